#pragma once
// Geometry of the planner's x/y charts (the candidate scatter, bubble against microbatches),
// without a window: a plot rectangle inside the widget (margins for the axes' labels), linear
// value <-> pixel mapping on both axes (y grows upwards), "nice" tick values, and hit-testing the
// point nearest to the cursor within a radius. Tested as plain arithmetic (tst_chartgeometry).

#include <vector>

namespace shardwidgets {

struct ChartPoint {
    double x = 0;
    double y = 0;
};

struct ChartGeometry {
    double width = 400; // of the whole widget
    double height = 300;
    double left = 64; // margins: y-axis labels on the left, x-axis labels below
    double right = 16;
    double top = 12;
    double bottom = 40;
    double xMin = 0, xMax = 1; // the value range each axis shows
    double yMin = 0, yMax = 1;

    double plotLeft() const { return left; }
    double plotRight() const { return width - right > left + 1 ? width - right : left + 1; }
    double plotTop() const { return top; }
    double plotBottom() const { return height - bottom > top + 1 ? height - bottom : top + 1; }

    double xForValue(double value) const;
    double valueForX(double x) const;
    double yForValue(double value) const; // larger values higher up
    double valueForY(double y) const;

    // Ranges covering `values` with a fraction `pad` of the span on either side; a single value
    // (or none) gets a span of its own so nothing divides by zero. `includeZero` starts at 0.
    void fitX(const std::vector<double>& values, double pad = 0.05, bool includeZero = false);
    void fitY(const std::vector<double>& values, double pad = 0.05, bool includeZero = false);

    // Ticks at 1, 2 or 5 x 10^k inside [lo, hi], about `count` of them.
    static std::vector<double> ticks(double lo, double hi, int count = 5);

    // Index of the point of `points` (values) nearest to pixel (px, py), within `radius`
    // pixels; -1 when none is that close.
    int hitTest(const std::vector<ChartPoint>& points, double px, double py, double radius = 8) const;
};

} // namespace shardwidgets
