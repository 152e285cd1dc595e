#include "widgets/style/flowlayout.h"

#include <QSpacerItem>
#include <QStyle>
#include <QWidget>
#include <algorithm>

namespace shardwidgets {

FlowLayout::FlowLayout(QWidget* parent) : QLayout(parent)
{
    setContentsMargins(0, 0, 0, 0);
}

FlowLayout::~FlowLayout()
{
    while (QLayoutItem* item = takeAt(0))
        delete item;
}

void FlowLayout::addSpacing(int width)
{
    addItem(new QSpacerItem(width, 0, QSizePolicy::Fixed, QSizePolicy::Minimum));
}

void FlowLayout::addItem(QLayoutItem* item)
{
    m_items.append(item);
    invalidate();
}

QLayoutItem* FlowLayout::takeAt(int index)
{
    if (index < 0 || index >= m_items.size())
        return nullptr;
    invalidate();
    return m_items.takeAt(index);
}

QSize FlowLayout::minimumSize() const
{
    // As narrow as its widest item: everything else can go to another line.
    QSize size;
    for (const QLayoutItem* item : m_items)
        size = size.expandedTo(item->minimumSize());
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

QSize FlowLayout::sizeHint() const
{
    // One line of every item at its preferred size.
    int width = 0, height = 0;
    const int gap = spacing() >= 0 ? spacing() : 6;
    for (const QLayoutItem* item : m_items) {
        width += item->sizeHint().width() + (width ? gap : 0);
        height = std::max(height, item->sizeHint().height());
    }
    const QMargins m = contentsMargins();
    return {width + m.left() + m.right(), height + m.top() + m.bottom()};
}

void FlowLayout::setGeometry(const QRect& rect)
{
    QLayout::setGeometry(rect);
    arrange(rect, true);
}

int FlowLayout::arrange(const QRect& rect, bool apply) const
{
    const QRect area = rect.marginsRemoved(contentsMargins());
    const int gap = spacing() >= 0 ? spacing() : 6;
    int x = area.x(), y = area.y(), lineHeight = 0;
    QList<QPair<QLayoutItem*, QRect>> line; // the current line, placed once its height is known
    auto flush = [&] {
        for (const auto& [item, box] : line) // centred vertically in the line, as in a toolbar
            item->setGeometry(QRect(box.x(), y + (lineHeight - box.height()) / 2, box.width(), box.height()));
        line.clear();
    };
    for (QLayoutItem* item : m_items) {
        if (item->isEmpty())
            continue;
        const bool spacer = item->spacerItem() != nullptr;
        if (spacer && x == area.x())
            continue; // no gap at the start of a line
        QSize size = item->sizeHint().boundedTo(item->maximumSize()).expandedTo(item->minimumSize());
        if (size.width() > area.width()) // a long path label: as wide as the line, cut there
            size.setWidth(std::max(item->minimumSize().width(), area.width()));
        if (x > area.x() && x + size.width() > area.right() + 1) { // does not fit: next line
            if (apply)
                flush();
            y += lineHeight + gap;
            x = area.x();
            lineHeight = 0;
            if (spacer)
                continue;
        }
        if (apply)
            line.append({item, QRect(QPoint(x, 0), size)});
        x += size.width() + (spacer ? 0 : gap);
        lineHeight = std::max(lineHeight, size.height());
    }
    if (apply)
        flush();
    return y + lineHeight - area.y() + contentsMargins().top() + contentsMargins().bottom();
}

} // namespace shardwidgets
