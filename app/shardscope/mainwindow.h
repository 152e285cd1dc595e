#pragma once
// The main window: a welcome page, the checkpoint, tensors, compare, reshard and pipeline planner pages in tabs, menus
// with shortcuts, recent folders, drag-and-drop, export, status bar and About box. The pages
// themselves live in the widgets library; this file only wires them to the desktop.

#include <QMainWindow>
#include <QSize>
#include <QStringList>

class QLabel;
class QMenu;
class QStackedWidget;
class QTabWidget;
template <typename T>
class QFuture;
struct ProfileJob; // mainwindow_actions.cpp

namespace shardwidgets {
class CheckpointPanel;
class ComparePanel;
class ConvertDialog;
class PlannerPanel;
class ReshardPanel;
class TensorsPanel;
class Settings;
struct ReportSources;
} // namespace shardwidgets

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // The smallest window every page is checked at: labels and buttons whole, tables a few rows.
    static constexpr QSize kMinimumSize{800, 600};

    // `interactive` false: no dialogs (headless export); errors are only reported by signals.
    MainWindow(shardwidgets::Settings* settings, bool interactive, QWidget* parent = nullptr);

    void openPath(const QString& path);
    // Opens `path`, then compares it with `other` on the Compare page.
    void openAndCompare(const QString& path, const QString& other);
    void openDemo();
    void showPlanner();
    void showCheckpoint();
    void showReshard();
    // File › Convert…: the conversion dialog (one, kept while the window lives, so a running
    // conversion survives closing it), its source the checkpoint shown unless it is converting.
    void showConvertDialog();
    bool exportReport(const QString& file, QString* error);
    bool exportTimeline(const QString& file, QString* error);
    // A layer profile of the open checkpoint (its layers, and the config.json beside it)
    // or of a PyTorch profiler trace, computed off the GUI thread and loaded into the planner; the
    // newest request wins. Ends in profileImported or profileImportFailed.
    void profileFromCheckpoint(int seqLen, int microBatchSize);
    void importTrace(const QString& path);

    shardwidgets::CheckpointPanel* checkpointPanel() const { return m_checkpoint; }
    shardwidgets::PlannerPanel* plannerPanel() const { return m_planner; }
    shardwidgets::ReshardPanel* reshardPanel() const { return m_reshard; }
    shardwidgets::TensorsPanel* tensorsPanel() const { return m_tensors; }
    shardwidgets::ComparePanel* comparePanel() const { return m_compare; }
    shardwidgets::ConvertDialog* convertDialog() const { return m_convertDialog; } // null until first shown

signals:
    void demoFailed(const QString& message);
    void profileImported(const QString& name, const QStringList& notes);
    void profileImportFailed(const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void createActions();
    void addPage(QWidget* page, const QString& title); // a tab, scrolling when the window is small
    QWidget* currentPage() const;
    void showPage(QWidget* page);
    QWidget* createWelcomePage();
    void updateRecentMenu();
    void chooseFolder();
    // File › Open Location…: s3://bucket/prefix or an http(s):// URL, read in place.
    void chooseLocation();
    void chooseReportFile();
    void chooseTimelineFile();
    // A save dialog in the last export folder, then `write`; the status bar or an error says how it went.
    void chooseExportFile(const QString& title, const QString& defaultName, const QString& filter,
                          bool (MainWindow::*write)(const QString&, QString*), const QString& written);
    void chooseProfile();
    void chooseScheduleCsv(); // File > Open Schedule CSV…: a torchtitan / torch.distributed.pipelining schedule
    void startProfileJob(const QString& what, const QFuture<ProfileJob>& future);
    void showAbout();
    void showError(const QString& title, const QString& text);
    void onVerificationFinished();
    // The one resume verdict from the verification and the values read, in both banners and the
    // status bar; Reshard follows it.
    void updateVerdict();
    // A page's news ("Reshard failed: ...") in the status bar for as long as that page is shown;
    // from a page in the background, only for a few seconds.
    void showPageMessage(QWidget* page, const QString& text);
    shardwidgets::ReportSources reportSources();

    shardwidgets::Settings* m_settings;
    bool m_interactive;
    QTabWidget* m_tabs;
    QStackedWidget* m_checkpointStack;
    shardwidgets::CheckpointPanel* m_checkpoint;
    shardwidgets::PlannerPanel* m_planner;
    shardwidgets::ReshardPanel* m_reshard;
    shardwidgets::TensorsPanel* m_tensors;
    shardwidgets::ComparePanel* m_compare;
    shardwidgets::ConvertDialog* m_convertDialog = nullptr;
    QMenu* m_recentMenu = nullptr;
    QString m_openedFolder; // as the user opened it: the key of its remembered settings
    QLabel* m_verdict;
    QWidget* m_messagePage = nullptr; // the page whose message the status bar shows, if any
    QString m_pageMessage;
};
