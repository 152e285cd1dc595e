#include "widgets/views/reshardview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/views/hovertext.h"

#include <QPainter>
#include <QPainterPath>

namespace shardwidgets {

ReshardView::ReshardView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setFixedHeight(preferredHeight());
}

void ReshardView::setPlan(const shardscope::ReshardPlan& plan, std::vector<ReshardBox> sources)
{
    m_plan = plan;
    m_sources = std::move(sources);
    update();
}

void ReshardView::clear()
{
    m_plan.reset();
    m_sources.clear();
    update();
}

ReshardGeometry ReshardView::geometryFor(const QRectF& rect) const
{
    ReshardGeometry g;
    g.left = rect.left() + kLabelWidth;
    g.width = std::max(1.0, rect.width() - kLabelWidth - 10);
    g.barHeight = 26;
    g.sourceTop = rect.top() + 8;
    g.targetTop = rect.bottom() - 8 - 18 - g.barHeight; // room for the legend line below
    return g;
}

void ReshardView::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    paintView(painter, rect());
}

void ReshardView::paintView(QPainter& painter, const QRect& rect) const
{
    const QPalette& pal = palette();
    if (!paintChartBackground(painter, rect, pal, m_plan.has_value(), tr("Open a checkpoint and pick a target world size")))
        return;
    painter.setRenderHint(QPainter::Antialiasing, true);
    const ReshardGeometry g = geometryFor(rect);
    const auto sources = g.sourceBoxes(*m_plan, m_sources);
    const auto targets = g.targetBoxes(*m_plan);
    const auto ribbons = g.ribbons(*m_plan, m_sources);

    // Ribbons first, so that the bars' edges sit on top of them.
    painter.setPen(Qt::NoPen);
    constexpr int kSteps = 16;
    for (const auto& r : ribbons) {
        QPainterPath path;
        const double top = g.ribbonTop(), bottom = g.ribbonBottom();
        path.moveTo(r.sourceX0, top);
        for (int i = 1; i <= kSteps; ++i) {
            const double y = top + (bottom - top) * i / kSteps;
            path.lineTo(g.edgeAt(r.sourceX0, r.targetX0, y), y);
        }
        path.lineTo(std::max(r.targetX1, r.targetX0 + 0.6), bottom);
        for (int i = kSteps - 1; i >= 0; --i) {
            const double y = top + (bottom - top) * i / kSteps;
            path.lineTo(std::max(g.edgeAt(r.sourceX1, r.targetX1, y), g.edgeAt(r.sourceX0, r.targetX0, y) + 0.6), y);
        }
        path.closeSubpath();
        QColor fill = categoryColor(r.sourceRank, pal);
        fill.setAlpha(r.staying ? 200 : 85);
        painter.fillPath(path, fill);
    }

    const QFontMetrics metrics(painter.font());
    auto drawBar = [&](const std::vector<ReshardBox>& boxes, double top, const QString& title) {
        painter.setPen(pal.color(QPalette::Text));
        painter.drawText(QRectF(rect.left() + 4, top, kLabelWidth - 10, g.barHeight), Qt::AlignVCenter | Qt::AlignLeft,
                         title);
        for (const auto& b : boxes) {
            if (b.numel == 0)
                continue;
            const QRectF box = b.rect.width() < 1 ? QRectF(b.rect.left(), top, 1, g.barHeight) : b.rect;
            const QColor fill = categoryColor(b.rank, pal);
            painter.fillRect(box, fill);
            const QString label = QStringLiteral("r%1").arg(b.rank);
            if (metrics.horizontalAdvance(label) + 6 < box.width()) {
                painter.setPen(textOn(fill));
                painter.drawText(box, Qt::AlignCenter, label);
            }
        }
    };
    auto ranks = [](int n) { return n == 1 ? tr("1 rank") : tr("%1 ranks").arg(n); };
    drawBar(sources, g.sourceTop, tr("Now: %1").arg(ranks(m_plan->source_world_size)));
    drawBar(targets, g.targetTop, tr("After: %1").arg(ranks(m_plan->target_world_size)));

    // Legend: what solid and faint mean, and the totals they stand for.
    QFont small = painter.font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    painter.setFont(small);
    painter.setPen(pal.color(QPalette::Text));
    const double legendTop = g.targetTop + g.barHeight + 2;
    const double share = m_plan->bytes_written ? 100.0 * double(m_plan->bytes_moving) / double(m_plan->bytes_written) : 0.0;
    painter.drawText(QRectF(g.left, legendTop, g.width, 18), Qt::AlignLeft | Qt::AlignVCenter,
                     tr("solid ribbons stay on the same rank index, faint ones move · %1 of %2 moves (%3 %)")
                         .arg(formatBytes(m_plan->bytes_moving), formatBytes(m_plan->bytes_written))
                         .arg(share, 0, 'f', 1));
    painter.drawText(QRectF(g.left, legendTop, g.width, 18), Qt::AlignRight | Qt::AlignVCenter,
                     tr("%1 elements").arg(formatCount(m_plan->numel_total)));
}

QString ReshardView::describeAt(const QPointF& position) const
{
    if (!m_plan)
        return {};
    const ReshardGeometry g = geometryFor(QRectF(rect()));
    const uint64_t bpe = m_plan->bytes_per_element;
    const auto sources = g.sourceBoxes(*m_plan, m_sources);
    if (const int i = ReshardGeometry::boxAt(sources, position); i >= 0) {
        const auto& b = sources[std::size_t(i)];
        return tr("Rank %1 now\nelements [%2, %3)\n%4 of parameter and optimizer state")
            .arg(b.rank)
            .arg(formatCount(b.offset), formatCount(b.offset + b.numel), formatBytes(b.numel * bpe));
    }
    const auto targets = g.targetBoxes(*m_plan);
    if (const int i = ReshardGeometry::boxAt(targets, position); i >= 0) {
        const auto& t = m_plan->targets[std::size_t(i)];
        QStringList from;
        for (const auto& run : t.runs)
            from << QStringLiteral("r%1").arg(run.source_rank);
        return tr("New rank %1\nelements [%2, %3)\n%4, from %5")
            .arg(t.rank)
            .arg(formatCount(t.offset), formatCount(t.offset + t.numel), formatBytes(t.bytes),
                 from.isEmpty() ? tr("nothing (empty shard)") : from.join(QStringLiteral(", ")));
    }
    const auto ribbons = g.ribbons(*m_plan, m_sources);
    if (const int i = g.ribbonAt(ribbons, position); i >= 0) {
        const auto& r = ribbons[std::size_t(i)];
        return tr("Rank %1 → new rank %2%3\nelements [%4, %5)\n%6")
            .arg(r.sourceRank)
            .arg(r.targetRank)
            .arg(r.staying ? tr(" (stays)") : QString())
            .arg(formatCount(r.offset), formatCount(r.offset + r.numel), formatBytes(r.numel * bpe));
    }
    return {};
}

bool ReshardView::event(QEvent* event)
{
    return showHoverText(this, event, [this](const QPointF& at) { return describeAt(at); }) || QWidget::event(event);
}

} // namespace shardwidgets
