#include "core/pipeline/fit_partition.h"

#include "core/pipeline/partition.h"
#include "core/util/error.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace shardscope::pipeline {
namespace {

constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();

// A stage's StageMemory::total as stage_memory() in training.cpp adds it up: parameter state
// (the experts' sharded over dp / ep ranks, the rest over dp) + activations held + the largest
// recomputed working set. kHuge when a part is kHuge or the sum overflows: a hostile profile's
// byte counts must not wrap around.
std::int64_t stage_total(std::int64_t params, std::int64_t experts, std::int64_t activations, std::int64_t working,
                         int zero, int dp, int ep, bool fp32_grads)
{
    std::int64_t total = 0;
    if (params == kHuge || activations == kHuge || params > kHuge / 32 || experts < 0 || experts > params ||
        __builtin_add_overflow(activations, working, &total) ||
        __builtin_add_overflow(total, param_state_bytes(params - experts, zero, dp, fp32_grads), &total) ||
        __builtin_add_overflow(total, param_state_bytes(experts, zero, std::max(1, dp / ep), fp32_grads), &total))
        return kHuge;
    return total;
}

// Range sums of the adjusted profile and the per-stage memory of a range [i, j), computed the
// way stage_memory() in training.cpp does for a one-chunk stage: parameter state + in-flight
// microbatches x bytes kept + the largest recomputed working set.
struct Ranges {
    std::vector<double> compute; // prefix sums of fwd_ms + bwd_ms
    std::vector<std::int64_t> params; // prefix sums (saturating)
    std::vector<std::int64_t> experts; // prefix sums of the expert parameters among them (saturating)
    std::vector<std::int64_t> kept; // prefix sums of the bytes each layer keeps (saturating)
    std::vector<std::int64_t> extra; // per layer: what recomputing it brings back
    std::vector<int> in_flight; // per stage
    int zero = 0;
    int dp = 1;
    int ep = 1;
    bool fp32_grads = false;

    double compute_of(int i, int j) const { return compute[j] - compute[i]; }

    std::int64_t memory_of(int stage, int i, int j, std::int64_t working) const
    {
        std::int64_t activations = 0;
        if (params[j] == kHuge || kept[j] == kHuge || experts[j] == kHuge ||
            __builtin_mul_overflow(std::int64_t(in_flight[static_cast<std::size_t>(stage)]), kept[j] - kept[i],
                                   &activations))
            return kHuge;
        return stage_total(params[j] - params[i], experts[j] - experts[i], activations, working, zero, dp, ep,
                           fp32_grads);
    }
};

std::int64_t saturating_add(std::int64_t a, std::int64_t b)
{
    std::int64_t sum = 0;
    return a == kHuge || __builtin_add_overflow(a, b, &sum) ? kHuge : sum;
}

std::optional<Ranges> ranges(const Profile& profile, const Schedule& schedule, const TrainingOptions& options,
                             const Holding& holding)
{
    if (static_cast<int>(profile.layers.size()) < schedule.spec.stages * schedule.spec.virtual_stages)
        return std::nullopt;
    Ranges r;
    if (schedule.spec.virtual_stages == 1)
        r.in_flight = holding.in_flight;
    r.zero = options.zero;
    r.dp = gradient_replicas(options); // ZeRO shards over dp x cp
    r.ep = std::max(1, options.ep);
    r.fp32_grads = options.fp32_grads;
    r.compute.push_back(0.0);
    r.params.push_back(0);
    r.experts.push_back(0);
    r.kept.push_back(0);
    // The figures with_recompute gives each layer, without copying the profile: the model search
    // asks this of thousands of configurations.
    const std::size_t layers = profile.layers.size();
    for (auto* sums : {&r.params, &r.experts, &r.kept})
        sums->reserve(layers + 1);
    r.compute.reserve(layers + 1);
    r.extra.reserve(layers);
    for (const Layer& layer : profile.layers) {
        const std::int64_t kept = options.recompute == Recompute::none
            ? layer.activation_bytes
            : static_cast<std::int64_t>(layer_held_bytes(profile, layer, options.recompute));
        // Summed as with_recompute's fwd_ms and bwd_ms would be, to the last bit.
        r.compute.push_back(r.compute.back() + layer.fwd_ms +
                            (layer.bwd_ms + layer_recompute_ms(profile, layer, options.recompute)));
        r.params.push_back(saturating_add(r.params.back(), layer.params));
        r.experts.push_back(saturating_add(r.experts.back(), layer.expert_params));
        r.kept.push_back(saturating_add(r.kept.back(), kept));
        r.extra.push_back(std::max<std::int64_t>(0, layer.activation_bytes - kept));
    }
    return r;
}

// min over cuts of max over stages of cost(stage, i, j) (layers [i, j)); cost returns nullopt
// for a range that is not allowed. Both the cost and "not allowed" only grow as a range grows
// (i decreasing for a fixed j), so the scan over i stops at the first range not allowed.
// Ties keep the smallest i: later stages as large as the optimum allows.
template <class T, class Cost>
std::optional<std::vector<int>> min_max_cut(const Ranges& r, int stages, Cost cost)
{
    const int layers = static_cast<int>(r.extra.size());
    const std::size_t width = static_cast<std::size_t>(layers) + 1;
    std::vector<std::optional<T>> best(static_cast<std::size_t>(stages) * width);
    std::vector<int> choice(best.size(), -1);
    auto at = [&](int s, int j) { return static_cast<std::size_t>(s) * width + static_cast<std::size_t>(j); };
    for (int s = 0; s < stages; ++s)
        for (int j = s + 1; j <= layers - (stages - 1 - s); ++j) {
            std::int64_t working = 0;
            for (int i = j - 1; i >= s; --i) {
                working = std::max(working, r.extra[static_cast<std::size_t>(i)]);
                if (s == 0 && i > 0)
                    continue; // stage 0 starts at layer 0; only its working set accumulates
                const std::optional<T> here = cost(s, i, j, working);
                if (!here)
                    break;
                const std::optional<T>& before = s == 0 ? here : best[at(s - 1, i)];
                if (!before)
                    continue;
                const T value = std::max(*before, *here);
                std::optional<T>& slot = best[at(s, j)];
                if (!slot || value <= *slot) {
                    slot = value;
                    choice[at(s, j)] = i;
                }
            }
        }
    if (!best[at(stages - 1, layers)])
        return std::nullopt;
    std::vector<int> boundaries(static_cast<std::size_t>(stages - 1));
    for (int s = stages - 1, j = layers; s >= 1; --s) {
        j = choice[at(s, j)];
        boundaries[static_cast<std::size_t>(s - 1)] = j;
    }
    return boundaries;
}

// ---- Several chunks per stage (interleaved) ----------------------------------------------
// A stage holds v pieces that are not adjacent (partition.h's placement), so its memory is not a
// function of one range and the DP above does not apply. Its activations peak where its op list
// holds the most bytes: after some forward, at sum_c held_c * kept(chunk c), with held_c counted
// from the op order alone. Only the count vectors no other one dominates can be that peak for
// some cut, and there are few of them, so a cut's exact memory (the StageMemory::total that
// make_step_plan reports) costs O(P + L + patterns x v) without simulating.

struct Chunked {
    const Ranges& r;
    int stages = 1;
    int chunks = 1;
    Placement placement = Placement::looped;
    const std::vector<std::vector<std::vector<int>>>& patterns; // Holding::patterns

    int pieces() const { return stages * chunks; }
    // What one memory() costs, in the search budget's visits: every layer once, and every held
    // count of every stage's undominated patterns (a V schedule of many microbatches has
    // hundreds a stage, more than the layers).
    std::int64_t visits() const
    {
        std::int64_t out = layers() + 1;
        for (const auto& stage : patterns)
            out += static_cast<std::int64_t>(stage.size()) * chunks;
        return out;
    }
    int layers() const { return static_cast<int>(r.extra.size()); }
    int begin_of(const std::vector<int>& cut, int p) const { return p == 0 ? 0 : cut[static_cast<std::size_t>(p - 1)]; }
    int end_of(const std::vector<int>& cut, int p) const
    {
        return p + 1 == pieces() ? layers() : cut[static_cast<std::size_t>(p)];
    }

    // Per stage: parameter state + the peak held activations + the largest recomputed working set.
    std::vector<std::int64_t> memory(const std::vector<int>& cut) const
    {
        std::vector<std::int64_t> out(static_cast<std::size_t>(stages));
        for (int s = 0; s < stages; ++s) {
            std::int64_t params = 0, experts = 0, working = 0, peak = 0;
            std::vector<std::int64_t> kept(static_cast<std::size_t>(chunks));
            bool huge = false;
            for (int c = 0; c < chunks; ++c) {
                const int p = piece_of(s, c, stages, placement), i = begin_of(cut, p), j = end_of(cut, p);
                huge |= r.params[j] == kHuge || r.kept[j] == kHuge || r.experts[j] == kHuge;
                params = saturating_add(params, r.params[j] - r.params[i]);
                experts = saturating_add(experts, r.experts[j] - r.experts[i]);
                kept[static_cast<std::size_t>(c)] = r.kept[j] - r.kept[i];
                for (int l = i; l < j; ++l)
                    working = std::max(working, r.extra[static_cast<std::size_t>(l)]);
            }
            for (const std::vector<int>& held : patterns[static_cast<std::size_t>(s)]) {
                std::int64_t bytes = 0, term = 0;
                for (int c = 0; c < chunks && !huge; ++c)
                    huge |= __builtin_mul_overflow(std::int64_t(held[static_cast<std::size_t>(c)]),
                                                   kept[static_cast<std::size_t>(c)], &term) ||
                        __builtin_add_overflow(bytes, term, &bytes);
                peak = std::max(peak, bytes);
            }
            out[static_cast<std::size_t>(s)] =
                huge ? kHuge : stage_total(params, experts, peak, working, r.zero, r.dp, r.ep, r.fp32_grads);
        }
        return out;
    }

    std::vector<double> compute(const std::vector<int>& cut) const
    {
        std::vector<double> out(static_cast<std::size_t>(pieces()));
        for (int p = 0; p < pieces(); ++p)
            out[static_cast<std::size_t>(p)] = r.compute_of(begin_of(cut, p), end_of(cut, p));
        return out;
    }
};

std::vector<std::vector<std::vector<int>>> held_patterns(const Schedule& schedule)
{
    const int v = schedule.spec.virtual_stages;
    std::vector<std::vector<std::vector<int>>> out;
    for (const std::vector<Op>& ops : schedule.stage_ops) {
        std::vector<std::vector<int>> seen;
        std::vector<int> held(static_cast<std::size_t>(v), 0);
        const OpKind releases = releasing_op(schedule);
        for (const Op& op : ops) {
            if (op.kind == OpKind::F) {
                ++held[static_cast<std::size_t>(op.chunk)];
                seen.push_back(held);
            } else if (op.kind == releases) {
                --held[static_cast<std::size_t>(op.chunk)];
            }
        }
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        auto dominated = [&](const std::vector<int>& a) {
            return std::any_of(seen.begin(), seen.end(), [&](const std::vector<int>& b) {
                return b != a && std::equal(a.begin(), a.end(), b.begin(), std::less_equal<>());
            });
        };
        std::vector<std::vector<int>> frontier;
        for (const std::vector<int>& a : seen)
            if (!dominated(a))
                frontier.push_back(a);
        out.push_back(std::move(frontier));
    }
    return out;
}

template <class T>
std::vector<T> descending(std::vector<T> values)
{
    std::sort(values.begin(), values.end(), std::greater<>());
    return values;
}

// The moves of the local search from `cut`: one boundary by one layer, or a run of 2..3 adjacent
// boundaries together (a piece slides along the model: its stage gives a layer at one end and
// takes one at the other, which single moves cannot do without passing through a worse cut).
template <class Visit>
void each_move(int layers, const std::vector<int>& cut, Visit&& visit)
{
    for (std::size_t b = 0; b < cut.size(); ++b)
        for (std::size_t run = 1; run <= 3 && b + run <= cut.size(); ++run)
            for (int step : {-1, 1}) {
                std::vector<int> next = cut;
                for (std::size_t k = b; k < b + run; ++k)
                    next[k] += step;
                const std::size_t last = b + run - 1;
                const int lo = b == 0 ? 1 : next[b - 1] + 1;
                const int hi = last + 1 == next.size() ? layers - 1 : next[last + 1] - 1;
                if (next[b] >= lo && next[last] <= hi)
                    visit(std::move(next));
            }
}

// How long one configuration's local search may take: every move strictly improves, so it ends,
// but a profile of thousands of layers could take minutes. Shared by a configuration's descents
// (kSearchVisits, fit_partition.h).
struct SearchBudget {
    std::int64_t visits = kSearchVisits;
    const std::atomic<bool>* cancel = nullptr;
    bool spent() const { return visits <= 0; }
    void check_cancel() const
    {
        if (cancel && cancel->load(std::memory_order_relaxed))
            throw Error(ProblemKind::cancelled, "the plan search was cancelled");
    }
};

// Moves `cut` to the best neighbour by `objective` (smaller is better) among those `allowed`
// admits, while that improves, `done` is not yet true and the budget lasts.
template <class Objective, class Allowed, class Done>
void steepest_descent(const Chunked& chunked, std::vector<int>& cut, SearchBudget& budget, Objective objective,
                      Allowed allowed, Done done)
{
    auto value = objective(cut);
    const std::int64_t visits = chunked.visits();
    while (!done(value) && !budget.spent()) {
        budget.check_cancel();
        std::optional<std::vector<int>> best;
        auto best_value = value;
        each_move(chunked.layers(), cut, [&](std::vector<int> next) {
            budget.visits -= visits;
            auto candidate = objective(next);
            if (candidate < best_value && allowed(next)) {
                best_value = std::move(candidate);
                best = std::move(next);
            }
        });
        if (!best)
            break;
        cut = std::move(*best);
        value = std::move(best_value);
    }
}

// The local search: lower the stages' memory (compared as a descending vector, so ties at the
// peak still make progress) until the peak is at most `limit`; then, when it is, lower the
// pieces' compute the same way while the peak stays within it. A cut it returns as fitting
// fits, but it is not proven to be the fastest that does (docs/shardctl.md, plan).
std::vector<int> descend(const Chunked& chunked, std::vector<int> cut, std::int64_t limit, SearchBudget& budget)
{
    const auto memory = [&](const std::vector<int>& c) { return descending(chunked.memory(c)); };
    const auto fits = [&](const std::vector<std::int64_t>& m) { return m.front() <= limit; };
    steepest_descent(
        chunked, cut, budget, memory, [](const std::vector<int>&) { return true; }, fits);
    if (!fits(memory(cut)))
        return cut;
    steepest_descent(
        chunked, cut, budget, [&](const std::vector<int>& c) { return descending(chunked.compute(c)); },
        [&](const std::vector<int>& c) { return fits(memory(c)); }, [](const std::vector<double>&) { return false; });
    return cut;
}

// Every cut of `layers` into `pieces`, in lexicographic order.
template <class Visit>
void each_cut(int layers, int pieces, Visit&& visit)
{
    std::vector<int> cut(static_cast<std::size_t>(pieces - 1));
    for (int b = 0; b < pieces - 1; ++b)
        cut[static_cast<std::size_t>(b)] = b + 1;
    for (;;) {
        visit(cut);
        int b = pieces - 2;
        while (b >= 0 && cut[static_cast<std::size_t>(b)] == layers - (pieces - 1 - b))
            --b;
        if (b < 0)
            return;
        ++cut[static_cast<std::size_t>(b)];
        for (int k = b + 1; k < pieces - 1; ++k)
            cut[static_cast<std::size_t>(k)] = cut[static_cast<std::size_t>(k - 1)] + 1;
    }
}

// C(n, k), or more than `cap` as soon as it exceeds it.
std::uint64_t cuts_up_to(int n, int k, std::uint64_t cap)
{
    std::uint64_t count = 1;
    for (int i = 1; i <= k; ++i) {
        count = count * static_cast<std::uint64_t>(n - k + i) / static_cast<std::uint64_t>(i);
        if (count > cap)
            return cap + 1;
    }
    return count;
}

// The chunked cuts: the fastest that fits `limit` (none found: nullopt) and the one with the
// least peak memory, from one pass. Small models are enumerated, which is exact under the same
// objective as the one-chunk DP; larger ones take the best local descents from the compute,
// parameter and layer-count cuts (a descent that never fits ends at a least-memory minimum, so
// the least-memory cut of a configuration that fits nowhere costs nothing more).
// A cut that surely fits, found exactly in O(P L^2) where the local search may wander: each piece
// is charged as if its stage held, at once, the most microbatches of each chunk it ever holds
// (h_p, the largest count of its chunk over the stage's patterns), its own parameter state and
// working set. A stage's v pieces then add up to at least its true memory (the peak over patterns
// of sum held_c x kept_c is at most sum h_c x kept_c; a state or working set split over pieces
// is at most their sum), so pieces each within limit / v make every stage fit. Among those cuts
// the DP takes the smallest busiest piece, what the search minimises. It can miss a fit whose
// stages split the limit unevenly; the descents go on from the other seeds.
std::optional<std::vector<int>> safe_cut(const Chunked& chunked, std::int64_t limit)
{
    const Ranges& r = chunked.r;
    std::vector<int> held(static_cast<std::size_t>(chunked.pieces()), 0);
    for (int s = 0; s < chunked.stages; ++s)
        for (int c = 0; c < chunked.chunks; ++c) {
            int& h = held[static_cast<std::size_t>(piece_of(s, c, chunked.stages, chunked.placement))];
            for (const std::vector<int>& pattern : chunked.patterns[static_cast<std::size_t>(s)])
                h = std::max(h, pattern[static_cast<std::size_t>(c)]);
        }
    const std::int64_t share = limit / chunked.chunks;
    return min_max_cut<double>(r, chunked.pieces(), [&](int p, int i, int j, std::int64_t working) {
        std::int64_t activations = 0;
        if (r.params[j] == kHuge || r.kept[j] == kHuge || r.experts[j] == kHuge ||
            __builtin_mul_overflow(std::int64_t(held[static_cast<std::size_t>(p)]), r.kept[j] - r.kept[i],
                                   &activations))
            return std::optional<double>();
        const std::int64_t bytes = stage_total(r.params[j] - r.params[i], r.experts[j] - r.experts[i], activations,
                                               working, r.zero, r.dp, r.ep, r.fp32_grads);
        return bytes <= share ? std::optional(r.compute_of(i, j)) : std::nullopt;
    });
}

Chunked chunked_of(const Schedule& schedule, const Ranges& r, const Holding& holding)
{
    return Chunked{.r = r,
                   .stages = schedule.spec.stages,
                   .chunks = schedule.spec.virtual_stages,
                   .placement = placement_of(schedule.spec),
                   .patterns = holding.patterns};
}

// `given`, or the schedule's holding worked out into `own`.
const Holding& holding_for(const Schedule& schedule, const Holding* given, std::optional<Holding>& own)
{
    if (given) {
        const std::size_t stages = static_cast<std::size_t>(schedule.spec.stages);
        if ((schedule.spec.virtual_stages > 1 ? given->patterns.size() : given->in_flight.size()) != stages)
            throw Error(ProblemKind::invalid_argument, "the held activations given are not this schedule's");
        return *given;
    }
    own = holding_of(schedule);
    return *own;
}

MemoryCuts chunked_cuts(const Profile& profile, const TrainingOptions& options, const Chunked& chunked,
                        std::int64_t limit, std::uint64_t max_enumerated, const std::atomic<bool>* cancel,
                        std::int64_t visits = kSearchVisits)
{
    const int pieces = chunked.pieces();
    struct Best {
        std::vector<int> cut;
        double busiest = 0.0;
        std::int64_t peak = 0;
    };
    std::optional<Best> fastest, leanest;
    auto consider = [&](const std::vector<int>& cut) {
        const std::vector<std::int64_t> memory = chunked.memory(cut);
        const std::int64_t peak = *std::max_element(memory.begin(), memory.end());
        if (!leanest || peak < leanest->peak)
            leanest = Best{.cut = cut, .peak = peak};
        if (peak > limit)
            return;
        const std::vector<double> compute = chunked.compute(cut);
        const double busiest = *std::max_element(compute.begin(), compute.end());
        if (!fastest || busiest < fastest->busiest || (busiest == fastest->busiest && peak < fastest->peak))
            fastest = Best{.cut = cut, .busiest = busiest, .peak = peak};
    };
    const bool enumerated = cuts_up_to(chunked.layers() - 1, pieces - 1, max_enumerated) <= max_enumerated;
    if (enumerated) {
        each_cut(chunked.layers(), pieces, consider);
    } else {
        if (limit >= 0)
            if (const auto safe = safe_cut(chunked, limit))
                consider(*safe);
        const Profile adjusted = with_recompute(profile, options.recompute);
        SearchBudget budget{.visits = visits, .cancel = cancel};
        for (PartitionMethod method : {PartitionMethod::compute, PartitionMethod::params, PartitionMethod::uniform})
            consider(descend(chunked, partition(adjusted, pieces, {.method = method}), limit, budget));
    }
    MemoryCuts out{.exact = enumerated};
    if (fastest)
        out.fitting = std::move(fastest->cut);
    if (leanest)
        out.least_memory = std::move(leanest->cut);
    return out;
}

// Whether some one-chunk cut fits `limit`, in O(layers), where the stages hold ever fewer
// microbatches (in_flight non-increasing: GPipe, 1F1B, ZB-H1). Filled from the last stage back,
// each stage taking every layer that still fits (leaving one for each stage before it): a layer
// that fits on some stage fits on every later one, which holds less, so if any cut fits this
// one does (each stage begins no later than in any fitting cut). Other schedules: true, and the
// DP decides.
bool any_cut_fits(const Ranges& r, int stages, std::int64_t limit)
{
    if (!std::is_sorted(r.in_flight.rbegin(), r.in_flight.rend()))
        return true;
    int end = static_cast<int>(r.extra.size());
    for (int s = stages - 1; s >= 0; --s) {
        int begin = end;
        std::int64_t working = 0;
        while (begin > s) { // stages 0 .. s - 1 keep a layer each
            const std::int64_t wider = std::max(working, r.extra[static_cast<std::size_t>(begin - 1)]);
            if (r.memory_of(s, begin - 1, end, wider) > limit)
                break;
            working = wider;
            --begin;
        }
        if (s == 0) {
            if (begin != 0)
                return false; // stage 0 must take every layer left
        } else if (begin == end) {
            return false; // not even one layer fits here
        }
        end = begin;
    }
    return true;
}

// No cut of `schedule` peaks below this many bytes. Stage s holds at least g_s microbatches'
// activations of its layers (one chunk a stage: its in-flight count; several: the most, over its
// op order, of its least-held chunk's count), so with P the peak and K_s, S_s its layers' kept
// bytes and parameter state, K_s <= (P - S_s) / g_s; summed, K <= P Z - S / g_max with
// Z = sum 1 / g_s, so P >= (K + S / g_max) / Z; and P >= S / N. Tells a configuration that no cut
// fits without searching the cuts (the model search asks thousands of them).
double peak_lower_bound(const Ranges& r, int n, const Chunked* chunked)
{
    std::vector<int> g = r.in_flight;
    if (chunked) {
        g.assign(static_cast<std::size_t>(n), 0);
        for (int stage = 0; stage < n; ++stage)
            for (const std::vector<int>& held : chunked->patterns[static_cast<std::size_t>(stage)])
                g[static_cast<std::size_t>(stage)] =
                    std::max(g[static_cast<std::size_t>(stage)], *std::min_element(held.begin(), held.end()));
    }
    const std::size_t layers = r.extra.size();
    const double state =
        static_cast<double>(stage_total(r.params[layers], r.experts[layers], 0, 0, r.zero, r.dp, r.ep, r.fp32_grads));
    if (state >= static_cast<double>(kHuge))
        return 0.0; // too many parameters to count here: no bound, the search decides
    double bound = state / n;
    if (std::all_of(g.begin(), g.end(), [](int held) { return held >= 1; })) {
        double z = 0.0;
        for (int held : g)
            z += 1.0 / held;
        bound =
            std::max(bound, (static_cast<double>(r.kept[layers]) + state / *std::max_element(g.begin(), g.end())) / z);
    }
    return bound;
}

} // namespace

Holding holding_of(const Schedule& schedule)
{
    Holding out;
    if (schedule.spec.virtual_stages > 1)
        out.patterns = held_patterns(schedule);
    else
        out.in_flight = in_flight_peaks(schedule);
    return out;
}

std::optional<std::vector<int>> memory_fit_boundaries(const Profile& profile, const Schedule& schedule,
                                                      const TrainingOptions& options, std::int64_t limit,
                                                      std::uint64_t max_enumerated, std::int64_t visits,
                                                      const Holding* given)
{
    std::optional<Holding> own;
    const Holding& holding = holding_for(schedule, given, own);
    const std::optional<Ranges> r = ranges(profile, schedule, options, holding);
    if (!r)
        return std::nullopt;
    const double least = static_cast<double>(limit) * (1.0 + 1e-9); // the bound's rounding
    if (schedule.spec.virtual_stages > 1) {
        const Chunked chunked = chunked_of(schedule, *r, holding);
        if (peak_lower_bound(*r, schedule.spec.stages, &chunked) > least)
            return std::nullopt;
        return chunked_cuts(profile, options, chunked, limit, max_enumerated, nullptr, visits).fitting;
    }
    if (peak_lower_bound(*r, schedule.spec.stages, nullptr) > least || !any_cut_fits(*r, schedule.spec.stages, limit))
        return std::nullopt;
    const int stages = schedule.spec.stages;
    // 1. The smallest busiest-stage compute among the cuts that fit.
    std::optional<double> bound;
    const auto fastest = min_max_cut<double>(*r, stages, [&](int s, int i, int j, std::int64_t working) {
        return r->memory_of(s, i, j, working) <= limit ? std::optional(r->compute_of(i, j)) : std::nullopt;
    });
    if (!fastest)
        return std::nullopt;
    for (int s = 0, i = 0; s < stages; ++s) {
        const int j = s + 1 < stages ? (*fastest)[static_cast<std::size_t>(s)] : static_cast<int>(r->extra.size());
        bound = std::max(bound.value_or(0.0), r->compute_of(i, j));
        i = j;
    }
    // 2. Among the cuts within that bound (compared in the same arithmetic), the least memory.
    const auto lean = min_max_cut<std::int64_t>(*r, stages, [&](int s, int i, int j, std::int64_t working) {
        const std::int64_t bytes = r->memory_of(s, i, j, working);
        return bytes <= limit && r->compute_of(i, j) <= *bound ? std::optional(bytes) : std::nullopt;
    });
    return lean ? lean : fastest;
}

std::optional<std::vector<int>> least_memory_boundaries(const Profile& profile, const Schedule& schedule,
                                                        const TrainingOptions& options, std::uint64_t max_enumerated,
                                                        std::int64_t visits)
{
    const Holding holding = holding_of(schedule);
    const std::optional<Ranges> r = ranges(profile, schedule, options, holding);
    if (!r)
        return std::nullopt;
    if (schedule.spec.virtual_stages > 1) // no cut fits -1 bytes: every descent minimises memory
        return chunked_cuts(profile, options, chunked_of(schedule, *r, holding), -1, max_enumerated, nullptr, visits)
            .least_memory;
    return min_max_cut<std::int64_t>(*r, schedule.spec.stages, [&](int s, int i, int j, std::int64_t working) {
        return std::optional(r->memory_of(s, i, j, working));
    });
}

MemoryCuts memory_cuts(const Profile& profile, const Schedule& schedule, const TrainingOptions& options,
                       std::int64_t limit, const std::atomic<bool>* cancel, std::uint64_t max_enumerated)
{
    const Holding holding = holding_of(schedule);
    const std::optional<Ranges> r = ranges(profile, schedule, options, holding);
    if (!r)
        return {};
    if (schedule.spec.virtual_stages > 1)
        return chunked_cuts(profile, options, chunked_of(schedule, *r, holding), limit, max_enumerated, cancel);
    MemoryCuts out{.fitting = memory_fit_boundaries(profile, schedule, options, limit, max_enumerated)};
    if (!out.fitting)
        out.least_memory = least_memory_boundaries(profile, schedule, options, max_enumerated);
    return out;
}

std::optional<std::int64_t> cut_peak_memory(const Profile& profile, const Schedule& schedule,
                                            const TrainingOptions& options, const std::vector<int>& cut,
                                            const Holding* given)
{
    validate_boundaries(static_cast<int>(profile.layers.size()), schedule.spec.stages * schedule.spec.virtual_stages,
                        cut);
    std::optional<Holding> own;
    const Holding& holding = holding_for(schedule, given, own);
    const std::optional<Ranges> r = ranges(profile, schedule, options, holding);
    if (!r)
        return std::nullopt;
    if (schedule.spec.virtual_stages > 1) {
        const std::vector<std::int64_t> memory = chunked_of(schedule, *r, holding).memory(cut);
        return *std::max_element(memory.begin(), memory.end());
    }
    std::int64_t peak = 0;
    for (int s = 0, i = 0; s < schedule.spec.stages; ++s) {
        const int j =
            s + 1 < schedule.spec.stages ? cut[static_cast<std::size_t>(s)] : static_cast<int>(r->extra.size());
        std::int64_t working = 0;
        for (int l = i; l < j; ++l)
            working = std::max(working, r->extra[static_cast<std::size_t>(l)]);
        peak = std::max(peak, r->memory_of(s, i, j, working));
        i = j;
    }
    return peak;
}

} // namespace shardscope::pipeline
