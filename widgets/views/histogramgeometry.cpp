#include "widgets/views/histogramgeometry.h"

#include <cmath>

namespace shardwidgets {

QRectF HistogramGeometry::barRect(int bin, uint64_t count) const
{
    if (bin < 0 || bin >= bins || maxCount == 0)
        return {};
    const double height = plot.height() * double(count) / double(maxCount);
    return {plot.left() + bin * binWidth(), plot.bottom() - height, binWidth(), height};
}

int HistogramGeometry::binAt(double x) const
{
    if (bins <= 0 || x < plot.left() || x >= plot.right())
        return -1;
    return std::min(bins - 1, int(std::floor((x - plot.left()) / binWidth())));
}

} // namespace shardwidgets
