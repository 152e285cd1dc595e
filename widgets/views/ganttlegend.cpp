// GanttView's legend and caption: what every mark on the timeline means, drawn by the view
// itself so that the window, the PNG and the SVG explain the same picture the same way.
#include "widgets/views/ganttview.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/statusstyle.h"

#include <QFontMetricsF>
#include <QPainter>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {

constexpr double kSwatch = 22; // width of a legend entry's sample mark
constexpr double kGap = 14; // between entries
constexpr double kPad = 4; // above and below the legend's lines

QColor allReduceSwatch(const QPalette& palette)
{
    return isDark(palette) ? QColor(0xb3, 0x9d, 0xdb) : QColor(0x6f, 0x4e, 0xb0); // as ganttstep.cpp
}

QString scheduleName(const pl::ScheduleSpec& spec)
{
    switch (spec.kind) {
    case pl::ScheduleKind::gpipe: return QStringLiteral("GPipe");
    case pl::ScheduleKind::one_f_one_b: return QStringLiteral("1F1B");
    case pl::ScheduleKind::interleaved: return QStringLiteral("Interleaved 1F1B (v = %1)").arg(spec.virtual_stages);
    case pl::ScheduleKind::zb_h1: return QStringLiteral("ZB-H1");
    case pl::ScheduleKind::zb_h2: return QStringLiteral("ZB-H2");
    case pl::ScheduleKind::zb_v: return QStringLiteral("ZB-V (chunk 1 is the V's way back)");
    case pl::ScheduleKind::dualpipe_v: return QStringLiteral("DualPipeV (chunk 1 is the V's way back)");
    case pl::ScheduleKind::custom: return QStringLiteral("Custom schedule (CSV)");
    }
    return QString::fromUtf8(pl::to_string(spec.kind));
}

} // namespace

std::vector<GanttView::LegendEntry> GanttView::legend(double width) const
{
    std::vector<LegendEntry> entries;
    if (m_rows.empty())
        return entries;
    const bool split = m_timeline.split_backward;
    const bool chunks = m_timeline.spec.virtual_stages > 1;
    entries.push_back({Mark::forward, chunks ? tr("F forward (F0·1: microbatch 0, chunk 1)") : tr("F forward")});
    entries.push_back({Mark::backward, split ? tr("B backward, input gradient") : tr("B backward")});
    if (split)
        entries.push_back({Mark::weight, tr("W backward, weight gradient")});
    entries.push_back({Mark::note, tr("hue = microbatch")});
    entries.push_back({Mark::idle, tr("idle (bubble)")});
    GanttGeometry fitted = m_geometry;
    fitted.fit(extent(), width < 0 ? double(this->width()) : width);
    if (m_shortestOp > 0 && m_shortestOp / fitted.msPerPixel < kMinBlockPixels)
        entries.push_back({Mark::merged, tr("ops too short to draw apart (Ctrl+wheel zooms in)")});
    if (!m_allreduce.empty())
        entries.push_back({Mark::allReduce, tr("gradient all-reduce")});
    if (!m_transfers.empty()) {
        entries.push_back({Mark::send, tr("activation send")});
        entries.push_back({Mark::gradientSend, tr("gradient send")});
    }
    bool tensor = false, expert = false;
    for (const pl::LayerComm& c : m_comm) {
        tensor = tensor || c.tp_fwd + c.cp_fwd + c.tp_bwd + c.cp_bwd > 0;
        expert = expert || c.ep_fwd + c.ep_bwd > 0;
    }
    if (tensor)
        entries.push_back({Mark::tensorComm, tr("tp/cp collectives inside F and B (at the op's end)")});
    if (expert)
        entries.push_back({Mark::expertComm, tr("expert all-to-all inside F and B")});
    if (m_memoryLimit)
        entries.push_back({Mark::overMemory, tr("stage over the GPU memory")});
    entries.push_back(
        {Mark::stepEnd,
         m_allreduce.empty() ? tr("step end (= makespan)") : tr("step end (makespan + exposed all-reduce)")});
    return entries;
}

QFont GanttView::legendFont() const
{
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    return f;
}

int GanttView::legendHeight(double width) const
{
    const std::vector<LegendEntry> entries = legend(width);
    if (entries.empty())
        return 0;
    const QFontMetricsF metrics(legendFont());
    std::vector<double> widths;
    for (const LegendEntry& e : entries)
        widths.push_back((e.mark == Mark::note ? 0 : kSwatch + 5) + metrics.horizontalAdvance(e.text));
    const auto places = GanttGeometry::flowLegend(widths, 8, std::max(100.0, width - 8), kGap);
    const int lines = places.back().line + 1;
    return int(std::ceil(lines * (metrics.height() + 4) + 2 * kPad));
}

void GanttView::paintLegend(QPainter& painter, double top, double width) const
{
    const std::vector<LegendEntry> entries = legend(width);
    if (entries.empty())
        return;
    const QPalette& pal = palette();
    painter.save();
    painter.setFont(legendFont());
    const QFontMetricsF metrics(painter.font());
    const double lineHeight = metrics.height() + 4;
    std::vector<double> widths;
    for (const LegendEntry& e : entries)
        widths.push_back((e.mark == Mark::note ? 0 : kSwatch + 5) + metrics.horizontalAdvance(e.text));
    const auto places = GanttGeometry::flowLegend(widths, 8, std::max(100.0, width - 8), kGap);
    painter.setPen(pal.color(QPalette::Mid));
    painter.drawLine(QPointF(0, top), QPointF(width, top));
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const LegendEntry& e = entries[i];
        const double y = top + kPad + places[i].line * lineHeight;
        const QRectF swatch(places[i].x, y + 2, kSwatch, lineHeight - 4);
        painter.setRenderHint(QPainter::Antialiasing, false);
        switch (e.mark) {
        case Mark::forward:
        case Mark::backward:
        case Mark::weight: {
            const pl::OpKind kind = e.mark == Mark::forward ? pl::OpKind::F
                : e.mark == Mark::backward                  ? pl::OpKind::B
                                                            : pl::OpKind::W;
            const QColor fill = microbatchColor(0, kind, pal);
            painter.fillRect(swatch, fill);
            painter.setPen(textOn(fill));
            painter.drawText(swatch, Qt::AlignCenter, QString(QChar::fromLatin1(pl::to_char(kind))));
            break;
        }
        case Mark::idle:
            painter.save();
            painter.setClipRect(swatch);
            painter.setPen(QPen(idleHatchColor(pal), 1));
            for (double x = swatch.left() - swatch.height(); x < swatch.right(); x += 7)
                painter.drawLine(QPointF(x, swatch.bottom()), QPointF(x + swatch.height(), swatch.top()));
            painter.restore();
            painter.setPen(pal.color(QPalette::Mid));
            painter.drawRect(swatch);
            break;
        case Mark::allReduce: painter.fillRect(swatch, allReduceSwatch(pal)); break;
        case Mark::merged: painter.fillRect(swatch, pal.color(QPalette::Mid)); break; // as paintRow's runs
        case Mark::overMemory:
            painter.setPen(QPen(severityColor(Severity::bad, pal), 2));
            painter.drawRect(swatch.adjusted(1, 1, -1, -1));
            break;
        case Mark::send:
        case Mark::gradientSend: {
            QColor ink = pal.color(QPalette::Text);
            ink.setAlpha(150);
            painter.setRenderHint(QPainter::Antialiasing, true);
            painter.setPen(QPen(ink, 1.2, e.mark == Mark::send ? Qt::SolidLine : Qt::DashLine));
            painter.drawLine(swatch.bottomLeft(), swatch.topRight());
            break;
        }
        case Mark::tensorComm:
        case Mark::expertComm:
            painter.fillRect(swatch, microbatchColor(0, pl::OpKind::F, pal));
            painter.fillRect(swatch,
                             e.mark == Mark::tensorComm ? QBrush(tensorCommColor(pal), Qt::Dense4Pattern)
                                                        : QBrush(expertCommColor(pal), Qt::DiagCrossPattern));
            break;
        case Mark::stepEnd:
            painter.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DashLine));
            painter.drawLine(QPointF(swatch.center().x(), swatch.top()), QPointF(swatch.center().x(), swatch.bottom()));
            break;
        case Mark::note: break;
        }
        const double textLeft = e.mark == Mark::note ? places[i].x : swatch.right() + 5;
        painter.setPen(e.mark == Mark::note ? pal.color(QPalette::PlaceholderText) : pal.color(QPalette::Text));
        painter.drawText(QRectF(textLeft, y, width - textLeft, lineHeight), Qt::AlignLeft | Qt::AlignVCenter, e.text);
    }
    painter.restore();
}

QString GanttView::caption() const
{
    if (m_rows.empty())
        return {};
    const pl::ScheduleSpec& spec = m_timeline.spec;
    QString text = tr("%1 · %2 stages · %3 microbatches · bubble %4 % · step time %5 ms")
                       .arg(scheduleName(spec))
                       .arg(spec.stages)
                       .arg(spec.microbatches)
                       .arg(m_timeline.bubble_fraction * 100.0, 0, 'f', 1)
                       .arg(extent(), 0, 'f', 2);
    if (!m_profileName.isEmpty())
        text += tr(" · profile %1").arg(m_profileName);
    return text;
}

QSize GanttView::exportSize(int width) const
{
    const QFontMetricsF metrics(font());
    return {width, preferredHeight(width) + int(std::ceil(metrics.height() + 12))};
}

void GanttView::paintExport(QPainter& painter, const QSize& size) const
{
    const QFontMetricsF metrics(font());
    const int band = int(std::ceil(metrics.height() + 12));
    const QPalette& pal = palette();
    painter.fillRect(QRect(0, 0, size.width(), band), pal.color(QPalette::Base));
    painter.save();
    QFont bold = font();
    bold.setBold(true);
    painter.setFont(bold);
    painter.setPen(pal.color(QPalette::Text));
    painter.drawText(QRectF(8, 0, size.width() - 16, band), Qt::AlignLeft | Qt::AlignVCenter,
                     QFontMetricsF(bold).elidedText(caption(), Qt::ElideRight, size.width() - 16));
    painter.restore();
    painter.save();
    painter.translate(0, band);
    paintFitted(painter, QSize(size.width(), size.height() - band));
    painter.restore();
}

} // namespace shardwidgets
