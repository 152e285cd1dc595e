#pragma once
// The reshard plan as a table, one row per target rank: its slice of the flat parameter vector,
// its bytes, the source ranks it copies from, and how much of it stays on the same rank index.
// Takes core's ReshardPlan whole; the totals live in the plan (plan()).

#include "core/checkpoint/reshard.h"

#include <QAbstractTableModel>
#include <optional>

namespace shardwidgets {

class ReshardPlanModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, Elements, Bytes, Sources, Staying, Moving, ColumnCount };
    enum Role { RawRole = Qt::UserRole + 1 }; // numbers (rank, numel, bytes), for sorting and tests

    explicit ReshardPlanModel(QObject* parent = nullptr);

    void setPlan(shardscope::ReshardPlan plan);
    void clear();
    const std::optional<shardscope::ReshardPlan>& plan() const { return m_plan; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QString sources(const shardscope::TargetPlan& target) const;
    QString sourcesTooltip(const shardscope::TargetPlan& target) const;

    std::optional<shardscope::ReshardPlan> m_plan;
};

} // namespace shardwidgets
