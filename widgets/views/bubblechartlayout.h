#pragma once
// What BubbleChart decides before it paints, without a window: where the M axis ends (the
// largest swept M or the current M, whichever is further, so no curve stops short of a marker
// and no marker sits past the curves' end unexplained), and which curves lie on top of an
// earlier one (GPipe and 1F1B share (N-1)/(M+N-1) on uniform stages and lie within a pixel of
// each other on most real ones): those are drawn dashed, so the earlier colour shows through the
// gaps, and the legend says "= GPipe here" (or "≈" when they only look the same).
// Tested as plain arithmetic (tst_bubblechartlayout).

#include "widgets/views/chartgeometry.h"

#include <vector>

namespace shardwidgets {

struct BubbleChartLayout {
    // The x range's end: at least 2, the largest point of any line, the current M.
    static double xEnd(const std::vector<std::vector<ChartPoint>>& lines, int currentM);

    // For each line, the index of the first earlier line it coincides with (the same M at every
    // point and bubbles within `tolerance`), or -1. An empty line coincides with nothing.
    static std::vector<int> sameAs(const std::vector<std::vector<ChartPoint>>& lines, double tolerance = 1e-9);
    // The bubble difference that is `pixels` high on a plot `plotHeight` pixels tall showing
    // [yMin, yMax]: what "drawn on top of each other" means for sameAs.
    static double pixelTolerance(double pixels, double plotHeight, double yMin, double yMax);

    // The dash pattern (in pen widths, as QPen::setDashPattern takes it) of the `rank`-th line
    // drawn over the same curve: empty (solid) for rank 0, then dashes whose gaps grow with the
    // rank, so that every colour of a stack of equal curves stays visible.
    static std::vector<double> dashPattern(int rank);

    // How many lines before `line` coincide with the same first line: its rank in its stack.
    static int stackRank(const std::vector<int>& sameAs, int line);
};

} // namespace shardwidgets
