#pragma once
// The per-stage Gantt timeline: one row per stage, blocks coloured by microbatch (forward light,
// backward dark, weight greyish) and labelled when wide enough, idle time hatched, a time ruler,
// Ctrl+wheel zoom about the cursor, drag or wheel to pan, fit-to-window, a tooltip per block,
// and under the rows a legend of every mark it draws (ganttlegend.cpp), in the window and in
// exports; exported pictures also carry a one-line caption (schedule, stages, M, bubble, profile).
// Painting walks only the visible blocks of each row (binary search for the first one) and
// merges runs of sub-pixel blocks into one rectangle, so 100k ops repaint within a frame.

#include "widgets/views/ganttgeometry.h"

#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/training.h"

#include <QWidget>

namespace shardwidgets {

class GanttView : public QWidget {
    Q_OBJECT
public:
    explicit GanttView(QWidget* parent = nullptr);

    // Keeps the user's zoom when only the partition changed (same makespan scale), else fits.
    void setTimeline(const shardscope::pipeline::Timeline& timeline); // without a training step
    // The timeline with its training step: stages over the GPU memory limit marked (a red frame
    // and label), the sends between stages as lines from sender to receiver, and each stage's
    // gradient all-reduce as a band after its backwards; the time axis runs to the step time.
    void setStepPlan(const shardscope::pipeline::StepPlan& step);
    // The tensor/context-parallel collectives and the expert all-to-all inside each F and B (core's
    // piece_comm, per piece of the plan shown): drawn over the op's end, since they are part of
    // its time and overlap none of it. Empty: none drawn. Call after setStepPlan.
    void setCommunication(const std::vector<shardscope::pipeline::LayerComm>& perPiece,
                          const std::vector<shardscope::pipeline::PieceCost>& pieces);
    bool hasCommunication() const { return !m_comm.empty(); }
    // The collectives of one op (of timeline().ops), nullptr when none are known.
    const shardscope::pipeline::LayerComm* opCommunication(int op) const;
    void clear();
    bool stageOverLimit(int stage) const;
    std::size_t sendCount() const { return m_transfers.size(); }
    std::size_t allReduceCount() const { return m_allreduce.size(); }
    double extent() const; // the step's end: makespan, or the step time with an all-reduce
    const shardscope::pipeline::Timeline& timeline() const { return m_timeline; }
    const GanttGeometry& geometry() const { return m_geometry; }
    bool hasTimeline() const { return !m_timeline.ops.empty(); }

    // What each mark on the timeline means, as the legend lists it (only marks the plan shows).
    enum class Mark {
        forward,
        backward,
        weight,
        idle,
        overMemory,
        allReduce,
        send,
        gradientSend,
        tensorComm,
        expertComm,
        merged,
        stepEnd,
        note
    };
    struct LegendEntry {
        Mark mark = Mark::note;
        QString text;
    };
    // At `width` pixels, the view's own width when < 0: whether ops are merged into grey runs
    // depends on the scale the whole step is fitted to (not on the zoom, so the legend does not
    // reflow while zooming).
    std::vector<LegendEntry> legend(double width = -1) const;
    // An op narrower than this is not drawn on its own: consecutive ones merge into a grey run.
    static constexpr double kMinBlockPixels = 2.0;
    int legendHeight(double width) const; // the strip under the rows at that width
    // The profile the timeline was planned on, for the caption.
    void setProfileName(const QString& name) { m_profileName = name; }
    // "1F1B · 4 stages · 32 microbatches · bubble 29.0 % · step time 3961.40 ms · profile x".
    QString caption() const;
    // A picture for export: the caption line above the fitted timeline and its legend.
    QSize exportSize(int width) const;
    void paintExport(QPainter& painter, const QSize& size) const;

    void fitToWindow();
    void zoomBy(double factor); // about the centre of the plot
    int opAt(const QPointF& position) const; // -1 when none
    QString describeOp(int op) const;

    // The whole timeline fitted into `size`, for export (PNG/SVG/report) without a window.
    void paintFitted(QPainter& painter, const QSize& size) const;
    QImage renderFitted(const QSize& size, qreal devicePixelRatio = 1.0) const;
    int preferredHeight(int width = 1600) const; // rows at full height, the ruler and the legend

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    void viewChanged(); // zoom or pan

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    bool event(QEvent* event) override;

private:
    void paintTimeline(QPainter& painter, const GanttGeometry& geometry, const QRect& rect) const;
    void paintRow(QPainter& painter, const GanttGeometry& geometry, int row, double plotRight) const;
    void paintRuler(QPainter& painter, const GanttGeometry& geometry, const QRect& rect) const;
    void layoutRows(GanttGeometry& geometry, const QSize& size) const; // rows above the legend
    void paintLegend(QPainter& painter, double top, double width) const;
    QFont legendFont() const;
    void showTimeline(const shardscope::pipeline::Timeline& timeline);
    // ganttstep.cpp: what the training step adds over the op blocks.
    void paintStep(QPainter& painter, const GanttGeometry& geometry, double plotRight) const;
    QString describeStep(const QPointF& position) const; // tooltip over a band or a marked label
    void paintCommunication(QPainter& painter, const GanttGeometry& geometry) const;

    shardscope::pipeline::Timeline m_timeline;
    std::vector<std::vector<GanttBlock>> m_rows;
    std::vector<shardscope::pipeline::StageMemory> m_memory; // empty without a training step
    std::optional<std::int64_t> m_memoryLimit;
    std::vector<shardscope::pipeline::Transfer> m_transfers;
    std::vector<shardscope::pipeline::AllReduce> m_allreduce;
    std::vector<shardscope::pipeline::LayerComm> m_comm; // by stage * v + chunk; empty: none
    double m_stepTime = 0;
    double m_shortestOp = 0; // ms, of the ops that take time
    QString m_profileName;
    GanttGeometry m_geometry;
    bool m_autoFit = true; // until the user zooms or pans, follow the window and the data
    bool m_panning = false;
    QPointF m_lastPan;
};

} // namespace shardwidgets
