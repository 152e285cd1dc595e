#include "widgets/views/reshardview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/views/hovertext.h"

#include <QPainter>
#include <QPainterPath>
#include <cmath>

namespace shardwidgets {

ReshardView::ReshardView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setFixedHeight(preferredHeight());
    clear();
}

void ReshardView::setPlan(const shardscope::ReshardPlan& plan, std::vector<ReshardBox> sources)
{
    m_plan = plan;
    m_sources = std::move(sources);
    update();
}

void ReshardView::clear(const QString& why)
{
    m_plan.reset();
    m_sources.clear();
    m_placeholder = why.isEmpty() ? tr("Open a checkpoint and pick a target world size") : why;
    update();
}

QString ReshardView::barTitle(bool source) const
{
    const int n = !m_plan ? 0 : source ? m_plan->source_world_size : m_plan->target_world_size;
    const QString ranks = n == 1 ? tr("1 rank") : tr("%1 ranks").arg(n);
    return source ? tr("Now: %1").arg(ranks) : tr("After: %1").arg(ranks);
}

ReshardGeometry ReshardView::geometryFor(const QRectF& rect, const QFontMetricsF& metrics) const
{
    ReshardGeometry g;
    // Wide enough for "After: 1024 ranks" in the font actually used: a cut title hides the count.
    const double labels =
        std::max(metrics.horizontalAdvance(barTitle(true)), metrics.horizontalAdvance(barTitle(false)));
    const double labelWidth = std::max(kMinLabelWidth, std::ceil(labels) + 14);
    g.left = rect.left() + labelWidth;
    g.width = std::max(1.0, rect.width() - labelWidth - 10);
    g.barHeight = 26;
    g.sourceTop = rect.top() + 8;
    g.targetTop = rect.bottom() - 8 - 18 - g.barHeight; // room for the legend line below
    if (m_plan)
        g.rankGroup = ReshardGeometry::groupFor(int(m_sources.size()), int(m_plan->targets.size()), g.width);
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
    if (!paintChartBackground(painter, rect, pal, m_plan.has_value(), m_placeholder))
        return;
    painter.setRenderHint(QPainter::Antialiasing, true);
    const QFontMetricsF metrics(painter.font());
    const ReshardGeometry g = geometryFor(rect, metrics);
    const auto sources = g.sourceBoxes(*m_plan, m_sources);
    const auto targets = g.targetBoxes(*m_plan);
    const auto ribbons = g.ribbons(*m_plan, m_sources);
    // One colour per box: per rank, or per group when ranks are grouped.
    auto colour = [&](int firstRank) { return categoryColor(firstRank / g.rankGroup, pal); };

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
        QColor fill = colour(r.sourceRank);
        // Solid for what stays, faint for what moves; a group's ribbon in between, by its share.
        const double stays = r.numel ? double(r.stayingNumel) / double(r.numel) : 0.0;
        fill.setAlpha(int(85 + (200 - 85) * stays));
        painter.fillPath(path, fill);
    }

    auto drawBar = [&](const std::vector<ReshardBox>& boxes, double top, const QString& title) {
        painter.setPen(pal.color(QPalette::Text));
        painter.drawText(QRectF(rect.left() + 4, top, g.left - rect.left() - 10, g.barHeight),
                         Qt::AlignVCenter | Qt::AlignLeft, title);
        for (const auto& b : boxes) {
            if (b.numel == 0)
                continue;
            const QRectF box = b.rect.width() < 1 ? QRectF(b.rect.left(), top, 1, g.barHeight) : b.rect;
            const QColor fill = colour(b.rank);
            painter.fillRect(box, fill);
            const QString label = b.lastRank >= 0 && b.lastRank != b.rank
                ? QStringLiteral("r%1–%2").arg(b.rank).arg(b.lastRank)
                : QStringLiteral("r%1").arg(b.rank);
            if (metrics.horizontalAdvance(label) + 6 < box.width()) {
                painter.setPen(textOn(fill));
                painter.drawText(box, Qt::AlignCenter, label);
            }
        }
    };
    drawBar(sources, g.sourceTop, barTitle(true));
    drawBar(targets, g.targetTop, barTitle(false));

    // Legend, and the element count at the right when there is room for both.
    QFont small = painter.font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    painter.setFont(small);
    const QFontMetricsF smallMetrics(small);
    painter.setPen(pal.color(QPalette::Text));
    const double legendTop = g.targetTop + g.barHeight + 2;
    const QString elements = tr("%1 elements").arg(formatCount(m_plan->numel_total));
    const double room = g.width - smallMetrics.horizontalAdvance(elements) - 16;
    const bool both = room >= g.width * 0.5;
    painter.drawText(QRectF(g.left, legendTop, g.width, 18), Qt::AlignLeft | Qt::AlignVCenter,
                     smallMetrics.elidedText(legend(g.rankGroup), Qt::ElideRight, both ? room : g.width));
    if (both)
        painter.drawText(QRectF(g.left, legendTop, g.width, 18), Qt::AlignRight | Qt::AlignVCenter, elements);
}

QString ReshardView::legend(int rankGroup) const
{
    if (!m_plan)
        return {};
    QString text = tr("%1 of %2 moves (%3)")
                       .arg(formatBytes(m_plan->bytes_moving), formatBytes(m_plan->bytes_written),
                            formatPercent(m_plan->bytes_moving, m_plan->bytes_written));
    if (rankGroup > 1)
        text += tr(" · boxes and ribbons grouped by %1 ranks").arg(rankGroup);
    return text + tr(" · solid ribbons stay on the same rank index, faint ones move");
}

QString ReshardView::describeAt(const QPointF& position) const
{
    if (!m_plan)
        return {};
    const ReshardGeometry g = geometryFor(QRectF(rect()), QFontMetricsF(font()));
    const uint64_t bpe = m_plan->bytes_per_element;
    auto ranks = [](int first, int last) {
        return last < 0 || last == first ? tr("rank %1").arg(first) : tr("ranks %1–%2").arg(first).arg(last);
    };
    const auto sources = g.sourceBoxes(*m_plan, m_sources);
    if (const int i = ReshardGeometry::boxAt(sources, position); i >= 0) {
        const auto& b = sources[std::size_t(i)];
        return tr("Now: %1\nelements [%2, %3)\n%4 of parameter and optimizer state")
            .arg(ranks(b.rank, b.lastRank), formatCount(b.offset), formatCount(b.offset + b.numel),
                 formatBytes(b.numel * bpe));
    }
    const auto targets = g.targetBoxes(*m_plan);
    if (const int i = ReshardGeometry::boxAt(targets, position); i >= 0) {
        const auto& b = targets[std::size_t(i)];
        if (b.lastRank >= 0 && b.lastRank != b.rank)
            return tr("After: %1\nelements [%2, %3)\n%4")
                .arg(ranks(b.rank, b.lastRank), formatCount(b.offset), formatCount(b.offset + b.numel),
                     formatBytes(b.numel * bpe));
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
        const bool group = r.sourceLast != r.sourceRank || r.targetLast != r.targetRank;
        const QString stays = group ? tr("%1 of it stays on the same rank index").arg(formatBytes(r.stayingNumel * bpe))
            : r.staying             ? tr("stays on the same rank index")
                                    : tr("moves to another rank");
        return tr("From %1 to new %2\nelements [%3, %4)\n%5, %6")
            .arg(ranks(r.sourceRank, r.sourceLast), ranks(r.targetRank, r.targetLast), formatCount(r.offset),
                 formatCount(r.offset + r.numel), formatBytes(r.numel * bpe), stays);
    }
    return {};
}

bool ReshardView::event(QEvent* event)
{
    return showHoverText(this, event, [this](const QPointF& at) { return describeAt(at); }) || QWidget::event(event);
}

} // namespace shardwidgets
