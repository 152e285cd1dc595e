#pragma once
// Geometry of the Gantt timeline, without a window: the time <-> pixel mapping with zoom about a
// point, pan and fit; rows per stage under a time ruler; the ruler's tick step; and hit-testing a
// block through a per-row index sorted by start time (binary search, so 100k ops stay cheap).

#include <vector>

namespace shardwidgets {

struct GanttBlock {
    double start = 0;
    double end = 0;
    int op = 0; // index into the timeline's op list
};

// Where one legend entry goes: its left edge and its line (0 = the first).
struct LegendSlot {
    double x = 0;
    int line = 0;
};

struct GanttGeometry {
    double labelWidth = 72; // the stage names' column
    double rulerHeight = 26;
    double rowHeight = 34;
    double rowGap = 6;
    double viewStart = 0; // time at the left edge of the plot area
    double msPerPixel = 1.0;
    double width = 800; // of the whole widget
    double duration = 0; // makespan: the scrollable extent

    double plotWidth() const { return width > labelWidth ? width - labelWidth : 1.0; }
    double xForTime(double t) const { return labelWidth + (t - viewStart) / msPerPixel; }
    double timeForX(double x) const { return viewStart + (x - labelWidth) * msPerPixel; }
    double rowTop(int row) const { return rulerHeight + rowGap + row * (rowHeight + rowGap); }
    double contentHeight(int rows) const { return rowTop(rows); }
    // The row at y, or -1 between rows, on the ruler or below the last of `rows`.
    int rowAt(double y, int rows) const;
    double visibleEnd() const { return timeForX(width); }

    // Whole timeline in the plot area with a small margin.
    void fit(double makespan, double widgetWidth);
    // Multiplies the zoom by `factor` (> 1 zooms in) keeping the time under x where it is.
    void zoomAt(double factor, double x);
    void panPixels(double dx);
    void clampView(); // keeps some of the timeline visible and the zoom in a sane range

    // Where the visible window lies in the whole step, as fractions of `duration` in [0, 1]:
    // the zoomed view's position indicator. False when the whole step is visible.
    bool visibleSpan(double& from, double& to) const;

    // A "nice" ruler step (1, 2 or 5 x 10^k ms) at least `minPixels` wide.
    double tickStep(double minPixels = 80) const;

    // The block of `row` under time t, or -1. `row` is sorted by start and non-overlapping.
    static int blockAt(const std::vector<GanttBlock>& row, double t);
    // First block of `row` whose end is after t: where painting of a visible window begins.
    static std::size_t firstVisible(const std::vector<GanttBlock>& row, double t);

    // The legend under the rows: entries of `widths` left to right from `left`, `gap` apart,
    // wrapping to a new line before one would pass `right` (an entry wider than the whole line
    // gets a line of its own). Lines used = the last slot's line + 1.
    static std::vector<LegendSlot> flowLegend(const std::vector<double>& widths, double left, double right, double gap);
};

} // namespace shardwidgets
