#include "widgets/views/candidatescatter.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"
#include "widgets/views/chartaxes.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <cmath>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kCompactHeight = 170;
} // namespace

CandidateScatter::CandidateScatter(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setToolTip(tr("Each dot a configuration: hover to name it, click to load it into the timeline"));
}

void CandidateScatter::setCandidates(std::vector<pl::Candidate> candidates, std::int64_t memoryLimit)
{
    m_candidates = std::move(candidates);
    m_limit = memoryLimit;
    m_points.clear();
    for (const pl::Candidate& c : m_candidates)
        m_points.push_back({.x = double(c.peak_memory_bytes) / kGiB, .y = c.step_time});
    m_selected = m_hovered = -1;
    update();
}

void CandidateScatter::clear()
{
    setCandidates({}, 0);
}

void CandidateScatter::setSelected(int index)
{
    m_selected = index >= 0 && index < int(m_candidates.size()) ? index : -1;
    update();
}

ChartGeometry CandidateScatter::geometry() const
{
    // Short (the window at its minimum size): no legend row and no x title, so the plot keeps
    // most of the height; the tooltip still names every dot.
    const bool compact = height() < kCompactHeight;
    ChartGeometry g{.width = double(width()),
                    .height = double(height()),
                    .left = 70,
                    .right = 16,
                    .top = compact ? 6.0 : 26.0,
                    .bottom = compact ? 22.0 : 40.0};
    std::vector<double> xs, ys;
    for (const ChartPoint& p : m_points) {
        xs.push_back(p.x);
        ys.push_back(p.y);
    }
    if (m_limit > 0)
        xs.push_back(double(m_limit) / kGiB); // the limit line always in view
    g.fitX(xs, 0.06, true);
    g.fitY(ys, 0.08, true);
    return g;
}

int CandidateScatter::candidateAt(const QPointF& position) const
{
    return geometry().hitTest(m_points, position.x(), position.y(), 8);
}

QString CandidateScatter::describe(int index) const
{
    if (index < 0 || index >= int(m_candidates.size()))
        return {};
    const pl::Candidate& c = m_candidates[std::size_t(index)];
    QString text = tr("#%1 · pp %2 × dp %3 · %4")
                       .arg(index + 1)
                       .arg(c.pp)
                       .arg(c.dp)
                       .arg(QString::fromUtf8(pl::to_string(c.schedule)));
    if (c.virtual_stages > 1)
        text += tr(" v %1").arg(c.virtual_stages);
    text += tr(" · M %1 · recompute %2\nstep %3 ms · peak %4 · %5")
                .arg(c.microbatches)
                .arg(QString::fromUtf8(pl::to_string(c.recompute)))
                .arg(c.step_time, 0, 'f', 2)
                .arg(formatBytes(uint64_t(std::max<std::int64_t>(0, c.peak_memory_bytes))),
                     c.fits ? tr("fits") : tr("over the limit"));
    return text;
}

void CandidateScatter::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    if (!paintChartBackground(painter, rect(), palette(), !m_candidates.empty(),
                              tr("Search to see the configurations here")))
        return;
    const ChartGeometry g = geometry();
    const bool compact = height() < kCompactHeight;
    paintChartAxes(
        painter, g, palette(), compact ? QString() : tr("peak memory per GPU (GiB)"),
        compact ? tr("ms") : tr("step time (ms)"), [](double v) { return QString::number(v, 'g', 4); },
        // Whole milliseconds, never "2e+04": step times run to tens of thousands.
        [](double v) { return std::abs(v) >= 100 ? QString::number(v, 'f', 0) : QString::number(v, 'g', 3); }, 5,
        compact ? 2 : 4);
    painter.setRenderHint(QPainter::Antialiasing, true);
    const QColor good = severityColor(Severity::good, palette());
    const QColor bad = severityColor(Severity::bad, palette());
    const QColor text = palette().color(QPalette::Text);

    if (m_limit > 0) {
        const double x = g.xForValue(double(m_limit) / kGiB);
        painter.setPen(QPen(bad, 1.5, Qt::DashLine));
        painter.drawLine(QPointF(x, g.plotTop()), QPointF(x, g.plotBottom()));
        const QString label = tr("limit %1").arg(formatBytes(uint64_t(m_limit)));
        const double w = painter.fontMetrics().horizontalAdvance(label);
        painter.setPen(bad);
        // Inside the plot under its top edge: the margin above belongs to the legend.
        painter.drawText(
            QPointF(x + 4 + w <= g.plotRight() ? x + 4 : x - 4 - w, g.plotTop() + painter.fontMetrics().ascent() + 2),
            label);
    }
    // Worst first, so that the best candidates are painted on top of a crowd.
    for (int i = int(m_points.size()) - 1; i >= 0; --i) {
        const QPointF p(g.xForValue(m_points[std::size_t(i)].x), g.yForValue(m_points[std::size_t(i)].y));
        if (m_candidates[std::size_t(i)].fits) {
            painter.setPen(QPen(good.darker(130), 1));
            painter.setBrush(good);
            painter.drawEllipse(p, 4, 4);
        } else {
            painter.setPen(QPen(bad, 1.6));
            painter.drawLine(p + QPointF(-4, -4), p + QPointF(4, 4));
            painter.drawLine(p + QPointF(-4, 4), p + QPointF(4, -4));
        }
    }
    painter.setBrush(Qt::NoBrush);
    // The best: core ranks it first, and only a fitting one is "best".
    if (!m_candidates.empty() && m_candidates.front().fits) {
        const QPointF p(g.xForValue(m_points[0].x), g.yForValue(m_points[0].y));
        painter.setPen(QPen(text, 2));
        painter.drawEllipse(p, 8, 8);
        const QString label = compact ? QString() : tr("best"); // the ring alone when cramped
        const double w = painter.fontMetrics().horizontalAdvance(label);
        painter.drawText(QPointF(p.x() + 11 + w <= g.plotRight() ? p.x() + 11 : p.x() - 11 - w, p.y() - 8), label);
    }
    for (int index : {m_selected, m_hovered}) {
        if (index < 0)
            continue;
        const QPointF p(g.xForValue(m_points[std::size_t(index)].x), g.yForValue(m_points[std::size_t(index)].y));
        painter.setPen(QPen(palette().color(QPalette::Highlight), index == m_selected ? 2.5 : 1.5));
        painter.drawEllipse(p, 11, 11);
    }
    // Legend in the top margin, shapes as in the plot.
    if (compact)
        return;
    painter.setPen(text);
    const QString legend = tr("●  fits    ✕  over the limit    ◯  best");
    painter.drawText(QRectF(g.plotLeft(), 0, g.plotRight() - g.plotLeft(), g.plotTop() - 2),
                     Qt::AlignRight | Qt::AlignVCenter, legend);
}

void CandidateScatter::mouseMoveEvent(QMouseEvent* event)
{
    const int index = candidateAt(event->position());
    if (index != m_hovered) {
        m_hovered = index;
        update();
    }
    if (index >= 0)
        QToolTip::showText(event->globalPosition().toPoint(), describe(index), this);
    else
        QToolTip::hideText();
}

void CandidateScatter::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return;
    const int index = candidateAt(event->position());
    if (index >= 0) {
        setSelected(index);
        emit candidateClicked(index);
    }
}

void CandidateScatter::leaveEvent(QEvent*)
{
    m_hovered = -1;
    update();
}

} // namespace shardwidgets
