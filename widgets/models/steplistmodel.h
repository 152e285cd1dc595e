#pragma once
// The steps of a checkpoint root (and of its mirror, the second tier), newest first: step, wall
// clock, whether it is complete (a manifest, no leftover .tmp), whether `latest` names it, its
// tier and where its upload to the mirror stands. Takes core's list_steps() result whole, and the
// lock holder and upload states core's root_status() read; the reading itself is core's, done
// off the GUI thread (StepsPane).

#include "core/run/lifecycle.h"
#include "core/run/root_status.h"

#include <QAbstractTableModel>
#include <QString>
#include <map>
#include <optional>

namespace shardwidgets {

class StepListModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Step, WallClock, Status, Latest, Tier, Upload, ColumnCount };
    // UploadStateRole: "pending", "uploading", "uploaded", "failed", or empty (a mirror row, no
    // mirror chosen, or a step older than the mirror is meant to hold).
    enum Role { DirectoryRole = Qt::UserRole + 1, CompleteRole, UploadStateRole };

    explicit StepListModel(QObject* parent = nullptr);

    // `steps` as list_steps(root, mirror) returns them.
    void setSteps(std::vector<shardscope::StepInfo> steps, const QString& root, const QString& mirror = {});
    void clear();
    // Who holds the root's writer lock and, with a mirror, each local step's upload state as the
    // disk says it (upload_states_on_disk). Changes cells, not rows: the list stays as it is.
    // `mirrorRead` false: the mirror could not be read, so no upload state is known.
    void setRootState(std::optional<shardscope::LockHolder> lock,
                      std::map<std::string, shardscope::UploadState> uploads, bool mirrorRead = true);
    const std::optional<shardscope::LockHolder>& lockHolder() const { return m_lock; }
    std::optional<shardscope::UploadState> uploadState(int row) const;
    // The step directory that is open now: shown in bold.
    void setCurrentDirectory(const QString& directory);
    // What verifying a step found (the listing alone says only whether a manifest is there):
    // a failed step shows "failed verification" in red, a passed one "verified". Kept across
    // listings until the step is verified again.
    void setVerdict(const QString& directory, bool ok);

    QString root() const { return m_root; }
    QString mirror() const { return m_mirror; }
    const shardscope::StepInfo& step(int row) const { return m_steps[std::size_t(row)]; }
    QString directory(int row) const;
    int rowForDirectory(const QString& directory) const; // -1 when not listed

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QString tooltip(const shardscope::StepInfo& step) const;

    std::vector<shardscope::StepInfo> m_steps; // newest first
    QString m_root;
    QString m_mirror;
    QString m_current;
    std::map<QString, bool> m_verdicts; // step directory -> verified ok
    std::optional<shardscope::LockHolder> m_lock;
    std::map<std::string, shardscope::UploadState> m_uploads; // local step name -> state
    bool m_mirrorRead = true;
};

} // namespace shardwidgets
