#pragma once
// Serialising a simulated Timeline: the `shardctl schedule --json` object (contract in
// docs/shardctl.md) and Chrome Trace Event JSON (opens in Perfetto / chrome://tracing).

#include "core/pipeline/simulator.h"

#include <nlohmann/json.hpp>
#include <string>

namespace shardscope::pipeline {

// schedule, stages, microbatches, virtual_stages, p2p_latency_ms, makespan, bubble_fraction,
// closed_form_bubble, megatron_bubble, stage_stats[] (stage, layers [first, last],
// chunk_layers [[first, last] per chunk], busy, idle, bubble_fraction, peak_activations,
// peak_activation_bytes), ops[] (stage, microbatch, kind "F"/"B"/"W", chunk, start, end).
// Times are in ms. `pieces` supplies chunk_layers; pass the Plan's pieces.
nlohmann::json to_json(const Timeline& timeline, const std::vector<PieceCost>& pieces);

// The `shardctl schedule --json` object: to_json(plan.timeline, plan.pieces) plus `profile`,
// `partition` (as the user spelled the method, e.g. "manual:3,6,9") and `boundaries`. Without ops
// (the report's pipeline section, the Python module's plan()) the op list is replaced by its
// length, `op_count`. One builder, so the CLI, the report and Python cannot drift apart.
nlohmann::json plan_json(const Plan& plan, const std::string& profile_name, const std::string& partition,
                         bool with_ops = true);

// {"traceEvents": [...], "displayTimeUnit": "ms"}: one ph:"X" event per op with ts/dur in µs,
// pid 0, tid = stage; ph:"M" process_name and thread_name ("stage s") / thread_sort_index
// metadata so each stage is one named track in stage order.
nlohmann::json to_trace_json(const Timeline& timeline, const std::string& title);

} // namespace shardscope::pipeline
