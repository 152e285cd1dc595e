#pragma once
// The steps of a checkpoint root (and of its mirror, the second tier), newest first: step, wall
// clock, whether it is complete (a manifest, no leftover .tmp), whether `latest` names it, and
// its tier. Takes core's list_steps() result whole; the listing itself is core's.

#include "core/run/lifecycle.h"

#include <QAbstractTableModel>
#include <QString>
#include <map>
#include <optional>

namespace shardwidgets {

class StepListModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Step, WallClock, Status, Latest, Tier, ColumnCount };
    enum Role { DirectoryRole = Qt::UserRole + 1, CompleteRole };

    explicit StepListModel(QObject* parent = nullptr);

    // `steps` as list_steps(root, mirror) returns them.
    void setSteps(std::vector<shardscope::StepInfo> steps, const QString& root, const QString& mirror = {});
    void clear();
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
};

} // namespace shardwidgets
