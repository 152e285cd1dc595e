#pragma once
// One row per paired tensor of core's DiffReport (shardctl diff), in model order, for the Compare
// page: status, changed elements, max |a-b| and the relative L2 change, which the page draws as
// a bar (RelativeChangeDelegate). Qt::UserRole gives raw numbers for sorting.

#include "core/inspect/diff.h"

#include <QAbstractTableModel>
#include <memory>

namespace shardwidgets {

class DiffModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, State, Status, Dtype, Shape, Changed, MaxAbs, RelativeChange, ColumnCount };
    // The relative change as a number for the bar: -1 when not compared, +inf when ||a|| = 0.
    static constexpr int RelativeChangeRole = Qt::UserRole + 1;

    explicit DiffModel(QObject* parent = nullptr);

    void setReport(std::shared_ptr<const shardscope::DiffReport> report);
    void clear() { setReport(nullptr); }
    const shardscope::TensorDiff* tensorAt(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const shardscope::DiffReport> m_report;
};

} // namespace shardwidgets
