#include "widgets/views/histogramgeometry.h"

#include <algorithm>
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

int HistogramGeometry::labelStep(double labelWidth) const
{
    int step = 8;
    while (step < bins && step * binWidth() < 1.5 * labelWidth + 4)
        step += 8;
    return step;
}

} // namespace shardwidgets
