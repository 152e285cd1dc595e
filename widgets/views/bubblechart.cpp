#include "widgets/views/bubblechart.h"

#include "widgets/style/chartcolors.h"
#include "widgets/views/chartaxes.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <cmath>

namespace shardwidgets {

BubbleChart::BubbleChart(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
}

void BubbleChart::setLines(std::vector<ChartLine> lines, int maxMicrobatches)
{
    m_lines = std::move(lines);
    m_maxM = std::max(2, maxMicrobatches);
    m_busy = false;
    update();
}

void BubbleChart::setCurrentMicrobatches(int microbatches)
{
    m_current = microbatches;
    update();
}

void BubbleChart::setBusy(bool busy)
{
    m_busy = busy;
    update();
}

void BubbleChart::clear()
{
    m_lines.clear();
    m_busy = false;
    update();
}

ChartGeometry BubbleChart::geometry() const
{
    // Right margin for the legend, so no line runs under it.
    ChartGeometry g{.width = double(width()),
                    .height = double(height()),
                    .left = 62,
                    .right = std::min(150.0, width() * 0.3),
                    .top = 12,
                    .bottom = 40};
    g.xMin = 1;
    g.xMax = std::max(m_maxM, m_current);
    double top = 0;
    for (const ChartLine& line : m_lines)
        for (const ChartPoint& p : line.points)
            top = std::max(top, p.y);
    g.yMin = 0;
    g.yMax = top > 0 ? std::min(1.0, top * 1.08) : 1.0;
    return g;
}

QString BubbleChart::describeAt(double x) const
{
    const ChartGeometry g = geometry();
    const int m = int(std::lround(g.valueForX(x)));
    QStringList rows{tr("M = %1").arg(m)};
    for (const ChartLine& line : m_lines)
        for (const ChartPoint& p : line.points)
            if (int(p.x) == m)
                rows << tr("%1: bubble %2 %").arg(line.name).arg(p.y * 100.0, 0, 'f', 1);
    return rows.size() > 1 ? rows.join(QLatin1Char('\n')) : QString();
}

void BubbleChart::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    bool any = false;
    for (const ChartLine& line : m_lines)
        any = any || !line.points.empty();
    if (!paintChartBackground(painter, rect(), palette(), any && !m_busy,
                              m_busy ? tr("Simulating every schedule…") : tr("No schedule to sweep")))
        return;
    const ChartGeometry g = geometry();
    paintChartAxes(
        painter, g, palette(), tr("microbatches per step (M)"), tr("bubble"),
        [](double v) { return QString::number(v, 'g', 4); },
        [](double v) { return QStringLiteral("%1 %").arg(v * 100.0, 0, 'g', 3); });
    painter.setRenderHint(QPainter::Antialiasing, true);
    painter.save();
    painter.setClipRect(QRectF(QPointF(g.plotLeft(), g.plotTop()), QPointF(g.plotRight(), g.plotBottom())));
    if (m_current >= 1) {
        const double x = g.xForValue(m_current);
        painter.setPen(QPen(palette().color(QPalette::Text), 1, Qt::DashLine));
        painter.drawLine(QPointF(x, g.plotTop()), QPointF(x, g.plotBottom()));
    }
    // Each line its categorical hue and its own marker shape, so lines stay apart without colour.
    for (std::size_t i = 0; i < m_lines.size(); ++i) {
        const ChartLine& line = m_lines[i];
        const QColor colour = categoryColor(int(i), palette());
        QPainterPath path;
        for (std::size_t k = 0; k < line.points.size(); ++k) {
            const QPointF p(g.xForValue(line.points[k].x), g.yForValue(line.points[k].y));
            k == 0 ? path.moveTo(p) : path.lineTo(p);
        }
        painter.setPen(QPen(colour, line.current ? 3.0 : 1.6));
        painter.setBrush(Qt::NoBrush);
        painter.drawPath(path);
        painter.setBrush(colour);
        for (const ChartPoint& point : line.points)
            if (int(point.x) == m_current) // the current M marked on every line
                painter.drawEllipse(QPointF(g.xForValue(point.x), g.yForValue(point.y)), 4.5, 4.5);
    }
    painter.restore();
    if (m_current >= 1) {
        painter.setPen(palette().color(QPalette::Text));
        const double x = g.xForValue(m_current);
        const QString label = tr("M = %1").arg(m_current);
        const double w = painter.fontMetrics().horizontalAdvance(label);
        painter.drawText(
            QPointF(x + 4 + w <= g.plotRight() ? x + 4 : x - 4 - w, g.plotTop() + painter.fontMetrics().ascent() + 2),
            label);
    }
    // Legend right of the plot.
    const double lineHeight = painter.fontMetrics().height() + 4;
    double y = g.plotTop() + 4;
    for (std::size_t i = 0; i < m_lines.size(); ++i) {
        const QColor colour = categoryColor(int(i), palette());
        const double x = g.plotRight() + 10;
        painter.setPen(QPen(colour, m_lines[i].current ? 3.0 : 1.6));
        painter.drawLine(QPointF(x, y + lineHeight / 2), QPointF(x + 18, y + lineHeight / 2));
        painter.setPen(palette().color(QPalette::Text));
        const QString name = m_lines[i].points.empty() ? tr("%1 (n/a)").arg(m_lines[i].name) : m_lines[i].name;
        painter.drawText(QRectF(x + 24, y, g.width - x - 26, lineHeight), Qt::AlignLeft | Qt::AlignVCenter,
                         painter.fontMetrics().elidedText(name, Qt::ElideRight, int(g.width - x - 26)));
        y += lineHeight;
    }
}

void BubbleChart::mouseMoveEvent(QMouseEvent* event)
{
    const QString text =
        event->position().x() >= geometry().plotLeft() && event->position().x() <= geometry().plotRight()
        ? describeAt(event->position().x())
        : QString();
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

} // namespace shardwidgets
