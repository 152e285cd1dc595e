#pragma once
// The plan search's candidates as a picture: step time (y) against peak memory per GPU (x),
// the GPU memory limit as a vertical line, fitting candidates as filled dots and the ones over
// the limit as crosses (shape as well as colour), the best one ringed and labelled. Hovering
// names a candidate; clicking one emits candidateClicked, as choosing its table row does.
// Layout and hit-testing live in ChartGeometry (tested without a window).

#include "core/pipeline/search.h"
#include "widgets/views/chartgeometry.h"

#include <QWidget>

namespace shardwidgets {

class CandidateScatter : public QWidget {
    Q_OBJECT
public:
    explicit CandidateScatter(QWidget* parent = nullptr);

    void setCandidates(std::vector<shardscope::pipeline::Candidate> candidates, std::int64_t memoryLimit);
    void clear();
    void setSelected(int index); // -1: none
    int selected() const { return m_selected; }
    int hovered() const { return m_hovered; }
    // The laid-out geometry for the current size (x in GiB, y in ms), and each candidate's point.
    ChartGeometry geometry() const;
    const std::vector<ChartPoint>& points() const { return m_points; }
    int candidateAt(const QPointF& position) const;
    QString describe(int index) const;

    QSize sizeHint() const override { return {420, 260}; }
    QSize minimumSizeHint() const override { return {240, 96}; } // fits the window's minimum size

signals:
    void candidateClicked(int index);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;

private:
    std::vector<shardscope::pipeline::Candidate> m_candidates;
    std::vector<ChartPoint> m_points;
    std::int64_t m_limit = 0;
    int m_selected = -1;
    int m_hovered = -1;
};

} // namespace shardwidgets
