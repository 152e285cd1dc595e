#pragma once
// The shard table: one row per manifest entry, in manifest order (the index the verifier's
// callbacks use), with the live status of its verification.

#include "core/checkpoint/verify.h"

#include <QAbstractTableModel>
#include <vector>

namespace shardwidgets {

class ShardTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, Status, File, Bytes, Offset, Numel, Sha256, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1, // numbers as numbers, statuses by severity
        StatusRole, // int(shardscope::ShardStatus)
        FullValueRole, // the untruncated text (full digest) for copying
    };

    explicit ShardTableModel(QObject* parent = nullptr);

    // Every shard pending. Resets the model.
    void setManifest(const shardscope::Manifest& manifest);
    // Rows straight from a verification's file checks: foreign formats have no manifest, so the
    // parameter columns stay empty and the last column shows each file's check detail instead of
    // a recorded digest.
    void setChecks(const std::vector<shardscope::ShardCheck>& checks);
    bool hasManifest() const { return !m_foreign; }
    void clear();
    // Live updates from a running verification, by manifest index; out-of-range is ignored.
    void setShardPercent(int index, int percent);
    void setShardResult(int index, const shardscope::ShardCheck& check);
    // After a cancelled verification: the rows it did not finish (pending, or hashing part-way)
    // say they were not checked, not that they still are.
    void markUnchecked();

    shardscope::ShardStatus status(int row) const;
    int percent(int row) const;
    const shardscope::ShardRecord& record(int row) const;
    int rowForRank(int rank) const; // -1 when absent

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        shardscope::ShardRecord record;
        shardscope::ShardCheck check;
        int percent = 0;
        bool unchecked = false; // left pending by a cancelled verification
    };
    QVariant display(const Row& row, int column) const;
    QVariant tooltip(const Row& row, int column) const;

    std::vector<Row> m_rows;
    bool m_foreign = false;
};

} // namespace shardwidgets
