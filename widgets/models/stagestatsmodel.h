#pragma once
// Per-stage figures of the current plan: layers, busy and idle time, bubble, peak activations
// and, from the training step (core's make_step_plan), what one rank of the stage holds in
// memory: weights, gradients, optimizer state, activations and their total. A stage over the
// GPU memory limit is shown red with a warning sign and a tooltip, so that colour is never the
// only signal.

#include "core/pipeline/training.h"

#include <QAbstractTableModel>
#include <QStringList>
#include <optional>

namespace shardwidgets {

class StageStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Stage,
        Layers,
        Params,
        Busy,
        Idle,
        Bubble,
        PeakActivations,
        Weights,
        Gradients,
        Optimizer,
        Activations,
        Total,
        ColumnCount
    };

    explicit StageStatsModel(QObject* parent = nullptr);

    // Same stage count: dataChanged only, so a drag does not reset the view's selection.
    void setPlan(const shardscope::pipeline::Plan& plan); // no memory columns
    void setStepPlan(const shardscope::pipeline::StepPlan& step);
    void clear();
    bool overLimit(int stage) const; // the stage's total exceeds the GPU memory limit

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    void take(const shardscope::pipeline::Plan& plan, std::vector<shardscope::pipeline::StageMemory> memory,
              std::optional<std::int64_t> limit);
    QVariant memoryValue(int column, const shardscope::pipeline::StageMemory& memory) const;

    std::vector<shardscope::pipeline::StageStats> m_stats;
    std::vector<shardscope::pipeline::StageCost> m_costs;
    std::vector<shardscope::pipeline::StageMemory> m_memory; // empty without a training step
    std::optional<std::int64_t> m_limit;
    QStringList m_layers; // per stage, from core's stage_layers
};

} // namespace shardwidgets
