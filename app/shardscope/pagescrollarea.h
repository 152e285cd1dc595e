#pragma once
// A tab page that scrolls only when it must. QScrollArea's own resizing gives a page whose rows
// wrap (height for width) its *preferred* height, so a page that fits the window at its minimum
// would still scroll; this one gives the page the viewport, or the least the page needs at that
// width (its layout's minimum height for the width), whichever is more.

#include <QScrollArea>

class PageScrollArea : public QScrollArea {
public:
    explicit PageScrollArea(QWidget* page, QWidget* parent = nullptr);

protected:
    void resizeEvent(QResizeEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void fit();
    bool m_fitting = false;
};
