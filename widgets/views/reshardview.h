#pragma once
// The reshard ribbons: the source ranks as a bar above, the target ranks as a bar below, and one
// ribbon per copy run from where its bytes sit now to where they will sit. A ribbon whose rank
// index stays the same is drawn solid; one that moves to another rank is faint, so the moving
// share reads at a glance. With many ranks, neighbouring ranks share a box and a ribbon, and the
// legend says by how many. Geometry and hit testing are in ReshardGeometry.

#include "widgets/views/reshardgeometry.h"

#include <QFontMetricsF>
#include <QWidget>
#include <optional>

namespace shardwidgets {

class ReshardView : public QWidget {
    Q_OBJECT
public:
    explicit ReshardView(QWidget* parent = nullptr);

    // `sources`: the current shards' slices (rank, offset, numel); rect is ignored.
    void setPlan(const shardscope::ReshardPlan& plan, std::vector<ReshardBox> sources);
    // No plan; the empty view says `why` (by default: open a checkpoint).
    void clear(const QString& why = {});
    bool hasPlan() const { return m_plan.has_value(); }
    QString placeholder() const { return m_placeholder; }

    // Laid out over `rect` for text measured by `metrics` (the bar titles' column fits them).
    ReshardGeometry geometryFor(const QRectF& rect, const QFontMetricsF& metrics) const;
    QString describeAt(const QPointF& position) const;
    void paintView(QPainter& painter, const QRect& rect) const; // also used for export
    // The line under the bars: what moves, how ranks are grouped (rankGroup > 1), what solid
    // and faint mean; most important first, so a narrow view cuts the explanation.
    QString legend(int rankGroup) const;
    int preferredHeight() const { return 210; }

    QSize sizeHint() const override { return {800, preferredHeight()}; }
    QSize minimumSizeHint() const override { return {300, preferredHeight()}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    static constexpr double kMinLabelWidth = 104;
    QString barTitle(bool source) const; // "Now: 8 ranks", "After: 16 ranks"

    std::optional<shardscope::ReshardPlan> m_plan;
    std::vector<ReshardBox> m_sources;
    QString m_placeholder;
};

} // namespace shardwidgets
