#pragma once
// One event-driven simulator for any schedule, its results (Timeline), the textbook closed
// forms, and make_plan(): partition costs + simulation in one cheap call for the GUI's drag loop.
//
// Model. Piece p = chunk * N + stage, or the V (see partition.h). A stage runs its ops strictly in
// list order, one at a time; an op starts when the stage is free and its dependencies are done:
//   F(p, m) after F(p-1, m)                       (the previous piece's output)
//   B(p, m) after F(p, m) and B(p+1, m)           (the next piece's input gradient)
//   W(p, m) after B(p, m)
// An overlapped pair (Op::overlap_next) starts when both its ops can and hands both results on
// when it ends. A dependency on another stage's op adds p2p_latency_ms plus the sending piece boundary's
// send_ms (PieceCost: piece p's output to p + 1 after F, its gradient back after B). Durations are the piece's fwd_ms,
// bwd_ms (unsplit B) or bwd_input_ms / bwd_weight_ms (split B / W). An op order that can never
// complete (e.g. a stage waiting on an op that is queued behind it) throws ProblemKind::deadlock
// naming the stuck ops; it never hangs. Cost: O(ops), no heap, ~a few ns per op.

#include "core/pipeline/partition.h"
#include "core/pipeline/profile.h"
#include "core/pipeline/schedule.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::pipeline {

struct TimedOp {
    int stage = 0;
    int microbatch = 0;
    int chunk = 0;
    OpKind kind = OpKind::F;
    double start = 0.0; // ms from the start of the step
    double end = 0.0;
};

struct StageStats {
    int stage = 0;
    int first_layer = 0; // inclusive; with v > 1 chunks: first layer of chunk 0
    int last_layer = 0; // inclusive; with v > 1 chunks: last layer of the last chunk
    double busy = 0.0; // ms spent running ops
    double idle = 0.0; // makespan - busy
    double bubble_fraction = 0.0; // idle / makespan
    // From the stage's first op's start to its last op's end: the stage's share of the step when
    // steps follow each other without a flush between them (span_bubble_fraction below).
    double span = 0.0;
    // Most (microbatch, chunk) activation sets held at once: counted from the F until the last
    // backward op of that microbatch on that chunk (B, or W where the backward is split).
    // With v = 1 this is "microbatches in flight"; with v > 1 each chunk counts separately.
    int peak_activations = 0;
    std::int64_t peak_activation_bytes = 0; // the largest sum of held pieces' activation_bytes
};

struct Timeline {
    ScheduleSpec spec;
    bool split_backward = false;
    // All ops grouped by stage (stage 0's first), each stage's in execution (= time) order;
    // stage s's ops are ops[stage_begin[s] .. stage_begin[s + 1]).
    std::vector<TimedOp> ops;
    std::vector<std::size_t> stage_begin; // N + 1 offsets
    double makespan = 0.0; // end of the last op (ms)
    double bubble_fraction = 0.0; // total idle / (N * makespan)
    double closed_form_bubble = 0.0; // closed_form_bubble(spec) for comparison
    double megatron_bubble = 0.0; // megatron_bubble(spec)
    // Qi et al.'s bubble rate ("Zero Bubble Pipeline Parallelism", ICLR 2024, section 5.3):
    // (cost - work) / cost with cost the longest StageStats::span and work the busiest stage's
    // busy time (their m (T_F + T_B + T_W) when stages are equal). A stage's wait for its first
    // input is not counted: with the optimizer step's synchronisation bypassed (their section 4)
    // it overlaps the previous step's tail, which is why ZB-H2's parallelogram has no bubble.
    double span_bubble_fraction = 0.0;
    std::vector<StageStats> stage_stats; // one per stage
};

// What a stage holds, counted in its op order: up at F by the piece's activation bytes, down at
// the op that frees them (B, or W where the backward is split). The one rule the simulator
// (StageStats::peak_activations / peak_activation_bytes) and the planner's memory bound share.
struct HeldActivations {
    OpKind releases = OpKind::B;
    int held = 0;
    int peak = 0;
    std::int64_t held_bytes = 0;
    std::int64_t peak_bytes = 0;
    void run(OpKind kind, std::int64_t bytes)
    {
        if (kind == OpKind::F) {
            ++held;
            held_bytes += bytes;
            peak = held > peak ? held : peak;
            peak_bytes = held_bytes > peak_bytes ? held_bytes : peak_bytes;
        } else if (kind == releases) {
            --held;
            held_bytes -= bytes;
        }
    }
};
// The op that frees a microbatch's activations under `schedule`: W when it splits the backward.
inline OpKind releasing_op(const Schedule& schedule)
{
    return schedule.split_backward ? OpKind::W : OpKind::B;
}

// How many (microbatch, chunk) activation sets each stage holds at most (HeldActivations over
// its op list): the count the simulator reports as peak_activations, without simulating.
std::vector<int> in_flight_peaks(const Schedule& schedule);

// Runs `schedule` with per-piece costs (`pieces.size()` must be N * v, indexed by piece as
// piece_costs() returns them). Throws invalid_schedule when the op lists do not hold each
// required op exactly once on the right stage, deadlock when the order cannot complete.
Timeline simulate(const Schedule& schedule, const std::vector<PieceCost>& pieces);
// Same, overwriting `out` and reusing its buffers: no allocation (and no page faults) when the
// op count does not grow, which is what a drag loop or a benchmark wants. On a throw `out` is
// left in an unspecified but valid state.
void simulate_into(const Schedule& schedule, const std::vector<PieceCost>& pieces, Timeline& out);

// The textbook bubble fraction (idle / (N * makespan)) for uniform stages (F = B = W per piece):
//   gpipe, 1f1b:  (N-1) / (M + N-1)
//   interleaved:  ((N-1)/v) / (M + (N-1)/v)
//   zb-h1, zb-h2: (N-1) / (3M + N-1)          (M >= N: the paper's case; the single step of
//                 1 - 3M / (2M + 2N - 1)       ZB-H2 ends as ZB-H1's, its gain is with B > F)
//                                              (M < N: the pipeline never fills)
//   zb-v:         I / (6M + I), I = max(N - 1, 4N - 2M - 2)   (idle slots of one chunk's F)
//   dualpipe-v:   (N-1) / (6M + N-1)           (M >= 2N)
//   custom:       0 (no closed form)
// The simulator reproduces each exactly for uniform stages (tests/core/tst_pipeline_simulator).
double closed_form_bubble(const ScheduleSpec& spec);
// Megatron's form, bubble time / ideal compute time: (N-1)/M, divided by v when interleaved;
// zb-h1 (F = B = W, M >= N): (N-1) / (3M); the others from the same makespans.
double megatron_bubble(const ScheduleSpec& spec);

// Everything the planner view draws for one partition.
struct Plan {
    std::vector<int> boundaries; // N * v - 1
    std::vector<PieceCost> pieces; // N * v, by piece
    std::vector<StageCost> stages; // N
    Timeline timeline;
};

// The layers stage `stage` holds, each of its pieces' range in piece order: "0–9", or with
// interleaved chunks "0–1, 8–9" (`ascii`: "0-1,8-9", for fixed-width text columns).
std::string stage_layers(const Plan& plan, int stage, bool ascii = false);

// piece_costs + build_schedule + simulate. For N = 8, M = 64 this is a few microseconds, cheap
// enough to call on every mouse move. Throws like the functions it calls.
Plan make_plan(const Profile& profile, const ScheduleSpec& spec, const std::vector<int>& boundaries);
// Same, reusing an already built schedule (when only the boundaries change).
Plan make_plan(const Profile& profile, const Schedule& schedule, const std::vector<int>& boundaries);

} // namespace shardscope::pipeline
