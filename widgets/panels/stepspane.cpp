#include "widgets/panels/stepspane.h"

#include "core/util/cancel.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/models/steplistmodel.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"

#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QStyle>
#include <QStyleOptionViewItem>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent>
#include <algorithm>
#include <utility>

namespace shardwidgets {

StepsPane::StepsPane(QWidget* parent)
    : QWidget(parent), m_model(new StepListModel(this)), m_view(new QTableView(this)), m_title(new QLabel(this)),
      m_open(new QPushButton(tr("Open"), this)), m_refresh(new QPushButton(tr("Refresh"), this)),
      m_mirror(new QPushButton(tr("Mirror…"), this)), m_lockLine(new QLabel(this)), m_autoRefresh(new QTimer(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    QFont bold = m_title->font();
    bold.setBold(true);
    m_title->setFont(bold);
    m_title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    layout->addWidget(m_title);
    m_lockLine->setWordWrap(true);
    m_lockLine->setTextFormat(Qt::PlainText); // a host name is the writer's, not markup
    m_lockLine->hide();
    layout->addWidget(m_lockLine);

    m_view->setModel(m_model);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 8);
    m_view->setAlternatingRowColors(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::SingleSelection);
    m_view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_view->setWordWrap(false);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    setMinimumRows(m_view, 3); // the newest steps, the one open and the one before it
    layout->addWidget(m_view, 1);

    auto* buttons = new QHBoxLayout;
    m_open->setToolTip(tr("Open and verify the selected step (Enter or double-click)"));
    m_refresh->setToolTip(tr("List the root's steps again (a running job may have saved more)"));
    m_mirror->setToolTip(tr("Also list the steps of the second tier: the mirror folder or bucket"));
    m_open->setEnabled(false);
    buttons->addWidget(m_open);
    buttons->addStretch(1);
    buttons->addWidget(m_refresh);
    buttons->addWidget(m_mirror);
    layout->addLayout(buttons);

    connect(m_view, &QAbstractItemView::activated, this, [this](const QModelIndex&) { openSelected(); });
    connect(m_open, &QPushButton::clicked, this, &StepsPane::openSelected);
    connect(m_refresh, &QPushButton::clicked, this, &StepsPane::refresh);
    auto* mirrorMenu = new QMenu(m_mirror);
    mirrorMenu->addAction(tr("Folder…"), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, tr("Mirror of this checkpoint root"),
            m_mirrorPath.isEmpty() || isUrl(m_mirrorPath) ? m_model->root() : m_mirrorPath);
        if (!dir.isEmpty())
            setMirror(dir);
    });
    mirrorMenu->addAction(tr("Location (s3://…)…"), this, &StepsPane::chooseMirrorLocation);
    m_mirror->setMenu(mirrorMenu);
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            [this] { m_open->setEnabled(m_view->selectionModel()->hasSelection()); });
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] { m_open->setEnabled(false); });
    // A job writing the root saves and uploads on: look again now and then, off the GUI thread. A
    // bucket is listed less often: each listing is a request or two a step, to a store that bills them.
    m_autoRefresh->setInterval(5000);
    connect(m_autoRefresh, &QTimer::timeout, this, [this] {
        const bool remote = isUrl(m_model->root()) || isUrl(m_mirrorPath);
        if (isVisible() && !m_watcher && (!remote || ++m_remoteTicks % kRemoteTicks == 0))
            refresh();
    });
    m_autoRefresh->start();
}

void StepsPane::setAutoRefreshInterval(int milliseconds)
{
    if (milliseconds <= 0) {
        m_autoRefresh->stop();
        return;
    }
    m_autoRefresh->start(milliseconds);
}

StepsPane::~StepsPane()
{
    m_listingCancel->store(true); // a listing waiting on a server that does not answer stops now
    if (m_watcher)
        m_watcher->waitForFinished(); // the worker holds no pointer to us, but keep shutdown orderly
}

void StepsPane::chooseMirrorLocation()
{
    bool ok = false;
    const QString text =
        QInputDialog::getText(this, tr("Mirror of this checkpoint root"),
                              tr("The bucket and prefix the run uploads its steps to:"), QLineEdit::Normal,
                              isUrl(m_mirrorPath) ? m_mirrorPath : QStringLiteral("s3://"), &ok)
            .trimmed();
    if (!ok || text.isEmpty())
        return;
    QString problem = urlProblem(text, tr("a folder is chosen with Mirror › Folder…"));
    if (problem.isEmpty() && checkpointLocation(text).scheme != shardscope::storage::Scheme::s3)
        problem =
            tr("%1: a mirror is a bucket (s3://bucket/prefix); a web server cannot be listed").arg(printableText(text));
    if (!problem.isEmpty()) {
        QMessageBox::warning(this, tr("Mirror of this checkpoint root"), problem);
        return;
    }
    setMirror(text);
}

void StepsPane::setSteps(std::vector<shardscope::StepInfo> steps, const QString& root)
{
    if (cleanCheckpointText(root) != m_model->root()) {
        m_mirrorPath.clear(); // another root: its mirror is not ours
        m_listingCancel->store(true); // nor is the listing of the last one, which may wait on a server
    }
    // A root in a bucket is itself where steps are uploaded to: no mirror, no upload states.
    m_mirror->setVisible(!isUrl(root));
    m_view->setColumnHidden(StepListModel::Upload, isUrl(root));
    m_readingProblem.clear();
    m_model->setSteps(std::move(steps), root, m_mirrorPath);
    m_model->setCurrentDirectory(m_currentDirectory);
    refresh(); // the lock holder and upload states are read in the background, now
    updateTitle();
    updateLockLine(); // the last root's problem is not this one's
}

void StepsPane::setVerdict(const QString& directory, bool ok)
{
    m_model->setVerdict(directory, ok);
}

void StepsPane::setCurrentDirectory(const QString& directory)
{
    m_currentDirectory = cleanCheckpointText(directory);
    m_model->setCurrentDirectory(m_currentDirectory);
    const int row = m_model->rowForDirectory(m_currentDirectory);
    if (row >= 0)
        m_view->scrollTo(m_model->index(row, 0));
}

void StepsPane::setMirror(const QString& mirror)
{
    const QString clean = cleanCheckpointText(mirror);
    if (clean != m_mirrorPath)
        m_listingCancel->store(true); // the last mirror's listing is of no use now
    m_mirrorPath = clean;
    refresh();
}

namespace {

// Whether two listings show the same rows: then a new reading changes cells, not the list (a
// reset would drop the selection under the user's mouse every few seconds).
bool sameRows(const std::vector<shardscope::StepInfo>& a, const std::vector<shardscope::StepInfo>& b)
{
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return x.name == y.name && x.tier == y.tier && x.complete == y.complete && x.is_latest == y.is_latest &&
            x.uploaded == y.uploaded && x.bytes == y.bytes && x.wall_clock_seconds == y.wall_clock_seconds &&
            x.world_size == y.world_size && x.leftover_tmp_files == y.leftover_tmp_files && x.problem == y.problem;
    });
}

QString since(int64_t unixSeconds)
{
    if (unixSeconds <= 0)
        return StepsPane::tr("an unknown time");
    const QDateTime at = QDateTime::fromSecsSinceEpoch(unixSeconds);
    return at.date() == QDate::currentDate() ? at.toString(QStringLiteral("HH:mm"))
                                             : at.toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

} // namespace

void StepsPane::refresh()
{
    const QString root = m_model->root();
    if (root.isEmpty())
        return;
    if (m_watcher) {
        m_again = true; // this one may have started before the change asked for: once more after it
        return;
    }
    const QString mirror = m_mirrorPath;
    m_listingCancel = std::make_shared<std::atomic<bool>>(false);
    const std::shared_ptr<std::atomic<bool>> cancel = m_listingCancel;
    m_refresh->setEnabled(false);
    m_watcher = new QFutureWatcher<Reading>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this, root, mirror] {
        Reading reading = m_watcher->result();
        m_watcher->deleteLater();
        m_watcher = nullptr;
        m_refresh->setEnabled(true);
        // A reading of another root or mirror than the one shown now is dropped; the listing
        // that was asked for when they changed follows.
        const bool current = root == m_model->root() && mirror == m_mirrorPath;
        if (current)
            applyReading(std::move(reading), root);
        if (std::exchange(m_again, false))
            refresh();
        else if (current)
            emit listed();
        updateTitle();
    });
    m_watcher->setFuture(QtConcurrent::run([root, mirror, cancel]() -> Reading {
        const shardscope::CancelScope scope(cancel.get());
        Reading reading;
        try {
            // The run's retention is not recorded in the root: the defaults of `train`.
            const shardscope::ManagerOptions defaults;
            const shardscope::storage::Location where = checkpointLocation(root);
            shardscope::RootStatus st = where.is_local()
                ? shardscope::root_status(where.path,
                                          mirror.isEmpty() ? std::nullopt : std::optional(checkpointLocation(mirror)),
                                          defaults.keep_last, defaults.mirror_keep_last)
                : shardscope::bucket_root_status(where, defaults.keep_last);
            reading.steps = std::move(st.steps);
            reading.lock = std::move(st.lock);
            reading.uploads = std::move(st.uploads);
            reading.mirrorError = std::move(st.mirror_error);
        } catch (const std::exception& error) {
            // the root vanished, became unreadable or its server failed
            reading.error = error.what();
        }
        return reading;
    }));
}

void StepsPane::applyReading(Reading reading, const QString& root)
{
    if (!reading.error.empty()) {
        // The rows of the last listing stay (a server that failed once has not lost the steps).
        m_readingProblem = tr("Could not list the steps again: %1").arg(printableText(reading.error));
        updateLockLine();
        return;
    }
    m_readingProblem = reading.mirrorError.empty()
        ? QString()
        : tr("The mirror's steps are not listed: %1").arg(printableText(reading.mirrorError));
    std::vector<shardscope::StepInfo> sorted = reading.steps;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { // as the model orders them
        return a.step != b.step ? a.step > b.step : a.tier < b.tier;
    });
    std::vector<shardscope::StepInfo> shown;
    for (int row = 0; row < m_model->rowCount(); ++row)
        shown.push_back(m_model->step(row));
    if (!sameRows(sorted, shown) || m_mirrorPath != m_model->mirror()) {
        m_model->setSteps(std::move(reading.steps), root, m_mirrorPath);
        m_model->setCurrentDirectory(m_currentDirectory);
    }
    m_model->setRootState(std::move(reading.lock), std::move(reading.uploads), reading.mirrorError.empty());
    updateTitle();
    updateLockLine();
}

QString StepsPane::lockText() const
{
    const auto& lock = m_model->lockHolder();
    if (!lock)
        return {};
    const QString pid = QString::number(lock->pid);
    const QString host = printableText(lock->host);
    if (lock->running == std::optional<bool>(false))
        return tr("A lock left by pid %1 on %2 (since %3), which no longer runs: the next job takes it over")
            .arg(pid, host, since(lock->started_at));
    return tr("Being written by pid %1 on %2%3, since %4 — showing committed steps only")
        .arg(pid, host, lock->running ? QString() : tr(" (another host)"), since(lock->started_at));
}

void StepsPane::updateLockLine()
{
    QStringList lines;
    for (const QString& line : {lockText(), m_readingProblem})
        if (!line.isEmpty())
            lines << line;
    const QString text = lines.join(QLatin1Char('\n'));
    m_lockLine->setText(text);
    m_lockLine->setVisible(!text.isEmpty());
    m_lockLine->setToolTip({});
    if (const auto& lock = m_model->lockHolder())
        m_lockLine->setToolTip(printableText(shardscope::describe(*lock)) +
                               tr("\nRead without taking the lock: only steps `latest` and their manifests "
                                  "name as committed are complete."));
}

void StepsPane::clear()
{
    m_model->clear();
    m_currentDirectory.clear();
    m_mirrorPath.clear();
    m_readingProblem.clear();
    updateTitle();
    updateLockLine();
}

void StepsPane::openSelected()
{
    const QModelIndexList rows = m_view->selectionModel()->selectedRows();
    const QModelIndex index = rows.isEmpty() ? m_view->currentIndex() : rows.first();
    if (!index.isValid())
        return;
    const QString dir = m_model->directory(index.row());
    if (!dir.isEmpty())
        emit openRequested(dir);
}

int StepsPane::tableWidth() const
{
    // Every row counts, also while the pane is hidden (the view's own hint looks only at the rows
    // on screen), and so does the vertical scroll bar of a long list.
    QStyleOptionViewItem option;
    option.initFrom(m_view);
    const int icon = m_view->style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, m_view);
    option.decorationSize = QSize(icon, icon); // the status icon takes room too
    int width = 2 * m_view->frameWidth() + 4 + m_view->style()->pixelMetric(QStyle::PM_ScrollBarExtent);
    for (int column = 0; column < m_model->columnCount(); ++column) {
        int cells = m_view->horizontalHeader()->sectionSizeHint(column);
        for (int row = 0; row < m_model->rowCount(); ++row) {
            const QModelIndex index = m_model->index(row, column);
            cells = std::max(cells,
                             m_view->itemDelegateForIndex(index)->sizeHint(option, index).width() +
                                 (m_view->showGrid() ? 1 : 0)); // as the table counts its grid line
        }
        if (column == m_model->columnCount() - 1) // the stretched last column keeps its default size
            cells = std::max(cells, m_view->horizontalHeader()->defaultSectionSize());
        width += cells;
    }
    return width;
}

void StepsPane::updateTitle()
{
    // Wide enough for every column: a clipped Tier or Latest column would hide what matters. The
    // header sizes the columns to their contents itself; resizing them here as well would pin
    // the stretched last column to its contents until the next resize (it shrank on Refresh).
    m_view->setMinimumWidth(std::min(tableWidth(), 460));
    int complete = 0;
    for (int row = 0; row < m_model->rowCount(); ++row)
        complete += m_model->index(row, 0).data(StepListModel::CompleteRole).toBool() ? 1 : 0;
    if (m_model->rowCount() == 0 && m_watcher) // a root in a bucket is listed by this pane alone
        m_title->setText(tr("Steps: listing…"));
    else
        m_title->setText(tr("Steps: %1 of %2 complete").arg(complete).arg(m_model->rowCount()));
    m_title->setToolTip(m_mirrorPath.isEmpty() ? m_model->root()
                                               : tr("%1\nmirror: %2").arg(m_model->root(), m_mirrorPath));
}

} // namespace shardwidgets
