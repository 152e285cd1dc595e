#pragma once
// The reshard ribbons: the source ranks as a bar above, the target ranks as a bar below, and one
// ribbon per copy run from where its bytes sit now to where they will sit. A ribbon whose rank
// index stays the same is drawn solid; one that moves to another rank is faint, so the moving
// share reads at a glance. Geometry and hit testing are in ReshardGeometry.

#include "widgets/views/reshardgeometry.h"

#include <QWidget>
#include <optional>

namespace shardwidgets {

class ReshardView : public QWidget {
    Q_OBJECT
public:
    explicit ReshardView(QWidget* parent = nullptr);

    // `sources`: the current shards' slices (rank, offset, numel); rect is ignored.
    void setPlan(const shardscope::ReshardPlan& plan, std::vector<ReshardBox> sources);
    void clear();
    bool hasPlan() const { return m_plan.has_value(); }

    ReshardGeometry geometryFor(const QRectF& rect) const;
    QString describeAt(const QPointF& position) const;
    void paintView(QPainter& painter, const QRect& rect) const; // also used for export
    int preferredHeight() const { return 210; }

    QSize sizeHint() const override { return {800, preferredHeight()}; }
    QSize minimumSizeHint() const override { return {300, preferredHeight()}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    static constexpr double kLabelWidth = 104;

    std::optional<shardscope::ReshardPlan> m_plan;
    std::vector<ReshardBox> m_sources;
};

} // namespace shardwidgets
