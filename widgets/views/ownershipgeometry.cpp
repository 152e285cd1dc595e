#include "widgets/views/ownershipgeometry.h"

#include <algorithm>
#include <cmath>

namespace shardwidgets {

double OwnershipGeometry::xForOffset(uint64_t offset) const
{
    if (total == 0)
        return left;
    return left + width * (double(offset) / double(total));
}

uint64_t OwnershipGeometry::offsetAt(double x) const
{
    if (total == 0 || width <= 0)
        return 0;
    const double fraction = std::clamp((x - left) / width, 0.0, 1.0);
    return std::min(total - 1, uint64_t(std::floor(fraction * double(total))));
}

int OwnershipGeometry::rangeAt(std::span<const OwnershipRange> ranges, double x) const
{
    if (total == 0 || x < left || x > left + width)
        return -1;
    const uint64_t offset = offsetAt(x);
    auto it = std::upper_bound(ranges.begin(), ranges.end(), offset,
                               [](uint64_t value, const OwnershipRange& r) { return value < r.offset; });
    if (it == ranges.begin())
        return -1;
    --it;
    if (offset < it->offset + it->numel)
        return int(it - ranges.begin());
    return -1;
}

} // namespace shardwidgets
