#include "app/shardscope/pagescrollarea.h"

#include <QEvent>
#include <QLayout>
#include <QStackedWidget>
#include <algorithm>

PageScrollArea::PageScrollArea(QWidget* page, QWidget* parent) : QScrollArea(parent)
{
    setFrameShape(QFrame::NoFrame);
    setWidgetResizable(false); // fit() sizes the page
    setWidget(page);
    page->installEventFilter(this);
}

void PageScrollArea::resizeEvent(QResizeEvent* event)
{
    QScrollArea::resizeEvent(event);
    fit();
}

bool PageScrollArea::eventFilter(QObject* watched, QEvent* event)
{
    // A page's content changed (a banner appeared, a row wrapped): it may need more or less.
    if (watched == widget() && event->type() == QEvent::LayoutRequest)
        fit();
    return QScrollArea::eventFilter(watched, event);
}

void PageScrollArea::fit()
{
    QWidget* page = widget();
    if (!page || m_fitting)
        return;
    m_fitting = true; // resizing the page can show a scroll bar, which resizes the viewport
    // The checkpoint tab is a stack (welcome page, checkpoint page): what counts is the one shown.
    QWidget* content = page;
    if (auto* stack = qobject_cast<QStackedWidget*>(page); stack && stack->currentWidget())
        content = stack->currentWidget();
    const QSize least = content->minimumSizeHint().expandedTo(content->minimumSize());
    const int width = std::max(viewport()->width(), least.width());
    int height = least.height();
    if (content->layout() && content->layout()->hasHeightForWidth())
        height = std::max(height, content->layout()->totalMinimumHeightForWidth(width));
    page->resize(width, std::max(viewport()->height(), height));
    m_fitting = false;
}
