#pragma once
// The steps of a checkpoint root beside the checkpoint page: a table (StepListModel) the user
// opens any step from (double-click, Enter or Open), Refresh to list again while a run is still
// saving, and Mirror… to add the second tier (a folder or an s3:// location). Above the table, who
// holds the root's writer lock ("Being written by pid 1234 on host, since 12:03 — showing committed
// steps only"), and why the root or its mirror could not be read. Listing reads every step's
// manifest and the lock record, so it runs off the GUI thread through core's root_status() (a root
// in a bucket: bucket_root_status()), which never takes the lock; it runs again when the root is
// opened again and, while the pane is shown, every few seconds. A listing stuck on a server that
// does not answer is cancelled when the pane goes.

#include "core/run/lifecycle.h"
#include "core/run/root_status.h"

#include <QFutureWatcher>
#include <QWidget>
#include <atomic>
#include <memory>

class QLabel;
class QPushButton;
class QTableView;
class QTimer;

namespace shardwidgets {

class StepListModel;

class StepsPane : public QWidget {
    Q_OBJECT
public:
    // What one background reading of the root found.
    struct Reading {
        std::vector<shardscope::StepInfo> steps;
        std::optional<shardscope::LockHolder> lock;
        std::map<std::string, shardscope::UploadState> uploads;
        std::string error; // the root could not be listed: the rows shown stay
        std::string mirrorError; // the mirror could not be read: its steps are not listed
    };

    explicit StepsPane(QWidget* parent = nullptr);
    ~StepsPane() override;

    // A listing already made (by the verification job that opened the root).
    void setSteps(std::vector<shardscope::StepInfo> steps, const QString& root);
    void setCurrentDirectory(const QString& directory);
    void setVerdict(const QString& directory, bool ok); // see StepListModel::setVerdict
    // Lists again, with the mirror's steps: a folder or an s3:// URL. A root in a bucket has none.
    void setMirror(const QString& mirror);
    QString mirror() const { return m_mirrorPath; }
    void refresh(); // lists again in the background
    void clear();
    // The periodic listing while the pane is shown (default 5000 ms; 0: only on request).
    void setAutoRefreshInterval(int milliseconds);
    // "Being written by …", or empty when no lock file names a holder.
    QString lockText() const;
    // Why the last listing could not read the root or its mirror, or empty.
    QString readingProblem() const { return m_readingProblem; }

    StepListModel* model() const { return m_model; }
    QTableView* view() const { return m_view; }
    bool isListing() const { return m_watcher != nullptr; }

signals:
    void openRequested(const QString& directory);
    void listed(); // a background listing finished and the model holds it

private:
    void applyReading(Reading reading, const QString& root);
    void updateLockLine();
    void openSelected();
    void chooseMirrorLocation();
    void updateTitle();
    int tableWidth() const; // every column at its contents' width

    StepListModel* m_model;
    QTableView* m_view;
    QLabel* m_title;
    QPushButton* m_open;
    QPushButton* m_refresh;
    QPushButton* m_mirror;
    QLabel* m_lockLine;
    QTimer* m_autoRefresh;
    QFutureWatcher<Reading>* m_watcher = nullptr;
    bool m_again = false; // asked to list again while a listing ran (another mirror, say)
    // The running listing's cancel flag (core/util/cancel.h), set when the root or the mirror
    // changes and when the pane goes: a listing waiting on a server stops.
    std::shared_ptr<std::atomic<bool>> m_listingCancel = std::make_shared<std::atomic<bool>>(false);
    static constexpr int kRemoteTicks = 6; // a bucket is listed every sixth tick (30 s)
    int m_remoteTicks = 0;
    QString m_readingProblem;
    QString m_currentDirectory;
    QString m_mirrorPath;
};

} // namespace shardwidgets
