#pragma once
// Serialising a simulated Timeline: the `shardctl schedule --json` object (contract in
// docs/shardctl.md) and Chrome Trace Event JSON (opens in Perfetto / chrome://tracing).

#include "core/pipeline/model_search.h"
#include "core/pipeline/search.h"
#include "core/pipeline/training.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace shardscope::pipeline {

// schedule, stages, microbatches, virtual_stages, p2p_latency_ms, makespan, bubble_fraction,
// closed_form_bubble, megatron_bubble, stage_stats[] (stage, layers [first, last],
// chunk_layers [[first, last] per chunk], busy, idle, bubble_fraction, peak_activations,
// peak_activation_bytes), ops[] (stage, microbatch, kind "F"/"B"/"W", chunk, start, end).
// Times are in ms. `pieces` supplies chunk_layers; pass the Plan's pieces. Without ops, `ops` is
// left out (plan_json says how many). A timeline of more than kMaxJsonOps ops is not listed:
// Error(invalid_argument) says so (a JSON object holds about 1 KB an op while it is built).
inline constexpr std::size_t kMaxJsonOps = std::size_t(1) << 22;
nlohmann::json to_json(const Timeline& timeline, const std::vector<PieceCost>& pieces, bool with_ops = true);

// The `shardctl schedule --json` object: to_json(plan.timeline, plan.pieces) plus `profile`,
// `partition` (as the user spelled the method, e.g. "manual:3,6,9") and `boundaries`. Without ops
// (the report's pipeline section, the Python module's plan()) the op list is replaced by its
// length, `op_count`. One builder, so the CLI, the report and Python cannot drift apart.
nlohmann::json plan_json(const Plan& plan, const std::string& profile_name, const std::string& partition,
                         bool with_ops = true);

// The `shardctl schedule --json` object with the training step: plan_json plus
// stage_stats[].memory {weights, gradients, optimizer, activations, total, fits}, and top-level
// dp, zero, recompute, link_gbps, overlap_allreduce, fp32_grads, gpu_memory_bytes (null without a limit),
// peak_memory_bytes, fits, allreduce_ms, exposed_allreduce_ms, step_time, allreduce[] {stage,
// bytes, start, end} and, with ops and a bandwidth, sends[] {from_stage, to_stage, microbatch,
// chunk, after, bytes, start, end}.
nlohmann::json step_plan_json(const StepPlan& step, const std::string& profile_name, const std::string& partition,
                              bool with_ops = true);

// What `shardctl schedule --model` runs, beside step_plan_json's keys: tp, sp, cp, ep,
// micro_batch_size, gpus (t·cp·dp·pp: ep is carved out of dp), global_batch (M·b·dp),
// tflops_per_gpu and mfu (`rate`, throughput() of the model's FLOPs; mfu null without a peak).
// The same keys and meanings as a plan candidate's, so a candidate and its command compare.
struct ScheduleRun {
    Parallelism parallel;
    int micro_batch_size = 1;
    std::int64_t gpus = 1;
    std::int64_t global_batch = 1;
    Throughput rate;
};
void add_schedule_run_json(nlohmann::json& out, const ScheduleRun& run);

// One plan candidate: tp, sp, cp, ep, pp, dp, virtual (= virtual_stages), zero,
// micro_batch_size, tflops_per_gpu and mfu (null when unknown), microbatches, schedule,
// recompute, partition, step_time, peak_memory_bytes, fits, samples_per_second, makespan, bubble_fraction,
// compute_ms, exposed_allreduce_ms, and `command` (the `shardctl schedule` line reproducing it,
// which the command line writes: core knows no shell syntax).
nlohmann::json candidate_json(const Candidate& candidate, const std::string& command);
// The `shardctl plan --json` object: ok (something fits), candidates (the best `top` that fit),
// searched, fitting, skipped (too large to simulate), gpus, global_batch, micro_batch_size,
// gpu_memory_bytes, zero (the ZeRO stages tried), link_gbps, profile, and when nothing fits `closest` (the candidate
// needing the least memory) with `over_bytes`. `command` gives each listed candidate's command.
nlohmann::json search_json(const SearchResult& result, const SearchSpec& spec, const std::string& profile_name,
                           std::size_t top, const std::function<std::string(const Candidate&)>& command);

// `shardctl plan --model --json`: search_json's keys (micro_batch_size is the list tried) plus
// seq_len, space (configurations enumerated), pruned_memory and pruned_time.
nlohmann::json model_search_json(const ModelSearchResult& result, const ModelSearchSpec& spec,
                                 const std::string& profile_name,
                                 const std::function<std::string(const Candidate&)>& command);

// {"traceEvents": [...], "displayTimeUnit": "ms"}: one ph:"X" event per op with ts/dur in µs,
// pid 0, tid = stage; ph:"M" process_name and thread_name ("stage s") / thread_sort_index
// metadata so each stage is one named track in stage order.
nlohmann::json to_trace_json(const Timeline& timeline, const std::string& title);
// The same with the training step's communication, when it has any: with a bandwidth every send
// (cat "send", on track N + s "stage s sends"), with D > 1 each stage's all-reduce (cat
// "allreduce", on that track too), so the links show beside the compute. Both refuse more than
// kMaxJsonOps ops, as to_json.
nlohmann::json to_trace_json(const StepPlan& step, const std::string& title);

} // namespace shardscope::pipeline
