#include "widgets/views/hovertext.h"

#include <QHelpEvent>
#include <QToolTip>
#include <QWidget>

namespace shardwidgets {

bool showHoverText(QWidget* widget, QEvent* event, const std::function<QString(const QPointF&)>& describe)
{
    if (event->type() != QEvent::ToolTip)
        return false;
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = describe(help->pos());
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(help->globalPos(), text, widget);
    return true;
}

} // namespace shardwidgets
