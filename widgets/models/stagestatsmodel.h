#pragma once
// Per-stage figures of the current plan: layers, busy and idle time, bubble, peak activations.

#include "core/pipeline/simulator.h"

#include <QAbstractTableModel>
#include <QStringList>

namespace shardwidgets {

class StageStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Stage, Layers, Params, Busy, Idle, Bubble, PeakActivations, PeakMemory, ColumnCount };

    explicit StageStatsModel(QObject* parent = nullptr);

    // Same stage count: dataChanged only, so a drag does not reset the view's selection.
    void setPlan(const shardscope::pipeline::Plan& plan);
    void clear();

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<shardscope::pipeline::StageStats> m_stats;
    std::vector<shardscope::pipeline::StageCost> m_costs;
    QStringList m_layers; // per stage, from core's stage_layers
};

} // namespace shardwidgets
