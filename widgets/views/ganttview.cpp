#include "widgets/views/ganttview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/statusstyle.h"

#include <QHelpEvent>
#include <QImage>
#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

GanttView::GanttView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setToolTip(tr("Ctrl+wheel zooms, drag or wheel pans, double-click fits"));
}

void GanttView::setTimeline(const pl::Timeline& timeline)
{
    m_memory.clear();
    m_memoryLimit.reset();
    m_transfers.clear();
    m_allreduce.clear();
    m_stepTime = timeline.makespan;
    showTimeline(timeline);
}

void GanttView::setStepPlan(const pl::StepPlan& step)
{
    m_memory = step.memory;
    m_memoryLimit = step.options.gpu_memory_bytes;
    // Sends as the schedule JSON lists them: only when they take time (a bandwidth or latency);
    // at an infinitely fast link they would be vertical hairlines over every block.
    if (step.options.link_gbps > 0 || step.plan.timeline.spec.p2p_latency_ms > 0)
        m_transfers = pl::transfers(step);
    else
        m_transfers.clear();
    m_allreduce = step.allreduce;
    m_stepTime = step.step_time;
    m_comm.clear(); // belongs to the plan it was given with
    showTimeline(step.plan.timeline);
}

bool GanttView::stageOverLimit(int stage) const
{
    return stage >= 0 && std::size_t(stage) < m_memory.size() && !m_memory[std::size_t(stage)].fits;
}

double GanttView::extent() const
{
    return std::max(m_timeline.makespan, m_stepTime);
}

void GanttView::showTimeline(const pl::Timeline& timeline)
{
    const double previous = extent();
    m_stepTime = std::max(m_stepTime, timeline.makespan);
    const double next = std::max(timeline.makespan, m_stepTime);
    const bool sameShape =
        timeline.spec.stages == m_timeline.spec.stages && previous > 0 && std::abs(next / previous - 1.0) < 0.5;
    m_timeline = timeline;
    m_shortestOp = 0;
    for (const pl::TimedOp& op : timeline.ops)
        if (const double length = op.end - op.start; length > 0 && (m_shortestOp == 0 || length < m_shortestOp))
            m_shortestOp = length;
    m_rows.assign(std::size_t(std::max(0, timeline.spec.stages)), {});
    for (int s = 0; s + 1 < int(timeline.stage_begin.size()) && s < int(m_rows.size()); ++s) {
        auto& row = m_rows[std::size_t(s)];
        const std::size_t begin = timeline.stage_begin[std::size_t(s)];
        const std::size_t end = timeline.stage_begin[std::size_t(s) + 1];
        row.reserve(end - begin);
        for (std::size_t i = begin; i < end; ++i)
            row.push_back({timeline.ops[i].start, timeline.ops[i].end, int(i)});
    }
    m_geometry.duration = extent();
    layoutRows(m_geometry, size());
    if (m_autoFit || !sameShape) {
        m_autoFit = true;
        m_geometry.fit(extent(), width());
    } else {
        m_geometry.clampView();
    }
    updateGeometry();
    update();
}

void GanttView::clear()
{
    m_timeline = {};
    m_shortestOp = 0;
    m_rows.clear();
    m_memory.clear();
    m_transfers.clear();
    m_allreduce.clear();
    m_comm.clear();
    m_stepTime = 0;
    update();
}

void GanttView::layoutRows(GanttGeometry& geometry, const QSize& size) const
{
    const int height = size.height() - legendHeight(size.width());
    const int rows = std::max<std::size_t>(1, m_rows.size());
    // Narrow gaps when rows are many or the view is low, so that every stage keeps a row.
    geometry.rowGap = rows > 16 || height < geometry.rulerHeight + rows * 20 ? 2 : 6;
    const double available = height - geometry.rulerHeight - geometry.rowGap;
    geometry.rowHeight = std::clamp(available / rows - geometry.rowGap, 6.0, 52.0);
    geometry.labelWidth = rows > 16 ? 56 : 72;
}

void GanttView::fitToWindow()
{
    m_autoFit = true;
    m_geometry.fit(extent(), width());
    update();
    emit viewChanged();
}

void GanttView::zoomBy(double factor)
{
    m_autoFit = false;
    m_geometry.zoomAt(factor, m_geometry.labelWidth + m_geometry.plotWidth() / 2);
    update();
    emit viewChanged();
}

int GanttView::preferredHeight(int width) const
{
    return int(GanttGeometry{}.contentHeight(int(std::max<std::size_t>(1, m_rows.size())))) + 4 + legendHeight(width);
}

QSize GanttView::sizeHint() const
{
    return {900, std::clamp(preferredHeight(900) + 60, 160, 600)};
}

QSize GanttView::minimumSizeHint() const
{
    // Every stage a row of at least 6 px (layoutRows' floor): 16 stages must not lose the last four.
    GanttGeometry least;
    least.rowHeight = 6;
    least.rowGap = 2;
    return {
        300,
        std::max(120, int(least.contentHeight(int(std::max<std::size_t>(1, m_rows.size())))) + 4 + legendHeight(900))};
}

int GanttView::opAt(const QPointF& position) const
{
    const int row = m_geometry.rowAt(position.y(), int(m_rows.size()));
    if (row < 0 || position.x() < m_geometry.labelWidth)
        return -1;
    return GanttGeometry::blockAt(m_rows[std::size_t(row)], m_geometry.timeForX(position.x()));
}

QString GanttView::describeOp(int op) const
{
    if (op < 0 || op >= int(m_timeline.ops.size()))
        return {};
    const pl::TimedOp& o = m_timeline.ops[std::size_t(op)];
    const QString kind = o.kind == pl::OpKind::F ? tr("forward")
        : o.kind == pl::OpKind::B ? (m_timeline.split_backward ? tr("backward (input gradient)") : tr("backward"))
                                  : tr("backward (weight gradient)");
    QString text = tr("Stage %1 · %2 of microbatch %3").arg(o.stage).arg(kind).arg(o.microbatch);
    if (m_timeline.spec.virtual_stages > 1)
        text += tr(" · chunk %1").arg(o.chunk);
    text += tr("\n%1 – %2 ms (%3 ms)").arg(o.start, 0, 'f', 3).arg(o.end, 0, 'f', 3).arg(o.end - o.start, 0, 'f', 3);
    if (const pl::LayerComm* c = opCommunication(op)) {
        const bool fwd = o.kind == pl::OpKind::F;
        const double tensor = fwd ? c->tp_fwd + c->cp_fwd : c->tp_bwd + c->cp_bwd;
        const double expert = fwd ? c->ep_fwd : c->ep_bwd;
        if (tensor > 0 || expert > 0)
            text += tr("\nof which tp/cp collectives %1 ms, expert all-to-all %2 ms")
                        .arg(tensor, 0, 'f', 3)
                        .arg(expert, 0, 'f', 3);
    }
    return text;
}

void GanttView::paintFitted(QPainter& painter, const QSize& size) const
{
    GanttGeometry geometry = m_geometry;
    layoutRows(geometry, size);
    geometry.fit(extent(), size.width());
    paintTimeline(painter, geometry, QRect(QPoint(0, 0), size));
}

QImage GanttView::renderFitted(const QSize& size, qreal devicePixelRatio) const
{
    QImage image(size * devicePixelRatio, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(devicePixelRatio);
    QPainter painter(&image);
    paintFitted(painter, size);
    return image;
}

void GanttView::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    paintTimeline(painter, m_geometry, rect());
}

void GanttView::paintTimeline(QPainter& painter, const GanttGeometry& geometry, const QRect& rect) const
{
    const QPalette& pal = palette();
    painter.fillRect(rect, pal.color(QPalette::Base));
    if (m_rows.empty()) {
        painter.setPen(pal.color(QPalette::PlaceholderText));
        painter.drawText(rect, Qt::AlignCenter, tr("No schedule to show"));
        return;
    }
    painter.save();
    paintRuler(painter, geometry, rect);
    const double plotRight = rect.right() + 1;
    for (int row = 0; row < int(m_rows.size()); ++row)
        paintRow(painter, geometry, row, plotRight);
    paintStep(painter, geometry, plotRight);

    // The end of the step: where the last op (or the last all-reduce) finishes.
    const double endX = geometry.xForTime(extent());
    if (endX >= geometry.labelWidth && endX <= plotRight) {
        QPen pen(pal.color(QPalette::Text), 1, Qt::DashLine);
        painter.setPen(pen);
        painter.drawLine(QPointF(endX, geometry.rulerHeight - 4),
                         QPointF(endX, geometry.contentHeight(int(m_rows.size()))));
    }
    painter.restore();
    // Right under the rows (a tall window leaves air below them, not between rows and legend).
    const double legendTop = std::min<double>(geometry.contentHeight(int(m_rows.size())) + 2,
                                              rect.bottom() + 1 - legendHeight(rect.width()));
    paintLegend(painter, legendTop, rect.width());
}

void GanttView::paintRuler(QPainter& painter, const GanttGeometry& geometry, const QRect& rect) const
{
    const QPalette& pal = palette();
    painter.fillRect(QRectF(0, 0, rect.width(), geometry.rulerHeight), pal.color(QPalette::AlternateBase));
    const double step = geometry.tickStep(90);
    const double bottom = geometry.contentHeight(int(m_rows.size()));
    const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step)));
    QColor grid = pal.color(QPalette::Text);
    grid.setAlpha(28);
    QFont font = painter.font();
    font.setPointSizeF(font.pointSizeF() * 0.85);
    painter.setFont(font);
    const double first = std::ceil(std::max(0.0, geometry.viewStart) / step) * step;
    for (double t = first; t <= geometry.visibleEnd(); t += step) {
        const double x = geometry.xForTime(t);
        if (x < geometry.labelWidth)
            continue;
        painter.setPen(grid);
        painter.drawLine(QPointF(x, geometry.rulerHeight), QPointF(x, bottom));
        painter.setPen(pal.color(QPalette::Text));
        painter.drawLine(QPointF(x, geometry.rulerHeight - 6), QPointF(x, geometry.rulerHeight));
        const QString label = QStringLiteral("%1 ms").arg(t, 0, 'f', decimals);
        const double labelWidth = QFontMetricsF(font).horizontalAdvance(label);
        // Right of its tick, or left of it where the right edge would cut it ("130 m").
        const double left = x + 3 + labelWidth <= rect.right() ? x + 3 : x - 3 - labelWidth;
        painter.drawText(QPointF(left, geometry.rulerHeight - 9), label);
    }
    painter.setPen(pal.color(QPalette::Mid));
    painter.drawLine(QPointF(0, geometry.rulerHeight), QPointF(rect.width(), geometry.rulerHeight));
    // Zoomed in: where the view is in the whole step, a track under the ruler's labels.
    if (double from = 0, to = 0; geometry.visibleSpan(from, to)) {
        const double trackLeft = geometry.labelWidth, trackWidth = rect.width() - geometry.labelWidth - 4;
        QColor track = pal.color(QPalette::Text);
        track.setAlpha(40);
        painter.fillRect(QRectF(trackLeft, geometry.rulerHeight - 4, trackWidth, 3), track);
        painter.fillRect(
            QRectF(trackLeft + from * trackWidth, geometry.rulerHeight - 4, std::max(4.0, (to - from) * trackWidth), 3),
            pal.color(QPalette::Highlight));
    }
}

void GanttView::paintRow(QPainter& painter, const GanttGeometry& geometry, int row, double plotRight) const
{
    const QPalette& pal = palette();
    const double top = geometry.rowTop(row);
    const double h = geometry.rowHeight;

    // Rows lower than a line of text (16 stages in a small window): a label on every k-th row
    // only, each a line high and centred on its row, so that labels never run into each other.
    const double line = painter.fontMetrics().height();
    const int every = std::max(1, int(std::ceil(line / (h + geometry.rowGap))));
    // Over the memory limit: the label in the warning colour with a sign (paintStep frames the row).
    const bool over = stageOverLimit(row);
    painter.setPen(over ? severityColor(Severity::bad, pal) : pal.color(QPalette::Text));
    if (row % every == 0 || over)
        painter.drawText(QRectF(2, top + (h - line) / 2, geometry.labelWidth - 8, line),
                         Qt::AlignVCenter | Qt::AlignRight, over ? tr("⚠ Stage %1").arg(row) : tr("Stage %1").arg(row));

    painter.save();
    painter.setClipRect(QRectF(geometry.labelWidth, top, plotRight - geometry.labelWidth, h));
    // Idle time: the whole step is hatched first; busy blocks are painted over it.
    const double x0 = std::max(geometry.labelWidth, geometry.xForTime(0));
    const double x1 = std::min(plotRight, geometry.xForTime(m_timeline.makespan));
    if (x1 > x0) {
        // Drawn as lines rather than a pattern brush: SVG and PDF output keep the hatching.
        painter.save();
        painter.setClipRect(QRectF(x0, top, x1 - x0, h), Qt::IntersectClip);
        painter.setPen(QPen(idleHatchColor(pal), 1));
        const double spacing = 7;
        const double startX = x0 - h - std::fmod(x0 - geometry.labelWidth, spacing);
        for (double x = startX; x < x1; x += spacing)
            painter.drawLine(QPointF(x, top + h), QPointF(x + h, top));
        painter.restore();
    }

    const auto& blocks = m_rows[std::size_t(row)];
    const double tEnd = geometry.visibleEnd();
    const QFontMetrics metrics(painter.font());
    const QColor dense = pal.color(QPalette::Mid);
    double runStart = -1, runEnd = -1; // a run of merged sub-pixel blocks
    auto flushRun = [&] {
        if (runStart >= 0)
            painter.fillRect(QRectF(runStart, top, std::max(1.0, runEnd - runStart), h), dense);
        runStart = runEnd = -1;
    };
    painter.setRenderHint(QPainter::Antialiasing, false);
    for (std::size_t i = GanttGeometry::firstVisible(blocks, geometry.viewStart);
         i < blocks.size() && blocks[i].start < tEnd; ++i) {
        const double bx0 = geometry.xForTime(blocks[i].start);
        const double bx1 = geometry.xForTime(blocks[i].end);
        if (bx1 - bx0 < kMinBlockPixels) {
            if (runStart >= 0 && bx0 - runEnd < 1.0) {
                runEnd = std::max(runEnd, bx1);
            } else {
                flushRun();
                runStart = bx0;
                runEnd = bx1;
            }
            continue;
        }
        flushRun();
        const pl::TimedOp& op = m_timeline.ops[std::size_t(blocks[i].op)];
        const QColor fill = microbatchColor(op.microbatch, op.kind, pal);
        const QRectF box(bx0, top, bx1 - bx0 - (bx1 - bx0 > 5 ? 1.0 : 0.0), h);
        painter.fillRect(box, fill);
        if (box.width() > 8) {
            painter.setPen(fill.darker(135));
            painter.drawRect(box.adjusted(0, 0, -1, -1));
        }
        // With chunks "F0" alone would name two different ops: the chunk is always said, in
        // "F0·1" or, in a narrow block, "0·1" (the shade tells F from B); else no label at all.
        const QChar kind = QChar::fromLatin1(pl::to_char(op.kind));
        QString label = QStringLiteral("%1%2").arg(kind).arg(op.microbatch);
        if (m_timeline.spec.virtual_stages > 1) {
            label = QStringLiteral("%1%2·%3").arg(kind).arg(op.microbatch).arg(op.chunk);
            if (box.width() <= metrics.horizontalAdvance(label) + 4)
                label = QStringLiteral("%1·%2").arg(op.microbatch).arg(op.chunk);
        }
        if (box.width() > metrics.horizontalAdvance(label) + 4 && h >= metrics.height()) {
            painter.setPen(textOn(fill));
            painter.drawText(box, Qt::AlignCenter, label);
        }
    }
    flushRun();
    painter.restore();
}

void GanttView::resizeEvent(QResizeEvent*)
{
    layoutRows(m_geometry, size());
    if (m_autoFit)
        m_geometry.fit(extent(), width());
    else {
        m_geometry.width = width();
        m_geometry.clampView();
    }
}

void GanttView::wheelEvent(QWheelEvent* event)
{
    const double steps = event->angleDelta().y() / 120.0;
    if (event->modifiers() & Qt::ControlModifier) {
        m_autoFit = false;
        m_geometry.zoomAt(std::pow(1.25, steps), event->position().x());
    } else if (!m_autoFit || event->angleDelta().x() != 0) {
        const double dx = event->angleDelta().x() != 0 ? event->angleDelta().x() : event->angleDelta().y();
        m_geometry.panPixels(dx / 120.0 * 60.0);
    } else {
        event->ignore(); // fitted: let a surrounding scroll area have the wheel
        return;
    }
    event->accept();
    update();
    emit viewChanged();
}

void GanttView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton || event->button() == Qt::MiddleButton) {
        m_panning = true;
        m_lastPan = event->position();
        setCursor(Qt::ClosedHandCursor);
    }
}

void GanttView::mouseMoveEvent(QMouseEvent* event)
{
    if (!m_panning)
        return;
    const double dx = event->position().x() - m_lastPan.x();
    m_lastPan = event->position();
    if (dx != 0) {
        m_autoFit = false;
        m_geometry.panPixels(dx);
        update();
        emit viewChanged();
    }
}

void GanttView::mouseReleaseEvent(QMouseEvent*)
{
    m_panning = false;
    unsetCursor();
}

void GanttView::mouseDoubleClickEvent(QMouseEvent*)
{
    fitToWindow();
}

void GanttView::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoomBy(1.5); break;
    case Qt::Key_Minus: zoomBy(1 / 1.5); break;
    case Qt::Key_0: fitToWindow(); break;
    case Qt::Key_Left:
        m_autoFit = false;
        m_geometry.panPixels(80);
        update();
        break;
    case Qt::Key_Right:
        m_autoFit = false;
        m_geometry.panPixels(-80);
        update();
        break;
    default: QWidget::keyPressEvent(event);
    }
}

bool GanttView::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int op = opAt(help->pos());
        const QString step = op < 0 ? describeStep(help->pos()) : QString();
        if (op >= 0)
            QToolTip::showText(help->globalPos(), describeOp(op), this);
        else if (!step.isEmpty())
            QToolTip::showText(help->globalPos(), step, this);
        else if (help->pos().y() < m_geometry.rulerHeight || help->pos().x() < m_geometry.labelWidth)
            QToolTip::showText(help->globalPos(), toolTip(), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

} // namespace shardwidgets
