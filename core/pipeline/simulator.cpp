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
    const double latency = n > 1 ? spec.p2p_latency_ms : 0.0; // every dependency crosses stages

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
        while (st.head < ops.size()) {
            const Op& op = ops[st.head];
            const int p = op.chunk * n + s;
            Done& slot = done[static_cast<std::size_t>(op.microbatch) * piece_count + p];
            double ready = st.free_at;
            double duration = 0.0;
            int wake = -1;
            if (op.kind == OpKind::F) {
                if (p > 0) {
                    const double t = (&slot - 1)->f;
                    if (t < 0.0)
                        break;
                    ready = std::max(ready, t + latency + pieces[p - 1].send_ms);
                }
                duration = pieces[p].fwd_ms;
                if (p + 1 < piece_count)
                    wake = (p + 1) % n;
            } else if (op.kind == OpKind::B) {
                if (slot.f < 0.0)
                    break;
                ready = std::max(ready, slot.f);
                if (p + 1 < piece_count) {
                    const double t = (&slot + 1)->b;
                    if (t < 0.0)
                        break;
                    ready = std::max(ready, t + latency + pieces[p].send_ms);
                }
                duration = split ? pieces[p].bwd_input_ms : pieces[p].bwd_ms;
                if (p > 0)
                    wake = (p - 1) % n;
            } else {
                if (slot.b < 0.0)
                    break;
                ready = std::max(ready, slot.b);
                duration = pieces[p].bwd_weight_ms;
            }
            const double end = ready + duration;
            if (op.kind == OpKind::F)
                slot.f = end;
            else if (op.kind == OpKind::B)
                slot.b = end;
            st.held.run(op.kind, pieces[p].activation_bytes);
            out[st.head] = TimedOp{s, op.microbatch, op.chunk, op.kind, ready, end};
            st.busy += duration;
            st.free_at = end;
            ++st.head;
            if (wake >= 0 && wake != s && !state[wake].queued) {
                state[wake].queued = true;
                worklist.push_back(wake);
            }
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
        const int p = op.chunk * n + s;
        std::string waits;
        const Done& slot = done[static_cast<std::size_t>(op.microbatch) * piece_count + p];
        if (op.kind == OpKind::F)
            waits = op_text(OpKind::F, op.microbatch, (p - 1) / n, v) + " on stage " + std::to_string((p - 1) % n);
        else if (op.kind == OpKind::B && slot.f < 0.0)
            waits = "its own " + op_text(OpKind::F, op.microbatch, op.chunk, v) + ", which comes later in its list";
        else if (op.kind == OpKind::B)
            waits = op_text(OpKind::B, op.microbatch, (p + 1) / n, v) + " on stage " + std::to_string((p + 1) % n);
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
    double idle_total = 0.0;
    timeline.stage_stats.assign(static_cast<std::size_t>(n), StageStats{});
    for (int s = 0; s < n; ++s) {
        StageStats& stats = timeline.stage_stats[s];
        stats.stage = s;
        stats.first_layer = pieces[s].first_layer;
        stats.last_layer = pieces[(v - 1) * n + s].last_layer;
        stats.busy = state[s].busy;
        stats.peak_activations = state[s].held.peak;
        stats.peak_activation_bytes = state[s].held.peak_bytes;
        stats.idle = std::max(0.0, timeline.makespan - stats.busy);
        stats.bubble_fraction = timeline.makespan > 0.0 ? stats.idle / timeline.makespan : 0.0;
        idle_total += stats.idle;
    }
    timeline.bubble_fraction = timeline.makespan > 0.0 ? idle_total / (n * timeline.makespan) : 0.0;
    timeline.closed_form_bubble = closed_form_bubble(spec);
    timeline.megatron_bubble = megatron_bubble(spec);
}

double closed_form_bubble(const ScheduleSpec& spec)
{
    const double n = spec.stages, m = spec.microbatches, v = spec.virtual_stages;
    switch (spec.kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b: return (n - 1) / (m + n - 1);
    case ScheduleKind::interleaved: return ((n - 1) / v) / (m + (n - 1) / v);
    case ScheduleKind::zb_h1: {
        // Stage 0 cannot start its first B before the forward and backward chains have crossed
        // the pipeline (2N - 1 op slots); with M < N it then still has 2M ops, which is longer
        // than the textbook 3M + N - 1 that assumes the pipeline fills (M >= N).
        const double makespan = std::max(3 * m + n - 1, 2 * m + 2 * n - 1);
        return (makespan - 3 * m) / makespan;
    }
    }
    return 0.0;
}

double megatron_bubble(const ScheduleSpec& spec)
{
    const double n = spec.stages, m = spec.microbatches, v = spec.virtual_stages;
    switch (spec.kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b: return (n - 1) / m;
    case ScheduleKind::interleaved: return (n - 1) / (m * v);
    case ScheduleKind::zb_h1: return (std::max(3 * m + n - 1, 2 * m + 2 * n - 1) - 3 * m) / (3 * m);
    }
    return 0.0;
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
    plan.pieces = piece_costs(profile, schedule.spec.stages, boundaries);
    plan.stages = stage_costs(plan.pieces, schedule.spec.stages);
    plan.timeline = simulate(schedule, plan.pieces);
    return plan;
}

Plan make_plan(const Profile& profile, const ScheduleSpec& spec, const std::vector<int>& boundaries)
{
    return make_plan(profile, build_schedule(spec), boundaries);
}

} // namespace shardscope::pipeline
