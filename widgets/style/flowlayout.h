#pragma once
// A row of controls that wraps: items sit side by side at their size hints, left to right, and
// continue on the next line when the width runs out, so a toolbar stays readable in a narrow
// window instead of squeezing "Schedule" to "Schedul". Height follows width (heightForWidth), so
// the page above and below it makes room for the second line.

#include <QLayout>
#include <QList>

namespace shardwidgets {

class FlowLayout : public QLayout {
public:
    explicit FlowLayout(QWidget* parent = nullptr);
    ~FlowLayout() override;

    // A stretch-free gap of `width` pixels before the next item (a visual group break; dropped
    // at the start of a line).
    void addSpacing(int width);

    void addItem(QLayoutItem* item) override;
    int count() const override { return int(m_items.size()); }
    QLayoutItem* itemAt(int index) const override { return m_items.value(index); }
    QLayoutItem* takeAt(int index) override;
    Qt::Orientations expandingDirections() const override { return {}; }
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override { return arrange(QRect(0, 0, width, 0), false); }
    QSize minimumSize() const override;
    QSize sizeHint() const override;
    void setGeometry(const QRect& rect) override;

private:
    int arrange(const QRect& rect, bool apply) const; // the height used
    QList<QLayoutItem*> m_items;
};

} // namespace shardwidgets
