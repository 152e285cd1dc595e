#include "core/pipeline/export.h"

namespace shardscope::pipeline {

nlohmann::json to_json(const Timeline& timeline, const std::vector<PieceCost>& pieces)
{
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
                         {"peak_activations", stage.peak_activations},
                         {"peak_activation_bytes", stage.peak_activation_bytes}});
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const TimedOp& op : timeline.ops)
        ops.push_back({{"stage", op.stage},
                       {"microbatch", op.microbatch},
                       {"kind", std::string(1, to_char(op.kind))},
                       {"chunk", op.chunk},
                       {"start", op.start},
                       {"end", op.end}});
    return {{"schedule", std::string(to_string(spec.kind))},
            {"stages", spec.stages},
            {"microbatches", spec.microbatches},
            {"virtual_stages", spec.virtual_stages},
            {"p2p_latency_ms", spec.p2p_latency_ms},
            {"time_unit", "ms"},
            {"makespan", timeline.makespan},
            {"bubble_fraction", timeline.bubble_fraction},
            {"closed_form_bubble", timeline.closed_form_bubble},
            {"megatron_bubble", timeline.megatron_bubble},
            {"stage_stats", std::move(stats)},
            {"ops", std::move(ops)}};
}

nlohmann::json to_trace_json(const Timeline& timeline, const std::string& title)
{
    nlohmann::json events = nlohmann::json::array();
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0},
                      {"args", {{"name", title}}}});
    for (int s = 0; s < timeline.spec.stages; ++s) {
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", s},
                          {"args", {{"name", std::string("stage ").append(std::to_string(s))}}}});
        // Perfetto otherwise orders tracks by first event, which puts late stages first.
        events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", s},
                          {"args", {{"sort_index", s}}}});
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

nlohmann::json plan_json(const Plan& plan, const std::string& profile_name, const std::string& partition,
                         bool with_ops)
{
    nlohmann::json out = to_json(plan.timeline, plan.pieces);
    if (!with_ops) {
        out.erase("ops");
        out["op_count"] = plan.timeline.ops.size();
    }
    out["profile"] = profile_name;
    out["partition"] = partition;
    out["boundaries"] = plan.boundaries;
    return out;
}

} // namespace shardscope::pipeline
