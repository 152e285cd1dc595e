#include "widgets/views/chartaxes.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPalette>

namespace shardwidgets {

void paintChartAxes(QPainter& painter, const ChartGeometry& g, const QPalette& palette, const QString& xTitle,
                    const QString& yTitle, const TickText& xText, const TickText& yText, int xTickCount, int yTickCount)
{
    painter.save();
    const QRectF plot(QPointF(g.plotLeft(), g.plotTop()), QPointF(g.plotRight(), g.plotBottom()));
    painter.fillRect(plot, palette.color(QPalette::Base));
    QColor grid = palette.color(QPalette::Text);
    grid.setAlpha(30);
    const QColor text = palette.color(QPalette::Text);
    const QFontMetricsF metrics(painter.font());
    for (double v : ChartGeometry::ticks(g.xMin, g.xMax, xTickCount)) {
        const double x = g.xForValue(v);
        painter.setPen(grid);
        painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
        painter.setPen(text);
        const QString label = xText(v);
        const double w = metrics.horizontalAdvance(label);
        // Kept inside the widget: a label at the right end is not cut in half.
        const double left = std::clamp(x - w / 2, 0.0, g.width - w - 1);
        painter.drawText(QPointF(left, plot.bottom() + metrics.ascent() + 3), label);
    }
    for (double v : ChartGeometry::ticks(g.yMin, g.yMax, yTickCount)) {
        const double y = g.yForValue(v);
        painter.setPen(grid);
        painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        painter.setPen(text);
        painter.drawText(QRectF(0, y - metrics.height() / 2, plot.left() - 5, metrics.height()),
                         Qt::AlignRight | Qt::AlignVCenter, yText(v));
    }
    painter.setPen(palette.color(QPalette::Mid));
    painter.drawRect(plot);
    painter.setPen(text);
    painter.drawText(QRectF(plot.left(), g.height - metrics.height() - 2, plot.width(), metrics.height()),
                     Qt::AlignHCenter | Qt::AlignBottom, xTitle);
    // The y title turned upright along the left edge.
    painter.translate(2, plot.center().y());
    painter.rotate(-90);
    painter.drawText(QRectF(-plot.height() / 2, 0, plot.height(), metrics.height()), Qt::AlignCenter, yTitle);
    painter.restore();
}

} // namespace shardwidgets
