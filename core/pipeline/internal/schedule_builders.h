#pragma once
// The zero-bubble family's op orders (schedule_zero_bubble.cpp), one stage at a time or all at
// once; build_schedule (schedule.cpp) is their only caller. Core only.

#include "core/pipeline/schedule.h"

#include <vector>

namespace shardscope::pipeline::internal {

// ZB-H2 for all N stages at once: the order a greedy list scheduler picks at F = B = W.
std::vector<std::vector<Op>> zb_h2(int stages, int microbatches);
// ZB-V and DualPipeV for one stage (rank) of N; chunk 0 / 1 as in the V placement.
std::vector<Op> zb_v(int stages, int stage, int microbatches);
std::vector<Op> dualpipe_v(int stages, int stage, int microbatches);

} // namespace shardscope::pipeline::internal
