// shardctl stats PATH [--json] [--tensor GLOB]... [--threads T]: what the values in a checkpoint
// look like, and the health checks (docs/shardctl.md, "stats").

#include "app/cli_common/cli.h"
#include "app/shardctl/commands.h"

#include "core/checkpoint/verify_json.h"
#include "core/inspect/content.h"
#include "core/util/printable.h"

#include <cstdio>
#include <iostream>

namespace shardctl {

using namespace shardscope;
using nlohmann::json;

namespace {

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

void print_text(const ContentReport& report)
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
        if (t.parts.size() > 1)
            line += "  (" + std::to_string(t.parts.size()) + " parts)";
        print_line(line);
    }
    for (const Problem& w : report.warnings)
        print_line("  warning: " + printable(w.message, 4096));
    if (report.ok())
        print_line("OK: no non-finite values" + std::string(report.format == "shardscope"
                                                                 ? ", no negative second moments, params match masters"
                                                                 : "") +
                   " (" + std::to_string(report.seconds).substr(0, 5) + " s)");
}

} // namespace

int run_stats(const QStringList& arguments)
{
    const bool as_json = arguments.contains(QStringLiteral("--json"));
    // --json promises one object on stdout whatever happens.
    auto failed = [&](const Problem& problem) {
        if (as_json)
            print_json({{"ok", false}, {"error", problem_json(problem)}});
        return fail(exit_code_for(problem.kind), problem.message);
    };
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Statistics of every tensor's values (NaN/Inf, zeros, min, max, mean, std, L2, log2 histogram), whole and "
        "per rank or file, and health checks: non-finite values, negative Adam second moments, parameters that are "
        "not their rounded master weights."));
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory, root or .safetensors file."));
    parser.addOptions({json_option(), threads_option(),
                       {QStringLiteral("tensor"), QStringLiteral("Only tensors whose name matches GLOB (repeatable)."),
                        QStringLiteral("GLOB")}});
    if (!parse(parser, arguments, 1, QStringLiteral("stats"))) {
        if (as_json)
            print_json({{"ok", false},
                        {"error", {{"kind", "invalid_argument"}, {"message", "usage error: see stderr"}}}});
        return kUsage;
    }
    ContentOptions options;
    const auto threads = int_option(parser, QStringLiteral("threads"), 0, 1024);
    if (!threads) { // int_option has said why on stderr
        if (as_json)
            print_json({{"ok", false},
                        {"error", {{"kind", "invalid_argument"}, {"message", "--threads must be an integer from 0 to 1024"}}}});
        return kUsage;
    }
    options.threads = static_cast<int>(*threads);
    for (const QString& glob : parser.values(QStringLiteral("tensor")))
        options.tensor_globs.push_back(local(glob));
    ContentReport report;
    try {
        report = inspect_content(local(parser.positionalArguments().at(0)), options);
    } catch (const Error& error) {
        return failed(error.problem());
    }
    if (as_json)
        print_json(content_report_json(report));
    else
        print_text(report);
    for (const Problem& p : report.problems) // messages quote names from the files: fail() escapes them
        fail(kCheckFailed, p.message);
    return report.ok() ? kOk : kCheckFailed;
}

} // namespace shardctl
