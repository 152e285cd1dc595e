#include "widgets/views/chartgeometry.h"

#include <algorithm>
#include <cmath>

namespace shardwidgets {

namespace {

void fitRange(const std::vector<double>& values, double pad, bool includeZero, double& lo, double& hi)
{
    if (values.empty()) {
        lo = 0;
        hi = 1;
        return;
    }
    const auto [minIt, maxIt] = std::minmax_element(values.begin(), values.end());
    lo = includeZero ? std::min(0.0, *minIt) : *minIt;
    hi = *maxIt;
    double span = hi - lo;
    if (span <= 0) // one value: show it in the middle of a span of its own size
        span = lo != 0 ? std::abs(lo) : 1.0;
    hi += span * pad;
    if (!includeZero || lo < 0)
        lo -= span * pad;
    if (hi == lo)
        hi = lo + 1;
}

} // namespace

double ChartGeometry::xForValue(double value) const
{
    return plotLeft() + (value - xMin) / (xMax - xMin) * (plotRight() - plotLeft());
}

double ChartGeometry::valueForX(double x) const
{
    // A widget smaller than its margins has no plot: every x maps to the left end, never to NaN.
    return xMin + (x - plotLeft()) / std::max(1e-9, plotRight() - plotLeft()) * (xMax - xMin);
}

double ChartGeometry::yForValue(double value) const
{
    return plotBottom() - (value - yMin) / (yMax - yMin) * (plotBottom() - plotTop());
}

double ChartGeometry::valueForY(double y) const
{
    return yMin + (plotBottom() - y) / std::max(1e-9, plotBottom() - plotTop()) * (yMax - yMin);
}

void ChartGeometry::fitX(const std::vector<double>& values, double pad, bool includeZero)
{
    fitRange(values, pad, includeZero, xMin, xMax);
}

void ChartGeometry::fitY(const std::vector<double>& values, double pad, bool includeZero)
{
    fitRange(values, pad, includeZero, yMin, yMax);
}

std::vector<double> ChartGeometry::ticks(double lo, double hi, int count)
{
    std::vector<double> out;
    if (!(hi > lo) || count < 1)
        return out;
    const double raw = (hi - lo) / count;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (double factor : {1.0, 2.0, 5.0, 10.0})
        if (factor * magnitude >= raw) {
            step = factor * magnitude;
            break;
        }
    // Multiples of the step, computed from an integer so that 0.1 + 0.2 drift cannot add a tick.
    for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
        out.push_back(k * step == 0 ? 0.0 : k * step);
    return out;
}

int ChartGeometry::hitTest(const std::vector<ChartPoint>& points, double px, double py, double radius) const
{
    int best = -1;
    double bestDistance = radius * radius;
    for (std::size_t i = 0; i < points.size(); ++i) {
        const double dx = xForValue(points[i].x) - px;
        const double dy = yForValue(points[i].y) - py;
        const double distance = dx * dx + dy * dy;
        if (distance <= bestDistance) {
            // Ties to the earlier point: the better-ranked candidate under a stack of equal ones.
            if (best >= 0 && distance == bestDistance)
                continue;
            best = int(i);
            bestDistance = distance;
        }
    }
    return best;
}

} // namespace shardwidgets
