#pragma once
// The stage bar: every layer of the profile as a segment sized by its compute cost, coloured by
// the stage that runs it, with the partition's boundaries as handles the user drags (snapping to
// layer edges) or moves with the arrow keys. Changes go straight to the PipelinePlanner.

#include "widgets/views/stagebargeometry.h"

#include <QWidget>

namespace shardwidgets {

class PipelinePlanner;

class StageBar : public QWidget {
    Q_OBJECT
public:
    explicit StageBar(PipelinePlanner* planner, QWidget* parent = nullptr);

    // The geometry for the current size (for tests: where to press).
    StageBarGeometry barGeometry() const;
    int selectedBoundary() const { return m_selected; }
    void setSelectedBoundary(int index);
    double barTop() const { return 8; }
    double barHeight() const { return 30; }
    // The caption under each piece (stage, or stage and chunk), empty where it does not fit; all
    // in one form (StageBarGeometry::captionForm).
    QStringList captions() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    void boundaryDragged(int index, int edge);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    bool event(QEvent* event) override;

private:
    int stageOfLayer(int layer) const;
    struct Piece {
        int first, last; // layers
    };
    std::vector<Piece> pieces() const;
    std::vector<double> layerCosts() const;

    PipelinePlanner* m_planner;
    int m_dragging = -1;
    int m_selected = -1;
    int m_hover = -1;
};

} // namespace shardwidgets
