// GanttView's training-step layer: what make_step_plan adds around the op blocks.
// Kept apart from ganttview.cpp so that the op painting, which must stay fast for 100k ops,
// reads on its own.
#include "widgets/views/ganttview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QPainter>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {

// Sends are drawn only while they stay readable: beyond this many in view they are a grey wash
// that hides the blocks, and the tooltip/legend still say they exist.
constexpr std::size_t kMostSendLines = 4000;

QColor allReduceColor(const QPalette& palette)
{
    return isDark(palette) ? QColor(0xb3, 0x9d, 0xdb) : QColor(0x6f, 0x4e, 0xb0);
}

} // namespace

void GanttView::setCommunication(const std::vector<pl::LayerComm>& perPiece, const std::vector<pl::PieceCost>& pieces)
{
    m_comm.clear();
    const int v = std::max(1, m_timeline.spec.virtual_stages);
    bool any = false;
    for (const pl::LayerComm& c : perPiece)
        any = any || c.fwd() > 0 || c.bwd() > 0;
    if (any && perPiece.size() == pieces.size() && pieces.size() == std::size_t(m_timeline.spec.stages * v)) {
        m_comm.resize(pieces.size());
        for (std::size_t p = 0; p < pieces.size(); ++p)
            m_comm[std::size_t(pieces[p].stage * v + pieces[p].chunk)] = perPiece[p];
    }
    updateGeometry(); // the legend may have grown
    update();
}

const pl::LayerComm* GanttView::opCommunication(int op) const
{
    if (m_comm.empty() || op < 0 || op >= int(m_timeline.ops.size()))
        return nullptr;
    const pl::TimedOp& o = m_timeline.ops[std::size_t(op)];
    const std::size_t at = std::size_t(o.stage * std::max(1, m_timeline.spec.virtual_stages) + o.chunk);
    return at < m_comm.size() ? &m_comm[at] : nullptr;
}

void GanttView::paintCommunication(QPainter& painter, const GanttGeometry& geometry) const
{
    if (m_comm.empty())
        return;
    // The op's last `comm` ms, patterned so the microbatch's hue still shows through: tp/cp
    // dense dots, the expert all-to-all cross-hatched (told apart without colour when wide).
    const QBrush tensor(tensorCommColor(palette()), Qt::Dense4Pattern);
    const QBrush expert(expertCommColor(palette()), Qt::DiagCrossPattern);
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(Qt::NoPen);
    for (std::size_t row = 0; row < m_rows.size(); ++row) {
        const double top = geometry.rowTop(int(row)) + 1, h = geometry.rowHeight - 2;
        for (const GanttBlock& block : m_rows[row]) {
            if (block.end < geometry.viewStart || block.start > geometry.visibleEnd())
                continue;
            const pl::TimedOp& o = m_timeline.ops[std::size_t(block.op)];
            if (o.kind == pl::OpKind::W)
                continue;
            const pl::LayerComm* c = opCommunication(block.op);
            if (!c)
                continue;
            const bool fwd = o.kind == pl::OpKind::F;
            const double ep = fwd ? c->ep_fwd : c->ep_bwd;
            const double tp = fwd ? c->tp_fwd + c->cp_fwd : c->tp_bwd + c->cp_bwd;
            const double epStart = geometry.xForTime(o.end - ep), end = geometry.xForTime(o.end);
            const double tpStart = geometry.xForTime(o.end - ep - tp);
            if (end - tpStart < 1.0)
                continue; // sub-pixel: the legend and the tooltip still say it is there
            // A pattern a few pixels wide reads as noise: narrow shares are solid edges.
            const auto fill = [&](double left, double right, const QBrush& brush) {
                const double w = std::max(1.0, right - left);
                painter.fillRect(QRectF(left, top, w, h), w < 6 ? QBrush(brush.color()) : brush);
            };
            if (tp > 0)
                fill(tpStart, epStart, tensor);
            if (ep > 0)
                fill(epStart, end, expert);
        }
    }
    painter.restore();
}

void GanttView::paintStep(QPainter& painter, const GanttGeometry& geometry, double plotRight) const
{
    if (m_rows.empty())
        return;
    const QPalette& pal = palette();
    const int rows = int(m_rows.size());
    painter.save();
    painter.setClipRect(QRectF(geometry.labelWidth, geometry.rulerHeight, plotRight - geometry.labelWidth,
                               geometry.contentHeight(rows) - geometry.rulerHeight));
    paintCommunication(painter, geometry);

    // All-reduce: a band in the lower half of the stage's row, labelled when it is wide enough.
    const QColor reduce = allReduceColor(pal);
    for (const pl::AllReduce& a : m_allreduce) {
        if (a.stage < 0 || a.stage >= rows || a.end <= a.start)
            continue;
        const double top = geometry.rowTop(a.stage), h = geometry.rowHeight;
        const QRectF band(geometry.xForTime(a.start), top + h * 0.45,
                          std::max(1.0, geometry.xForTime(a.end) - geometry.xForTime(a.start)), h * 0.55);
        painter.fillRect(band, reduce);
        const QString label = tr("all-reduce");
        if (band.width() > painter.fontMetrics().horizontalAdvance(label) + 6 &&
            band.height() >= painter.fontMetrics().height()) {
            painter.setPen(textOn(reduce));
            painter.drawText(band, Qt::AlignCenter, label);
        }
    }

    // Sends: sender's end -> receiver's earliest start, centre of one row to centre of the other;
    // gradients going back dashed, so the two directions are told apart without colour.
    std::size_t visible = 0;
    for (const pl::Transfer& t : m_transfers)
        visible += t.end >= geometry.viewStart && t.start <= geometry.visibleEnd();
    // And at least a few pixels of plot per send: denser, they hatch the blocks grey (zoom in).
    const double plotWidth = plotRight - geometry.labelWidth;
    if (visible > 0 && visible <= kMostSendLines && double(visible) <= plotWidth / 3) {
        painter.setRenderHint(QPainter::Antialiasing, true);
        QColor ink = pal.color(QPalette::Text);
        ink.setAlpha(150);
        QPen forward(ink, 1.2), backward(ink, 1.2, Qt::DashLine);
        for (const pl::Transfer& t : m_transfers) {
            if (t.end < geometry.viewStart || t.start > geometry.visibleEnd())
                continue;
            if (t.from_stage < 0 || t.from_stage >= rows || t.to_stage < 0 || t.to_stage >= rows)
                continue;
            const double y0 = geometry.rowTop(t.from_stage) + geometry.rowHeight / 2;
            const double y1 = geometry.rowTop(t.to_stage) + geometry.rowHeight / 2;
            painter.setPen(t.after == pl::OpKind::F ? forward : backward);
            painter.drawLine(QPointF(geometry.xForTime(t.start), y0), QPointF(geometry.xForTime(t.end), y1));
        }
    }
    painter.restore();

    // Over the limit: the whole row framed in the warning colour (the label says it in words).
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(QPen(severityColor(Severity::bad, pal), 2));
    painter.setBrush(Qt::NoBrush);
    for (int row = 0; row < rows; ++row)
        if (stageOverLimit(row))
            painter.drawRect(QRectF(geometry.labelWidth - 1, geometry.rowTop(row) - 1,
                                    std::min(plotRight, geometry.xForTime(extent())) - geometry.labelWidth + 2,
                                    geometry.rowHeight + 2));
    painter.restore();
}

QString GanttView::describeStep(const QPointF& position) const
{
    const int row = m_geometry.rowAt(position.y(), int(m_rows.size()));
    if (row < 0)
        return {};
    if (position.x() < m_geometry.labelWidth) {
        if (!stageOverLimit(row) || !m_memoryLimit)
            return {};
        const auto& m = m_memory[std::size_t(row)];
        return tr("Stage %1 needs %2 per GPU, %3 over the %4 limit")
            .arg(row)
            .arg(formatBytes(uint64_t(m.total)), formatBytes(uint64_t(m.total - *m_memoryLimit)),
                 formatBytes(uint64_t(*m_memoryLimit)));
    }
    const double t = m_geometry.timeForX(position.x());
    for (const pl::AllReduce& a : m_allreduce)
        if (a.stage == row && t >= a.start && t <= a.end)
            return tr("Stage %1 · gradient all-reduce of %2\n%3 – %4 ms (%5 ms)")
                .arg(row)
                .arg(formatBytes(uint64_t(std::max<std::int64_t>(0, a.bytes))))
                .arg(a.start, 0, 'f', 3)
                .arg(a.end, 0, 'f', 3)
                .arg(a.end - a.start, 0, 'f', 3);
    return {};
}

} // namespace shardwidgets
