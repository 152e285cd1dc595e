#pragma once
// The checkpoint page: summary, failure banner, progress (bytes/s, ETA, Cancel, Re-verify), the
// sortable and filterable shard table with live per-shard status, and the ownership map with a
// reshard preview. Opening a folder starts a background verification; opening another one
// cancels it (the newest wins).

#include "core/report/verdict.h"
#include "widgets/jobs/verifycontroller.h"

#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace shardwidgets {

class FailureBanner;
class OwnershipMap;
class ShardTableModel;
class StepsPane;
class SummaryModel;
class TensorListPane;

class CheckpointPanel : public QWidget {
    Q_OBJECT
public:
    explicit CheckpointPanel(QWidget* parent = nullptr);
    ~CheckpointPanel() override;

    void open(const QString& path);
    void reverify();
    void cancel();
    void setVerifyOptions(const VerifyController::Options& options) { m_options = options; }
    // The world size the job expects (0: any), as `--expect-world-size` in the CLI; set before
    // open() for the folder's remembered value. Changing it in the panel's box verifies again
    // and emits expectedWorldSizeChanged.
    void setExpectedWorldSize(int worldSize);
    int expectedWorldSize() const;
    QSpinBox* expectedWorldSizeBox() const { return m_expected; }

    QString currentPath() const { return m_path; }
    bool isVerifying() const { return m_controller->isRunning(); }
    // A folder is open, no verification runs, and it held a checkpoint (a folder holding none
    // would only find the same nothing again): what the Re-verify button and action follow.
    bool canReverify() const;
    // The finished verification of the current folder, if any.
    const std::optional<shardscope::VerifyReport>& report() const { return m_report; }

    VerifyController* controller() const { return m_controller; }
    ShardTableModel* shardModel() const { return m_shards; }
    SummaryModel* summaryModel() const { return m_summary; }
    FailureBanner* banner() const { return m_banner; }
    // The one resume verdict (the main window's, from the bytes and the values together) replaces
    // what the bytes alone said.
    void showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues);
    OwnershipMap* ownershipMap() const { return m_map; }
    QTableView* shardView() const { return m_table; }
    StepsPane* stepsPane() const { return m_stepsPane; } // shown for a checkpoint root
    QSpinBox* reshardTargetBox() const { return m_reshard; }
    // A foreign format's tensors, on the "Tensor list" tab (hidden for a native checkpoint).
    TensorListPane* tensorList() const { return m_tensorList; }
    QTabWidget* tabs() const { return m_tabs; }
    static constexpr int kTensorsTab = 1;

signals:
    void opened(const QString& directory); // the manifest is read, verification running
    void openFailed(const QString& message, const QString& path);
    void verificationStarted(); // open() and reverify(): a verification runs
    void expectedWorldSizeChanged(int worldSize); // by the user in the box, 0: any
    void verificationFinished();
    void statusMessage(const QString& text);

private:
    // The constructor's parts, top to bottom: the folder and the job's controls, the summary with a
    // root's steps and the problems, the files and tensor list, the ownership map; then the signals.
    QWidget* buildHeader();
    QWidget* buildSummaryPane();
    QWidget* buildFileTabs();
    QWidget* buildMapBox();
    void connectJob();

    void onManifestReady();
    void onFirstTensorsListed();
    void onFilesListed();
    void showForeignLayout(const shardscope::VerifyReport& report);
    void showNativeLayout();
    void onFinished();
    void onFailed(const QString& message, const QString& path);
    void onProgress(quint64 done, quint64 total, double rate, double eta);
    void copySelection() const;
    void showProblems(const shardscope::VerifyReport& report);
    void findNearbyCheckpoint();
    void stopNearbySearch(); // the running one, if any, is no longer wanted

    VerifyController* m_controller;
    VerifyController::Options m_options;
    ShardTableModel* m_shards;
    SummaryModel* m_summary;
    QSortFilterProxyModel* m_proxy;
    FailureBanner* m_banner;
    OwnershipMap* m_map;
    QWidget* m_mapBox = nullptr; // the map with its title line
    QLabel* m_mapTitle = nullptr;
    QLabel* m_reshardLabel = nullptr;
    QTableView* m_table;
    QTableView* m_summaryView;
    QListWidget* m_problems;
    QLabel* m_pathLabel;
    StepsPane* m_stepsPane;
    QProgressBar* m_progress;
    QLabel* m_rate;
    QPushButton* m_cancel;
    QPushButton* m_reverify;
    QSpinBox* m_expected;
    QLineEdit* m_filter;
    QSpinBox* m_reshard;
    QTabWidget* m_tabs;
    TensorListPane* m_tensorList;
    QString m_path; // what the user opened (a root or a step)
    QString m_rootPath; // the root whose steps the steps pane lists
    std::optional<shardscope::VerifyReport> m_report;
    // For a folder holding no checkpoint: the one next to it (nearby_checkpoint, read off the GUI
    // thread), offered under every verdict shown for that folder.
    QString m_suggestedPath;
    QString m_suggestedText;
    // Set when that search is no longer wanted (another folder opened, the panel closed): a
    // bucket that does not answer stops holding its thread.
    std::shared_ptr<std::atomic<bool>> m_nearbyCancel;
};

} // namespace shardwidgets
