// The main window's menus, toolbar and shortcuts (mainwindow.h): what each action does and when
// it is enabled.

#include "app/shardscope/mainwindow.h"

#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/settings/settings.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/verifycontroller.h"

#include <QAction>
#include <QApplication>
#include <QInputDialog>
#include <QMenuBar>
#include <QSpinBox>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>

using namespace shardwidgets;

void MainWindow::createActions()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(style()->standardIcon(QStyle::SP_DirOpenIcon), tr("&Open Folder…"), this,
                                    &MainWindow::chooseFolder);
    open->setShortcut(QKeySequence::Open);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    updateRecentMenu();
    file->addAction(tr("Open &Demo Checkpoint"), this, &MainWindow::openDemo);
    QAction* compare = file->addAction(tr("Compare &With…"), this, [this] {
        showPage(m_compare);
        m_compare->chooseAndCompare();
    });
    compare->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_D));
    compare->setEnabled(false);
    connect(m_checkpoint, &CheckpointPanel::opened, compare, [compare] { compare->setEnabled(true); });
    connect(m_checkpoint, &CheckpointPanel::openFailed, compare, [compare] { compare->setEnabled(false); });
    file->addSeparator();
    QAction* report = file->addAction(style()->standardIcon(QStyle::SP_DialogSaveButton), tr("&Export Report…"),
                                      this, &MainWindow::chooseReportFile);
    report->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    QAction* timeline = file->addAction(tr("Export &Timeline…"), this, &MainWindow::chooseTimelineFile);
    timeline->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E));
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* check = menuBar()->addMenu(tr("&Verify"));
    QAction* reverify = check->addAction(style()->standardIcon(QStyle::SP_BrowserReload), tr("&Re-verify"),
                                         m_checkpoint, &CheckpointPanel::reverify);
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
        reverify->setEnabled(checkpoint && !verifying);
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
    planner->addSeparator();
    QAction* zoomIn = planner->addAction(tr("Zoom &In"), this, [this] { m_planner->gantt()->zoomBy(1.5); });
    zoomIn->setShortcut(QKeySequence::ZoomIn);
    QAction* zoomOut = planner->addAction(tr("Zoom &Out"), this, [this] { m_planner->gantt()->zoomBy(1 / 1.5); });
    zoomOut->setShortcut(QKeySequence::ZoomOut);
    QAction* fit = planner->addAction(tr("&Fit Timeline"), m_planner->gantt(), &GanttView::fitToWindow);
    fit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));

    QMenu* view = menuBar()->addMenu(tr("V&iew"));
    QAction* showCheck = view->addAction(tr("&Checkpoint"), this, &MainWindow::showCheckpoint);
    showCheck->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_1));
    QAction* showReshard = view->addAction(tr("&Reshard Preview"), this, &MainWindow::showReshard);
    showReshard->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_3));
    QAction* showPlan = view->addAction(tr("&Pipeline Planner"), this, &MainWindow::showPlanner);
    showPlan->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_2));
    QAction* showTensors = view->addAction(tr("&Tensors"), this, [this] { showPage(m_tensors); });
    showTensors->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_4));
    QAction* showCompare = view->addAction(tr("Co&mpare"), this, [this] { showPage(m_compare); });
    showCompare->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_5));

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
