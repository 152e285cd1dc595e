#pragma once
// Cuts that respect the GPU memory limit (`shardctl plan`). A stage's memory depends
// on where it sits: stage s keeps its activations for in_flight[s] microbatches (GPipe M on
// every stage, 1F1B N - s, zb-h1 N), so a layer costs more memory on an early stage than on a
// late one, and no greedy fill finds the fastest cut that fits (one filled from the last stage
// back does tell whether any cut fits, where stages hold ever fewer microbatches: fit_partition.cpp
// rejects a limit with it, and with a lower bound on every cut's peak, before the search). The
// memory bounded is always the very StageMemory::total that make_step_plan reports for the cut.
//
// One chunk per stage (gpipe, 1f1b, zb-h1): dynamic programmes over (stage, end layer),
// O(N * L^2) with O(1) per range (prefix sums; the working-set maximum grows as the range does),
// and exact.
//
// Several chunks per stage (interleaved): a stage's v pieces are not adjacent, so its memory is
// not a function of one range. Up to `max_enumerated` cuts (C(L-1, N*v-1)) are all evaluated,
// which is exact; beyond, the best of a safe cut (an exact DP over the pieces, each charged as if
// its stage held the most microbatches of every chunk at once and kept within limit / v, so that
// it surely fits) and three steepest descents (from the compute, parameter and layer-count cuts:
// first the memory down to the limit, then the compute down within it) is a local search, never
// reported as fitting when it does not, but not proven to be the best cut, and bounded (about a
// second of cut evaluations a configuration; the best cut so far when that runs out).
//
// Objective of the fitting cut: the smallest busiest-piece compute (fwd_ms + bwd_ms of the
// recompute-adjusted profile, what --partition compute minimises); among those, the smallest peak
// memory; among those (one chunk), later stages as large as possible. The simulated step time
// follows the busiest piece but is not minimised directly (it also depends on the op order).

#include "core/pipeline/training.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

namespace shardscope::pipeline {

// What the search asks for, in one pass: the fastest cut that fits and, when none is found, the
// cut with the least peak memory (with one chunk per stage: memory_fit_boundaries and then
// least_memory_boundaries; interleaved: the same descents serve both).
struct MemoryCuts {
    std::optional<std::vector<int>> fitting;
    std::optional<std::vector<int>> least_memory; // set when `fitting` is not (may be set anyway)
    // Every cut was looked at: no `fitting` proves that none fits. False after a local search (an
    // interleaved or V schedule with more than kEnumeratedCuts cuts), which can miss one.
    bool exact = true;
};

// Interleaved cuts up to this many are enumerated (exact); about 10 ms of evaluation.
inline constexpr std::uint64_t kEnumeratedCuts = 20'000;

// How long one configuration's local search may run, in what its cut evaluations visit (every
// layer and every held-count pattern of the schedule once an evaluation): about a second. A
// search cut short returns the best cut found so far, still checked.
inline constexpr std::int64_t kSearchVisits = 400'000'000;

// Which activations a schedule's stages hold at once, from its op order alone: with one chunk a
// stage, the most microbatches in flight; with several, the count vectors (one count a chunk) a
// stage passes through that no other one dominates. Every cut's memory is computed from it; a
// search that asks about many configurations on one schedule works it out once and passes it.
struct Holding {
    std::vector<int> in_flight; // one chunk a stage
    std::vector<std::vector<std::vector<int>>> patterns; // several: [stage] -> held count per chunk
};
Holding holding_of(const Schedule& schedule);

// The fastest cut of `schedule` whose every stage fits `limit` bytes, under the objective above;
// nullopt when none does (none is found, for a large interleaved model) or when the model has
// fewer layers than pieces.
std::optional<std::vector<int>> memory_fit_boundaries(const Profile& profile, const Schedule& schedule,
                                                      const TrainingOptions& options, std::int64_t limit,
                                                      std::uint64_t max_enumerated = kEnumeratedCuts,
                                                      std::int64_t visits = kSearchVisits,
                                                      const Holding* holding = nullptr);

// The cut with the least peak memory (the largest stage total), whatever its speed: what "the
// closest configuration" is measured by when nothing fits (exact, or the local search above).
std::optional<std::vector<int>> least_memory_boundaries(const Profile& profile, const Schedule& schedule,
                                                        const TrainingOptions& options,
                                                        std::uint64_t max_enumerated = kEnumeratedCuts,
                                                        std::int64_t visits = kSearchVisits);

// `cancel` (may be null) is checked at every move of the local search: Error(cancelled) when set.
MemoryCuts memory_cuts(const Profile& profile, const Schedule& schedule, const TrainingOptions& options,
                       std::int64_t limit, const std::atomic<bool>* cancel = nullptr,
                       std::uint64_t max_enumerated = kEnumeratedCuts);

// The largest StageMemory::total of `cut` (make_step_plan's peak_memory_bytes for it) without
// simulating, in O(layers + stages x patterns); nullopt when the model has fewer layers than
// pieces.
std::optional<std::int64_t> cut_peak_memory(const Profile& profile, const Schedule& schedule,
                                            const TrainingOptions& options, const std::vector<int>& cut,
                                            const Holding* holding = nullptr);

} // namespace shardscope::pipeline
