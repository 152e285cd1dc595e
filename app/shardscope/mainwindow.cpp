#include "app/shardscope/mainwindow.h"
#include "app/shardscope/pagescrollarea.h"

#include "widgets/panels/checkpointpanel.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/jobs/democheckpoint.h"
#include "core/report/report.h"
#include "core/report/verdict.h"
#include "widgets/export/exporter.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/panels/modelplanpanel.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/planpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/panels/convertdialog.h"
#include "widgets/settings/settings.h"
#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <algorithm>

#include <QAction>
#include <QScreen>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QInputDialog>
#include <QLineEdit>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

using namespace shardwidgets;

MainWindow::MainWindow(Settings* settings, bool interactive, QWidget* parent)
    : QMainWindow(parent), m_settings(settings), m_interactive(interactive), m_tabs(new QTabWidget(this)),
      m_checkpointStack(new QStackedWidget(this)), m_checkpoint(new CheckpointPanel(this)),
      m_planner(new PlannerPanel(this)), m_reshard(new ReshardPanel(this)), m_tensors(new TensorsPanel(this)),
      m_compare(new ComparePanel(this)), m_verdict(new QLabel(this))
{
    setWindowTitle(tr("ShardScope"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/shardscope.svg")));
    setAcceptDrops(true);
    VerifyController::Options options;
    options.fast = m_settings->fastVerify();
    options.threads = m_settings->verifyThreads();
    m_checkpoint->setVerifyOptions(options);

    m_checkpointStack->addWidget(createWelcomePage());
    m_checkpointStack->addWidget(m_checkpoint);
    addPage(m_checkpointStack, tr("&Checkpoint"));
    addPage(m_tensors, tr("&Tensors"));
    addPage(m_compare, tr("Co&mpare"));
    addPage(m_reshard, tr("&Reshard"));
    addPage(m_planner, tr("&Pipeline planner"));
    m_reshard->setInteractive(m_interactive);
    m_tabs->setDocumentMode(true);
    setCentralWidget(m_tabs);
    setMinimumSize(kMinimumSize);
    if (!tlsVerified()) {
        // The one opt-out of TLS checks stays in sight for as long as it holds.
        auto* unchecked = new QLabel(tr("⚠ TLS certificates not checked (--no-verify-tls)"), this);
        unchecked->setObjectName(QStringLiteral("tlsUncheckedLabel"));
        unchecked->setToolTip(tr("This run reads https:// servers and S3 endpoints without checking their "
                                 "certificates: another server could answer in their place"));
        statusBar()->addPermanentWidget(unchecked);
    }
    statusBar()->addPermanentWidget(m_verdict);
    createActions();

    connect(m_checkpoint, &CheckpointPanel::statusMessage, this,
            [this](const QString& text) { showPageMessage(m_checkpointStack, text); });
    connect(m_tabs, &QTabWidget::currentChanged, this, [this] {
        if (m_messagePage && currentPage() != m_messagePage && statusBar()->currentMessage() == m_pageMessage)
            statusBar()->clearMessage();
    });
    connect(m_checkpoint, &CheckpointPanel::opened, this, [this](const QString& dir) {
        setWindowTitle(tr("%1 — ShardScope").arg(printableText(QFileInfo(dir).fileName())));
        m_verdict->setText(tr("⏳ verifying"));
    });
    connect(m_checkpoint, &CheckpointPanel::verificationFinished, this, &MainWindow::onVerificationFinished);
    // One verdict from the bytes and the values: whichever finishes last decides it.
    connect(m_tensors, &TensorsPanel::scanFinished, this, &MainWindow::updateVerdict);
    for (FailureBanner* banner : {m_checkpoint->banner(), m_tensors->banner()})
        connect(banner, &FailureBanner::reshardRequested, this, [this](int worldSize) {
            m_reshard->setTargetWorldSize(worldSize);
            showReshard();
            m_reshard->chooseDestinationAndReshard();
        });
    connect(m_checkpoint, &CheckpointPanel::expectedWorldSizeChanged, this, [this](int worldSize) {
        if (!m_openedFolder.isEmpty())
            m_settings->setExpectedWorldSize(m_openedFolder, worldSize);
    });
    // The reshard page previews the checkpoint that is open, as soon as its manifest is read.
    connect(m_checkpoint, &CheckpointPanel::opened, this, [this](const QString& dir) {
        if (const auto& manifest = m_checkpoint->controller()->manifest())
            m_reshard->setCheckpoint(dir, *manifest);
        else
            m_reshard->setNoManifest(dir);
    });
    connect(m_checkpoint, &CheckpointPanel::openFailed, m_reshard, &ReshardPanel::clear);
    // The Tensors page reads the values of the same checkpoint, in the background, at once.
    connect(m_checkpoint, &CheckpointPanel::opened, m_tensors, &TensorsPanel::open);
    connect(m_checkpoint, &CheckpointPanel::openFailed, m_tensors, &TensorsPanel::clear);
    // The Compare page compares the open checkpoint with another one, when asked.
    connect(m_checkpoint, &CheckpointPanel::opened, m_compare, &ComparePanel::setBase);
    connect(m_checkpoint, &CheckpointPanel::openFailed, m_compare, [this] { m_compare->setBase({}); });
    // One target world size: the ownership map's preview lane follows the reshard page and back.
    connect(m_reshard, &ReshardPanel::targetChanged, m_checkpoint->reshardTargetBox(), &QSpinBox::setValue);
    connect(m_checkpoint->reshardTargetBox(), &QSpinBox::valueChanged, this, [this](int value) {
        if (value > 0)
            m_reshard->setTargetWorldSize(value);
    });
    connect(m_reshard, &ReshardPanel::openRequested, this, &MainWindow::openPath);
    connect(m_reshard, &ReshardPanel::statusMessage, this,
            [this](const QString& text) { showPageMessage(m_reshard, text); });
    connect(m_checkpoint, &CheckpointPanel::openFailed, this, [this](const QString& message, const QString& path) {
        m_verdict->setText(tr("✗ not opened"));
        m_settings->removeRecentFolder(path);
        updateRecentMenu();
        showError(tr("Cannot open checkpoint"),
                  tr("<b>%1</b><br><br>%2").arg(printableText(path).toHtmlEscaped(), message.toHtmlEscaped()));
    });
    connect(m_planner, &PlannerPanel::profileError, this,
            [this](const QString& message) { showError(tr("Cannot load profile"), message.toHtmlEscaped()); });

    if (const auto training = m_settings->plannerTraining())
        m_planner->planner()->setTrainingOptions(*training);
    if (const auto search = m_settings->planSearch())
        m_planner->planPanel()->setSearchInputs(*search);
    if (const auto modelSearch = m_settings->modelSearch())
        m_planner->modelPlanPanel()->setInputs(*modelSearch);

    // The first window fits its screen: 1440×900 where there is room, else 90 % of what the screen
    // offers (a 1280×720 laptop would otherwise lose the SHA-256 column, the end of the timeline
    // and the status bar off its edges). A geometry saved on a larger screen is restored only if
    // it still fits.
    const QRect available = screen()->availableGeometry();
    const QSize fitted = QSize(std::min(1440, available.width() * 9 / 10), std::min(900, available.height() * 9 / 10))
                             .expandedTo(minimumSize());
    resize(fitted);
    move(available.center() - rect().center());
    if (restoreGeometry(m_settings->windowGeometry()) && !available.contains(frameGeometry())) {
        setWindowState(windowState() & ~Qt::WindowMaximized);
        resize(fitted);
        move(available.center() - rect().center());
    }
    restoreState(m_settings->windowState(), Settings::kWindowStateVersion);
}

void MainWindow::addPage(QWidget* page, const QString& title)
{
    // Each page is laid out for at least the window's minimum size; when it needs more (a root's
    // steps above a long failure, a large font) it scrolls rather than squeezing its controls
    // until their labels are cut. One scroll area per page: a tall page does not make the
    // others scroll.
    m_tabs->addTab(new PageScrollArea(page, m_tabs), title);
}

QWidget* MainWindow::currentPage() const
{
    const auto* scroll = qobject_cast<const QScrollArea*>(m_tabs->currentWidget());
    return scroll ? scroll->widget() : nullptr;
}

void MainWindow::showPage(QWidget* page)
{
    for (int i = 0; i < m_tabs->count(); ++i)
        if (const auto* scroll = qobject_cast<const QScrollArea*>(m_tabs->widget(i));
            scroll && scroll->widget() == page)
            m_tabs->setCurrentIndex(i);
}

QWidget* MainWindow::createWelcomePage()
{
    auto* page = new QWidget(this);
    auto* outer = new QVBoxLayout(page);
    outer->addStretch(1);
    auto* icon = new QLabel(page);
    icon->setPixmap(QIcon(QStringLiteral(":/icons/shardscope.svg")).pixmap(QSize(96, 96), devicePixelRatioF()));
    icon->setAlignment(Qt::AlignCenter);
    auto* title = new QLabel(tr("<h2>ShardScope</h2><p>Open a sharded training checkpoint to verify every "
                                "shard's hash, see who owns which slice of the parameters and preview a "
                                "reshard.<br>Drop a folder here, or:</p>"),
                             page);
    title->setAlignment(Qt::AlignCenter);
    title->setWordWrap(true);
    auto* demo = new QPushButton(tr("Open the demo checkpoint"), page);
    demo->setDefault(true);
    connect(demo, &QPushButton::clicked, this, &MainWindow::openDemo);
    auto* folder = new QPushButton(style()->standardIcon(QStyle::SP_DirOpenIcon), tr("Open Folder…"), page);
    connect(folder, &QPushButton::clicked, this, &MainWindow::chooseFolder);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    buttons->addWidget(demo);
    buttons->addWidget(folder);
    buttons->addStretch(1);
    auto* recent = new QListWidget(page);
    recent->setMaximumWidth(640);
    recent->setMaximumHeight(200);
    for (const QString& path : m_settings->recentFolders()) {
        auto* item = new QListWidgetItem(printableText(path), recent);
        item->setData(Qt::UserRole, path); // what to open: the folder itself, not how it is shown
    }
    recent->setVisible(recent->count() > 0);
    connect(recent, &QListWidget::itemActivated, this,
            [this](QListWidgetItem* item) { openPath(item->data(Qt::UserRole).toString()); });
    outer->addWidget(icon);
    outer->addWidget(title);
    outer->addLayout(buttons);
    auto* recentRow = new QHBoxLayout;
    recentRow->addStretch(1);
    recentRow->addWidget(recent, 2);
    recentRow->addStretch(1);
    outer->addSpacing(16);
    outer->addLayout(recentRow);
    outer->addStretch(2);
    return page;
}

void MainWindow::updateRecentMenu()
{
    m_recentMenu->clear();
    const QStringList folders = m_settings->recentFolders();
    for (int i = 0; i < folders.size(); ++i) {
        // "&&": an ampersand in a folder name is shown, not taken for a shortcut.
        const QString shown = printableText(folders[i]).replace(QLatin1Char('&'), QStringLiteral("&&"));
        QAction* action = m_recentMenu->addAction(QStringLiteral("&%1 %2").arg((i + 1) % 10).arg(shown));
        connect(action, &QAction::triggered, this, [this, path = folders[i]] { openPath(path); });
    }
    m_recentMenu->addSeparator();
    QAction* clear = m_recentMenu->addAction(tr("Clear List"), this, [this] {
        m_settings->clearRecentFolders();
        updateRecentMenu();
    });
    clear->setEnabled(!folders.isEmpty());
}

void MainWindow::openAndCompare(const QString& path, const QString& other)
{
    // Once A is open (and the Compare page has it as its base), compare it with B.
    auto* once = new QObject(this);
    connect(m_checkpoint, &CheckpointPanel::opened, once, [this, once, other] {
        once->deleteLater();
        showPage(m_compare);
        m_compare->compareWith(other);
    });
    connect(m_checkpoint, &CheckpointPanel::openFailed, once, &QObject::deleteLater);
    openPath(path);
}

void MainWindow::openPath(const QString& path)
{
    const QString clean = shardwidgets::isUrl(path) ? path : QDir::cleanPath(QFileInfo(path).absoluteFilePath());
    m_checkpointStack->setCurrentWidget(m_checkpoint);
    m_tabs->setCurrentIndex(0);
    m_settings->addRecentFolder(clean);
    updateRecentMenu();
    m_openedFolder = clean;
    m_checkpoint->setExpectedWorldSize(m_settings->expectedWorldSize(clean)); // the job's, for this folder
    m_checkpoint->open(clean);
}

void MainWindow::openDemo()
{
    statusBar()->showMessage(tr("Preparing the demo checkpoint in %1…").arg(demoCheckpointRoot()));
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcher<QString>::finished, this, [this, watcher] {
        const QString root = watcher->result();
        watcher->deleteLater();
        if (root.isEmpty()) {
            QString error;
            ensureDemoCheckpoint(&error); // cheap when it fails early; gives the reason
            showError(tr("Cannot create the demo checkpoint"), error.toHtmlEscaped());
            emit demoFailed(error);
            return;
        }
        openPath(root);
    });
    watcher->setFuture(ensureDemoCheckpointAsync());
}

void MainWindow::showPlanner()
{
    showPage(m_planner);
}

void MainWindow::showReshard()
{
    showPage(m_reshard);
}

void MainWindow::showCheckpoint()
{
    m_tabs->setCurrentIndex(0);
}

void MainWindow::chooseFolder()
{
    const QStringList recent = m_settings->recentFolders();
    const auto folder =
        std::find_if(recent.begin(), recent.end(), [](const QString& r) { return !shardwidgets::isUrl(r); });
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open checkpoint folder"),
                                                          folder == recent.end() ? QDir::homePath() : *folder);
    if (!dir.isEmpty())
        openPath(dir);
}

void MainWindow::chooseLocation()
{
    const QStringList recent = m_settings->recentFolders();
    const auto url =
        std::find_if(recent.begin(), recent.end(), [](const QString& r) { return shardwidgets::isUrl(r); });
    bool ok = false;
    const QString text =
        QInputDialog::getText(this, tr("Open location"),
                              tr("Read a checkpoint in place, from a bucket or a web server:\n"
                                 "    s3://bucket/prefix\n"
                                 "    https://host/path/model.safetensors.index.json\n"
                                 "S3 credentials and endpoint come from the environment, as for the AWS tools\n"
                                 "(AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_ENDPOINT_URL).%1")
                                  .arg(tlsVerified() ? QString()
                                                     : tr("\nTLS certificates are not checked in this run "
                                                          "(--no-verify-tls).")),
                              QLineEdit::Normal, url != recent.end() ? *url : QStringLiteral("s3://"), &ok)
            .trimmed();
    if (!ok || text.isEmpty())
        return;
    // An unknown scheme, credentials in it, a folder: said now, before anything is read.
    if (const QString problem = shardwidgets::urlProblem(text, tr("a local folder is opened with Open Folder…"));
        !problem.isEmpty()) {
        showError(tr("Cannot open this location"), problem.toHtmlEscaped());
        return;
    }
    openPath(text);
}

ReportSources MainWindow::reportSources()
{
    ReportSources sources;
    sources.checkpointPath = m_checkpoint->currentPath();
    if (m_checkpoint->report())
        sources.report = &*m_checkpoint->report();
    // The plan goes into a checkpoint's report only when its profile was chosen (PlannerPanel::
    // profileChosen); without a checkpoint the plan is the whole report, so the demo's may be it.
    const bool aboutACheckpoint = sources.report || !sources.checkpointPath.isEmpty();
    if (!aboutACheckpoint || m_planner->profileChosen()) {
        sources.planner = m_planner->planner();
        sources.gantt = m_planner->gantt();
    }
    sources.ownership = m_checkpoint->ownershipMap();
    // The preview belongs to the checkpoint in the report, not to whatever was open before it.
    if (sources.report && m_reshard->plan()) {
        sources.reshardPlan = &*m_reshard->plan();
        sources.reshardView = m_reshard->view();
    }
    // The tensors read for the same checkpoint (the scan follows every open): its content health.
    if (sources.report) {
        sources.content = m_tensors->sharedReport();
        sources.diff = m_compare->sharedReport();
    }
    sources.window = this;
    return sources;
}

bool MainWindow::exportReport(const QString& file, QString* error)
{
    return Exporter::exportReport(file, reportSources(), error);
}

bool MainWindow::exportTimeline(const QString& file, QString* error)
{
    // The picture's own caption (schedule, stages, M, bubble, step time, profile) as its title too.
    return Exporter::exportTimeline(file, m_planner->gantt(), m_planner->gantt()->caption(), error);
}

void MainWindow::chooseReportFile()
{
    if (m_checkpoint->isVerifying())
        statusBar()->showMessage(tr("Verification is still running: the report shows the last finished result"));
    // Named after the checkpoint and step, so a report attached to a ticket says what it is about.
    chooseExportFile(tr("Export report"), Exporter::defaultReportName(reportSources()), Exporter::reportFilter(),
                     &MainWindow::exportReport, tr("Report written to %1"));
}

void MainWindow::chooseTimelineFile()
{
    chooseExportFile(tr("Export timeline"), QStringLiteral("timeline.png"), Exporter::timelineFilter(),
                     &MainWindow::exportTimeline, tr("Timeline written to %1"));
}

void MainWindow::chooseExportFile(const QString& title, const QString& defaultName, const QString& filter,
                                  bool (MainWindow::*write)(const QString&, QString*), const QString& written)
{
    const QString file = QFileDialog::getSaveFileName(
        this, title, QDir(m_settings->lastExportDirectory()).filePath(defaultName), filter);
    if (file.isEmpty())
        return;
    m_settings->setLastExportDirectory(QFileInfo(file).absolutePath());
    QString error;
    if (!(this->*write)(file, &error))
        showError(tr("Export failed"), error.toHtmlEscaped());
    else
        statusBar()->showMessage(written.arg(file), 8000);
}

void MainWindow::chooseProfile()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Load profile"), QFileInfo(m_settings->lastProfile()).absolutePath(),
                                     tr("Profiles (*.json *.csv);;All files (*)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!m_planner->openProfile(path, &error)) {
        showError(tr("Cannot load profile"), error.toHtmlEscaped());
        return;
    }
    m_settings->setLastProfile(path);
    showPlanner();
}

void MainWindow::showAbout()
{
    QMessageBox::about(
        this, tr("About ShardScope"),
        tr("<h3>ShardScope %1</h3>"
           "<p>Inspect, verify and reshard sharded training checkpoints, and plan "
           "pipeline-parallel schedules on an interactive timeline.</p>"
           "<p>Built with Qt %2 (running on Qt %3).</p>")
            .arg(QStringLiteral(SHARDSCOPE_VERSION), QStringLiteral(QT_VERSION_STR), QString::fromLatin1(qVersion())));
}

void MainWindow::showError(const QString& title, const QString& text)
{
    statusBar()->showMessage(title);
    if (!m_interactive)
        return;
    QMessageBox box(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
    box.setTextFormat(Qt::RichText);
    box.exec();
}

void MainWindow::showPageMessage(QWidget* page, const QString& text)
{
    m_messagePage = page;
    m_pageMessage = text;
    statusBar()->showMessage(text, currentPage() == page ? 0 : 8000);
}

void MainWindow::onVerificationFinished()
{
    const auto& report = m_checkpoint->report();
    if (!report)
        return;
    // A manifest only the verifier could read (the first read raced a writer): preview it now.
    if (!m_reshard->plan() && report->manifest)
        m_reshard->setCheckpoint(m_checkpoint->controller()->directory(), *report->manifest);
    updateVerdict();
}

void MainWindow::updateVerdict()
{
    const auto& report = m_checkpoint->report();
    if (!report) { // the values were read first: no verdict until the bytes are verified too
        if (m_checkpoint->isVerifying())
            m_tensors->banner()->showVerifying(m_checkpoint->currentPath());
        return;
    }
    const bool reading = m_tensors->isReading();
    const auto& content = m_tensors->sharedReport(); // of the checkpoint that is open (cleared on open)
    const int expected = m_checkpoint->expectedWorldSize();
    const shardscope::ResumeVerdict verdict =
        shardscope::resume_verdict(*report, reading ? nullptr : content.get(), expected > 0 ? expected : -1);
    m_checkpoint->showVerdict(verdict, reading);
    m_tensors->showVerdict(verdict, reading, &*report); // marks the tensors read from its failed files

    using shardscope::ResumeState;
    Severity severity = Severity::bad;
    if (verdict.no_checkpoint) { // a folder to pick again, not a damaged checkpoint
        m_verdict->setText(tr("no checkpoint"));
        severity = Severity::neutral;
    } else {
        switch (verdict.state) {
        case ResumeState::safe:
            m_verdict->setText(tr("✓ safe to resume"));
            severity = Severity::good;
            break;
        case ResumeState::unchecked:
            m_verdict->setText(report->cancelled ? tr("◌ cancelled")
                                   : reading     ? tr("⏳ reading values")
                                                 : tr("? values not read"));
            severity = reading ? Severity::busy : Severity::neutral;
            break;
        case ResumeState::needs_reshard: m_verdict->setText(tr("✗ needs reshard")); break;
        case ResumeState::diverged: m_verdict->setText(tr("✗ diverged")); break;
        case ResumeState::incomplete: m_verdict->setText(tr("✗ incomplete")); break;
        case ResumeState::corrupt: m_verdict->setText(tr("✗ corrupt")); break;
        }
    }
    m_verdict->setToolTip(printableText(verdict.title));
    QPalette pal = m_verdict->palette();
    pal.setColor(QPalette::WindowText, severityColor(severity, palette()));
    m_verdict->setPalette(pal);

    // Reshard reads every source shard and stops at the first that fails its check: a failure of
    // the bytes blocks it, but a world-size change of intact shards is exactly what it cures, and
    // the preview goes to the job's world size.
    const bool only_world_size =
        std::all_of(report->problems.begin(), report->problems.end(), [](const shardscope::Problem& p) {
            return p.kind == shardscope::ProblemKind::world_size_mismatch;
        });
    m_reshard->setSourceProblem(
        report->cancelled || only_world_size ? QString() : printableText(shardscope::classify_failure(*report).title));
    if (verdict.state == ResumeState::needs_reshard && expected > 0)
        m_reshard->setTargetWorldSize(expected);
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (m_interactive) {
        m_settings->setWindowGeometry(saveGeometry());
        m_settings->setWindowState(saveState(Settings::kWindowStateVersion));
        m_settings->setPlannerTraining(m_planner->planner()->trainingOptions());
        m_settings->setPlanSearch(m_planner->planPanel()->searchSpec());
        m_settings->setModelSearch(m_planner->modelPlanPanel()->inputs());
    }
    m_checkpoint->cancel();
    m_reshard->cancelReshard(); // core removes what it wrote; the controller waits for it
    if (m_convertDialog)
        m_convertDialog->cancelConversion(); // the same: no half-written output stays
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.size() == 1 && urls.first().isLocalFile() && QFileInfo::exists(urls.first().toLocalFile()))
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.size() != 1 || !urls.first().isLocalFile())
        return;
    QFileInfo info(urls.first().toLocalFile());
    if (!info.exists())
        return;
    // A dropped manifest.json or shard file means its folder.
    const QString path = info.isDir() ? info.absoluteFilePath() : info.absolutePath();
    event->acceptProposedAction();
    // Not inside the drop handler: the drag source is still waiting for it to return.
    QTimer::singleShot(0, this, [this, path] { openPath(path); });
}
