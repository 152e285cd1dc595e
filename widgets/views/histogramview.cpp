#include "widgets/views/histogramview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/views/hovertext.h"

#include <QPainter>
#include <algorithm>

namespace shardwidgets {

namespace {

constexpr int kMargin = 8;
constexpr int kTitleHeight = 20;
constexpr int kAxisHeight = 18;

QString power(int exponent)
{
    return QStringLiteral("2^%1").arg(exponent);
}

} // namespace

HistogramView::HistogramView(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(260, 140);
    setMouseTracking(true);
}

void HistogramView::setStats(const QString& title, const shardscope::ValueStats& stats)
{
    m_title = title;
    m_stats = stats;
    m_hasData = true;
    update();
}

void HistogramView::clear()
{
    m_hasData = false;
    update();
}

HistogramGeometry HistogramView::geometryFor(const QRectF& rect) const
{
    HistogramGeometry g;
    g.bins = shardscope::kHistogramBins;
    g.plot = QRectF(rect.left() + kMargin, rect.top() + kMargin + kTitleHeight, rect.width() - 2 * kMargin,
                    rect.height() - 2 * kMargin - kTitleHeight - kAxisHeight);
    g.maxCount = *std::max_element(m_stats.histogram.begin(), m_stats.histogram.end());
    return g;
}

QString HistogramView::describeAt(const QPointF& point) const
{
    if (!m_hasData)
        return {};
    const int bin = geometryFor(rect()).binAt(point.x());
    if (bin < 0)
        return {};
    const int e = shardscope::kHistogramLowExponent + bin;
    const QString range = bin == 0              ? tr("|x| < %1").arg(power(e + 1))
        : bin == shardscope::kHistogramBins - 1 ? tr("|x| ≥ %1").arg(power(e))
                                                : tr("%1 ≤ |x| < %2").arg(power(e), power(e + 1));
    return tr("%1: %2 values").arg(range, formatCount(m_stats.histogram[std::size_t(bin)]));
}

void HistogramView::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    const QPalette& pal = palette();
    if (!paintChartBackground(painter, rect(), pal, m_hasData, tr("Select a tensor to see its magnitudes")))
        return;
    const HistogramGeometry g = geometryFor(rect());
    painter.setPen(pal.color(QPalette::WindowText));
    const QString zeros = tr("zeros %1, NaN %2, +Inf %3, −Inf %4")
                              .arg(formatCount(m_stats.zeros), formatCount(m_stats.nan), formatCount(m_stats.posinf),
                                   formatCount(m_stats.neginf));
    painter.drawText(QRectF(kMargin, kMargin, width() - 2 * kMargin, kTitleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                     // Cut at the end: the tensor's name is what must stay readable.
                     painter.fontMetrics().elidedText(m_title + QStringLiteral("  —  ") + zeros, Qt::ElideRight,
                                                      width() - 2 * kMargin));
    const QColor bar = categoryColor(0, pal);
    for (int b = 0; b < g.bins; ++b)
        if (const uint64_t count = m_stats.histogram[std::size_t(b)])
            painter.fillRect(g.barRect(b, count).adjusted(0.5, 0, -0.5, 0), bar);
    painter.setPen(pal.color(QPalette::Mid));
    painter.drawLine(g.plot.bottomLeft(), g.plot.bottomRight());
    painter.setPen(pal.color(QPalette::WindowText));
    // A label every 8 bins (2^-56, 2^-48, ... 2^0 ...), enough to read magnitudes at a glance;
    // every 16 or more when the plot is too narrow for them side by side.
    const int step = g.labelStep(painter.fontMetrics().horizontalAdvance(power(-100)));
    for (int b = 0; b <= g.bins; b += step) {
        const double x = g.plot.left() + b * g.binWidth();
        painter.drawLine(QPointF(x, g.plot.bottom()), QPointF(x, g.plot.bottom() + 3));
        const QString label = power(shardscope::kHistogramLowExponent + b);
        const double w = painter.fontMetrics().horizontalAdvance(label);
        const double left = std::clamp(x - w / 2, 0.0, width() - w);
        painter.drawText(QPointF(left, g.plot.bottom() + kAxisHeight - 3), label);
    }
}

bool HistogramView::event(QEvent* event)
{
    if (showHoverText(this, event, [this](const QPointF& p) { return describeAt(p); }))
        return true;
    return QWidget::event(event);
}

} // namespace shardwidgets
