#include "core/pipeline/simulator.h"

#include "core/util/error.h"

#include <algorithm>
#include <string>

namespace shardscope::pipeline {
namespace {

std::string op_text(OpKind kind, int microbatch, int chunk, int chunks)
{
    std::string text = std::string(1, to_char(kind)) + "(microbatch " + std::to_string(microbatch);
    if (chunks > 1)
        text += ", chunk " + std::to_string(chunk);
    return text + ")";
}

// Every stage must run each of its (kind, chunk, microbatch) ops exactly once; a missing op
// would otherwise look like a deadlock and a duplicate would silently run twice.
void check_ops(const Schedule& schedule)
{
    const ScheduleSpec& spec = schedule.spec;
    const int n = spec.stages, m = spec.microbatches, v = spec.virtual_stages;
    const int kinds = schedule.split_backward ? 3 : 2;
    if (static_cast<int>(schedule.stage_ops.size()) != n)
        throw Error(ProblemKind::invalid_schedule,
                    "the schedule has op lists for " + std::to_string(schedule.stage_ops.size()) + " stages, not " +
                        std::to_string(n));
    std::vector<unsigned char> seen(static_cast<std::size_t>(kinds) * v * m);
    for (int s = 0; s < n; ++s) {
        const auto& ops = schedule.stage_ops[s];
        std::fill(seen.begin(), seen.end(), 0);
        if (ops.size() != seen.size())
            throw Error(ProblemKind::invalid_schedule,
                        "stage " + std::to_string(s) + " has " + std::to_string(ops.size()) +
                            " ops; it must run each of its " + std::to_string(seen.size()) + " ops exactly once");
        for (const Op& op : ops) {
            const int k = static_cast<int>(op.kind);
            if (op.microbatch < 0 || op.microbatch >= m || op.chunk < 0 || op.chunk >= v || k >= kinds)
                throw Error(ProblemKind::invalid_schedule,
                            "stage " + std::to_string(s) + " lists " + op_text(op.kind, op.microbatch, op.chunk, 2) +
                                ", which is not an op of this schedule");
            unsigned char& flag = seen[(static_cast<std::size_t>(k) * v + op.chunk) * m + op.microbatch];
            if (flag)
                throw Error(ProblemKind::invalid_schedule,
                            "stage " + std::to_string(s) + " lists " + op_text(op.kind, op.microbatch, op.chunk, v) +
                                " twice");
            flag = 1;
        }
    }
}

} // namespace

std::vector<int> in_flight_peaks(const Schedule& schedule)
{
    std::vector<int> peaks;
    for (const auto& ops : schedule.stage_ops) {
        HeldActivations held{.releases = releasing_op(schedule)};
        for (const Op& op : ops)
            held.run(op.kind, 0);
        peaks.push_back(held.peak);
    }
    return peaks;
}

Timeline simulate(const Schedule& schedule, const std::vector<PieceCost>& pieces)
{
    Timeline timeline;
    simulate_into(schedule, pieces, timeline);
    return timeline;
}

void simulate_into(const Schedule& schedule, const std::vector<PieceCost>& pieces, Timeline& timeline)
{
    check_spec(schedule.spec);
    check_ops(schedule);
    const ScheduleSpec& spec = schedule.spec;
    const int n = spec.stages, m = spec.microbatches, v = spec.virtual_stages;
    const int piece_count = n * v;
    if (static_cast<int>(pieces.size()) != piece_count)
        throw Error(ProblemKind::invalid_schedule,
                    std::to_string(n) + " stages x " + std::to_string(v) + " virtual stages need " +
                        std::to_string(piece_count) + " pieces of the model, got " + std::to_string(pieces.size()));
    const bool split = schedule.split_backward;
    const Placement placement = placement_of(spec);
    const auto piece_stage = [&](int p) { return stage_of_piece(p, n, placement); };
    // A piece holds at most M microbatches' activations at once: what a stage can hold must be
    // countable in 64 bits, or its peak would wrap to a small number that "fits".
    {
        std::vector<std::int64_t> per_stage(static_cast<std::size_t>(n), 0);
        for (int p = 0; p < piece_count; ++p) {
            std::int64_t& sum = per_stage[static_cast<std::size_t>(piece_stage(p))];
            std::int64_t held = 0;
            if (pieces[p].activation_bytes < 0 || __builtin_mul_overflow(pieces[p].activation_bytes, m, &held) ||
                __builtin_add_overflow(sum, held, &sum))
                throw Error(ProblemKind::invalid_profile,
                            "stage " + std::to_string(piece_stage(p)) + " would hold " + std::to_string(m) +
                                " microbatches of its pieces' activation bytes, more than 2^63 bytes: too many to "
                                "count");
        }
    }
    // Piece p's output (or gradient) reaching p + 1 (or p): looped placements always cross stages
    // when N > 1, the V's turn at piece N - 1 -> N stays on the last stage. Only a crossing pays
    // the p2p latency and the boundary's send time.
    const auto hand_over = [&](int p) {
        return piece_stage(p) != piece_stage(p + 1) ? spec.p2p_latency_ms + pieces[p].send_ms : 0.0;
    };

    // Completion times of each (piece, microbatch)'s F and B, -1 while not done. Microbatch-major
    // so that the neighbouring pieces an op depends on share its cache line: the pipeline's
    // wavefront then stays in cache however large M gets, which keeps the cost linear in M.
    struct Done {
        double f = -1.0;
        double b = -1.0;
    };
    std::vector<Done> done(static_cast<std::size_t>(piece_count) * m);

    timeline.spec = spec;
    timeline.split_backward = split;
    timeline.stage_begin.assign(static_cast<std::size_t>(n) + 1, 0);
    for (int s = 0; s < n; ++s)
        timeline.stage_begin[s + 1] = timeline.stage_begin[s] + schedule.stage_ops[s].size();
    timeline.ops.resize(timeline.stage_begin[n]);

    // Per-stage running state; the statistics are gathered while simulating so the (large)
    // op array is written once and never re-read.
    struct StageState {
        std::size_t head = 0;
        double free_at = 0.0;
        double busy = 0.0;
        HeldActivations held;
        bool queued = true;
    };
    std::vector<StageState> state(static_cast<std::size_t>(n));
    std::vector<int> worklist(static_cast<std::size_t>(n));
    for (int s = 0; s < n; ++s)
        worklist[s] = n - 1 - s;
    for (StageState& st : state)
        st.held.releases = releasing_op(schedule);

    // Times follow from the fixed per-stage order alone, so instead of a time-ordered event
    // queue each stage advances as far as its dependencies allow and wakes the one stage that
    // consumes what it just finished. Every op is scheduled once and every wake-up either
    // schedules an op or stops, so this is O(ops) with no priority queue.
    while (!worklist.empty()) {
        const int s = worklist.back();
        worklist.pop_back();
        StageState& st = state[s];
        st.queued = false;
        const auto& ops = schedule.stage_ops[s];
        TimedOp* out = timeline.ops.data() + timeline.stage_begin[s];
        // Stages are visited round-robin a few ops at a time, i.e. 2N interleaved memory streams
        // (op lists in, timeline out): more than the hardware prefetcher tracks once N * M
        // outgrows the cache, so fetch each stage's next lines ahead ourselves.
        constexpr std::size_t kAhead = 8;
#if defined(__GNUC__)
        if (st.head + kAhead < ops.size()) {
            __builtin_prefetch(&ops[st.head + kAhead]);
            __builtin_prefetch(&out[st.head + kAhead], 1);
        }
#endif
        // When op `i` can start at the earliest (or -1 while a dependency is missing), its
        // duration, and the stage its result unblocks.
        const auto probe = [&](std::size_t i, double& ready, double& duration, int& wake) {
            const Op& op = ops[i];
            const int p = piece_of(s, op.chunk, n, placement);
            const Done& slot = done[static_cast<std::size_t>(op.microbatch) * piece_count + p];
            wake = -1;
            if (op.kind == OpKind::F) {
                if (p > 0) {
                    const double t = (&slot - 1)->f;
                    if (t < 0.0)
                        return false;
                    ready = std::max(ready, t + hand_over(p - 1));
                }
                duration = pieces[p].fwd_ms;
                if (p + 1 < piece_count)
                    wake = piece_stage(p + 1);
            } else if (op.kind == OpKind::B) {
                if (slot.f < 0.0)
                    return false;
                ready = std::max(ready, slot.f);
                if (p + 1 < piece_count) {
                    const double t = (&slot + 1)->b;
                    if (t < 0.0)
                        return false;
                    ready = std::max(ready, t + hand_over(p));
                }
                duration = split ? pieces[p].bwd_input_ms : pieces[p].bwd_ms;
                if (p > 0)
                    wake = piece_stage(p - 1);
            } else {
                if (slot.b < 0.0)
                    return false;
                ready = std::max(ready, slot.b);
                duration = pieces[p].bwd_weight_ms;
            }
            return true;
        };
        // Records op `i` as run from `start` for `duration`, its result usable from `done_at`.
        const auto run = [&](std::size_t i, double start, double duration, double done_at, int wake) {
            const Op& op = ops[i];
            const int p = piece_of(s, op.chunk, n, placement);
            Done& slot = done[static_cast<std::size_t>(op.microbatch) * piece_count + p];
            if (op.kind == OpKind::F)
                slot.f = done_at;
            else if (op.kind == OpKind::B)
                slot.b = done_at;
            st.held.run(op.kind, pieces[p].activation_bytes);
            out[i] = TimedOp{s, op.microbatch, op.chunk, op.kind, start, start + duration};
            st.busy += duration;
            if (wake >= 0 && wake != s && !state[wake].queued) {
                state[wake].queued = true;
                worklist.push_back(wake);
            }
        };
        while (st.head < ops.size()) {
            const std::size_t i = st.head;
            double ready = st.free_at, duration = 0.0;
            int wake = -1;
            if (!probe(i, ready, duration, wake))
                break;
            if (ops[i].overlap_next && i + 1 < ops.size()) {
                // An overlapped pair (DualPipe's F&B) starts once both halves can and hands both
                // results on only when the pair ends: each half's communication hides behind
                // the other's compute, so neither is out earlier.
                double second_duration = 0.0;
                int second_wake = -1;
                if (!probe(i + 1, ready, second_duration, second_wake))
                    break;
                const double end = ready + duration + second_duration;
                run(i, ready, duration, end, wake);
                run(i + 1, ready + duration, second_duration, end, second_wake);
                st.free_at = end;
                st.head += 2;
                continue;
            }
            run(i, ready, duration, ready + duration, wake);
            st.free_at = ready + duration;
            ++st.head;
        }
    }

    std::string stuck;
    int stuck_count = 0;
    for (int s = 0; s < n; ++s) {
        if (state[s].head == schedule.stage_ops[s].size())
            continue;
        if (++stuck_count > 3)
            continue;
        const Op& op = schedule.stage_ops[s][state[s].head];
        const int p = piece_of(s, op.chunk, n, placement);
        std::string waits;
        const Done& slot = done[static_cast<std::size_t>(op.microbatch) * piece_count + p];
        if (op.kind == OpKind::F)
            waits = op_text(OpKind::F, op.microbatch, chunk_of_piece(p - 1, n, placement), v) + " on stage " +
                std::to_string(piece_stage(p - 1));
        else if (op.kind == OpKind::B && slot.f < 0.0)
            waits = "its own " + op_text(OpKind::F, op.microbatch, op.chunk, v) + ", which comes later in its list";
        else if (op.kind == OpKind::B)
            waits = op_text(OpKind::B, op.microbatch, chunk_of_piece(p + 1, n, placement), v) + " on stage " +
                std::to_string(piece_stage(p + 1));
        else
            waits = "its own " + op_text(OpKind::B, op.microbatch, op.chunk, v) + ", which comes later in its list";
        stuck += (stuck.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) + " is stuck at " +
            op_text(op.kind, op.microbatch, op.chunk, v) + ", waiting for " + waits;
    }
    if (stuck_count > 0)
        throw Error(
            ProblemKind::deadlock,
            "the " + std::string(to_string(spec.kind)) + " op order deadlocks: " + stuck +
                (stuck_count > 3 ? " (and " + std::to_string(stuck_count - 3) + " more stages)" : std::string()));

    timeline.makespan = 0.0;
    for (const StageState& st : state)
        timeline.makespan = std::max(timeline.makespan, st.free_at);
    double idle_total = 0.0, longest_span = 0.0, most_busy = 0.0;
    timeline.stage_stats.assign(static_cast<std::size_t>(n), StageStats{});
    for (int s = 0; s < n; ++s) {
        StageStats& stats = timeline.stage_stats[s];
        stats.stage = s;
        stats.first_layer = pieces[piece_of(s, 0, n, placement)].first_layer;
        stats.last_layer = pieces[piece_of(s, v - 1, n, placement)].last_layer;
        stats.busy = state[s].busy;
        stats.peak_activations = state[s].held.peak;
        stats.peak_activation_bytes = state[s].held.peak_bytes;
        stats.idle = std::max(0.0, timeline.makespan - stats.busy);
        stats.bubble_fraction = timeline.makespan > 0.0 ? stats.idle / timeline.makespan : 0.0;
        // Ops are in time order per stage, so the first starts first and the last ends last.
        if (timeline.stage_begin[s + 1] > timeline.stage_begin[s])
            stats.span = state[s].free_at - timeline.ops[timeline.stage_begin[s]].start;
        idle_total += stats.idle;
        longest_span = std::max(longest_span, stats.span);
        most_busy = std::max(most_busy, stats.busy);
    }
    timeline.bubble_fraction = timeline.makespan > 0.0 ? idle_total / (n * timeline.makespan) : 0.0;
    timeline.span_bubble_fraction = longest_span > 0.0 ? std::max(0.0, longest_span - most_busy) / longest_span : 0.0;
    timeline.closed_form_bubble = closed_form_bubble(spec);
    timeline.megatron_bubble = megatron_bubble(spec);
}

namespace {

// Makespan in units of one piece's F (= B = W) for uniform stages, or 0 without a closed form.
double uniform_makespan(const ScheduleSpec& spec)
{
    const double n = spec.stages, m = spec.microbatches, v = spec.virtual_stages;
    switch (spec.kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b: return 3 * (m + n - 1);
    case ScheduleKind::interleaved: return 3 * (m * v + n - 1);
    case ScheduleKind::zb_h1:
    case ScheduleKind::zb_h2:
        // Stage 0 cannot start its first B before the forward and backward chains have crossed
        // the pipeline (2N - 1 op slots); with M < N it then still has 2M ops, which is longer
        // than the textbook 3M + N - 1 that assumes the pipeline fills (M >= N).
        return std::max(3 * m + n - 1, 2 * m + 2 * n - 1);
    case ScheduleKind::zb_v:
        // N - 1 slots of warm-up at the last stage once the V fills (M >= 2N - 1); with fewer
        // microbatches the V's two turns leave 4(N - 1) idle slots, two fewer per microbatch.
        return 6 * m + std::max(n - 1, 4 * n - 2 * m - 2);
    case ScheduleKind::dualpipe_v: return 6 * m + n - 1;
    case ScheduleKind::custom: return 0.0;
    }
    return 0.0;
}

} // namespace

double closed_form_bubble(const ScheduleSpec& spec)
{
    const double makespan = uniform_makespan(spec);
    const double work = 3.0 * spec.microbatches * spec.virtual_stages;
    return makespan > 0.0 ? (makespan - work) / makespan : 0.0;
}

double megatron_bubble(const ScheduleSpec& spec)
{
    const double makespan = uniform_makespan(spec);
    const double work = 3.0 * spec.microbatches * spec.virtual_stages;
    return makespan > 0.0 ? (makespan - work) / work : 0.0;
}

std::string stage_layers(const Plan& plan, int stage, bool ascii)
{
    std::string text;
    for (const PieceCost& piece : plan.pieces) {
        if (piece.stage != stage)
            continue;
        if (!text.empty())
            text += ascii ? "," : ", ";
        text += std::to_string(piece.first_layer) + (ascii ? "-" : "\u2013") + std::to_string(piece.last_layer);
    }
    return text;
}

Plan make_plan(const Profile& profile, const Schedule& schedule, const std::vector<int>& boundaries)
{
    const int pieces = schedule.spec.stages * schedule.spec.virtual_stages;
    if (static_cast<int>(boundaries.size()) + 1 != pieces)
        throw Error(ProblemKind::invalid_schedule,
                    std::to_string(schedule.spec.stages) + " stages x " + std::to_string(schedule.spec.virtual_stages) +
                        " virtual stages need " + std::to_string(pieces - 1) + " boundaries, got " +
                        std::to_string(boundaries.size()));
    Plan plan;
    plan.boundaries = boundaries;
    plan.pieces = piece_costs(profile, schedule.spec.stages, boundaries, placement_of(schedule.spec));
    plan.stages = stage_costs(plan.pieces, schedule.spec.stages);
    plan.timeline = simulate(schedule, plan.pieces);
    return plan;
}

Plan make_plan(const Profile& profile, const ScheduleSpec& spec, const std::vector<int>& boundaries)
{
    return make_plan(profile, build_schedule(spec), boundaries);
}

} // namespace shardscope::pipeline
