#include "core/pipeline/fit_partition.h"

#include "core/util/error.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace shardscope::pipeline {
namespace {

constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();

// A stage's StageMemory::total as stage_memory() in training.cpp adds it up: parameter state +
// activations held + the largest recomputed working set. kHuge when a part is kHuge or the sum
// overflows: a hostile profile's byte counts must not wrap around.
std::int64_t stage_total(std::int64_t params, std::int64_t activations, std::int64_t working, int zero, int dp,
                         bool fp32_grads)
{
    std::int64_t total = 0;
    if (params == kHuge || activations == kHuge || params > kHuge / 32 ||
        __builtin_add_overflow(activations, working, &total) ||
        __builtin_add_overflow(total, param_state_bytes(params, zero, dp, fp32_grads), &total))
        return kHuge;
    return total;
}

// Range sums of the adjusted profile and the per-stage memory of a range [i, j), computed the
// way stage_memory() in training.cpp does for a one-chunk stage: parameter state + in-flight
// microbatches x bytes kept + the largest recomputed working set.
struct Ranges {
    std::vector<double> compute; // prefix sums of fwd_ms + bwd_ms
    std::vector<std::int64_t> params; // prefix sums (saturating)
    std::vector<std::int64_t> kept; // prefix sums of the bytes each layer keeps (saturating)
    std::vector<std::int64_t> extra; // per layer: what recomputing it brings back
    std::vector<int> in_flight; // per stage
    int zero = 0;
    int dp = 1;
    bool fp32_grads = false;

    double compute_of(int i, int j) const { return compute[j] - compute[i]; }

    std::int64_t memory_of(int stage, int i, int j, std::int64_t working) const
    {
        std::int64_t activations = 0;
        if (params[j] == kHuge || kept[j] == kHuge ||
            __builtin_mul_overflow(std::int64_t(in_flight[static_cast<std::size_t>(stage)]), kept[j] - kept[i],
                                   &activations))
            return kHuge;
        return stage_total(params[j] - params[i], activations, working, zero, dp, fp32_grads);
    }
};

std::int64_t saturating_add(std::int64_t a, std::int64_t b)
{
    std::int64_t sum = 0;
    return a == kHuge || __builtin_add_overflow(a, b, &sum) ? kHuge : sum;
}

std::optional<Ranges> ranges(const Profile& profile, const Schedule& schedule, const TrainingOptions& options)
{
    if (static_cast<int>(profile.layers.size()) < schedule.spec.stages * schedule.spec.virtual_stages)
        return std::nullopt;
    const Profile adjusted = with_recompute(profile, options.recompute);
    Ranges r;
    if (schedule.spec.virtual_stages == 1)
        r.in_flight = in_flight_peaks(schedule);
    r.zero = options.zero;
    r.dp = options.dp;
    r.fp32_grads = options.fp32_grads;
    r.compute.push_back(0.0);
    r.params.push_back(0);
    r.kept.push_back(0);
    for (std::size_t l = 0; l < adjusted.layers.size(); ++l) {
        const Layer& layer = adjusted.layers[l];
        r.compute.push_back(r.compute.back() + layer.fwd_ms + layer.bwd_ms);
        r.params.push_back(saturating_add(r.params.back(), layer.params));
        r.kept.push_back(saturating_add(r.kept.back(), layer.activation_bytes));
        r.extra.push_back(std::max<std::int64_t>(0, profile.layers[l].activation_bytes - layer.activation_bytes));
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
    std::vector<std::vector<std::vector<int>>> patterns; // [stage] -> held count per chunk

    int pieces() const { return stages * chunks; }
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
            std::int64_t params = 0, working = 0, peak = 0;
            std::vector<std::int64_t> kept(static_cast<std::size_t>(chunks));
            bool huge = false;
            for (int c = 0; c < chunks; ++c) {
                const int p = piece_of(s, c, stages, placement), i = begin_of(cut, p), j = end_of(cut, p);
                huge |= r.params[j] == kHuge || r.kept[j] == kHuge;
                params = saturating_add(params, r.params[j] - r.params[i]);
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
                huge ? kHuge : stage_total(params, peak, working, r.zero, r.dp, r.fp32_grads);
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
// but a profile of thousands of layers could take minutes. Counted in layers visited by the cut
// evaluations (one evaluation visits every layer once), shared by a configuration's descents:
// about a second of work; a search cut short returns the best cut so far, still checked.
struct SearchBudget {
    std::int64_t layer_visits = 400'000'000;
    const std::atomic<bool>* cancel = nullptr;
    bool spent() const { return layer_visits <= 0; }
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
    while (!done(value) && !budget.spent()) {
        budget.check_cancel();
        std::optional<std::vector<int>> best;
        auto best_value = value;
        each_move(chunked.layers(), cut, [&](std::vector<int> next) {
            budget.layer_visits -= chunked.layers() + 1;
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
MemoryCuts chunked_cuts(const Profile& profile, const Schedule& schedule, const TrainingOptions& options,
                        const Ranges& r, std::int64_t limit, std::uint64_t max_enumerated,
                        const std::atomic<bool>* cancel)
{
    const Chunked chunked{.r = r,
                          .stages = schedule.spec.stages,
                          .chunks = schedule.spec.virtual_stages,
                          .placement = placement_of(schedule.spec),
                          .patterns = held_patterns(schedule)};
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
        const Profile adjusted = with_recompute(profile, options.recompute);
        SearchBudget budget{.cancel = cancel};
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

} // namespace

std::optional<std::vector<int>> memory_fit_boundaries(const Profile& profile, const Schedule& schedule,
                                                      const TrainingOptions& options, std::int64_t limit,
                                                      std::uint64_t max_enumerated)
{
    const std::optional<Ranges> r = ranges(profile, schedule, options);
    if (!r)
        return std::nullopt;
    if (schedule.spec.virtual_stages > 1)
        return chunked_cuts(profile, schedule, options, *r, limit, max_enumerated, nullptr).fitting;
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
                                                        const TrainingOptions& options, std::uint64_t max_enumerated)
{
    const std::optional<Ranges> r = ranges(profile, schedule, options);
    if (!r)
        return std::nullopt;
    if (schedule.spec.virtual_stages > 1) // no cut fits -1 bytes: every descent minimises memory
        return chunked_cuts(profile, schedule, options, *r, -1, max_enumerated, nullptr).least_memory;
    return min_max_cut<std::int64_t>(*r, schedule.spec.stages, [&](int s, int i, int j, std::int64_t working) {
        return std::optional(r->memory_of(s, i, j, working));
    });
}

MemoryCuts memory_cuts(const Profile& profile, const Schedule& schedule, const TrainingOptions& options,
                       std::int64_t limit, const std::atomic<bool>* cancel, std::uint64_t max_enumerated)
{
    const std::optional<Ranges> r = ranges(profile, schedule, options);
    if (!r)
        return {};
    if (schedule.spec.virtual_stages > 1)
        return chunked_cuts(profile, schedule, options, *r, limit, max_enumerated, cancel);
    MemoryCuts out{.fitting = memory_fit_boundaries(profile, schedule, options, limit, max_enumerated)};
    if (!out.fitting)
        out.least_memory = least_memory_boundaries(profile, schedule, options, max_enumerated);
    return out;
}

} // namespace shardscope::pipeline
