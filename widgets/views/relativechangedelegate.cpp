#include "widgets/views/relativechangedelegate.h"

#include "widgets/style/statusstyle.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace shardwidgets {

namespace {

constexpr double kLowDecade = -8, kHighDecade = 1; // 1e-8 .. 10

} // namespace

double relativeChangeFraction(double relative)
{
    if (relative < 0 || std::isnan(relative))
        return -1;
    if (relative == 0)
        return 0;
    if (std::isinf(relative))
        return 1;
    return std::clamp((std::log10(relative) - kLowDecade) / (kHighDecade - kLowDecade), 0.0, 1.0);
}

void RelativeChangeDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                                   const QModelIndex& index) const
{
    QStyledItemDelegate::paint(painter, option, index); // background, selection, the figure
    const double fraction = relativeChangeFraction(index.data(m_role).toDouble());
    if (fraction <= 0)
        return;
    const QRect cell = option.rect.adjusted(2, 3, -2, -3);
    QRect bar = cell;
    bar.setWidth(std::max(2, int(std::lround(cell.width() * fraction))));
    QColor colour = severityColor(Severity::bad, option.palette);
    colour.setAlpha(70); // under the text, which stays readable
    painter->fillRect(bar, colour);
}

QSize RelativeChangeDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const
{
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    size.setWidth(std::max(size.width(), 160)); // room for a bar worth reading
    return size;
}

} // namespace shardwidgets
