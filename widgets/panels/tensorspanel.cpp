#include "widgets/panels/tensorspanel.h"

#include "core/inspect/content.h"
#include "widgets/jobs/contentcontroller.h"
#include "widgets/models/tensorstatsmodel.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/histogramview.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

namespace shardwidgets {

// Names by the filter text and, when asked, only the tensors core's health checks fail for (as
// the Compare page's "only tensors that differ").
class TensorFilter : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setOnlyProblems(bool only)
    {
        m_only = only;
        invalidateFilter();
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override
    {
        if (m_only && !static_cast<const TensorStatsModel*>(sourceModel())->hasProblem(row))
            return false;
        return QSortFilterProxyModel::filterAcceptsRow(row, parent);
    }

private:
    bool m_only = false;
};

namespace {

// What a health problem means for whoever decides whether to resume from this step.
QString meaningOf(shardscope::ProblemKind kind)
{
    switch (kind) {
    case shardscope::ProblemKind::nonfinite_values:
        return QObject::tr("The run had diverged when this step was saved: do not resume from it; resume from an "
                           "earlier step whose tensors are finite.");
    case shardscope::ProblemKind::negative_second_moment:
        return QObject::tr("Adam's second moment cannot be negative: the optimizer state is corrupt; resume from an "
                           "earlier step.");
    case shardscope::ProblemKind::param_master_mismatch:
        return QObject::tr("The parameters were not saved from the same step as their fp32 master weights: the "
                           "state is inconsistent; resume from an earlier step.");
    case shardscope::ProblemKind::replicas_differ:
        return QObject::tr("Tensor-parallel ranks hold different copies of a tensor each should hold the same: the "
                           "ranks diverged; resume from an earlier step whose copies agree.");
    default: return QObject::tr("Some tensor data could not be read; check the file named above.");
    }
}

// The summary line back to plain text (it is red while it names failed files).
void resetStatus(QLabel* status, const QString& text)
{
    status->setPalette(QPalette());
    status->setToolTip({});
    status->setText(text);
}

} // namespace

TensorsPanel::TensorsPanel(QWidget* parent)
    : QWidget(parent), m_controller(new ContentController(this)), m_status(new QLabel(this)),
      m_progress(new QProgressBar(this)), m_rate(new QLabel(this)), m_cancel(new QPushButton(tr("Cancel"), this)),
      m_banner(new FailureBanner(this)), m_filter(new QLineEdit(this)),
      m_onlyProblems(new QCheckBox(tr("Only tensors with problems"), this)), m_count(new QLabel(this)),
      m_model(new TensorStatsModel(this)), m_proxy(new TensorFilter(this)), m_table(new QTableView(this)),
      m_histogram(new HistogramView(this)), m_parts(new TensorPartsModel(this)), m_partsView(new QTableView(this))
{
    m_status->setObjectName(QStringLiteral("tensorSummary"));
    m_table->setObjectName(QStringLiteral("tensorTable"));
    m_filter->setObjectName(QStringLiteral("tensorFilter"));
    m_onlyProblems->setObjectName(QStringLiteral("onlyProblems"));
    m_count->setObjectName(QStringLiteral("tensorCount"));
    m_partsView->setObjectName(QStringLiteral("partsTable"));
    m_histogram->setObjectName(QStringLiteral("histogram"));
    m_banner->setObjectName(QStringLiteral("banner"));
    auto* layout = new QVBoxLayout(this);
    auto* header = new QHBoxLayout;
    m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_status->setTextFormat(Qt::PlainText); // holds a path
    m_progress->setRange(0, 1000);
    m_progress->setMinimumWidth(180);
    m_rate->setMinimumWidth(170);
    m_cancel->setEnabled(false);
    header->addWidget(m_status, 1);
    header->addWidget(m_progress);
    header->addWidget(m_rate);
    header->addWidget(m_cancel);
    layout->addLayout(header);
    layout->addWidget(m_banner);
    m_banner->hideBanner();

    m_filter->setPlaceholderText(tr("Filter tensors by name"));
    m_filter->setClearButtonEnabled(true);
    m_onlyProblems->setToolTip(tr("The tensors the health checks fail for: NaN or Inf, a negative Adam second "
                                  "moment, parameters that are not their master weights rounded."));
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_proxy->setFilterKeyColumn(TensorStatsModel::Name); // names only: no figure is formatted per keystroke
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(-1, Qt::AscendingOrder); // model order (the checkpoint's) until the user sorts
    // A sort keeps the scroll position, which would leave the rows now first (the problems, for
    // the health columns) out of sight.
    connect(m_table->horizontalHeader(), &QHeaderView::sortIndicatorChanged, m_table, &QTableView::scrollToTop);
    setUpDataTable(m_table);
    // exp_avg and exp_avg_sq differ at the end: the middle of a long name is what can go.
    m_table->setTextElideMode(Qt::ElideMiddle);
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    auto* filters = new QHBoxLayout;
    filters->addWidget(m_filter, 1);
    filters->addWidget(m_onlyProblems);
    filters->addWidget(m_count);
    leftLayout->addLayout(filters);
    leftLayout->addWidget(m_table);

    m_partsView->setModel(m_parts);
    setUpDataTable(m_partsView);
    m_partsView->setTextElideMode(Qt::ElideMiddle); // a file's name and its suffix both say something
    // The file that holds a NaN is the point of this table: its name is shown whole (with the
    // health count beside it), the finite figures scroll if the page is narrow.
    m_partsView->horizontalHeader()->setStretchLastSection(true);
    auto* right = new QSplitter(Qt::Vertical, this);
    right->addWidget(m_histogram);
    right->addWidget(m_partsView);

    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({1000, 600});
    layout->addWidget(split, 1);

    connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& text) {
        m_proxy->setFilterFixedString(text);
        showCount();
    });
    connect(m_onlyProblems, &QCheckBox::toggled, this, [this](bool only) {
        m_proxy->setOnlyProblems(only);
        showCount();
    });
    connect(m_model, &QAbstractItemModel::modelReset, this, &TensorsPanel::showCount);
    connect(m_cancel, &QPushButton::clicked, this, &TensorsPanel::cancel);
    connect(m_controller, &ContentController::progressChanged, this, &TensorsPanel::onProgress);
    connect(m_controller, &ContentController::finished, this, &TensorsPanel::onFinished);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &TensorsPanel::showSelected);
    clear();
}

void TensorsPanel::open(const QString& path)
{
    m_report.reset();
    m_model->clear();
    m_parts->setTensor(nullptr);
    m_histogram->clear();
    m_banner->hideBanner();
    resetStatus(m_status, tr("Reading the tensors of %1").arg(printableText(path)));
    m_progress->setValue(0);
    m_progress->setFormat(tr("reading"));
    m_rate->clear();
    m_cancel->setEnabled(true);
    m_controller->start(path);
}

void TensorsPanel::cancel()
{
    m_controller->cancel();
}

void TensorsPanel::clear()
{
    m_report.reset();
    m_model->clear();
    m_parts->setTensor(nullptr);
    m_histogram->clear();
    m_banner->hideBanner();
    resetStatus(m_status, tr("Open a checkpoint to look inside its tensors"));
    m_progress->setValue(0);
    m_progress->setFormat(tr("no checkpoint"));
    m_rate->clear();
    m_cancel->setEnabled(false);
}

void TensorsPanel::onProgress(quint64 done, quint64 total, double rate, double eta)
{
    showJobProgress(m_progress, m_rate, done, total, rate, eta, tr("reading"));
}

void TensorsPanel::onFinished()
{
    m_cancel->setEnabled(false);
    const auto& outcome = m_controller->outcome();
    if (outcome.error) {
        showJobOutcome(m_progress, Severity::bad, tr("not read"));
        m_rate->clear();
        resetStatus(m_status, tr("Tensors not read"));
        m_banner->showError(tr("The tensors cannot be read"), printableText(outcome.error->message));
        // Kept as a finding, as shardctl verify --content does: values that cannot be read are
        // part of the resume verdict, not a gap in it.
        auto unread = std::make_shared<shardscope::ContentReport>();
        unread->problems.push_back(*outcome.error);
        m_report = std::move(unread);
        emit scanFinished(false);
        return;
    }
    m_report = outcome.report;
    m_model->setReport(m_report);
    m_rate->clear(); // "0 s left" of a job that has ended would read as still running
    const auto& r = *m_report;
    showJobOutcome(m_progress,
                   r.cancelled  ? Severity::neutral
                       : r.ok() ? Severity::good
                                : Severity::bad,
                   r.cancelled  ? tr("cancelled")
                       : r.ok() ? tr("read")
                                : tr("problems"));
    m_readSummary = tr("%1 tensors (%2) read in %3")
                        .arg(formatCount(r.tensors.size()), printableText(r.format), formatDuration(r.seconds));
    showSummary();
    if (r.cancelled)
        m_banner->showResult(false, tr("Cancelled"), tr("Not every tensor was read; the table shows partial figures."));
    else if (!r.problems.empty())
        m_banner->showResult(
            false, printableText(r.problems.front().message),
            meaningOf(r.problems.front().kind) +
                (r.problems.size() > 1 ? tr(" (%1 more problems)").arg(r.problems.size() - 1) : QString()));
    else
        m_banner->showResult(true, tr("All %1 tensors are finite").arg(formatCount(r.tensors.size())),
                             r.format == "shardscope"
                                 ? tr("No NaN or Inf, no negative second moment, every parameter is its rounded "
                                      "master weight.")
                                 : tr("No NaN or Inf in any tensor."));
    m_table->resizeColumnsToContents(); // once per report: names and figures fit, then the user decides
    m_table->setColumnWidth(TensorStatsModel::Name, std::min(m_table->columnWidth(TensorStatsModel::Name), 360));
    // Select the first tensor holding NaN/Inf, so the banner's finding is on screen at once.
    int first = 0;
    for (int row = 0; row < m_proxy->rowCount(); ++row)
        if (const auto* t = m_model->tensorAt(m_proxy->mapToSource(m_proxy->index(row, 0)).row());
            t && t->stats.nonfinite() > 0) {
            first = row;
            break;
        }
    if (m_proxy->rowCount() > 0) {
        m_table->selectRow(first);
        m_table->scrollTo(m_proxy->index(first, 0));
        m_autoSelected = true;
    }
    emit scanFinished(r.ok());
}

void TensorsPanel::showSummary()
{
    const int marked = m_model->fromFailedFileCount();
    const auto& failed = m_model->failedFiles();
    if (marked == 0) {
        resetStatus(m_status, m_readSummary);
        return;
    }
    QPalette pal = m_status->palette();
    pal.setColor(QPalette::WindowText, severityColor(Severity::bad, pal));
    m_status->setPalette(pal);
    QStringList names;
    for (const FailedFile& f : failed)
        names << printableText(f.path);
    const QString which = failed.size() == 1 ? names.front() : tr("%1 files").arg(failed.size());
    // Not "finite" or "read" alone: these figures are not what the step holds. A truncated file
    // gave no values at all: its tensors lack them rather than hold them.
    const bool read = m_model->readFromFailedFileCount() > 0, unread = m_model->unreadFromFailedFileCount() > 0;
    const QString how = read && unread ? tr("hold values from, or lack values in,")
        : read                         ? tr("hold values from")
                                       : tr("lack the values in");
    m_status->setText(tr("%1 · %2 of them %3 %4, which failed verification")
                          .arg(m_readSummary, formatCount(uint64_t(marked)), how, which));
    m_status->setToolTip(tr("Failed verification: %1. The marked rows' statistics are not the saved values.")
                             .arg(names.join(QStringLiteral(", "))));
}

void TensorsPanel::showCount()
{
    const int all = m_model->rowCount(), shown = m_proxy->rowCount();
    if (all == 0)
        m_count->clear();
    else if (shown == all)
        m_count->setText(tr("%1 tensors").arg(formatCount(uint64_t(all))));
    else
        m_count->setText(tr("%1 of %2 tensors").arg(formatCount(uint64_t(shown)), formatCount(uint64_t(all))));
}

bool TensorsPanel::isReading() const
{
    return m_controller->isRunning();
}

void TensorsPanel::showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues,
                               const shardscope::VerifyReport* verify)
{
    m_banner->showVerdict(verdict, readingValues);
    std::vector<FailedFile> failed;
    for (const std::string& path : verdict.failed_files) {
        FailedFile f{.path = path};
        if (verify)
            for (const shardscope::ShardCheck& shard : verify->shards)
                if (shard.path == path)
                    f.status = shard.status;
        failed.push_back(std::move(f));
    }
    const bool wasMarked = m_model->fromFailedFileCount() > 0;
    m_model->setFailedFiles(failed);
    m_parts->setFailedFiles(std::move(failed));
    if (!m_report || m_model->rowCount() == 0)
        return;
    if (!wasMarked && m_model->fromFailedFileCount() > 0) { // the names make room for the mark's icon
        m_table->resizeColumnToContents(TensorStatsModel::Name);
        m_table->setColumnWidth(TensorStatsModel::Name, std::min(m_table->columnWidth(TensorStatsModel::Name), 360));
        m_partsView->resizeColumnsToContents();
    }
    showSummary();
    showJobOutcome(m_progress,
                   m_model->fromFailedFileCount() > 0 ? Severity::bad
                       : m_report->cancelled          ? Severity::neutral
                       : m_report->ok()               ? Severity::good
                                                      : Severity::bad,
                   m_model->fromFailedFileCount() > 0 ? tr("not the saved values")
                       : m_report->cancelled          ? tr("cancelled")
                       : m_report->ok()               ? tr("read")
                                                      : tr("problems"));
    // The page chose the row (no NaN to show): show the first marked tensor and its failed part.
    const QModelIndex current = m_proxy->mapToSource(m_table->currentIndex());
    if (!m_autoSelected || m_model->fromFailedFileCount() == 0 ||
        (current.isValid() &&
         (m_model->isFromFailedFile(current.row()) || m_model->tensorAt(current.row())->stats.nonfinite() > 0)))
        return;
    for (int row = 0; row < m_proxy->rowCount(); ++row)
        if (m_model->isFromFailedFile(m_proxy->mapToSource(m_proxy->index(row, 0)).row())) {
            m_table->selectRow(row);
            m_table->scrollTo(m_proxy->index(row, 0), QAbstractItemView::PositionAtCenter);
            m_autoSelected = true;
            break;
        }
}

void TensorsPanel::showSelected()
{
    m_autoSelected = false; // set again by whoever selected on the user's behalf
    const QModelIndex current = m_proxy->mapToSource(m_table->currentIndex());
    const shardscope::TensorContent* tensor = current.isValid() ? m_model->tensorAt(current.row()) : nullptr;
    m_parts->setTensor(tensor);
    m_partsView->resizeColumnsToContents();
    if (!tensor) {
        m_histogram->clear();
        return;
    }
    QString title = printableText(tensor->name);
    if (!tensor->state.empty())
        title += QStringLiteral(" [%1]").arg(printableText(tensor->state));
    m_histogram->setStats(title, tensor->stats);
}

} // namespace shardwidgets
