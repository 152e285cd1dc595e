#pragma once
// The bubble readout: measured bubble (big), the closed-form prediction beside it, makespan and
// the largest per-stage activation peak. Per-stage figures are in the StageStatsModel table.

#include <QFrame>

class QLabel;

namespace shardwidgets {

class PipelinePlanner;

class BubbleReadout : public QFrame {
    Q_OBJECT
public:
    explicit BubbleReadout(PipelinePlanner* planner, QWidget* parent = nullptr);

    QString bubbleText() const; // "18.8 %" (what the big figure shows), empty without a plan
    QString detailText() const;

private:
    void refresh();

    PipelinePlanner* m_planner;
    QLabel* m_caption;
    QLabel* m_bubble;
    QLabel* m_detail;
};

} // namespace shardwidgets
