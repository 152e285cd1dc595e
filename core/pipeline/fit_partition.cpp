#include "core/pipeline/fit_partition.h"

#include <algorithm>
#include <limits>

namespace shardscope::pipeline {
namespace {

constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();

// Range sums of the adjusted profile and the per-stage memory of a range [i, j), computed the
// way stage_memory() in training.cpp does for a one-chunk stage: parameter state + in-flight
// microbatches x bytes kept + the largest recomputed working set.
struct Ranges {
    std::vector<double> compute;     // prefix sums of fwd_ms + bwd_ms
    std::vector<std::int64_t> params; // prefix sums (saturating)
    std::vector<std::int64_t> kept;   // prefix sums of the bytes each layer keeps (saturating)
    std::vector<std::int64_t> extra;  // per layer: what recomputing it brings back
    std::vector<int> in_flight;       // per stage
    int zero = 0;
    int dp = 1;

    double compute_of(int i, int j) const { return compute[j] - compute[i]; }

    // Saturates at kHuge: a hostile profile's byte counts must not wrap around.
    std::int64_t memory_of(int stage, int i, int j, std::int64_t working) const
    {
        const std::int64_t p = params[j] - params[i];
        if (params[j] == kHuge || kept[j] == kHuge || p > kHuge / 32)
            return kHuge;
        std::int64_t activations = 0, total = 0;
        if (__builtin_mul_overflow(std::int64_t(in_flight[static_cast<std::size_t>(stage)]),
                                   kept[j] - kept[i], &activations) ||
            __builtin_add_overflow(activations, working, &activations) ||
            __builtin_add_overflow(param_state_bytes(p, zero, dp), activations, &total))
            return kHuge;
        return total;
    }
};

std::int64_t saturating_add(std::int64_t a, std::int64_t b)
{
    std::int64_t sum = 0;
    return a == kHuge || __builtin_add_overflow(a, b, &sum) ? kHuge : sum;
}

std::optional<Ranges> ranges(const Profile& profile, const Schedule& schedule, const TrainingOptions& options)
{
    if (schedule.spec.virtual_stages != 1)
        return std::nullopt; // a stage's chunks are not one contiguous range
    if (static_cast<int>(profile.layers.size()) < schedule.spec.stages)
        return std::nullopt;
    const Profile adjusted = with_recompute(profile, options.recompute);
    Ranges r;
    r.in_flight = in_flight_peaks(schedule);
    r.zero = options.zero;
    r.dp = options.dp;
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

} // namespace

std::optional<std::vector<int>> memory_fit_boundaries(const Profile& profile, const Schedule& schedule,
                                                      const TrainingOptions& options, std::int64_t limit)
{
    const std::optional<Ranges> r = ranges(profile, schedule, options);
    if (!r)
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
                                                        const TrainingOptions& options)
{
    const std::optional<Ranges> r = ranges(profile, schedule, options);
    if (!r)
        return std::nullopt;
    return min_max_cut<std::int64_t>(*r, schedule.spec.stages, [&](int s, int i, int j, std::int64_t working) {
        return std::optional(r->memory_of(s, i, j, working));
    });
}

} // namespace shardscope::pipeline
