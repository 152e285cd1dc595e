#include "core/pipeline/export.h"

#include "core/util/error.h"

#include <algorithm>

namespace shardscope::pipeline {

namespace {

// 2^22 ops is a schedule of thousands of microbatches on hundreds of stages; past that the JSON
// would take gigabytes to build (and nlohmann needs memory even to free a large one).
void check_listable(const Timeline& timeline, const char* what)
{
    if (timeline.ops.size() > kMaxJsonOps)
        throw Error(ProblemKind::invalid_argument,
                    "the timeline has " + std::to_string(timeline.ops.size()) + " ops, more than the " +
                        std::to_string(kMaxJsonOps) + " " + what +
                        " lists (about 1 KB each while it is built); the text summary (without --json) has every "
                        "figure, or simulate fewer microbatches");
}

} // namespace

nlohmann::json to_json(const Timeline& timeline, const std::vector<PieceCost>& pieces, bool with_ops)
{
    if (with_ops)
        check_listable(timeline, "a JSON timeline");
    const ScheduleSpec& spec = timeline.spec;
    nlohmann::json stats = nlohmann::json::array();
    for (const StageStats& stage : timeline.stage_stats) {
        nlohmann::json chunk_layers = nlohmann::json::array();
        for (const PieceCost& piece : pieces)
            if (piece.stage == stage.stage)
                chunk_layers.push_back({piece.first_layer, piece.last_layer});
        stats.push_back({{"stage", stage.stage},
                         {"layers", {stage.first_layer, stage.last_layer}},
                         {"chunk_layers", std::move(chunk_layers)},
                         {"busy", stage.busy},
                         {"idle", stage.idle},
                         {"bubble_fraction", stage.bubble_fraction},
                         {"span", stage.span},
                         {"peak_activations", stage.peak_activations},
                         {"peak_activation_bytes", stage.peak_activation_bytes}});
    }
    nlohmann::json ops = nlohmann::json::array();
    for (std::size_t i = 0; with_ops && i < timeline.ops.size(); ++i) {
        const TimedOp& op = timeline.ops[i];
        ops.push_back({{"stage", op.stage},
                       {"microbatch", op.microbatch},
                       {"kind", std::string(1, to_char(op.kind))},
                       {"chunk", op.chunk},
                       {"start", op.start},
                       {"end", op.end}});
    }
    nlohmann::json out = {{"schedule", std::string(to_string(spec.kind))},
                          {"stages", spec.stages},
                          {"microbatches", spec.microbatches},
                          {"virtual_stages", spec.virtual_stages},
                          {"p2p_latency_ms", spec.p2p_latency_ms},
                          {"time_unit", "ms"},
                          {"makespan", timeline.makespan},
                          {"bubble_fraction", timeline.bubble_fraction},
                          {"closed_form_bubble", timeline.closed_form_bubble},
                          {"megatron_bubble", timeline.megatron_bubble},
                          {"span_bubble_fraction", timeline.span_bubble_fraction},
                          {"stage_stats", std::move(stats)}};
    if (with_ops)
        out["ops"] = std::move(ops);
    return out;
}

nlohmann::json to_trace_json(const Timeline& timeline, const std::string& title)
{
    check_listable(timeline, "a trace");
    nlohmann::json events = nlohmann::json::array();
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", title}}}});
    for (int s = 0; s < timeline.spec.stages; ++s) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", 0},
                          {"tid", s},
                          {"args", {{"name", std::string("stage ").append(std::to_string(s))}}}});
        // Perfetto otherwise orders tracks by first event, which puts late stages first.
        events.push_back(
            {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", s}, {"args", {{"sort_index", s}}}});
    }
    const bool chunks = timeline.spec.virtual_stages > 1;
    for (const TimedOp& op : timeline.ops) {
        std::string name(1, to_char(op.kind));
        name.append(std::to_string(op.microbatch));
        if (chunks)
            name.append(".").append(std::to_string(op.chunk));
        events.push_back({{"name", std::move(name)},
                          {"cat", std::string(1, to_char(op.kind))},
                          {"ph", "X"},
                          {"pid", 0},
                          {"tid", op.stage},
                          {"ts", op.start * 1000.0}, // ms -> µs, the format's unit
                          {"dur", (op.end - op.start) * 1000.0},
                          {"args", {{"microbatch", op.microbatch}, {"chunk", op.chunk}}}});
    }
    return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

nlohmann::json to_trace_json(const StepPlan& step, const std::string& title)
{
    nlohmann::json trace = to_trace_json(step.plan.timeline, title);
    const bool sends = step.options.link_gbps > 0.0;
    if (!sends && step.allreduce.empty())
        return trace;
    nlohmann::json& events = trace["traceEvents"];
    const int n = step.plan.timeline.spec.stages;
    for (int s = 0; s < n; ++s) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", 0},
                          {"tid", n + s},
                          {"args", {{"name", "stage " + std::to_string(s) + " sends"}}}});
        events.push_back({{"name", "thread_sort_index"},
                          {"ph", "M"},
                          {"pid", 0},
                          {"tid", n + s},
                          {"args", {{"sort_index", n + s}}}});
    }
    auto span = [&](std::string name, const char* category, int track, double start, double end, std::int64_t bytes) {
        events.push_back({{"name", std::move(name)},
                          {"cat", category},
                          {"ph", "X"},
                          {"pid", 0},
                          {"tid", n + track},
                          {"ts", start * 1000.0},
                          {"dur", (end - start) * 1000.0},
                          {"args", {{"bytes", bytes}}}});
    };
    if (sends)
        for (const Transfer& t : transfers(step))
            span(std::string(t.after == OpKind::F ? "act" : "grad") + std::to_string(t.microbatch) + "->" +
                     std::to_string(t.to_stage),
                 "send", t.from_stage, t.start, t.end, t.bytes);
    for (const AllReduce& a : step.allreduce)
        span("all-reduce", "allreduce", a.stage, a.start, a.end, a.bytes);
    return trace;
}

nlohmann::json plan_json(const Plan& plan, const std::string& profile_name, const std::string& partition, bool with_ops)
{
    nlohmann::json out = to_json(plan.timeline, plan.pieces, with_ops);
    if (!with_ops)
        out["op_count"] = plan.timeline.ops.size();
    out["profile"] = profile_name;
    out["partition"] = partition;
    out["boundaries"] = plan.boundaries;
    return out;
}

nlohmann::json step_plan_json(const StepPlan& step, const std::string& profile_name, const std::string& partition,
                              bool with_ops)
{
    nlohmann::json out = plan_json(step.plan, profile_name, partition, with_ops);
    const TrainingOptions& options = step.options;
    for (std::size_t s = 0; s < step.memory.size(); ++s) {
        const StageMemory& m = step.memory[s];
        out["stage_stats"][s]["memory"] = {{"weights", m.weights},     {"gradients", m.gradients},
                                           {"optimizer", m.optimizer}, {"activations", m.activations},
                                           {"total", m.total},         {"fits", m.fits}};
    }
    out["dp"] = options.dp;
    out["zero"] = options.zero;
    out["recompute"] = std::string(to_string(options.recompute));
    out["link_gbps"] = options.link_gbps;
    out["overlap_allreduce"] = options.overlap_allreduce;
    out["fp32_grads"] = options.fp32_grads;
    out["gpu_memory_bytes"] = options.gpu_memory_bytes ? nlohmann::json(*options.gpu_memory_bytes) : nlohmann::json();
    out["peak_memory_bytes"] = step.peak_memory_bytes;
    out["fits"] = step.fits;
    out["allreduce_ms"] = step.allreduce_ms;
    out["exposed_allreduce_ms"] = step.exposed_allreduce_ms;
    out["step_time"] = step.step_time;
    nlohmann::json allreduce = nlohmann::json::array();
    for (const AllReduce& a : step.allreduce)
        allreduce.push_back({{"stage", a.stage}, {"bytes", a.bytes}, {"start", a.start}, {"end", a.end}});
    out["allreduce"] = std::move(allreduce);
    // Without a bandwidth every send is the bare latency, already implied by the ops' gaps;
    // listing them would only double the object.
    if (with_ops && options.link_gbps > 0.0) {
        nlohmann::json sends = nlohmann::json::array();
        for (const Transfer& t : transfers(step))
            sends.push_back({{"from_stage", t.from_stage},
                             {"to_stage", t.to_stage},
                             {"microbatch", t.microbatch},
                             {"chunk", t.chunk},
                             {"after", std::string(1, to_char(t.after))},
                             {"bytes", t.bytes},
                             {"start", t.start},
                             {"end", t.end}});
        out["sends"] = std::move(sends);
    }
    return out;
}

void add_schedule_run_json(nlohmann::json& out, const ScheduleRun& run)
{
    out["tp"] = run.parallel.tp;
    out["sp"] = run.parallel.sequence_parallel;
    out["cp"] = run.parallel.cp;
    out["ep"] = run.parallel.ep;
    out["micro_batch_size"] = run.micro_batch_size;
    out["gpus"] = run.gpus;
    out["global_batch"] = run.global_batch;
    out["tflops_per_gpu"] = run.rate.tflops_per_gpu > 0.0 ? nlohmann::json(run.rate.tflops_per_gpu) : nullptr;
    out["mfu"] = run.rate.mfu > 0.0 ? nlohmann::json(run.rate.mfu) : nullptr;
}

nlohmann::json candidate_json(const Candidate& c, const std::string& command)
{
    const auto known = [](double value) { return value > 0.0 ? nlohmann::json(value) : nlohmann::json(nullptr); };
    return {{"tp", c.tp},
            {"sp", c.sp},
            {"cp", c.cp},
            {"ep", c.ep},
            {"pp", c.pp},
            {"dp", c.dp},
            {"virtual", c.virtual_stages},
            {"virtual_stages", c.virtual_stages},
            {"zero", c.zero},
            {"micro_batch_size", c.micro_batch_size},
            {"tflops_per_gpu", known(c.tflops_per_gpu)},
            {"mfu", known(c.mfu)},
            {"microbatches", c.microbatches},
            {"schedule", std::string(to_string(c.schedule))},
            {"recompute", std::string(to_string(c.recompute))},
            {"partition", c.partition},
            {"step_time", c.step_time},
            {"peak_memory_bytes", c.peak_memory_bytes},
            {"fits", c.fits},
            {"samples_per_second", c.samples_per_second},
            {"makespan", c.makespan},
            {"bubble_fraction", c.bubble_fraction},
            {"compute_ms", c.compute_ms},
            {"exposed_allreduce_ms", c.exposed_allreduce_ms},
            {"command", command}};
}

nlohmann::json search_json(const SearchResult& result, const SearchSpec& spec, const std::string& profile_name,
                           std::size_t top, const std::function<std::string(const Candidate&)>& command)
{
    nlohmann::json candidates = nlohmann::json::array();
    for (std::size_t i = 0; i < std::min(top, result.fitting); ++i)
        candidates.push_back(candidate_json(result.candidates[i], command(result.candidates[i])));
    nlohmann::json out = {{"ok", result.fitting > 0},
                          {"candidates", std::move(candidates)},
                          {"searched", result.candidates.size()},
                          {"fitting", result.fitting},
                          {"skipped", result.skipped},
                          {"gpus", spec.gpus},
                          {"global_batch", spec.global_batch},
                          {"micro_batch_size", spec.micro_batch_size},
                          {"gpu_memory_bytes", spec.gpu_memory_bytes},
                          {"zero", searched_zero_stages(spec.zero)},
                          {"fp32_grads", spec.fp32_grads},
                          {"link_gbps", spec.link_gbps},
                          {"profile", profile_name}};
    // Sorted: the first candidate that does not fit is the one closest to fitting.
    if (result.fitting == 0 && !result.candidates.empty()) {
        const Candidate& closest = result.candidates.front();
        out["closest"] = candidate_json(closest, command(closest));
        out["closest"]["over_bytes"] = closest.peak_memory_bytes - spec.gpu_memory_bytes;
    }
    return out;
}

nlohmann::json model_search_json(const ModelSearchResult& result, const ModelSearchSpec& spec,
                                 const std::string& profile_name,
                                 const std::function<std::string(const Candidate&)>& command)
{
    const SearchSpec shown{.gpus = spec.gpus,
                           .global_batch = spec.global_batch,
                           .gpu_memory_bytes = spec.gpu_memory_bytes,
                           .link_gbps = spec.links.gbps.value_or(0.0),
                           .zero = spec.zero,
                           .fp32_grads = spec.fp32_grads};
    nlohmann::json out = search_json(result.search, shown, profile_name, spec.top, command);
    out["micro_batch_size"] = spec.micro_batch_sizes.empty() ? std::vector<int>{1, 2, 4} : spec.micro_batch_sizes;
    out["link_gbps"] = spec.links.gbps ? nlohmann::json(*spec.links.gbps) : nlohmann::json(nullptr);
    out["seq_len"] = spec.seq_len;
    out["space"] = result.space;
    out["pruned_memory"] = result.pruned_memory;
    out["pruned_time"] = result.pruned_time;
    return out;
}

} // namespace shardscope::pipeline
