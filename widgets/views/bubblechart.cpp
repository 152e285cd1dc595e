#include "widgets/views/bubblechart.h"

#include "widgets/style/chartcolors.h"
#include "widgets/views/bubblechartlayout.h"
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

namespace {

std::vector<std::vector<ChartPoint>> pointsOf(const std::vector<ChartLine>& lines)
{
    std::vector<std::vector<ChartPoint>> points;
    for (const ChartLine& line : lines)
        points.push_back(line.points);
    return points;
}

} // namespace

void BubbleChart::setLines(std::vector<ChartLine> lines)
{
    m_lines = std::move(lines);
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
    g.xMax = BubbleChartLayout::xEnd(pointsOf(m_lines), m_current);
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

std::vector<int> BubbleChart::coinciding() const
{
    // Three pixels: closer than that, a 3-pixel current line and a 1.6-pixel one read as one.
    const ChartGeometry g = geometry();
    return BubbleChartLayout::sameAs(
        pointsOf(m_lines), BubbleChartLayout::pixelTolerance(3.0, g.plotBottom() - g.plotTop(), g.yMin, g.yMax));
}

QString BubbleChart::legendName(int line) const
{
    if (line < 0 || line >= int(m_lines.size()))
        return {};
    const ChartLine& l = m_lines[std::size_t(line)];
    if (l.points.empty())
        return tr("%1 (n/a)").arg(l.name);
    const int under = coinciding()[std::size_t(line)];
    if (under < 0)
        return l.name;
    const bool equal = BubbleChartLayout::sameAs({m_lines[std::size_t(under)].points, l.points})[1] == 0;
    return (equal ? tr("%1 (= %2 here)") : tr("%1 (≈ %2 here)")).arg(l.name, m_lines[std::size_t(under)].name);
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
    // Each line its categorical hue; a line on top of an earlier equal one dashed, so both show.
    const std::vector<int> same = coinciding();
    auto pen = [&](int i) {
        QPen pen(categoryColor(i, palette()), m_lines[std::size_t(i)].current ? 3.0 : 1.6);
        const std::vector<double> dashes = BubbleChartLayout::dashPattern(BubbleChartLayout::stackRank(same, i));
        if (!dashes.empty())
            pen.setDashPattern(QList<qreal>(dashes.begin(), dashes.end()));
        pen.setCapStyle(Qt::FlatCap);
        return pen;
    };
    for (std::size_t i = 0; i < m_lines.size(); ++i) {
        const ChartLine& line = m_lines[i];
        QPainterPath path;
        for (std::size_t k = 0; k < line.points.size(); ++k) {
            const QPointF p(g.xForValue(line.points[k].x), g.yForValue(line.points[k].y));
            k == 0 ? path.moveTo(p) : path.lineTo(p);
        }
        painter.setPen(pen(int(i)));
        painter.setBrush(Qt::NoBrush);
        painter.drawPath(path);
    }
    painter.restore();
    // The current M marked on every line, unclipped: at the axis' end half a dot would be lost.
    for (std::size_t i = 0; i < m_lines.size(); ++i) {
        painter.setPen(Qt::NoPen);
        painter.setBrush(categoryColor(int(i), palette()));
        for (const ChartPoint& point : m_lines[i].points)
            if (int(point.x) == m_current)
                painter.drawEllipse(QPointF(g.xForValue(point.x), g.yForValue(point.y)), 4.5, 4.5);
    }
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
        const double x = g.plotRight() + 10;
        painter.setPen(pen(int(i)));
        painter.drawLine(QPointF(x, y + lineHeight / 2), QPointF(x + 18, y + lineHeight / 2));
        painter.setPen(palette().color(QPalette::Text));
        const QString name = legendName(int(i));
        // Two lines of legend when the note does not fit beside the swatch.
        const QRectF box(x + 24, y, g.width - x - 26, lineHeight * 2);
        const bool wraps = painter.fontMetrics().horizontalAdvance(name) > box.width();
        painter.drawText(wraps ? box : QRectF(x + 24, y, box.width(), lineHeight),
                         Qt::AlignLeft | (wraps ? Qt::AlignTop | Qt::TextWordWrap : Qt::AlignVCenter), name);
        y += wraps ? lineHeight * 2 : lineHeight;
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
