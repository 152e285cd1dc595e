#pragma once
// One row per tensor of core's ContentReport (name, state, dtype, shape and its statistics), for
// the Tensors page. Non-finite counts are red; Qt::UserRole gives raw numbers for sorting.

#include "core/inspect/content.h"

#include <QAbstractTableModel>
#include <memory>

namespace shardwidgets {

class TensorStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, State, Dtype, Shape, Min, Max, Mean, Std, NonFinite, Zeros, ColumnCount };

    explicit TensorStatsModel(QObject* parent = nullptr);

    void setReport(std::shared_ptr<const shardscope::ContentReport> report);
    void clear();
    const shardscope::TensorContent* tensorAt(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const shardscope::ContentReport> m_report;
};

// The parts of one tensor (a rank's slice, a file, a DCP chunk) with their own figures, so a NaN
// is traced to the file that holds it.
class TensorPartsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, File, Elements, Min, Max, Mean, NonFinite, ColumnCount };

    explicit TensorPartsModel(QObject* parent = nullptr);

    // `tensor` must outlive the model's use of it (the page keeps the report alive).
    void setTensor(const shardscope::TensorContent* tensor);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    const shardscope::TensorContent* m_tensor = nullptr;
};

} // namespace shardwidgets
