#pragma once
// The training step around a pipeline schedule: what each stage holds in memory
// (16-bit weights and gradients, AdamW's fp32 state under ZeRO, activations under
// recomputation), what the sends between stages and the data-parallel gradient all-reduce
// cost, and the step time. The simulator (simulator.h) stays a pure op-order model; this layer
// turns options into its inputs (costs, send times) and its outputs into bytes and a step time.
//
// Memory per rank of stage s, AdamW in mixed precision (Rajbhandari et al. 2020, ZeRO):
//   weights 2 B/param, gradients 2 B/param, fp32 master + two moments 12 B/param; ZeRO stage z
//   shards across the D data-parallel ranks: z >= 1 the 12, z >= 2 the gradients, z = 3 the
//   weights, i.e. 16, 4 + 12/D, 2 + 14/D, 16/D bytes per parameter (a sharded buffer holds
//   ceil(P / D) elements per rank). Activations: the largest sum of held pieces' bytes in the
//   stage's op order (Timeline's peak_activation_bytes, so GPipe holds M microbatches, 1F1B
//   N - s, interleaved as Narayanan et al. 2021) plus, when recomputing, one layer's
//   recomputed working set (its activation_bytes minus what it keeps).
// Recomputation (Korthikanti et al. 2022): selective keeps layer_selective_bytes (drops the
// 5as/h attention term) and adds layer_selective_recompute_ms to each backward; full keeps
// layer_input_bytes and adds the forward to each backward (to B when the backward is split:
// the input gradient needs the recomputed activations), so 1F1B on uniform stages takes
// (M + N - 1)(2F + B) instead of (M + N - 1)(F + B).
// Communication at link_gbps (10^9 bit/s): a piece's output (layer_output_bytes of its last
// layer) and, back, the gradient of that output each take bytes / bandwidth + the p2p latency;
// sends overlap compute and contend neither with each other nor with the all-reduce. The
// gradient all-reduce of a stage over its D ranks is a ring: 2 (D - 1) / D x 2 B x params /
// bandwidth; in units of U = (D - 1) / D x 2 B x params / bandwidth a ring all-reduce is 2.
// ZeRO-1 (and Megatron's distributed optimizer) reduce-scatters the gradients and all-gathers
// the updated weights: the same 2 U. Sharded gradients cannot accumulate over the M
// microbatches, so ZeRO-2 reduce-scatters after every microbatch's backward and all-gathers the
// weights once: (M + 1) U; ZeRO-3 also all-gathers the weights before every microbatch's forward
// and backward (Rajbhandari et al. 2020, section 7.2): 3 M U (the gathered layer it holds
// meanwhile is not counted in its memory). The last microbatch's part (2 U; 3 U for ZeRO-3) is a block
// after the backward; the rest overlaps the stage's own compute and is exposed only where it
// exceeds the stage's busy time. Without overlap the block starts when the pipeline has flushed
// (every stage waits for the step's end, as a synchronous reduce does); with overlap_allreduce
// each stage's starts when its last microbatch's backward does (the gradients of the layers that
// backward has passed are final: DDP's buckets) and ends no earlier than that backward, hiding
// it behind that backward and the other stages' cool-down. step_time = the end of the last block
// (= makespan without DP). Expert weights
// (Layer::expert_params, expert parallelism over ep of the D ranks) are replicated over D / ep
// ranks only: their ZeRO shards and their gradient traffic are over D / ep.
// Context parallelism (cp = C): each of C ranks holds the same weights and computes partial weight
// gradients from its slice of the sequence, so the gradients are reduced, and ZeRO shards, over the
// D x C ranks (Megatron's data-parallel group with context parallelism); D above is then D x C.
// make_step_plan throws invalid_argument when a time is not finite.

#include "core/pipeline/simulator.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

enum class Recompute { none, selective, full };
inline constexpr std::string_view kRecomputeNames[] = {"none", "selective", "full"};
std::string_view to_string(Recompute mode);
std::optional<Recompute> parse_recompute(std::string_view text);

struct TrainingOptions {
    int dp = 1; // data-parallel degree D >= 1
    int cp = 1; // context-parallel degree C >= 1: gradients and ZeRO shards span D x C (above)
    int zero = 0; // ZeRO stage 0..3
    Recompute recompute = Recompute::none;
    double link_gbps = 0.0; // 0: links infinitely fast (sends cost the latency, all-reduce free)
    std::optional<double> dp_link_gbps; // the data-parallel traffic's link, when not link_gbps
    int ep = 1; // expert-parallel degree, a divisor of dp (see above)
    bool overlap_allreduce = false;
    // Gradients kept and reduced in fp32 (4 bytes) instead of the weights' 16 bits: Megatron's
    // main_grad buffer, its default with bf16 (Megatron's distributed optimizer is then ZeRO 1).
    bool fp32_grads = false;
    std::optional<std::int64_t> gpu_memory_bytes; // the limit `fits` is judged against
};
// Throws invalid_argument, in one sentence, for a value out of range.
void check_options(const TrainingOptions& options);
// The ranks that hold a weight and reduce its gradient: D x C.
int gradient_replicas(const TrainingOptions& options);

// Bytes per parameter one rank holds under ZeRO stage `zero` over `dp` ranks (exact fractions):
// 2 of weights, 2 of gradients (4 with fp32_grads) and 12 of optimizer state (fp32 master, Adam's
// two moments), each sharded from its stage on. ZeRO's K = 12 (Rajbhandari et al. 2019); with
// fp32 gradients, Megatron's "bf16 parameters, fp32 gradients" row: 18, and 6 + 12/d distributed.
struct ParamBytes {
    double weights = 0.0;
    double gradients = 0.0;
    double optimizer = 0.0;
    double total() const { return weights + gradients + optimizer; }
};
ParamBytes bytes_per_param(int zero, int dp, bool fp32_grads = false);
// What one rank holds for `params` parameters (weights + gradients + optimizer), in whole
// bytes: a sharded buffer is padded to D equal shards of ceil(P / D) elements.
std::int64_t param_state_bytes(std::int64_t params, int zero, int dp, bool fp32_grads = false);

// The profile as the schedule runs it under `mode`: activation_bytes = what each layer keeps,
// backward times grown by the recomputation. Partitioning by compute sees the real costs.
Profile with_recompute(const Profile& profile, Recompute mode);
// What a layer keeps per microbatch under `mode`: activation_bytes, layer_selective_bytes or
// layer_input_bytes.
double layer_held_bytes(const Profile& profile, const Layer& layer, Recompute mode);
// How much `mode` lengthens a layer's backward: the forward it runs again (none: 0).
double layer_recompute_ms(const Profile& profile, const Layer& layer, Recompute mode);

// Units U (above) of data-parallel traffic a step moves under ZeRO stage `zero` with
// `microbatches` microbatches, and how many of them follow the last backward. With fp32_grads a
// gradient's reduction moves twice the bytes: 2 units where 16-bit gradients take 1 (the weights'
// all-gathers stay 16-bit).
struct ZeroTraffic {
    double total = 2.0;
    double final = 2.0;
};
ZeroTraffic zero_traffic(int zero, int microbatches, bool fp32_grads = false);

// ms to move `bytes` over a link of `link_gbps` (no latency); 0 when link_gbps is 0.
double transfer_ms(std::int64_t bytes, double link_gbps);
// Ring all-reduce of `bytes` over `dp` ranks: 2 (dp - 1) / dp * bytes / bandwidth, in ms.
double ring_allreduce_ms(std::int64_t bytes, int dp, double link_gbps);

struct StageMemory {
    std::int64_t weights = 0;
    std::int64_t gradients = 0;
    std::int64_t optimizer = 0;
    std::int64_t activations = 0;
    std::int64_t total = 0;
    bool fits = true; // total <= the GPU memory limit (true without a limit)
};

struct AllReduce {
    int stage = 0;
    std::int64_t bytes = 0; // the stage's 16-bit gradients
    double start = 0.0; // ms
    double end = 0.0;
};

// A send between stages: after F, the piece's output to the next piece; after B, the gradient
// of the previous piece's output back to it.
struct Transfer {
    int from_stage = 0;
    int to_stage = 0;
    int microbatch = 0;
    int chunk = 0; // the sending op's chunk
    OpKind after = OpKind::F;
    std::int64_t bytes = 0;
    double start = 0.0; // the sending op's end
    double end = 0.0; // when the receiver may start: + bytes / bandwidth + latency
};

struct StepPlan {
    Plan plan; // over with_recompute(profile); pieces carry send_ms
    TrainingOptions options;
    std::vector<StageMemory> memory; // per stage
    std::int64_t peak_memory_bytes = 0;
    bool fits = true;
    std::vector<AllReduce> allreduce; // per stage; empty when dp == 1
    double allreduce_ms = 0.0; // the longest stage's all-reduce
    double exposed_allreduce_ms = 0.0; // step_time - makespan
    double step_time = 0.0; // ms
};

// partition (on the recompute-adjusted profile) + build_schedule + simulate + the above.
StepPlan make_step_plan(const Profile& profile, const ScheduleSpec& spec, const PartitionSpec& partition_spec,
                        const TrainingOptions& options);
// Same with a built schedule and given boundaries (the planner's inner loop).
StepPlan make_step_plan(const Profile& profile, const Schedule& schedule, const std::vector<int>& boundaries,
                        const TrainingOptions& options);

// `step` under ZeRO stage `zero`: the stage changes what a rank holds and the data-parallel
// traffic, not one op of the pipeline, so the simulation is kept and only the memory, the
// all-reduce and the step time are worked out again; the same as make_step_plan with that stage.
// The planner's way of trying every stage at the cost of one simulation.
StepPlan with_zero(const Profile& profile, StepPlan step, int zero);

// Every send of the step, in op order; empty with one stage.
std::vector<Transfer> transfers(const StepPlan& step);

} // namespace shardscope::pipeline
