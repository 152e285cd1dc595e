#include "widgets/views/ganttgeometry.h"

#include <algorithm>
#include <cmath>

namespace shardwidgets {

int GanttGeometry::rowAt(double y, int rows) const
{
    if (y < rulerHeight + rowGap)
        return -1;
    const double pitch = rowHeight + rowGap;
    const int row = int(std::floor((y - rulerHeight - rowGap) / pitch));
    if (row < 0 || row >= rows)
        return -1;
    return y - rowTop(row) <= rowHeight ? row : -1;
}

void GanttGeometry::fit(double makespan, double widgetWidth)
{
    width = widgetWidth;
    duration = makespan;
    const double span = makespan > 0 ? makespan : 1.0;
    const double margin = 12; // pixels of air at the right end
    msPerPixel = span / std::max(1.0, plotWidth() - margin);
    viewStart = 0;
}

void GanttGeometry::zoomAt(double factor, double x)
{
    if (!(factor > 0))
        return;
    const double anchor = timeForX(x);
    msPerPixel /= factor;
    clampView();
    viewStart = anchor - (x - labelWidth) * msPerPixel;
    clampView();
}

void GanttGeometry::panPixels(double dx)
{
    viewStart -= dx * msPerPixel;
    clampView();
}

void GanttGeometry::clampView()
{
    const double span = duration > 0 ? duration : 1.0;
    // From far past "fit" (a tiny stripe) to a few nanoseconds a pixel.
    msPerPixel = std::clamp(msPerPixel, span * 1e-7, span / 20.0);
    const double visible = plotWidth() * msPerPixel;
    const double lowest = std::min(0.0, span - visible);
    viewStart = std::clamp(viewStart, lowest, std::max(lowest, span - visible * 0.1));
    if (visible >= span)
        viewStart = std::min(viewStart, 0.0);
}

double GanttGeometry::tickStep(double minPixels) const
{
    const double raw = minPixels * msPerPixel;
    if (!(raw > 0))
        return 1.0;
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    for (double multiple : {1.0, 2.0, 5.0, 10.0})
        if (multiple * power >= raw)
            return multiple * power;
    return 10.0 * power;
}

std::size_t GanttGeometry::firstVisible(const std::vector<GanttBlock>& row, double t)
{
    // Blocks do not overlap within a row, so their ends are sorted as well.
    const auto it =
        std::upper_bound(row.begin(), row.end(), t, [](double time, const GanttBlock& b) { return time < b.end; });
    return std::size_t(it - row.begin());
}

int GanttGeometry::blockAt(const std::vector<GanttBlock>& row, double t)
{
    const std::size_t i = firstVisible(row, t);
    if (i < row.size() && row[i].start <= t && t < row[i].end)
        return row[i].op;
    return -1;
}

bool GanttGeometry::visibleSpan(double& from, double& to) const
{
    if (duration <= 0)
        return false;
    from = std::clamp(viewStart / duration, 0.0, 1.0);
    to = std::clamp(visibleEnd() / duration, 0.0, 1.0);
    return from > 1e-9 || to < 1 - 1e-9;
}

std::vector<LegendSlot> GanttGeometry::flowLegend(const std::vector<double>& widths, double left, double right,
                                                  double gap)
{
    std::vector<LegendSlot> places;
    double x = left;
    int line = 0;
    for (double w : widths) {
        if (x > left && x + w > right) {
            ++line;
            x = left;
        }
        places.push_back({.x = x, .line = line});
        x += w + gap;
    }
    return places;
}

} // namespace shardwidgets
