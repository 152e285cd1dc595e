#pragma once
// The frame both planner charts share: grid lines and tick labels on the ChartGeometry's nice
// ticks, and the two axis titles. One painter routine, so the scatter and the bubble chart
// cannot drift apart in how they label their axes.

#include "widgets/views/chartgeometry.h"

#include <QString>
#include <functional>

class QPainter;
class QPalette;

namespace shardwidgets {

using TickText = std::function<QString(double)>;

void paintChartAxes(QPainter& painter, const ChartGeometry& geometry, const QPalette& palette, const QString& xTitle,
                    const QString& yTitle, const TickText& xText, const TickText& yText, int xTickCount = 5,
                    int yTickCount = 4);

} // namespace shardwidgets
