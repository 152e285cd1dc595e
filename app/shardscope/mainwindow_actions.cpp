// The main window's menus, toolbar and shortcuts (mainwindow.h): what each action does and when
// it is enabled.

#include "app/shardscope/mainwindow.h"

#include "widgets/jobs/checkpointlocation.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/panels/convertdialog.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/settings/settings.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/jobs/verifycontroller.h"

#include "core/inspect/layer_profile.h"
#include "core/pipeline/profile_trace.h"

#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QFutureWatcher>
#include <QStatusBar>
#include <QtConcurrent>
#include <QInputDialog>
#include <QMenuBar>
#include <QSpinBox>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>

using namespace shardwidgets;

// What a profile job hands back to the GUI thread: a profile, or the error's sentence.
struct ProfileJob {
    std::optional<shardscope::pipeline::Profile> profile;
    QStringList notes;
    QString error;
};

namespace {

template <class Compute>
ProfileJob runProfileJob(Compute compute)
{
    ProfileJob job;
    try {
        auto [profile, notes] = compute();
        job.profile = std::move(profile);
        for (const std::string& note : notes)
            job.notes << QString::fromStdString(note);
    } catch (const std::exception& error) { // shardscope::Error, or bad_alloc on a huge trace
        job.error = QString::fromStdString(error.what());
    }
    return job;
}

// The newest request wins: a job finishing after a newer one started is dropped.
int g_profileGeneration = 0;

} // namespace

void MainWindow::profileFromCheckpoint(int seqLen, int microBatchSize)
{
    const QString path = m_checkpoint->currentPath();
    if (path.isEmpty()) {
        emit profileImportFailed(tr("Open a checkpoint first: the profile is made from its tensors."));
        return;
    }
    if (const auto remote = shardwidgets::localOnly(path, tr("A layer profile"))) {
        emit profileImportFailed(*remote);
        return;
    }
    startProfileJob(tr("Profiling %1…").arg(path), QtConcurrent::run([path, seqLen, microBatchSize] {
                        return runProfileJob([&] {
                            const auto model = shardscope::profile_checkpoint(
                                path.toStdString(), {.seq_len = seqLen, .micro_batch_size = microBatchSize});
                            return std::pair{model.profile, model.notes};
                        });
                    }));
}

void MainWindow::importTrace(const QString& path)
{
    startProfileJob(tr("Importing the trace %1…").arg(path), QtConcurrent::run([path] {
                        return runProfileJob([&] {
                            const auto trace = shardscope::pipeline::load_profiler_trace(path.toStdString());
                            return std::pair{trace.profile, trace.notes};
                        });
                    }));
}

void MainWindow::startProfileJob(const QString& what, const QFuture<ProfileJob>& future)
{
    statusBar()->showMessage(what);
    const int generation = ++g_profileGeneration;
    auto* watcher = new QFutureWatcher<ProfileJob>(this);
    connect(watcher, &QFutureWatcher<ProfileJob>::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != g_profileGeneration)
            return;
        const ProfileJob job = watcher->result();
        if (!job.profile) {
            showError(tr("Cannot make the profile"), job.error.toHtmlEscaped());
            emit profileImportFailed(job.error);
            return;
        }
        m_planner->planner()->setProfile(*job.profile);
        showPlanner();
        const QString name = QString::fromStdString(job.profile->name);
        statusBar()->showMessage(job.notes.isEmpty() ? tr("Profile %1 loaded").arg(name)
                                                     : tr("Profile %1 loaded; %2").arg(name, job.notes.front()),
                                 15000);
        emit profileImported(name, job.notes);
    });
    watcher->setFuture(future);
}

void MainWindow::chooseScheduleCsv()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open schedule CSV"), QString(), tr("Schedules (*.csv);;All files (*)"));
    if (path.isEmpty())
        return;
    statusBar()->showMessage(tr("Reading the schedule %1…").arg(path));
    m_planner->openScheduleCsv(path, [this, path](bool ok, const QString& error) {
        if (!ok) {
            statusBar()->clearMessage();
            showError(tr("Cannot open the schedule"), error.toHtmlEscaped());
            return;
        }
        showPlanner();
        statusBar()->showMessage(tr("Schedule %1 on the timeline").arg(path), 8000);
    });
}

void MainWindow::showConvertDialog()
{
    if (!m_convertDialog) {
        m_convertDialog = new ConvertDialog(this);
        m_convertDialog->setInteractive(m_interactive);
        connect(m_convertDialog, &ConvertDialog::openRequested, this, &MainWindow::openPath);
        connect(m_convertDialog, &ConvertDialog::conversionFinished, this, [this](bool ok) {
            if (ok)
                statusBar()->showMessage(m_convertDialog->statusText(), 15000);
        });
    }
    // The step the Checkpoint page shows (a root's newest, or the one picked from its steps), not
    // the root, whose `latest` a running job may move meanwhile; a step of an earlier folder (this
    // one failed to open) is not it. Ignored while it converts.
    const QString path = m_checkpoint->currentPath();
    const QString shown = m_checkpoint->controller()->directory();
    const bool inPath = !path.isEmpty() && (shown == path || shown.startsWith(path + QLatin1Char('/')));
    m_convertDialog->setSource(inPath ? shown : path);
    m_convertDialog->show();
    m_convertDialog->raise();
    m_convertDialog->activateWindow();
}

void MainWindow::createActions()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(style()->standardIcon(QStyle::SP_DirOpenIcon), tr("&Open Folder…"), this,
                                    &MainWindow::chooseFolder);
    open->setShortcut(QKeySequence::Open);
    QAction* location = file->addAction(tr("Open &Location…"), this, &MainWindow::chooseLocation);
    location->setObjectName(QStringLiteral("openLocationAction"));
    location->setShortcut(QKeySequence(tr("Ctrl+L")));
    location->setToolTip(tr("Read a checkpoint in place from s3://bucket/prefix or an http(s):// URL"));
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    updateRecentMenu();
    file->addAction(tr("Open &Demo Checkpoint"), this, &MainWindow::openDemo);
    QAction* scheduleCsv = file->addAction(tr("Open &Schedule CSV…"), this, &MainWindow::chooseScheduleCsv);
    scheduleCsv->setObjectName(QStringLiteral("openScheduleCsvAction"));
    scheduleCsv->setToolTip(tr("Show a torch.distributed.pipelining (torchtitan) CSV schedule on the planner's "
                               "timeline, timed with the planner's profile"));
    QAction* modelConfig = file->addAction(tr("Open &Model Config…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open model config"), QString(),
                                                          tr("Hugging Face config (*.json);;All files (*)"));
        if (path.isEmpty())
            return;
        m_planner->openModelConfig(path);
        showPlanner();
    });
    modelConfig->setObjectName(QStringLiteral("openModelConfigAction"));
    modelConfig->setToolTip(tr("Search every tp, cp, ep, pp, dp, ZeRO stage and micro batch of a Hugging Face "
                               "config.json on a cluster preset (the planner's Model search tab)"));
    QAction* compare = file->addAction(tr("Compare &With…"), this, [this] {
        showPage(m_compare);
        m_compare->chooseAndCompare();
    });
    compare->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_D));
    compare->setEnabled(false);
    connect(m_checkpoint, &CheckpointPanel::opened, compare, [compare] { compare->setEnabled(true); });
    connect(m_checkpoint, &CheckpointPanel::openFailed, compare, [compare] { compare->setEnabled(false); });
    QAction* convert = file->addAction(tr("Con&vert…"), this, &MainWindow::showConvertDialog);
    convert->setObjectName(QStringLiteral("convertAction"));
    convert->setToolTip(tr("Write a checkpoint as a Hugging Face folder, a torch DCP or a ShardScope checkpoint"));
    file->addSeparator();
    QAction* report = file->addAction(style()->standardIcon(QStyle::SP_DialogSaveButton), tr("&Export Report…"), this,
                                      &MainWindow::chooseReportFile);
    report->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    QAction* timeline = file->addAction(tr("Export &Timeline…"), this, &MainWindow::chooseTimelineFile);
    timeline->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E));
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* check = menuBar()->addMenu(tr("&Verify"));
    QAction* reverify = check->addAction(style()->standardIcon(QStyle::SP_BrowserReload), tr("&Re-verify"),
                                         m_checkpoint, &CheckpointPanel::reverify);
    reverify->setObjectName(QStringLiteral("reverifyAction"));
    reverify->setShortcut(QKeySequence::Refresh);
    QAction* cancel = check->addAction(style()->standardIcon(QStyle::SP_BrowserStop), tr("&Cancel Verification"),
                                       m_checkpoint, &CheckpointPanel::cancel);
    cancel->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
    QAction* fast = check->addAction(tr("&Fast Checksum (XXH3)"));
    fast->setCheckable(true);
    fast->setChecked(m_settings->fastVerify());
    fast->setToolTip(tr("Compare the manifest's XXH3 checksum instead of SHA-256: much faster, not cryptographic"));
    connect(fast, &QAction::toggled, this, [this](bool on) {
        m_settings->setFastVerify(on);
        VerifyController::Options options;
        options.fast = on;
        options.threads = m_settings->verifyThreads();
        m_checkpoint->setVerifyOptions(options);
    });

    // Nothing to act on, nothing enabled: Re-verify needs a checkpoint (and no verification
    // running), Cancel a running verification, Export Report a checkpoint or the planner's plan.
    auto updateActions = [this, reverify, cancel, report] {
        const bool verifying = m_checkpoint->isVerifying();
        const bool checkpoint = !m_checkpoint->currentPath().isEmpty();
        // A folder without a checkpoint has nothing to verify again.
        reverify->setEnabled(checkpoint && !verifying && m_checkpoint->canReverify());
        cancel->setEnabled(verifying);
        report->setEnabled(checkpoint || currentPage() == m_planner);
    };
    connect(m_checkpoint, &CheckpointPanel::verificationStarted, this, updateActions);
    connect(m_checkpoint, &CheckpointPanel::verificationFinished, this, updateActions);
    connect(m_checkpoint, &CheckpointPanel::openFailed, this, updateActions);
    connect(m_tabs, &QTabWidget::currentChanged, this, updateActions);
    updateActions();

    QAction* expect = check->addAction(tr("&Expected World Size…"), this, [this] {
        bool ok = false;
        const int value = QInputDialog::getInt(this, tr("Expected world size"),
                                               tr("The world size your job runs at (0: any). A checkpoint saved at "
                                                  "another one is reported as a world size change."),
                                               m_checkpoint->expectedWorldSize(), 0, shardscope::kMaxWorldSize, 1, &ok);
        if (ok)
            m_checkpoint->expectedWorldSizeBox()->setValue(value); // verifies again and is remembered
    });
    expect->setEnabled(false);
    connect(m_checkpoint, &CheckpointPanel::opened, expect, [expect] { expect->setEnabled(true); });

    check->addSeparator();
    QAction* reshard = check->addAction(tr("Re&shard…"), this, [this] {
        showReshard();
        m_reshard->chooseDestinationAndReshard();
    });
    reshard->setToolTip(tr("Write this checkpoint at another world size into a new folder"));

    QMenu* planner = menuBar()->addMenu(tr("&Planner"));
    planner->addAction(tr("&Load Profile…"), this, &MainWindow::chooseProfile);
    QAction* fromCheckpoint = planner->addAction(tr("Profile from the Open &Checkpoint…"), this, [this] {
        if (m_checkpoint->currentPath().isEmpty()) {
            showError(tr("No checkpoint open"), tr("Open a checkpoint first: the profile is made from its tensors."));
            return;
        }
        bool ok = false;
        const int seqLen = QInputDialog::getInt(this, tr("Profile from the checkpoint"),
                                                tr("Sequence length (tokens per sample):"), 4096, 1, 1 << 24, 1, &ok);
        if (!ok)
            return;
        const int microBatch = QInputDialog::getInt(this, tr("Profile from the checkpoint"),
                                                    tr("Micro batch size (samples):"), 1, 1, 1 << 20, 1, &ok);
        if (ok)
            profileFromCheckpoint(seqLen, microBatch);
    });
    fromCheckpoint->setObjectName(QStringLiteral("profileFromCheckpointAction"));
    fromCheckpoint->setToolTip(tr("Layers and parameters from the checkpoint's tensors, FLOPs and activations from the "
                                  "config.json beside it (A100 at 50 % MFU)"));
    QAction* fromTrace = planner->addAction(tr("Import Profiler &Trace…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Import profiler trace"), QString(),
                                                          tr("Chrome traces (*.json);;All files (*)"));
        if (!path.isEmpty())
            importTrace(path);
    });
    fromTrace->setObjectName(QStringLiteral("importTraceAction"));
    fromTrace->setToolTip(tr("fwd_ms and bwd_ms from the record_function ranges named after layers in a PyTorch "
                             "profiler trace"));
    planner->addSeparator();
    QAction* zoomIn = planner->addAction(tr("Zoom &In"), this, [this] { m_planner->gantt()->zoomBy(1.5); });
    zoomIn->setShortcut(QKeySequence::ZoomIn);
    QAction* zoomOut = planner->addAction(tr("Zoom &Out"), this, [this] { m_planner->gantt()->zoomBy(1 / 1.5); });
    zoomOut->setShortcut(QKeySequence::ZoomOut);
    QAction* fit = planner->addAction(tr("&Fit Timeline"), m_planner->gantt(), &GanttView::fitToWindow);
    fit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));

    // One entry per tab, in the tabs' order, Ctrl+N selecting the Nth: built from the tabs, so the
    // menu, the shortcuts and the tab bar cannot disagree.
    QMenu* view = menuBar()->addMenu(tr("V&iew"));
    for (int i = 0; i < m_tabs->count() && i < 9; ++i) {
        QAction* show = view->addAction(m_tabs->tabText(i), this, [this, i] { m_tabs->setCurrentIndex(i); });
        show->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    }

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About ShardScope"), this, &MainWindow::showAbout);
    help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);

    QToolBar* toolbar = addToolBar(tr("Main"));
    toolbar->setObjectName(QStringLiteral("mainToolbar"));
    toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toolbar->addAction(open);
    toolbar->addAction(reverify);
    toolbar->addAction(cancel);
    toolbar->addAction(report);
}
