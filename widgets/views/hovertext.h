#pragma once
// The charts explain what is under the mouse in a tooltip: one place that answers Qt's tooltip
// request with the chart's own description of a point.

#include <QPointF>
#include <QString>
#include <functional>

class QEvent;
class QWidget;

namespace shardwidgets {

// For a QEvent::ToolTip on `widget`: shows describe(position), or hides the tooltip when that is
// empty, and returns true. Any other event: false (the caller passes it on).
bool showHoverText(QWidget* widget, QEvent* event, const std::function<QString(const QPointF&)>& describe);

} // namespace shardwidgets
