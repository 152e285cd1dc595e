#pragma once
// The checkpoint summary as a two-column property list: format, world size, step, wall clock,
// total bytes, dtype, and the training state's fields flattened one per row.

#include "core/checkpoint/verify.h"

#include <QAbstractTableModel>
#include <QString>
#include <vector>

namespace shardwidgets {

class SummaryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Property, Value, ColumnCount };

    explicit SummaryModel(QObject* parent = nullptr);

    void setCheckpoint(const QString& dir, const QString& format, const shardscope::Manifest& manifest);
    // A checkpoint ShardScope did not write: its summary rows and the first tensors.
    void setForeign(const QString& dir, const shardscope::VerifyReport& report);
    void clear();
    QString value(const QString& property) const; // for tests and exports; empty when absent

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Entry {
        QString property;
        QString value;
        QString tooltip;
    };
    std::vector<Entry> m_entries;
};

} // namespace shardwidgets
