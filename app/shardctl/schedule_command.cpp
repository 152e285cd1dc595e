// shardctl schedule: simulates one pipeline-parallel training step (contract in docs/shardctl.md, "schedule").
#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/shardctl/model_options.h"
#include "app/shardctl/training_options.h"

#include "core/pipeline/export.h"
#include "core/pipeline/schedule_csv.h"
#include "core/pipeline/simulator.h"
#include "core/util/printable.h"

#include <QSaveFile>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
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

// Writes `text` to `path` atomically, or says why not.
bool write_file(const QString& path, const std::string& text, const char* what)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) ||
        file.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) ||
        !file.commit()) {
        fail(kUsage, std::string("cannot write the ") + what + " " + local(path) + ": " + local(file.errorString()));
        return false;
    }
    return true;
}

void print_text(const pl::StepPlan& step, const std::string& profile_name, const std::string& csv_path,
                const std::optional<pl::ScheduleRun>& run)
{
    const pl::Plan& plan = step.plan;
    const pl::Timeline& t = plan.timeline;
    const bool custom = t.spec.kind == pl::ScheduleKind::custom;
    std::string head = (custom ? "custom schedule " + csv_path : std::string(pl::to_string(t.spec.kind))) + ": " +
        std::to_string(t.spec.stages) + " stages, " + std::to_string(t.spec.microbatches) + " microbatches";
    if (t.spec.virtual_stages > 1)
        head += ", " + std::to_string(t.spec.virtual_stages) + " chunks per stage" +
            (pl::placement_of(t.spec) == pl::Placement::vshape ? " (V)" : "");
    print_line(
        head + ", profile " + profile_name +
        (t.spec.p2p_latency_ms > 0 ? ", p2p latency " + format("%g", t.spec.p2p_latency_ms) + " ms" : std::string()));
    if (custom)
        print_line("makespan " + format("%.4g", t.makespan) + " ms, bubble " +
                   format("%.2f", 100.0 * t.bubble_fraction) + " %");
    else
        print_line("makespan " + format("%.4g", t.makespan) + " ms, bubble " +
                   format("%.2f", 100.0 * t.bubble_fraction) + " % (closed form " +
                   format("%.2f", 100.0 * t.closed_form_bubble) + " % for uniform stages; " + "bubble/compute " +
                   format("%.4g", t.megatron_bubble) + ")");
    const pl::TrainingOptions& o = step.options;
    std::string training = "step time " + format("%.4g", step.step_time) + " ms";
    if (pl::gradient_replicas(o) > 1)
        training += " (all-reduce " + format("%.4g", step.allreduce_ms) + " ms, " +
            format("%.4g", step.exposed_allreduce_ms) + " ms exposed)";
    training += "; dp " + std::to_string(o.dp) +
        (o.cp > 1 ? " (gradients and ZeRO over dp x cp = " + std::to_string(pl::gradient_replicas(o)) + ")" : "") +
        ", ZeRO " + std::to_string(o.zero) + (o.fp32_grads ? ", fp32 gradients" : "") + ", recompute " +
        std::string(pl::to_string(o.recompute)) + "; peak memory " + bytes_text(step.peak_memory_bytes);
    if (o.gpu_memory_bytes)
        training += step.fits ? " (fits " + bytes_text(*o.gpu_memory_bytes) + ")"
                              : " (does NOT fit " + bytes_text(*o.gpu_memory_bytes) + ")";
    print_line(training);
    if (run) {
        // A plan candidate's columns, so that its reproducing command reads the same.
        const pl::Parallelism& p = run->parallel;
        std::string line = "tp " + std::to_string(p.tp) + (p.sequence_parallel ? " (sp)" : "") + ", cp " +
            std::to_string(p.cp) + ", ep " + std::to_string(p.ep) + ", pp " + std::to_string(t.spec.stages) + ", dp " +
            std::to_string(o.dp) + ": " + std::to_string(run->gpus) + " GPUs, global batch " +
            std::to_string(run->global_batch) + " (micro batch " + std::to_string(run->micro_batch_size) + "); " +
            format("%.1f", run->rate.tflops_per_gpu) + " model TFLOP/s per GPU";
        line += run->rate.mfu > 0.0 ? ", MFU " + format("%.1f", 100.0 * run->rate.mfu) + " %"
                                    : ", MFU unknown (no --cluster peak)";
        print_line(line);
    }
    print_line("stage  layers          busy ms     idle ms  bubble  peak act  act bytes   memory");
    for (const pl::StageStats& s : t.stage_stats) {
        char line[200];
        // With chunks a stage's layers are not contiguous: each chunk's range.
        const std::string layers = pl::stage_layers(plan, s.stage, true);
        const pl::StageMemory& m = step.memory[static_cast<std::size_t>(s.stage)];
        std::snprintf(line, sizeof line, "%5d  %-13s %10.4g %11.4g  %5.1f %%  %8d  %9s  %9s%s", s.stage, layers.c_str(),
                      s.busy, s.idle, 100.0 * s.bubble_fraction, s.peak_activations, bytes_text(m.activations).c_str(),
                      bytes_text(m.total).c_str(), m.fits ? "" : "  over the limit");
        print_line(line);
    }
}

} // namespace

int run_schedule(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Simulates one pipeline-parallel training step: partitions the model into stages, orders "
                       "each stage's forward/backward ops by the schedule and reports the timeline and bubble. "
                       "Without --profile every stage is one uniform layer per chunk (F = 1, B = 2; B = W = 1 "
                       "where the backward is split), which reproduces the papers' figures. --from-csv runs a "
                       "schedule in torch.distributed.pipelining's CSV format instead of a built-in one."));
    parser.addOptions({
        {QStringLiteral("stages"), QStringLiteral("Pipeline stages (ranks), N >= 1."), QStringLiteral("N")},
        {QStringLiteral("microbatches"), QStringLiteral("Microbatches per step, M >= 1."), QStringLiteral("M")},
        {QStringLiteral("schedule"), QStringLiteral("gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipe-v."),
         QStringLiteral("KIND")},
        {QStringLiteral("virtual"),
         QStringLiteral("Model chunks per stage for interleaved (default 2; M must be a multiple "
                        "of N); zb-v and dualpipe-v always run 2."),
         QStringLiteral("V")},
        {QStringLiteral("from-csv"),
         QStringLiteral("Run the schedule in this torch.distributed.pipelining CSV file (one line per rank); "
                        "stages, microbatches and chunks come from it."),
         QStringLiteral("FILE")},
        {QStringLiteral("export-csv"),
         QStringLiteral("Also write the schedule as torch.distributed.pipelining CSV (torchtitan's "
                        "pipeline_parallel_schedule_csv)."),
         QStringLiteral("FILE")},
        {QStringLiteral("profile"), QStringLiteral("Layer-cost profile, JSON or CSV."), QStringLiteral("FILE")},
        {QStringLiteral("micro-batch-size"), QStringLiteral("Samples per microbatch with --model (default 1)."),
         QStringLiteral("B")},
        {QStringLiteral("partition"),
         QStringLiteral("uniform (default), params, compute or manual:B1,B2,... (first layer of "
                        "each next stage)."),
         QStringLiteral("METHOD")},
        {QStringLiteral("dp"),
         QStringLiteral("Data-parallel degree D (default 1): replicas of the pipeline whose "
                        "gradients are all-reduced."),
         QStringLiteral("D")},
        {QStringLiteral("recompute"), QStringLiteral("Activation recomputation: none (default), selective or full."),
         QStringLiteral("MODE")},
        json_option(),
        {QStringLiteral("trace"), QStringLiteral("Write a Chrome Trace Event file (Perfetto)."),
         QStringLiteral("FILE")},
    });
    parser.addOptions(training_options());
    parser.addOptions(model_options(true));
    if (!parse(parser, arguments, 0, QStringLiteral("schedule")))
        return kUsage;
    if (parser.isSet(QStringLiteral("profile")) && parser.isSet(QStringLiteral("model")))
        return fail(kUsage, "give --profile or --model, not both");
    if (parser.isSet(QStringLiteral("micro-batch-size")) && !parser.isSet(QStringLiteral("model")))
        return fail(kUsage, "--micro-batch-size applies to --model (a profile states its own)");
    const bool from_csv = parser.isSet(QStringLiteral("from-csv"));
    if (from_csv) {
        for (const char* taken : {"stages", "microbatches", "schedule", "virtual"})
            if (parser.isSet(QString::fromLatin1(taken)))
                return fail(kUsage,
                            std::string("--from-csv takes the stages, microbatches and chunks from the file; "
                                        "drop --") +
                                taken);
    } else {
        for (const char* required : {"stages", "microbatches", "schedule"})
            if (!parser.isSet(QString::fromLatin1(required)))
                return fail(kUsage, std::string("schedule needs --") + required + " (see shardctl schedule --help)");
    }

    std::optional<long long> stages = 1, microbatches = 1;
    std::optional<pl::ScheduleKind> kind = pl::ScheduleKind::custom;
    long long chunks = 1;
    if (!from_csv) {
        stages = int_option(parser, QStringLiteral("stages"), 1, 4096);
        if (!stages)
            return kUsage;
        microbatches = int_option(parser, QStringLiteral("microbatches"), 1, 1 << 22);
        if (!microbatches)
            return kUsage;
        kind = pl::parse_schedule_kind(local(parser.value(QStringLiteral("schedule"))));
        if (!kind)
            return fail(kUsage,
                        "--schedule must be gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipe-v, not '" +
                            local(parser.value(QStringLiteral("schedule"))) + "'");
        chunks = pl::default_virtual_stages(*kind);
        if (parser.isSet(QStringLiteral("virtual"))) {
            const auto value = int_option(parser, QStringLiteral("virtual"), 1, 256);
            if (!value)
                return kUsage;
            chunks = *value;
        }
    }
    pl::TrainingOptions training;
    double latency = 0.0;
    if (!read_training_options(parser, training, latency))
        return kUsage;
    if (parser.isSet(QStringLiteral("dp"))) {
        const auto dp = int_option(parser, QStringLiteral("dp"), 1, 1 << 20);
        if (!dp)
            return kUsage;
        training.dp = static_cast<int>(*dp);
    }
    if (parser.isSet(QStringLiteral("recompute"))) {
        const auto mode = pl::parse_recompute(local(parser.value(QStringLiteral("recompute"))));
        if (!mode)
            return fail(kUsage,
                        "--recompute must be none, selective or full, not '" +
                            local(parser.value(QStringLiteral("recompute"))) + "'");
        training.recompute = *mode;
    }

    int micro_batch = 1;
    if (parser.isSet(QStringLiteral("micro-batch-size"))) {
        const auto value = int_option(parser, QStringLiteral("micro-batch-size"), 1, 1 << 20);
        if (!value)
            return kUsage;
        micro_batch = static_cast<int>(*value);
    }
    ModelSource source;
    try {
        if (!read_model_source(parser, micro_batch, false, true, source))
            return kUsage;
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
    apply_cluster(parser, source, training, latency);

    const QString csv_path = parser.value(QStringLiteral("from-csv"));
    try {
        pl::Schedule schedule;
        if (from_csv) {
            schedule = pl::load_schedule_csv(local(csv_path));
            schedule.spec.p2p_latency_ms = latency;
        } else {
            schedule = pl::build_schedule(pl::ScheduleSpec{.kind = *kind,
                                                           .stages = static_cast<int>(*stages),
                                                           .microbatches = static_cast<int>(*microbatches),
                                                           .virtual_stages = static_cast<int>(chunks),
                                                           .p2p_latency_ms = latency});
        }
        const pl::ScheduleSpec& spec = schedule.spec;
        pl::check_spec(spec);
        // A timeline too long to list is said before anything is written (--export-csv included).
        std::size_t op_count = 0;
        for (const auto& ops : schedule.stage_ops)
            op_count += ops.size();
        if ((parser.isSet(QStringLiteral("json")) || parser.isSet(QStringLiteral("trace"))) &&
            op_count > pl::kMaxJsonOps)
            return fail(shardscope::Error(
                shardscope::ProblemKind::invalid_argument,
                "the timeline has " + std::to_string(op_count) + " ops, more than the " +
                    std::to_string(pl::kMaxJsonOps) +
                    " --json and --trace list (about 1 KB each while it is "
                    "built); the text summary (without them) has every figure, or simulate fewer microbatches"));
        const pl::PartitionSpec partition_spec = pl::parse_partition_spec(
            parser.isSet(QStringLiteral("partition")) ? local(parser.value(QStringLiteral("partition")))
                                                      : std::string("uniform"));
        const int pieces = spec.stages * spec.virtual_stages;
        pl::Profile profile;
        if (!source.model_path.empty()) {
            const pl::Mesh mesh{.tp = source.parallel.tp,
                                .cp = source.parallel.cp,
                                .ep = source.parallel.ep,
                                .dp = training.dp,
                                .pp = spec.stages};
            profile = model_mesh_profile(source, link_choice(parser, source, training, latency), mesh, training,
                                         schedule.spec.p2p_latency_ms)
                          .profile;
        } else {
            profile = parser.isSet(QStringLiteral("profile"))
                ? pl::load_profile(local(parser.value(QStringLiteral("profile"))))
                : pl::uniform_profile(pieces);
        }
        // Cut the model by the costs it will really run with (recomputation lengthens backwards).
        const std::vector<int> boundaries =
            pl::partition(pl::with_recompute(profile, training.recompute), pieces, partition_spec);
        const pl::StepPlan step = pl::make_step_plan(profile, schedule, boundaries, training);
        std::optional<pl::ScheduleRun> run;
        if (!source.model_path.empty()) {
            run = pl::ScheduleRun{
                .parallel = source.parallel,
                .micro_batch_size = source.work.micro_batch_size,
                .gpus = std::int64_t(source.parallel.tp) * source.parallel.cp * training.dp * spec.stages,
                .global_batch = std::int64_t(spec.microbatches) * source.work.micro_batch_size * training.dp};
            run->rate = pl::throughput(pl::model_flops_per_sample(model_source_config(source), source.work.seq_len),
                                       run->global_batch, run->gpus, source.cluster ? source.cluster->peak_tflops : 0.0,
                                       step.step_time);
        }

        if (parser.isSet(QStringLiteral("export-csv")) &&
            !write_file(parser.value(QStringLiteral("export-csv")), pl::schedule_csv(schedule), "schedule CSV"))
            return kUsage;
        if (parser.isSet(QStringLiteral("trace"))) {
            const QString path = parser.value(QStringLiteral("trace"));
            const std::string title = "shardctl schedule " + std::string(pl::to_string(spec.kind)) +
                " N=" + std::to_string(spec.stages) + " M=" + std::to_string(spec.microbatches);
            if (!write_file(path, pl::to_trace_json(step, title).dump(), "trace file"))
                return kUsage;
        }
        if (parser.isSet(QStringLiteral("json"))) {
            nlohmann::json out = pl::step_plan_json(step, profile.name, pl::to_string(partition_spec));
            if (run)
                pl::add_schedule_run_json(out, *run);
            print_json(out);
        } else {
            print_text(step, profile.name, local(csv_path), run);
        }
        return kOk;
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
}

} // namespace shardctl
