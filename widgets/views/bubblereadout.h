#pragma once
// The bubble readout: measured bubble (big), the closed-form prediction beside it, then the
// training step as `shardctl schedule` prints it — step time = makespan + exposed all-reduce
// (each term), the peak stage memory against the GPU's with the fit verdict — and what the
// timeline draws after the makespan. Every figure is core's StepPlan (make_step_plan), the very
// numbers of `shardctl schedule`; per-stage figures are in the StageStatsModel table. With a
// model's candidate loaded (PipelinePlanner::modelContext) also what the busiest stage spends in
// tensor/context-parallel collectives and expert all-to-all inside its ops (core's stage_comm),
// and the throughput: TFLOP/s per GPU and MFU (core's throughput).

#include <QFrame>

class QLabel;

namespace shardwidgets {

class PipelinePlanner;

class BubbleReadout : public QFrame {
    Q_OBJECT
public:
    explicit BubbleReadout(PipelinePlanner* planner, QWidget* parent = nullptr);

    QString bubbleText() const; // "18.8 %" (what the big figure shows), empty without a plan
    QString detailText() const; // every line below the big figure, plain text

    // The readout's way of writing milliseconds ("12472.89 ms"): tests compare core's figures
    // through it, so the text and the check cannot disagree on rounding.
    static QString ms(double value);
    // One line for the plan shown: "step time = makespan + exposed all-reduce", the fit verdict
    // and, with a model, TFLOP/s per GPU and MFU. Empty without a plan.
    static QString modelSummary(const PipelinePlanner& planner);

private:
    void refresh();

    PipelinePlanner* m_planner;
    QLabel* m_caption;
    QLabel* m_bubble;
    QLabel* m_detail;
};

} // namespace shardwidgets
