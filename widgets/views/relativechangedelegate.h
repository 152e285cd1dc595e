#pragma once
// The Compare page's bar of each tensor's relative change ||a-b|| / ||a||, drawn behind its
// figure in the table so that the tensors that moved stand out in model order. The scale is
// logarithmic from 1e-8 (no bar) to 10 (a full bar): relative changes between two steps of a run
// span many decades, and a linear bar would show only the largest.

#include <QStyledItemDelegate>

namespace shardwidgets {

// The bar's length as a fraction of the cell, for a relative change (0 for none, 1 for inf;
// negative: not compared, no bar).
double relativeChangeFraction(double relative);

class RelativeChangeDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    // `valueRole`: the role under which the model gives the relative change as a double.
    RelativeChangeDelegate(int valueRole, QObject* parent) : QStyledItemDelegate(parent), m_role(valueRole) {}
    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

private:
    int m_role;
};

} // namespace shardwidgets
