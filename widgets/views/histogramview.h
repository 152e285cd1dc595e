#pragma once
// The selected tensor's histogram of log2|x| (core/inspect/stats.h: 64 bins from 2^-56), with
// the zero and non-finite counts beside it: where a tensor's magnitudes sit, and whether part of
// it has underflowed or blown up. The tooltip tells a bin's range and count.

#include "core/inspect/stats.h"
#include "widgets/views/histogramgeometry.h"

#include <QString>
#include <QWidget>

namespace shardwidgets {

class HistogramView : public QWidget {
    Q_OBJECT
public:
    explicit HistogramView(QWidget* parent = nullptr);

    void setStats(const QString& title, const shardscope::ValueStats& stats);
    void clear();
    QString title() const { return m_title; } // the tensor shown
    HistogramGeometry geometryFor(const QRectF& rect) const;
    QString describeAt(const QPointF& point) const;
    QSize sizeHint() const override { return {420, 200}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    QString m_title;
    shardscope::ValueStats m_stats;
    bool m_hasData = false;
};

} // namespace shardwidgets
