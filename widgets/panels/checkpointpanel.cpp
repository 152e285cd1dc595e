#include "widgets/panels/checkpointpanel.h"

#include "widgets/jobs/checkpointlocation.h"
#include "widgets/views/failurebanner.h"
#include "widgets/style/flowlayout.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/views/ownershipmap.h"
#include "widgets/models/shardtablemodel.h"
#include "widgets/style/statusstyle.h"
#include "widgets/panels/stepspane.h"
#include "widgets/models/summarymodel.h"
#include "widgets/panels/tensorlistpane.h"

#include "core/open/nearby.h"
#include "core/util/cancel.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace shardwidgets {

CheckpointPanel::CheckpointPanel(QWidget* parent)
    : QWidget(parent), m_controller(new VerifyController(this)), m_shards(new ShardTableModel(this)),
      m_summary(new SummaryModel(this)), m_proxy(new QSortFilterProxyModel(this)), m_banner(new FailureBanner(this)),
      m_map(new OwnershipMap(this)), m_table(new QTableView(this)), m_summaryView(new QTableView(this)),
      m_problems(new QListWidget(this)), m_pathLabel(new QLabel(this)), m_stepsPane(new StepsPane(this)),
      m_progress(new QProgressBar(this)), m_rate(new QLabel(this)), m_cancel(new QPushButton(tr("Cancel"), this)),
      m_reverify(new QPushButton(tr("Re-verify"), this)), m_expected(new QSpinBox(this)), m_filter(new QLineEdit(this)),
      m_reshard(new QSpinBox(this)), m_tabs(new QTabWidget(this)), m_tensorList(new TensorListPane(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(buildHeader());
    layout->addWidget(m_banner);
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(buildSummaryPane());
    splitter->addWidget(buildFileTabs());
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 5);
    splitter->setChildrenCollapsible(false); // a pane dragged to nothing hides the summary's values
    layout->addWidget(splitter, 1);
    layout->addWidget(buildMapBox());
    connectJob();
}

QWidget* CheckpointPanel::buildHeader()
{
    m_expected->setObjectName(QStringLiteral("expectedWorldSize"));
    m_expected->setRange(0, shardscope::kMaxWorldSize);
    m_expected->setSpecialValueText(tr("expect any world size")); // the prefix is not shown with it
    m_expected->setPrefix(tr("expect "));
    m_expected->setSuffix(tr(" ranks"));
    m_expected->setToolTip(tr("The world size your job runs at: a checkpoint saved at another one is reported as a "
                              "world size change (shardctl --expect-world-size). Remembered per folder."));
    m_expected->setKeyboardTracking(false); // verify once the number is typed, not per digit
    QFont bold = m_pathLabel->font();
    bold.setBold(true);
    m_pathLabel->setFont(bold);
    m_pathLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_pathLabel->setTextFormat(Qt::PlainText); // a folder name is never markup
    m_pathLabel->setMinimumWidth(40); // a long path is cut, rather than making the window that wide
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(true);
    m_progress->setMinimumWidth(180);
    m_rate->setMinimumWidth(170);
    m_cancel->setEnabled(false);
    m_reverify->setEnabled(false);
    m_reverify->setObjectName(QStringLiteral("reverify"));
    // The folder, then the job's controls; in a narrow window the controls go to a second line
    // rather than cutting the folder's name to "/tmp/g/ck102".
    auto* header = new QWidget(this);
    auto* flow = new FlowLayout(header);
    auto* controls = new QWidget(header);
    auto* controlsRow = new QHBoxLayout(controls);
    controlsRow->setContentsMargins(0, 0, 0, 0);
    for (QWidget* widget : std::initializer_list<QWidget*>{m_expected, m_progress, m_rate, m_cancel, m_reverify})
        controlsRow->addWidget(widget);
    flow->addWidget(m_pathLabel);
    flow->addSpacing(12);
    flow->addWidget(controls);
    return header;
}

// Left of the files: a root's steps above the summary of the open one, and its problems.
QWidget* CheckpointPanel::buildSummaryPane()
{
    m_stepsPane->hide(); // only a root has steps to list
    m_summaryView->setModel(m_summary);
    m_summaryView->verticalHeader()->hide();
    fitKeyColumn(m_summaryView); // the values stay in sight in a narrow window
    setMinimumRows(m_summaryView, 3);
    m_summaryView->setWordWrap(false);
    m_summaryView->verticalHeader()->setDefaultSectionSize(m_summaryView->fontMetrics().height() + 6);
    m_summaryView->setAlternatingRowColors(true);
    m_summaryView->setSelectionBehavior(QAbstractItemView::SelectRows);
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_stepsPane, 2);
    leftLayout->addWidget(m_summaryView, 3);
    m_problems->setWordWrap(true);
    m_problems->setAlternatingRowColors(true);
    m_problems->hide();
    leftLayout->addWidget(m_problems, 1);
    return left;
}

QWidget* CheckpointPanel::buildFileTabs()
{
    m_proxy->setSourceModel(m_shards);
    m_proxy->setSortRole(ShardTableModel::SortRole);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_proxy->setFilterKeyColumn(-1);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(ShardTableModel::Rank, Qt::AscendingOrder);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setColumnWidth(ShardTableModel::Rank, 56);
    m_table->setColumnWidth(ShardTableModel::Status, 140);
    m_table->setColumnWidth(ShardTableModel::File, 170);
    m_table->setColumnWidth(ShardTableModel::Bytes, 90);
    m_table->setColumnWidth(ShardTableModel::Offset, 110);
    m_table->setColumnWidth(ShardTableModel::Numel, 100);
    setMinimumRows(m_table, 3);
    m_table->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto* copy = new QAction(tr("Copy"), m_table);
    copy->setShortcut(QKeySequence::Copy);
    copy->setShortcutContext(Qt::WidgetShortcut);
    connect(copy, &QAction::triggered, this, &CheckpointPanel::copySelection);
    m_table->addAction(copy);
    m_filter->setPlaceholderText(tr("Filter shards (rank, file, status…)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    auto* files = new QWidget(this);
    auto* filesLayout = new QVBoxLayout(files);
    filesLayout->setContentsMargins(0, 0, 0, 0);
    filesLayout->addWidget(m_filter);
    filesLayout->addWidget(m_table);
    // A foreign format's tensors (up to 10^5) get a tab of their own beside its files; a native
    // checkpoint has no such list, so the tab is hidden for it.
    m_tabs->setObjectName(QStringLiteral("checkpointTabs"));
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(files, tr("Files"));
    m_tabs->addTab(m_tensorList, tr("Tensor list"));
    m_tabs->setTabVisible(kTensorsTab, false);
    return m_tabs;
}

// The map's title and its preview control share one line: a small window's height goes to the
// tables, not to a frame.
QWidget* CheckpointPanel::buildMapBox()
{
    m_mapBox = new QWidget(this);
    auto* mapLayout = new QVBoxLayout(m_mapBox);
    mapLayout->setContentsMargins(0, 0, 0, 0);
    auto* reshardRow = new QHBoxLayout;
    m_mapTitle = new QLabel(tr("Ownership of the flat parameter space"), m_mapBox);
    m_mapTitle->setFont(m_pathLabel->font());
    m_mapTitle->setMinimumWidth(40); // cut rather than widen the window
    m_reshard->setRange(0, shardscope::kMaxWorldSize);
    m_reshard->setSpecialValueText(tr("off"));
    m_reshard->setToolTip(tr("Show the ranges each rank would own after resharding to this world size"));
    m_reshardLabel = new QLabel(tr("&Reshard preview, ranks:"), this);
    m_reshardLabel->setBuddy(m_reshard);
    reshardRow->addWidget(m_mapTitle, 1);
    reshardRow->addWidget(m_reshardLabel);
    reshardRow->addWidget(m_reshard);
    connect(m_reshard, &QSpinBox::valueChanged, m_map, &OwnershipMap::setReshardTarget);
    mapLayout->addLayout(reshardRow);
    mapLayout->addWidget(m_map);
    return m_mapBox;
}

void CheckpointPanel::connectJob()
{
    connect(m_cancel, &QPushButton::clicked, this, &CheckpointPanel::cancel);
    connect(m_reverify, &QPushButton::clicked, this, &CheckpointPanel::reverify);
    connect(m_banner, &FailureBanner::openRequested, this, &CheckpointPanel::open);
    connect(m_stepsPane, &StepsPane::openRequested, this, [this](const QString& dir) {
        m_path = dir;
        reverify(); // keeps the root's step list
    });
    connect(m_controller, &VerifyController::manifestReady, this, &CheckpointPanel::onManifestReady);
    connect(m_controller, &VerifyController::firstTensorsListed, this, &CheckpointPanel::onFirstTensorsListed);
    connect(m_controller, &VerifyController::filesListed, this, &CheckpointPanel::onFilesListed);
    connect(m_controller, &VerifyController::shardPercent, m_shards, &ShardTableModel::setShardPercent);
    connect(m_controller, &VerifyController::shardFinished, m_shards, &ShardTableModel::setShardResult);
    connect(m_controller, &VerifyController::progressChanged, this, &CheckpointPanel::onProgress);
    connect(m_controller, &VerifyController::finished, this, &CheckpointPanel::onFinished);
    connect(m_controller, &VerifyController::failed, this, &CheckpointPanel::onFailed);
    connect(m_expected, &QSpinBox::valueChanged, this, [this](int value) {
        m_options.expectedWorldSize = value > 0 ? value : -1;
        if (m_path.isEmpty())
            return;
        emit expectedWorldSizeChanged(value);
        reverify();
    });
}

void CheckpointPanel::open(const QString& path)
{
    m_path = cleanCheckpointText(path);
    m_rootPath.clear();
    m_suggestedPath.clear();
    stopNearbySearch();
    m_suggestedText.clear();
    m_tensorList->clear(); // it points into the report and the controller's listing
    m_report.reset();
    m_stepsPane->hide();
    m_pathLabel->setText(printableText(m_path));
    m_pathLabel->setToolTip(printableText(m_path));
    m_controller->start(m_path, m_options);
    m_banner->showVerifying(m_path);
    m_cancel->setEnabled(true);
    m_reverify->setEnabled(false);
    m_progress->setValue(0);
    m_rate->clear();
    emit verificationStarted();
}

void CheckpointPanel::setExpectedWorldSize(int worldSize)
{
    const QSignalBlocker blocker(m_expected);
    m_expected->setValue(std::max(0, worldSize));
    m_options.expectedWorldSize = worldSize > 0 ? worldSize : -1;
}

int CheckpointPanel::expectedWorldSize() const
{
    return std::max(0, m_options.expectedWorldSize);
}

bool CheckpointPanel::canReverify() const
{
    return !m_path.isEmpty() && !isVerifying() && !(m_report && shardscope::no_checkpoint_found(*m_report));
}

void CheckpointPanel::reverify()
{
    if (m_path.isEmpty())
        return;
    const QString root = m_rootPath;
    const QString path = m_path;
    m_suggestedPath.clear();
    stopNearbySearch();
    m_suggestedText.clear();
    m_tensorList->clear();
    m_report.reset();
    m_controller->start(path, m_options);
    m_rootPath = root;
    m_banner->showVerifying(path);
    m_cancel->setEnabled(true);
    m_reverify->setEnabled(false);
    emit verificationStarted();
}

void CheckpointPanel::cancel()
{
    m_controller->cancel();
}

void CheckpointPanel::onManifestReady()
{
    const QString dir = m_controller->directory();
    const auto& manifest = m_controller->manifest();
    m_pathLabel->setText(printableText(dir));
    m_banner->showVerifying(dir);
    if (m_controller->isRoot()) {
        m_rootPath = m_controller->path();
        m_stepsPane->setSteps(m_controller->steps(), m_rootPath);
        m_stepsPane->show();
    }
    m_stepsPane->setCurrentDirectory(dir); // a step picked from the root's list keeps the list
    showNativeLayout();
    m_tensorList->clear();
    if (manifest) {
        m_shards->setManifest(*manifest);
        m_summary->setCheckpoint(dir, m_controller->format(), *manifest);
        m_map->setManifest(*manifest);
        m_map->setReshardTarget(m_reshard->value());
    } else {
        m_shards->clear();
        m_summary->clear();
        m_map->clear();
    }
    m_problems->clear();
    m_problems->hide();
    emit opened(dir);
    emit statusMessage(tr("Verifying %1…").arg(printableText(dir)));
}

void CheckpointPanel::onFirstTensorsListed()
{
    // The first tensors of a long metadata (DCP), while the rest is read: onFilesListed replaces
    // them with the whole list. The controller keeps them until its next start().
    m_tabs->setTabVisible(kTensorsTab, true);
    m_tensorList->setSummary(&m_controller->firstTensors(), TensorListPane::Listing::first);
}

void CheckpointPanel::onFilesListed()
{
    // Native checkpoints have their rows from the manifest already; a foreign format's rows
    // exist from here on, while its files are being checked.
    const shardscope::VerifyReport& listed = m_controller->listed();
    if (!listed.foreign)
        return;
    m_shards->setChecks(listed.shards);
    m_summary->setForeign(QString::fromStdString(listed.dir.string()), listed);
    showForeignLayout(listed);
    // The controller keeps `listed` until its next start(), which open() and reverify() precede
    // with clear(). Formats whose metadata lists the tensors (DCP) show them from here on.
    if (!listed.foreign->tensors.empty())
        m_tensorList->setSummary(&*listed.foreign);
}

void CheckpointPanel::showForeignLayout(const shardscope::VerifyReport& report)
{
    // A foreign format has no flat parameter ranges: its file names are what matter, and the map
    // shows who holds which chunks only where the format records chunks (DCP).
    m_table->setColumnHidden(ShardTableModel::Offset, true);
    m_table->setColumnHidden(ShardTableModel::Numel, true);
    m_table->setColumnWidth(ShardTableModel::File, 330);
    m_reshard->setVisible(false);
    m_reshardLabel->setVisible(false);
    m_tabs->setTabVisible(kTensorsTab, true);
    if (report.foreign && report.foreign->layout) {
        m_mapTitle->setText(tr("Ownership of the stored chunks (every tensor's chunks end to end)"));
        m_map->setForeignLayout(*report.foreign->layout, report.shards);
        m_mapBox->show();
    } else {
        m_map->clear();
        m_mapBox->hide();
    }
}

void CheckpointPanel::showNativeLayout()
{
    m_table->setColumnHidden(ShardTableModel::Offset, false);
    m_table->setColumnHidden(ShardTableModel::Numel, false);
    m_table->setColumnWidth(ShardTableModel::File, 170);
    m_reshard->setVisible(true);
    m_reshardLabel->setVisible(true);
    m_tabs->setTabVisible(kTensorsTab, false);
    m_tabs->setCurrentIndex(0);
    m_mapTitle->setText(tr("Ownership of the flat parameter space"));
    m_mapBox->show();
}

void CheckpointPanel::onProgress(quint64 done, quint64 total, double rate, double eta)
{
    showJobProgress(m_progress, m_rate, done, total, rate, eta, tr("reading manifest"));
}

void CheckpointPanel::onFinished()
{
    // open() and reverify() cleared the pane with m_report: it points at most into the listing.
    // Taken, not copied: 10^5 foreign tensors copied here stalled the event loop by 80 ms.
    m_report = m_controller->takeReport();
    const shardscope::VerifyReport& report = *m_report;
    if (!m_controller->manifest() && report.manifest) // a manifest only the verifier could read
        m_shards->setManifest(*report.manifest);
    if (report.foreign) { // a foreign format: the summary is complete only now
        if (m_shards->rowCount() != int(report.shards.size())) // listed rows are updated in place
            m_shards->setChecks(report.shards);
        showForeignLayout(report);
        m_summary->setForeign(QString::fromStdString(report.dir.string()), report);
        m_tensorList->setSummary(&*report.foreign);
    }
    for (std::size_t i = 0; i < report.shards.size(); ++i)
        if (report.shards[i].status != m_shards->status(int(i)) &&
            report.shards[i].status != shardscope::ShardStatus::pending)
            m_shards->setShardResult(int(i), report.shards[i]);
    if (report.cancelled)
        m_shards->markUnchecked();
    m_banner->showReport(report);
    if (!report.cancelled) // the steps list says what this verification found, not just "complete"
        m_stepsPane->setVerdict(QString::fromStdString(report.dir.string()), report.ok());
    std::set<int> failed;
    for (const auto& check : report.shards)
        if (severity(check.status) == Severity::bad)
            failed.insert(check.rank);
    m_map->setFailedRanks(std::move(failed));
    showProblems(report);
    m_cancel->setEnabled(false);
    m_rate->clear();
    if (shardscope::no_checkpoint_found(report)) {
        // Not a failure of anything: verifying the same folder again would find the same nothing.
        m_reverify->setEnabled(false);
        m_problems->hide(); // the banner says it, and what would open
        m_mapBox->hide();
        showJobOutcome(m_progress, Severity::neutral, tr("no checkpoint"));
        m_progress->setValue(m_progress->minimum()); // a full bar reads as work done
        emit statusMessage(tr("No checkpoint found in %1").arg(printableText(m_path)));
        findNearbyCheckpoint();
        emit verificationFinished();
        return;
    }
    m_reverify->setEnabled(true);
    showJobOutcome(m_progress,
                   report.cancelled  ? Severity::neutral
                       : report.ok() ? Severity::good
                                     : Severity::bad,
                   report.cancelled                           ? tr("cancelled")
                       : !report.ok()                         ? tr("failed")
                       : shardscope::verify_read_data(report) ? tr("verified")
                                                              : tr("checked"));
    // A format without checksums has only its headers and byte ranges checked: never "verified".
    emit statusMessage(report.cancelled   ? tr("Verification cancelled")
                           : !report.ok() ? tr("%n problem(s) found", nullptr, int(report.problems.size()))
                           : shardscope::verify_read_data(report)
                           ? tr("All %1 shards verified").arg(report.shards.size())
                           : tr("All %1 files' headers and byte ranges check out (the format has no checksums)")
                                 .arg(report.shards.size()));
    emit verificationFinished();
}

void CheckpointPanel::showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues)
{
    m_banner->showVerdict(verdict, readingValues);
    if (verdict.no_checkpoint && !m_suggestedPath.isEmpty())
        m_banner->suggestCheckpoint(m_suggestedPath, m_suggestedText);
}

CheckpointPanel::~CheckpointPanel()
{
    stopNearbySearch();
}

void CheckpointPanel::stopNearbySearch()
{
    if (m_nearbyCancel)
        *m_nearbyCancel = true;
    m_nearbyCancel.reset();
}

void CheckpointPanel::findNearbyCheckpoint()
{
    using Nearby = std::optional<shardscope::NearbyCheckpoint>;
    const QString path = m_path;
    shardscope::storage::Location where;
    try {
        where = checkpointLocation(path);
    } catch (const shardscope::Error&) {
        return; // no location to look around (its own error is shown)
    }
    stopNearbySearch();
    m_nearbyCancel = std::make_shared<std::atomic<bool>>(false);
    auto* watcher = new QFutureWatcher<Nearby>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, path] {
        const Nearby nearby = watcher->result();
        watcher->deleteLater();
        // Another folder was opened (or this one verified again) meanwhile: its own search follows.
        if (!nearby || path != m_path || m_controller->isRunning())
            return;
        m_suggestedPath = QString::fromStdString(shardscope::storage::to_string(nearby->location));
        m_suggestedText =
            tr("A checkpoint is next to it: %1.").arg(printableText(QString::fromStdString(describe_nearby(*nearby))));
        m_banner->suggestCheckpoint(m_suggestedPath, m_suggestedText);
    });
    // Detection lists the parent and up to kMaxNearbyFolders sub-folders (in a bucket, requests to
    // a server): never on the GUI thread.
    watcher->setFuture(QtConcurrent::run([where, cancel = m_nearbyCancel] {
        const shardscope::CancelScope scope(cancel.get());
        return shardscope::nearby_checkpoint(where);
    }));
}

void CheckpointPanel::showProblems(const shardscope::VerifyReport& report)
{
    m_problems->clear();
    for (const auto& problem : report.problems) {
        auto* item =
            new QListWidgetItem(severityIcon(Severity::bad),
                                QStringLiteral("%1 — %2").arg(QString::fromUtf8(shardscope::to_string(problem.kind)),
                                                              printableText(problem.message)),
                                m_problems);
        item->setToolTip(printableText(problem.message));
    }
    for (const auto& name : report.leftover_tmp_files)
        new QListWidgetItem(severityIcon(Severity::neutral), tr("leftover temporary file %1").arg(printableText(name)),
                            m_problems);
    m_problems->setVisible(m_problems->count() > 0);
}

void CheckpointPanel::onFailed(const QString& message, const QString& path)
{
    m_cancel->setEnabled(false);
    m_reverify->setEnabled(true);
    m_shards->clear();
    m_summary->clear();
    m_tensorList->clear();
    m_map->clear();
    showJobOutcome(m_progress, Severity::bad, tr("not opened"));
    m_rate->clear();
    m_banner->showError(tr("Cannot open %1").arg(printableText(path.isEmpty() ? m_path : path)), message);
    emit openFailed(message, path.isEmpty() ? m_path : path);
}

void CheckpointPanel::copySelection() const
{
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    QStringList lines;
    for (const QModelIndex& row : rows) {
        QStringList cells;
        for (int column = 0; column < ShardTableModel::ColumnCount; ++column)
            cells << m_proxy->index(row.row(), column).data(ShardTableModel::FullValueRole).toString();
        lines << cells.join(QLatin1Char('\t'));
    }
    if (!lines.isEmpty())
        QApplication::clipboard()->setText(lines.join(QLatin1Char('\n')));
}

} // namespace shardwidgets
