#pragma once
// Pipeline schedules as per-stage ordered op lists. A schedule only says in which ORDER each
// stage runs its ops; when they run follows from the costs and dependencies, computed by the
// simulator (simulator.h). Any op list can be simulated, not just the built-in ones.
//
// Built-in schedules (N stages, M microbatches, v chunks per stage):
//  - gpipe:       all M forwards, then all M backwards (in microbatch order).
//  - 1f1b:        PipeDream-Flush: stage s warms up with min(N - s - 1, M) forwards, then
//                 alternates one forward / one backward, then cools down with the rest.
//  - interleaved: Megatron-LM's interleaved 1F1B over v chunks per stage. Rule: M must be a
//                 multiple of N (Megatron's own check), because microbatches enter each chunk
//                 in groups of N; with a partial group the order deadlocks or idles.
//                 Stage s warms up with min((N - s - 1) * 2 + (v - 1) * N, M * v) forwards
//                 (all of them when M == N), then 1F1B, then cool-down.
//  - zb-h1:       zero-bubble ZB-H1 (Qi et al., 2023): the backward is split into B (input
//                 gradient, on the critical path) and W (weight gradient, deferrable). Same
//                 warm-up as 1f1b; each stage defers its first s W passes so they fill the
//                 cool-down bubble, which keeps at most N microbatches' activations on any
//                 stage while cutting 1F1B's bubble to a third when F = B = W.
//  - zb-h2:       zero-bubble ZB-H2 (same paper): a memory budget of 2N - 1 microbatches per
//                 stage buys extra warm-up forwards that fill the bubble before the first B, and
//                 W passes move to the tail wherever a B is ready, so the step becomes a
//                 parallelogram. The order is the greedy one at F = B = W: B first, then F while
//                 fewer than 2N - 1 microbatches are held, then W (schedule_zero_bubble.cpp).
//  - zb-v:        ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", the zero
//                 bubble paper's V schedule): v = 2 chunks per stage placed as a V (partition.h),
//                 split backward, at most 2N chunk activations (= N microbatches of a whole
//                 stage, 1F1B's memory) and no bubble in the steady state when F = B = W.
//  - dualpipe-v:  DeepSeek's DualPipe "cut in half" (DualPipeV, as torch.distributed.pipelining
//                 builds it): the V placement, forwards of one chunk paired with backwards of
//                 the other in the steady state, zero-bubble B/W splits at the edges. Needs
//                 M >= 2N. The paired F&B run one after the other here (no overlap modelled).
//  - custom:      an op list read from a file (schedule_csv.h); never built.

#include "core/pipeline/partition.h"
#include "core/util/enum_names.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, zb_v, dualpipe_v, custom };
inline constexpr std::string_view kScheduleKindNames[] = {"gpipe", "1f1b", "interleaved", "zb-h1",
                                                          "zb-h2", "zb-v", "dualpipe-v",  "custom"};
static_assert(std::size(kScheduleKindNames) == std::size_t(ScheduleKind::custom) + 1);

// "gpipe" | "1f1b" | "interleaved" | "zb-h1" | "zb-h2" | "zb-v" | "dualpipe-v" | "custom"
std::string_view to_string(ScheduleKind kind);
// Any name above except "custom", which only a schedule read from a file has.
std::optional<ScheduleKind> parse_schedule_kind(std::string_view text);
// The chunks per stage a kind runs when none is asked for: 2 for interleaved, zb-v and
// dualpipe-v (the V kinds need exactly 2), else 1.
int default_virtual_stages(ScheduleKind kind);
// True for the kinds that split the backward into B and W.
bool splits_backward(ScheduleKind kind);

// F = forward. B = backward; when the schedule splits the backward (zb-h1) B is only the input
// gradient and W the weight gradient, otherwise B is the whole backward and there is no W.
enum class OpKind : std::uint8_t { F, B, W };
char to_char(OpKind kind); // 'F', 'B', 'W'

struct Op {
    int microbatch = 0;
    int chunk = 0; // 0 .. v-1; the op runs piece chunk * N + stage
    OpKind kind = OpKind::F;
    // This op and the next one on the stage are one overlapped pair (torch's OVERLAP_F_B,
    // DualPipe's F&B): they start together, run for the sum of their durations, and both hand
    // their results on when the pair ends.
    bool overlap_next = false;
    friend bool operator==(const Op&, const Op&) = default;
};

struct ScheduleSpec {
    ScheduleKind kind = ScheduleKind::one_f_one_b;
    int stages = 1; // N >= 1
    int microbatches = 1; // M >= 1
    int virtual_stages = 1; // v: chunks per stage; 1, except interleaved (>= 2), zb-v and dualpipe-v (2)
    double p2p_latency_ms = 0.0; // added to every dependency that crosses stages (simulation)
    Placement custom_placement = Placement::looped; // only for kind == custom; the others imply theirs
};

// Where the spec's pieces live: V-shaped for zb-v and dualpipe-v, custom_placement for custom,
// otherwise looped.
Placement placement_of(const ScheduleSpec& spec);

struct Schedule {
    ScheduleSpec spec;
    bool split_backward = false; // true: B and W ops (zb-h1, zb-h2, zb-v, dualpipe-v)
    std::vector<std::vector<Op>> stage_ops; // [stage] -> ops in execution order
};

// Throws invalid_schedule, in one sentence, when the spec breaks a rule above (N, M, v ranges,
// v > 1 without interleaved, interleaved with v < 2 or M not a multiple of N, a V kind with
// v != 2, dualpipe-v with M < 2N).
void check_spec(const ScheduleSpec& spec);

// Builds a built-in schedule (calls check_spec first; custom throws). O(N * M * v), zb-h2
// O(N * M).
Schedule build_schedule(const ScheduleSpec& spec);

} // namespace shardscope::pipeline
