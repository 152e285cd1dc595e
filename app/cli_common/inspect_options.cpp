#include "app/cli_common/inspect_options.h"

#include "core/util/printable.h"

#include <cmath>
#include <cstdio>

namespace shardctl {

using namespace shardscope;
using nlohmann::json;

namespace {

// Six significant digits: what a person compares at a glance (--json has every digit).
std::string number(double value)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return text;
}

std::string shape_text(const std::vector<uint64_t>& shape)
{
    std::string out;
    for (std::size_t i = 0; i < shape.size(); ++i)
        out += (i ? "x" : "") + std::to_string(shape[i]);
    return out.empty() ? "scalar" : out;
}

void print_stats_text(const ContentReport& report)
{
    print_line(report.dir.string() + ": " + report.format + ", " + std::to_string(report.tensors.size()) + " tensors");
    for (const TensorContent& t : report.tensors) {
        const ValueStats& s = t.stats;
        std::string line = "  " + printable(t.name) + (t.state.empty() ? "" : " [" + t.state + "]") + "  " +
            std::string(to_string(t.type)) + " " + shape_text(t.shape);
        if (s.finite > 0)
            line += "  min " + number(s.min) + "  max " + number(s.max) + "  mean " + number(s.mean) + "  std " +
                number(s.std_dev());
        if (s.nonfinite() > 0)
            line += "  NaN " + std::to_string(s.nan) + "  +Inf " + std::to_string(s.posinf) + "  -Inf " +
                std::to_string(s.neginf);
        if (t.scale >= 0)
            line += "  (dequantized by " + printable(report.tensors[std::size_t(t.scale)].name) + ")";
        if (t.parts.size() > 1)
            line += "  (" + std::to_string(t.parts.size()) + " parts)";
        print_line(line);
    }
    for (const Problem& w : report.warnings)
        print_line("  warning: " + printable(w.message, 4096));
    if (report.ok())
        print_line(
            "OK: no non-finite values" +
            std::string(report.format == "shardscope" ? ", no negative second moments, params match masters" : "") +
            " (" + format_seconds(report.seconds) + " s)");
}

std::string tensor_label(const TensorDiff& t)
{
    return printable(t.name) + (t.state.empty() ? "" : " [" + t.state + "]");
}

void print_diff_text(const DiffReport& report)
{
    print_line("A: " + report.path_a.string() + " (" + report.a.format + ")");
    print_line("B: " + report.path_b.string() + " (" + report.b.format + ")");
    if (report.states_as_param)
        print_line("   one side has no optimizer states: its tensors are compared with the other's param state");
    std::size_t same = 0;
    for (const TensorDiff& t : report.tensors) {
        if (t.status == DiffStatus::identical) {
            ++same;
            continue;
        }
        std::string line = "  " + tensor_label(t) + "  " + std::string(to_string(t.status));
        if (t.status == DiffStatus::changed || t.status == DiffStatus::dtype_changed) {
            const auto rel = t.rel_l2();
            line += "  " + std::to_string(t.sums.changed) + " of " + std::to_string(t.numel) + " elements, max |a-b| " +
                number(t.sums.max_abs_diff) + ", rel L2 " + (rel ? number(*rel) : std::string("inf"));
            if (t.sums.nonfinite_changed > 0) // not in max |a-b| or the L2 figures
                line += " (" + std::to_string(t.sums.nonfinite_changed) + " where a side is NaN or Inf)";
        }
        print_line(line);
    }
    std::string summary = std::to_string(report.tensors.size()) + " tensors: " + std::to_string(same) + " identical";
    if (same < report.tensors.size())
        summary += ", " + std::to_string(report.tensors.size() - same) + " differ";
    if (const TensorDiff* largest = largest_change(report))
        summary += " (largest relative change " +
            (largest->rel_l2() ? number(*largest->rel_l2()) : std::string("inf")) + " in " + tensor_label(*largest) +
            ")";
    print_line(summary + (report.options.bitwise() ? ", bitwise" : ", within tolerance"));
}

// --atol/--rtol: a finite, non-negative number.
bool tolerance(const QCommandLineParser& parser, const QString& name, std::optional<double>& out)
{
    if (!parser.isSet(name))
        return true;
    bool ok = false;
    const double value = parser.value(name).toDouble(&ok);
    if (!ok || !std::isfinite(value) || value < 0) {
        fail(kUsage, "--" + local(name) + " must be a non-negative number, not '" + local(parser.value(name)) + "'");
        return false;
    }
    out = value;
    return true;
}

std::optional<int> threads_of(const QCommandLineParser& parser)
{
    const auto threads = int_option(parser, QStringLiteral("threads"), 0, 1024);
    return threads ? std::optional<int>(static_cast<int>(*threads)) : std::nullopt;
}

QCommandLineOption tensor_option()
{
    return {QStringLiteral("tensor"), QStringLiteral("Only tensors whose name matches GLOB (repeatable)."),
            QStringLiteral("GLOB")};
}

QCommandLineOption raw_fp8_option()
{
    return {QStringLiteral("raw-fp8"),
            QStringLiteral("Read FP8 weights' stored values; by default a weight with a *_scale_inv partner is "
                           "dequantized by its 128x128 block scales.")};
}

std::vector<std::string> globs_of(const QCommandLineParser& parser)
{
    std::vector<std::string> globs;
    for (const QString& glob : parser.values(QStringLiteral("tensor")))
        globs.push_back(local(glob));
    return globs;
}

} // namespace

std::optional<StatsArgs> parse_stats_args(const QStringList& arguments, const QCommandLineOption& json_flag,
                                          const QCommandLineOption& threads_flag)
{
    QCommandLineParser parser;
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory, root or file."));
    parser.setApplicationDescription(
        QStringLiteral("Statistics of every tensor's values (NaN/Inf, zeros, min, max, mean, std, L2, log2 histogram), "
                       "whole and per rank or file, and health checks: non-finite values, negative Adam second "
                       "moments, parameters that are not their rounded master weights."));
    parser.addOptions({json_flag, threads_flag, tensor_option(), raw_fp8_option()});
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("stats")))
        return std::nullopt;
    const auto threads = threads_of(parser);
    if (!threads)
        return std::nullopt;
    StatsArgs args;
    args.path = checkpoint_argument(parser.positionalArguments().at(0));
    args.options.threads = *threads;
    args.options.tensor_globs = globs_of(parser);
    args.options.raw_fp8 = parser.isSet(QStringLiteral("raw-fp8"));
    args.json = parser.isSet(QStringLiteral("json"));
    return args;
}

std::optional<DiffArgs> parse_diff_args(const QStringList& arguments, const QCommandLineOption& json_flag,
                                        const QCommandLineOption& threads_flag)
{
    QCommandLineParser parser;
    parser.addPositionalArgument(QStringLiteral("A"), QStringLiteral("The first checkpoint (any format stats reads)."));
    parser.addPositionalArgument(QStringLiteral("B"), QStringLiteral("The second checkpoint."));
    parser.setApplicationDescription(
        QStringLiteral("Pairs tensors by name (and state) across two checkpoints of any formats and world sizes and "
                       "compares them element by element: identical, changed (how many elements, max |a-b|, "
                       "||a-b||/||a||), only in one, shape or dtype changed. Exit 0 when everything matches "
                       "(bitwise unless a tolerance is given), 1 when anything differs."));
    parser.addOptions(
        {json_flag,
         threads_flag,
         tensor_option(),
         raw_fp8_option(),
         {QStringLiteral("atol"), QStringLiteral("Absolute tolerance: |a-b| <= atol + rtol*|b| counts as equal."),
          QStringLiteral("X")},
         {QStringLiteral("rtol"), QStringLiteral("Relative tolerance."), QStringLiteral("Y")}});
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 2, QStringLiteral("diff")))
        return std::nullopt;
    DiffArgs args;
    const auto threads = threads_of(parser);
    if (!threads || !tolerance(parser, QStringLiteral("atol"), args.options.atol) ||
        !tolerance(parser, QStringLiteral("rtol"), args.options.rtol))
        return std::nullopt;
    const QStringList paths = parser.positionalArguments();
    args.a = checkpoint_argument(paths.at(0));
    args.b = checkpoint_argument(paths.at(1));
    args.options.threads = *threads;
    args.options.tensor_globs = globs_of(parser);
    args.options.raw_fp8 = parser.isSet(QStringLiteral("raw-fp8"));
    args.json = parser.isSet(QStringLiteral("json"));
    return args;
}

int print_stats(const ContentReport& report, bool as_json, const json& extra)
{
    if (as_json) {
        json out = content_report_json(report);
        if (extra.is_object())
            out.update(extra);
        print_json(out);
    } else {
        print_stats_text(report);
    }
    for (const Problem& p : report.problems) // messages quote names from the files: fail() escapes them
        fail(kCheckFailed, p.message);
    return report.ok() ? kOk : kCheckFailed;
}

int print_diff(const DiffReport& report, bool as_json, const json& extra)
{
    if (as_json) {
        json out = diff_report_json(report);
        if (extra.is_object())
            out.update(extra);
        print_json(out);
    } else {
        print_diff_text(report);
    }
    for (const Problem& p : report.problems)
        fail(kCheckFailed, p.message);
    return report.identical() ? kOk : kCheckFailed;
}

} // namespace shardctl
