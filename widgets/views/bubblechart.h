#pragma once
// "Bubble against microbatches": one line per schedule (gpipe, 1f1b, interleaved, zb-h1) of the
// simulated bubble fraction as M grows, at the current stages and partition, with a legend and
// the current M as a vertical line. Hovering reads every line at that M. The lines come from
// BubbleSweep (core's simulator, off the GUI thread); layout is ChartGeometry's, the axis end and
// which curves coincide (drawn dashed, "= GPipe here" in the legend) BubbleChartLayout's.

#include "widgets/views/chartgeometry.h"

#include <QString>
#include <QWidget>

namespace shardwidgets {

struct ChartLine {
    QString name;
    std::vector<ChartPoint> points; // x = M, y = bubble fraction
    bool current = false; // the schedule the planner shows: drawn thicker
};

class BubbleChart : public QWidget {
    Q_OBJECT
public:
    explicit BubbleChart(QWidget* parent = nullptr);

    void setLines(std::vector<ChartLine> lines); // the axis runs to the largest M of any line
    void setCurrentMicrobatches(int microbatches);
    void setBusy(bool busy); // a sweep is running: say so instead of stale lines
    void clear();
    const std::vector<ChartLine>& lines() const { return m_lines; }
    int currentMicrobatches() const { return m_current; }
    ChartGeometry geometry() const; // x = M, y = bubble fraction
    QString describeAt(double x) const; // every line's bubble at the M under x
    // BubbleChartLayout::sameAs of the lines, to within 3 pixels at the current size.
    std::vector<int> coinciding() const;
    QString legendName(int line) const; // "1F1B (= GPipe here)", "≈" where only the pixels agree

    QSize sizeHint() const override { return {520, 260}; }
    QSize minimumSizeHint() const override { return {280, 120}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;

private:
    std::vector<ChartLine> m_lines;
    int m_current = 0;
    bool m_busy = false;
};

} // namespace shardwidgets
