#pragma once
// The one rule for drawing many ranks: a box, ribbon or colour band per rank until they would be
// thinner than a few pixels (1,024 ranks over 1,400 pixels is grey noise), then one per group of
// neighbouring ranks, the group a power of two so that its label reads "r0–15", "r16–31".

#include <algorithm>

namespace shardwidgets {

// The smallest power of two of ranks per group that keeps `items` side by side over `width`
// pixels at least `minWidth` wide each; never more than `items`.
inline int rankGroupFor(int items, double width, double minWidth = 4)
{
    int group = 1;
    while (group < items && width * group < minWidth * std::max(1, items))
        group *= 2;
    return group;
}

} // namespace shardwidgets
