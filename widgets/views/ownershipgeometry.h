#pragma once
// Geometry of the ownership map, without a window: the flat parameter space [0, total) drawn over
// a pixel span, and which range (a rank's shard, or a model tensor) lies under a pixel.

#include <cstdint>
#include <span>
#include <vector>

namespace shardwidgets {

struct OwnershipRange {
    uint64_t offset = 0;
    uint64_t numel = 0;
    int id = 0; // rank, or index of the tensor
};

struct OwnershipGeometry {
    uint64_t total = 0;
    double left = 0;
    double width = 1;

    double xForOffset(uint64_t offset) const;
    uint64_t offsetAt(double x) const; // clamped to [0, total)
    // Index into `ranges` (sorted by offset, need not tile) of the range containing the element
    // under x, or -1 in a gap or outside the bar.
    int rangeAt(std::span<const OwnershipRange> ranges, double x) const;
};

} // namespace shardwidgets
