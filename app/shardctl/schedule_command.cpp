// shardctl schedule: simulates one pipeline-parallel training step (contract in docs/shardctl.md, "schedule").
#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"

#include "core/pipeline/export.h"
#include "core/pipeline/simulator.h"
#include "core/util/printable.h"

#include <QSaveFile>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace shardctl {
namespace {

namespace pl = shardscope::pipeline;

std::string format(const char* pattern, double value)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, pattern, value);
    return buffer;
}

void print_text(const pl::Plan& plan, const std::string& profile_name)
{
    const pl::Timeline& t = plan.timeline;
    std::string head = std::string(pl::to_string(t.spec.kind)) + ": " +
                       std::to_string(t.spec.stages) + " stages, " +
                       std::to_string(t.spec.microbatches) + " microbatches";
    if (t.spec.virtual_stages > 1)
        head += ", " + std::to_string(t.spec.virtual_stages) + " chunks per stage";
    print_line(head + ", profile " + profile_name +
               (t.spec.p2p_latency_ms > 0 ? ", p2p latency " +
                                                format("%g", t.spec.p2p_latency_ms) + " ms"
                                          : std::string()));
    print_line("makespan " + format("%.4g", t.makespan) + " ms, bubble " +
               format("%.2f", 100.0 * t.bubble_fraction) + " % (closed form " +
               format("%.2f", 100.0 * t.closed_form_bubble) + " % for uniform stages; " +
               "bubble/compute " + format("%.4g", t.megatron_bubble) + ")");
    print_line("stage  layers          busy ms     idle ms  bubble  peak act  peak bytes");
    for (const pl::StageStats& s : t.stage_stats) {
        char line[160];
        // With chunks a stage's layers are not contiguous: each chunk's range.
        const std::string layers = pl::stage_layers(plan, s.stage, true);
        std::snprintf(line, sizeof line, "%5d  %-13s %10.4g %11.4g  %5.1f %%  %8d  %10s", s.stage,
                      layers.c_str(), s.busy, s.idle, 100.0 * s.bubble_fraction,
                      s.peak_activations, shardscope::human_bytes(uint64_t(std::max<std::int64_t>(0, s.peak_activation_bytes))).c_str());
        print_line(line);
    }
}

} // namespace

int run_schedule(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Simulates one pipeline-parallel training step: partitions the model into stages, orders "
        "each stage's forward/backward ops by the schedule and reports the timeline and bubble. "
        "Without --profile every stage is one uniform layer per chunk (F = 1, B = 2; B = W = 1 "
        "for zb-h1), which reproduces the papers' figures."));
    parser.addOptions({
        {QStringLiteral("stages"), QStringLiteral("Pipeline stages (ranks), N >= 1."),
         QStringLiteral("N")},
        {QStringLiteral("microbatches"), QStringLiteral("Microbatches per step, M >= 1."),
         QStringLiteral("M")},
        {QStringLiteral("schedule"), QStringLiteral("gpipe, 1f1b, interleaved or zb-h1."),
         QStringLiteral("KIND")},
        {QStringLiteral("virtual"),
         QStringLiteral("Model chunks per stage for interleaved (default 2; M must be a multiple "
                        "of N)."),
         QStringLiteral("V")},
        {QStringLiteral("profile"), QStringLiteral("Layer-cost profile, JSON or CSV."),
         QStringLiteral("FILE")},
        {QStringLiteral("partition"),
         QStringLiteral("uniform (default), params, compute or manual:B1,B2,... (first layer of "
                        "each next stage)."),
         QStringLiteral("METHOD")},
        {QStringLiteral("p2p-latency"),
         QStringLiteral("Milliseconds added to every cross-stage send (default 0)."),
         QStringLiteral("MS")},
        json_option(),
        {QStringLiteral("trace"), QStringLiteral("Write a Chrome Trace Event file (Perfetto)."),
         QStringLiteral("FILE")},
    });
    if (!parse(parser, arguments, 0, QStringLiteral("schedule")))
        return kUsage;
    for (const char* required : {"stages", "microbatches", "schedule"})
        if (!parser.isSet(QString::fromLatin1(required)))
            return fail(kUsage, std::string("schedule needs --") + required +
                                    " (see shardctl schedule --help)");

    const auto stages = int_option(parser, QStringLiteral("stages"), 1, 4096);
    if (!stages)
        return kUsage;
    const auto microbatches = int_option(parser, QStringLiteral("microbatches"), 1, 1 << 22);
    if (!microbatches)
        return kUsage;
    const auto kind = pl::parse_schedule_kind(local(parser.value(QStringLiteral("schedule"))));
    if (!kind)
        return fail(kUsage, "--schedule must be gpipe, 1f1b, interleaved or zb-h1, not '" +
                                local(parser.value(QStringLiteral("schedule"))) + "'");
    long long chunks = *kind == pl::ScheduleKind::interleaved ? 2 : 1;
    if (parser.isSet(QStringLiteral("virtual"))) {
        const auto value = int_option(parser, QStringLiteral("virtual"), 1, 256);
        if (!value)
            return kUsage;
        chunks = *value;
    }
    double latency = 0.0;
    if (parser.isSet(QStringLiteral("p2p-latency"))) {
        bool ok = false;
        latency = parser.value(QStringLiteral("p2p-latency")).toDouble(&ok);
        if (!ok || !std::isfinite(latency) || latency < 0.0)
            return fail(kUsage, "--p2p-latency must be a number of milliseconds >= 0, not '" +
                                    local(parser.value(QStringLiteral("p2p-latency"))) + "'");
    }

    const pl::ScheduleSpec spec{*kind, static_cast<int>(*stages), static_cast<int>(*microbatches),
                                static_cast<int>(chunks), latency};
    try {
        const pl::PartitionSpec partition_spec =
            pl::parse_partition_spec(parser.isSet(QStringLiteral("partition"))
                                         ? local(parser.value(QStringLiteral("partition")))
                                         : std::string("uniform"));
        pl::check_spec(spec);
        const int pieces = spec.stages * spec.virtual_stages;
        const pl::Profile profile = parser.isSet(QStringLiteral("profile"))
                                        ? pl::load_profile(local(parser.value(QStringLiteral("profile"))))
                                        : pl::uniform_profile(pieces);
        const std::vector<int> boundaries = pl::partition(profile, pieces, partition_spec);
        const pl::Plan plan = pl::make_plan(profile, spec, boundaries);

        if (parser.isSet(QStringLiteral("trace"))) {
            const QString path = parser.value(QStringLiteral("trace"));
            const std::string title = "shardctl schedule " + std::string(pl::to_string(spec.kind)) +
                                      " N=" + std::to_string(spec.stages) +
                                      " M=" + std::to_string(spec.microbatches);
            const std::string text = pl::to_trace_json(plan.timeline, title).dump();
            QSaveFile file(path);
            if (!file.open(QIODevice::WriteOnly) ||
                file.write(text.data(), static_cast<qint64>(text.size())) !=
                    static_cast<qint64>(text.size()) ||
                !file.commit())
                return fail(kUsage, "cannot write the trace file " + local(path) + ": " +
                                        local(file.errorString()));
        }
        if (parser.isSet(QStringLiteral("json"))) {
            print_json(pl::plan_json(plan, profile.name, pl::to_string(partition_spec)));
        } else {
            print_text(plan, profile.name);
        }
        return kOk;
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
}

} // namespace shardctl
