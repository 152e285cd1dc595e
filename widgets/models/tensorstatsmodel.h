#pragma once
// One row per tensor of core's ContentReport (name, its health counts, state, dtype, shape and its
// statistics), for the Tensors page. The health columns come right after the name and sort
// problems first on their first click (Qt::InitialSortOrderRole); non-finite counts are red;
// Qt::UserRole gives raw numbers for sorting. Min, max, mean and std are over the finite values
// and their headers say so. A tensor whose values were read from a file that failed verification
// is marked (icon, tint, tooltip): its figures are not the saved values.

#include "core/checkpoint/verify.h"
#include "core/inspect/content.h"

#include <QAbstractTableModel>
#include <QIcon>
#include <memory>
#include <string>
#include <vector>

namespace shardwidgets {

// A file the values were read from that failed verification (the verdict's failed_files), with
// the status the shard table shows for it.
struct FailedFile {
    std::string path; // relative to the checkpoint, as TensorPart::file
    shardscope::ShardStatus status = shardscope::ShardStatus::invalid;
};

class TensorStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, NonFinite, Zeros, State, Dtype, Shape, Min, Max, Mean, Std, ColumnCount };

    explicit TensorStatsModel(QObject* parent = nullptr);

    // A new report has no marks until setFailedFiles names the files of its verification.
    void setReport(std::shared_ptr<const shardscope::ContentReport> report);
    void clear();
    const shardscope::TensorContent* tensorAt(int row) const;
    // Core's health checks (tensor_health) failed for it: NaN/Inf, a negative second moment, a
    // param that is not its master weight rounded. An all-zero tensor is a warning, not a problem.
    bool hasProblem(int row) const;
    int problemCount() const;
    // Marks the tensors read, in whole or in part, from these files (core's tensors_read_from).
    void setFailedFiles(std::vector<FailedFile> files);
    const std::vector<FailedFile>& failedFiles() const { return m_failed; }
    int fromFailedFileCount() const { return int(m_from.size()); }
    // Of those: how many hold values read from the files, how many lack values their files held.
    int readFromFailedFileCount() const;
    int unreadFromFailedFileCount() const;
    bool isFromFailedFile(int row) const { return markOf(row) != nullptr; }
    // "Read from rank3.safetensors, which failed verification (hash mismatch): …" (or which of its
    // elements were not read at all, their file being unreadable), or empty.
    QString failedFileNote(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    const shardscope::TensorFromFiles* markOf(int row) const;
    QIcon failedFileIcon(int row) const;

    std::shared_ptr<const shardscope::ContentReport> m_report;
    std::vector<FailedFile> m_failed;
    std::vector<shardscope::TensorFromFiles> m_from; // the marked tensors, in row order
    std::vector<int> m_markOfRow; // per row: its index in m_from, or -1
};

// The parts of one tensor (a rank's slice, a file, a DCP chunk) with their own figures, so a NaN
// is traced to the file that holds it.
class TensorPartsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, File, NonFinite, Elements, Min, Max, Mean, ColumnCount };

    explicit TensorPartsModel(QObject* parent = nullptr);

    // `tensor` must outlive the model's use of it (the page keeps the report alive).
    void setTensor(const shardscope::TensorContent* tensor);
    // The parts read from these files are marked, as their tensor's row is.
    void setFailedFiles(std::vector<FailedFile> files);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    const FailedFile* failedFileOf(int row) const;

    const shardscope::TensorContent* m_tensor = nullptr;
    std::vector<FailedFile> m_failed;
};

} // namespace shardwidgets
