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

#include "core/util/enum_names.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };
inline constexpr std::string_view kScheduleKindNames[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
static_assert(std::size(kScheduleKindNames) == std::size_t(ScheduleKind::zb_h1) + 1);

// "gpipe" | "1f1b" | "interleaved" | "zb-h1"
std::string_view to_string(ScheduleKind kind);
std::optional<ScheduleKind> parse_schedule_kind(std::string_view text);

// F = forward. B = backward; when the schedule splits the backward (zb-h1) B is only the input
// gradient and W the weight gradient, otherwise B is the whole backward and there is no W.
enum class OpKind : std::uint8_t { F, B, W };
char to_char(OpKind kind); // 'F', 'B', 'W'

struct Op {
    int microbatch = 0;
    int chunk = 0; // 0 .. v-1; the op runs piece chunk * N + stage
    OpKind kind = OpKind::F;
    friend bool operator==(const Op&, const Op&) = default;
};

struct ScheduleSpec {
    ScheduleKind kind = ScheduleKind::one_f_one_b;
    int stages = 1; // N >= 1
    int microbatches = 1; // M >= 1
    int virtual_stages = 1; // v: chunks per stage; must be 1 unless kind == interleaved (>= 2)
    double p2p_latency_ms = 0.0; // added to every dependency that crosses stages (simulation)
};

struct Schedule {
    ScheduleSpec spec;
    bool split_backward = false; // true: B and W ops (zb-h1)
    std::vector<std::vector<Op>> stage_ops; // [stage] -> ops in execution order
};

// Throws invalid_schedule, in one sentence, when the spec breaks a rule above (N, M, v ranges,
// v > 1 without interleaved, interleaved with v < 2 or M not a multiple of N).
void check_spec(const ScheduleSpec& spec);

// Builds a built-in schedule (calls check_spec first). O(N * M * v).
Schedule build_schedule(const ScheduleSpec& spec);

} // namespace shardscope::pipeline
