#pragma once
// Cuts that respect the GPU memory limit (issue 16, `shardctl plan`), for schedules with one
// chunk per stage (gpipe, 1f1b, zb-h1). A stage's memory depends on where it sits: stage s keeps
// its activations for in_flight[s] microbatches (GPipe M on every stage, 1F1B N - s, zb-h1 N),
// so a layer costs more memory on an early stage than on a late one, and no greedy fill is exact.
// Both functions below are dynamic programmes over (stage, end layer), O(N * L^2) with O(1) per
// range (prefix sums; the working-set maximum grows as the range does), and exact: the memory
// they bound is the very StageMemory::total that make_step_plan reports for the cut.
//
// Objective of the fitting cut: the smallest busiest-stage compute (fwd_ms + bwd_ms of the
// recompute-adjusted profile, what --partition compute minimises); among those, the smallest peak
// memory; among those, later stages as large as possible. The simulated step time follows the
// busiest stage but is not minimised directly (it also depends on the op order).

#include "core/pipeline/training.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace shardscope::pipeline {

// The fastest cut of `schedule` (one chunk per stage) whose every stage fits `limit` bytes,
// under the objective above; nullopt when none does, when the schedule has chunks (v > 1) or
// fewer layers than stages.
std::optional<std::vector<int>> memory_fit_boundaries(const Profile& profile, const Schedule& schedule,
                                                      const TrainingOptions& options,
                                                      std::int64_t limit);

// The cut with the least peak memory (the largest stage total), whatever its speed: what "the
// closest configuration" is measured by when nothing fits. nullopt as above for v > 1.
std::optional<std::vector<int>> least_memory_boundaries(const Profile& profile, const Schedule& schedule,
                                                        const TrainingOptions& options);

} // namespace shardscope::pipeline
