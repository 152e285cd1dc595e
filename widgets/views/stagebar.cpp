#include "widgets/views/stagebar.h"

#include "widgets/style/chartcolors.h"
#include "widgets/style/format.h"
#include "widgets/jobs/pipelineplanner.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace shardwidgets {

StageBar::StageBar(PipelinePlanner* planner, QWidget* parent) : QWidget(parent), m_planner(planner)
{
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setAccessibleName(tr("Stage boundaries"));
    connect(m_planner, &PipelinePlanner::planChanged, this, [this] {
        if (m_selected >= int(m_planner->boundaries().size()))
            m_selected = -1;
        update();
    });
}

QSize StageBar::sizeHint() const
{
    return {900, 66};
}

QSize StageBar::minimumSizeHint() const
{
    return {240, 66};
}

std::vector<double> StageBar::layerCosts() const
{
    std::vector<double> costs;
    costs.reserve(m_planner->profile().layers.size());
    for (const auto& layer : m_planner->profile().layers)
        costs.push_back(layer.fwd_ms + layer.bwd_ms);
    return costs;
}

StageBarGeometry StageBar::barGeometry() const
{
    StageBarGeometry geometry = StageBarGeometry::layout(layerCosts(), 8, std::max(1, width() - 16));
    geometry.grabTolerance = 6;
    return geometry;
}

int StageBar::stageOfLayer(int layer) const
{
    const auto& boundaries = m_planner->boundaries();
    const int piece = int(std::upper_bound(boundaries.begin(), boundaries.end(), layer) - boundaries.begin());
    return piece % std::max(1, m_planner->spec().stages);
}

std::vector<StageBar::Piece> StageBar::pieces() const
{
    const auto& boundaries = m_planner->boundaries();
    const int layers = int(m_planner->profile().layers.size());
    std::vector<Piece> result;
    if (boundaries.empty() || layers == 0)
        return result;
    for (std::size_t piece = 0; piece <= boundaries.size(); ++piece)
        result.push_back(
            {piece == 0 ? 0 : boundaries[piece - 1], piece == boundaries.size() ? layers - 1 : boundaries[piece] - 1});
    return result;
}

QStringList StageBar::captions() const
{
    const auto all = pieces();
    const int stages = std::max(1, m_planner->spec().stages);
    const bool chunks = int(all.size()) > stages; // interleaved or a V: several chunks per stage
    namespace pl = shardscope::pipeline;
    const pl::Placement placement = pl::placement_of(m_planner->spec());
    // Longest first: the stage with its layer range, shorter with the range, the stage alone, its
    // bare number.
    std::vector<QStringList> forms(4);
    for (std::size_t i = 0; i < all.size(); ++i) {
        const int piece = int(i), first = all[i].first, last = all[i].last;
        const int stage = pl::stage_of_piece(piece, stages, placement);
        const QString shortName =
            chunks ? tr("S%1.%2").arg(stage).arg(pl::chunk_of_piece(piece, stages, placement)) : tr("S%1").arg(piece);
        const QString range = QStringLiteral("%1–%2").arg(first).arg(last); // as the stage table: "33–33"
        forms[0] << tr("%1 · %2").arg(chunks ? shortName : tr("Stage %1").arg(piece), range);
        forms[1] << tr("%1 · %2").arg(shortName, range);
        forms[2] << shortName;
        forms[3] << QString::number(stage);
    }
    const StageBarGeometry geometry = barGeometry();
    const QFontMetricsF metrics(font());
    std::vector<double> room;
    std::vector<std::vector<double>> widths(forms.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        room.push_back(geometry.edgeX(all[i].last + 1) - geometry.edgeX(all[i].first));
        for (std::size_t f = 0; f < forms.size(); ++f)
            widths[f].push_back(metrics.horizontalAdvance(forms[f][int(i)]));
    }
    const int form = StageBarGeometry::captionForm(room, widths);
    QStringList result;
    for (std::size_t i = 0; i < all.size(); ++i)
        result << (StageBarGeometry::captionFits(widths[std::size_t(form)][i], room[i])
                       ? forms[std::size_t(form)][int(i)]
                       : QString());
    return result;
}

void StageBar::setSelectedBoundary(int index)
{
    m_selected = index >= 0 && index < int(m_planner->boundaries().size()) ? index : -1;
    update();
}

void StageBar::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    const QPalette& pal = palette();
    painter.fillRect(rect(), pal.color(QPalette::Window));
    const StageBarGeometry geometry = barGeometry();
    const double top = barTop(), h = barHeight();
    if (geometry.layerCount() == 0)
        return;

    for (int layer = 0; layer < geometry.layerCount(); ++layer) {
        const double x0 = geometry.edgeX(layer), x1 = geometry.edgeX(layer + 1);
        QColor fill = categoryColor(stageOfLayer(layer), pal);
        if (layer % 2)
            fill = isDark(pal) ? fill.lighter(118) : fill.darker(112); // layers stay countable
        painter.fillRect(QRectF(x0, top, x1 - x0, h), fill);
    }
    painter.setPen(pal.color(QPalette::Mid));
    painter.drawRect(QRectF(geometry.edgeX(0), top, geometry.edges.back() - geometry.edgeX(0), h));

    // Piece captions under the bar: stage (and chunk) with its layer range, all in one form.
    const QStringList texts = captions();
    const auto all = pieces();
    const QFontMetrics metrics(font());
    painter.setPen(pal.color(QPalette::Text));
    for (std::size_t piece = 0; piece < all.size(); ++piece) {
        const double x0 = geometry.edgeX(all[piece].first), x1 = geometry.edgeX(all[piece].last + 1);
        if (!texts[int(piece)].isEmpty())
            painter.drawText(QRectF(x0, top + h + 2, x1 - x0, metrics.height()), Qt::AlignCenter, texts[int(piece)]);
    }

    const auto& boundaries = m_planner->boundaries();
    // Handles: a line across the bar and a grip above it; the selected/dragged one stands out.
    for (int i = 0; i < int(boundaries.size()); ++i) {
        const double x = geometry.edgeX(boundaries[std::size_t(i)]);
        const bool active = i == m_dragging || i == m_selected;
        const bool hover = i == m_hover;
        const QColor color = active ? pal.color(QPalette::Highlight) : pal.color(QPalette::Text);
        painter.setPen(QPen(color, active || hover ? 3 : 2));
        painter.drawLine(QPointF(x, top - 5), QPointF(x, top + h + 1));
        painter.setBrush(color);
        painter.setPen(Qt::NoPen);
        painter.setRenderHint(QPainter::Antialiasing);
        const QPointF grip[] = {{x - 5, top - 7}, {x + 5, top - 7}, {x, top - 1}};
        painter.drawPolygon(grip, 3);
        painter.setRenderHint(QPainter::Antialiasing, false);
    }
    if (hasFocus() && m_selected < 0 && !boundaries.empty()) {
        painter.setPen(QPen(pal.color(QPalette::Highlight), 1, Qt::DotLine));
        painter.setBrush(Qt::NoBrush);
        painter.drawRect(rect().adjusted(1, 1, -2, -2));
    }
}

void StageBar::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return;
    const int index = barGeometry().boundaryAt(m_planner->boundaries(), event->position().x());
    if (index >= 0) {
        m_dragging = index;
        m_selected = index;
        setCursor(Qt::SplitHCursor);
        update();
    }
}

void StageBar::mouseMoveEvent(QMouseEvent* event)
{
    const StageBarGeometry geometry = barGeometry();
    if (m_dragging >= 0) {
        const int edge = geometry.snapEdge(event->position().x());
        if (m_planner->moveBoundary(m_dragging, edge))
            emit boundaryDragged(m_dragging, m_planner->boundaries()[std::size_t(m_dragging)]);
        return;
    }
    const int hover = geometry.boundaryAt(m_planner->boundaries(), event->position().x());
    if (hover != m_hover) {
        m_hover = hover;
        if (hover >= 0)
            setCursor(Qt::SplitHCursor);
        else
            unsetCursor();
        update();
    }
}

void StageBar::mouseReleaseEvent(QMouseEvent* event)
{
    if (m_dragging >= 0 && event->button() == Qt::LeftButton) {
        const int edge = barGeometry().snapEdge(event->position().x());
        m_planner->moveBoundary(m_dragging, edge);
        m_dragging = -1;
        unsetCursor();
        update();
    }
}

void StageBar::keyPressEvent(QKeyEvent* event)
{
    const int count = int(m_planner->boundaries().size());
    if (count == 0)
        return QWidget::keyPressEvent(event);
    switch (event->key()) {
    case Qt::Key_Left:
    case Qt::Key_Right: {
        if (m_selected < 0)
            m_selected = 0;
        const int step = event->key() == Qt::Key_Left ? -1 : 1;
        m_planner->moveBoundary(m_selected, m_planner->boundaries()[std::size_t(m_selected)] + step);
        update();
        break;
    }
    case Qt::Key_Up:
    case Qt::Key_Down: {
        const int step = event->key() == Qt::Key_Up ? -1 : 1;
        m_selected = m_selected < 0 ? 0 : (m_selected + step + count) % count;
        update();
        break;
    }
    default: QWidget::keyPressEvent(event);
    }
}

bool StageBar::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const StageBarGeometry geometry = barGeometry();
        const int boundary = geometry.boundaryAt(m_planner->boundaries(), help->pos().x());
        const int layer = geometry.layerAt(help->pos().x());
        if (boundary >= 0) {
            QToolTip::showText(help->globalPos(),
                               tr("Boundary %1: stage %2 starts at layer %3\nDrag it, or select it and "
                                  "use the arrow keys")
                                   .arg(boundary)
                                   .arg((boundary + 1) % std::max(1, m_planner->spec().stages))
                                   .arg(m_planner->boundaries()[std::size_t(boundary)]),
                               this);
        } else if (layer >= 0) {
            const auto& l = m_planner->profile().layers[std::size_t(layer)];
            QToolTip::showText(help->globalPos(),
                               tr("Layer %1 “%2” on stage %3\nforward %4 ms · backward %5 ms\n%6 "
                                  "parameters · %7 activation bytes")
                                   .arg(layer)
                                   .arg(printableText(l.name))
                                   .arg(stageOfLayer(layer))
                                   .arg(l.fwd_ms, 0, 'f', 3)
                                   .arg(l.bwd_ms, 0, 'f', 3)
                                   .arg(l.params)
                                   .arg(l.activation_bytes),
                               this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(event);
}

} // namespace shardwidgets
