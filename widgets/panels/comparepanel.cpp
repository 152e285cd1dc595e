#include "widgets/panels/comparepanel.h"

#include "core/inspect/diff.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/jobs/diffcontroller.h"
#include "widgets/models/diffmodel.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/relativechangedelegate.h"

#include <QCheckBox>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

namespace shardwidgets {

// Names by the filter text and, when asked, only the tensors that differ.
class DiffFilter : public QSortFilterProxyModel {
public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setOnlyDiffering(bool only)
    {
        m_only = only;
        invalidateFilter();
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override
    {
        if (m_only) {
            const auto* t = static_cast<const DiffModel*>(sourceModel())->tensorAt(row);
            if (t && t->status == shardscope::DiffStatus::identical)
                return false;
        }
        return QSortFilterProxyModel::filterAcceptsRow(row, parent);
    }

private:
    bool m_only = false;
};

namespace {

// A tolerance field: empty is "not given"; anything else must be a finite number >= 0.
bool readTolerance(const QLineEdit* field, std::optional<double>& out)
{
    const QString text = field->text().trimmed();
    if (text.isEmpty())
        return true;
    bool ok = false;
    const double value = text.toDouble(&ok);
    if (!ok || !std::isfinite(value) || value < 0)
        return false;
    out = value;
    return true;
}

} // namespace

ComparePanel::ComparePanel(QWidget* parent)
    : QWidget(parent), m_controller(new DiffController(this)), m_sides(new QLabel(this)), m_other(new QLineEdit(this)),
      m_browse(new QPushButton(tr("Browse…"), this)), m_compare(new QPushButton(tr("Compare"), this)),
      m_atol(new QLineEdit(this)), m_rtol(new QLineEdit(this)), m_progress(new QProgressBar(this)),
      m_rate(new QLabel(this)), m_cancel(new QPushButton(tr("Cancel"), this)), m_banner(new FailureBanner(this)),
      m_onlyDiffering(new QCheckBox(tr("Only tensors that differ"), this)), m_filter(new QLineEdit(this)),
      m_model(new DiffModel(this)), m_proxy(new DiffFilter(this)), m_table(new QTableView(this))
{
    m_table->setObjectName(QStringLiteral("diffTable"));
    m_other->setObjectName(QStringLiteral("otherPath"));
    m_atol->setObjectName(QStringLiteral("atol"));
    m_rtol->setObjectName(QStringLiteral("rtol"));
    m_onlyDiffering->setObjectName(QStringLiteral("onlyDiffering"));
    m_banner->setObjectName(QStringLiteral("banner"));

    auto* layout = new QVBoxLayout(this);
    m_sides->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_sides->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_sides->setTextFormat(Qt::PlainText); // holds two paths
    layout->addWidget(m_sides);

    auto* controls = new QHBoxLayout;
    m_other->setPlaceholderText(tr("Checkpoint B: a folder, a .safetensors or a torch.save file"));
    m_other->setClearButtonEnabled(true);
    m_atol->setPlaceholderText(tr("atol"));
    m_rtol->setPlaceholderText(tr("rtol"));
    const QString tolerance = tr("Elements a, b count as equal when |a − b| ≤ atol + rtol·|b|; leave both empty to "
                                 "compare bitwise.");
    m_atol->setToolTip(tolerance);
    m_rtol->setToolTip(tolerance);
    m_atol->setMaximumWidth(90);
    m_rtol->setMaximumWidth(90);
    controls->addWidget(new QLabel(tr("Compare with"), this));
    controls->addWidget(m_other, 1);
    controls->addWidget(m_browse);
    controls->addWidget(m_atol);
    controls->addWidget(m_rtol);
    controls->addWidget(m_compare);
    layout->addLayout(controls);

    auto* status = new QHBoxLayout;
    m_progress->setRange(0, 1000);
    m_progress->setMinimumWidth(180);
    m_rate->setMinimumWidth(170);
    m_cancel->setEnabled(false);
    status->addWidget(m_progress, 1);
    status->addWidget(m_rate);
    status->addWidget(m_cancel);
    layout->addLayout(status);
    layout->addWidget(m_banner);

    auto* filters = new QHBoxLayout;
    m_filter->setPlaceholderText(tr("Filter tensors by name"));
    m_filter->setClearButtonEnabled(true);
    filters->addWidget(m_filter, 1);
    filters->addWidget(m_onlyDiffering);
    layout->addLayout(filters);

    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_proxy->setFilterKeyColumn(DiffModel::Name);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(-1, Qt::AscendingOrder); // model order until the user sorts
    m_table->setItemDelegateForColumn(DiffModel::RelativeChange,
                                      new RelativeChangeDelegate(DiffModel::RelativeChangeRole, m_table));
    m_table->horizontalHeader()->setStretchLastSection(true); // the bar gets the spare width
    setUpDataTable(m_table);
    layout->addWidget(m_table, 1);

    connect(m_browse, &QPushButton::clicked, this, &ComparePanel::chooseAndCompare);
    connect(m_compare, &QPushButton::clicked, this, [this] { compareWith(m_other->text().trimmed()); });
    connect(m_other, &QLineEdit::returnPressed, this, [this] { compareWith(m_other->text().trimmed()); });
    connect(m_cancel, &QPushButton::clicked, this, &ComparePanel::cancel);
    connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    connect(m_onlyDiffering, &QCheckBox::toggled, this, [this](bool only) { m_proxy->setOnlyDiffering(only); });
    connect(m_controller, &DiffController::progressChanged, this, &ComparePanel::onProgress);
    connect(m_controller, &DiffController::finished, this, &ComparePanel::onFinished);
    setBase({});
}

void ComparePanel::setBase(const QString& path)
{
    m_controller->cancel();
    m_base = path;
    m_report.reset();
    m_model->clear();
    m_banner->hideBanner();
    m_progress->setValue(0);
    m_progress->setFormat(path.isEmpty() ? tr("no checkpoint") : tr("not compared"));
    m_rate->clear();
    m_cancel->setEnabled(false);
    m_compare->setEnabled(!path.isEmpty());
    m_browse->setEnabled(!path.isEmpty());
    m_sides->setText(path.isEmpty() ? tr("Open a checkpoint, then compare it with another one (any format or world "
                                         "size): the tensors are paired by name and compared element by element.")
                                    : tr("A: %1").arg(printableText(path)));
}

void ComparePanel::chooseAndCompare()
{
    const QString start = !m_other->text().isEmpty() && !isUrl(m_other->text()) ? m_other->text()
        : isUrl(m_base)                                                         ? QDir::homePath()
                                                                                : QFileInfo(m_base).absolutePath();
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Compare with checkpoint folder"), start);
    if (!dir.isEmpty())
        compareWith(dir);
}

void ComparePanel::compareWith(const QString& other)
{
    if (m_base.isEmpty() || other.isEmpty())
        return;
    m_other->setText(other);
    std::optional<double> atol, rtol;
    if (!readTolerance(m_atol, atol) || !readTolerance(m_rtol, rtol)) {
        m_banner->showError(tr("Tolerances must be numbers ≥ 0"),
                            tr("Leave atol and rtol empty to compare bitwise, or give e.g. 1e-6."));
        return;
    }
    m_report.reset();
    m_model->clear();
    m_banner->hideBanner();
    m_sides->setText(tr("A: %1    B: %2").arg(printableText(m_base), printableText(other)));
    m_progress->setValue(0);
    m_progress->setFormat(tr("comparing"));
    m_cancel->setEnabled(true);
    m_controller->start(m_base, other, atol, rtol);
}

void ComparePanel::cancel()
{
    m_controller->cancel();
}

void ComparePanel::onProgress(quint64 done, quint64 total, double rate, double eta)
{
    showJobProgress(m_progress, m_rate, done, total, rate, eta, tr("comparing"));
}

void ComparePanel::onFinished()
{
    m_cancel->setEnabled(false);
    const auto& outcome = m_controller->outcome();
    if (outcome.error) {
        showJobOutcome(m_progress, Severity::bad, tr("not compared"));
        m_rate->clear();
        m_banner->showError(tr("The checkpoints cannot be compared"), printableText(outcome.error->message));
        emit compareFinished(false);
        return;
    }
    m_report = outcome.report;
    m_model->setReport(m_report);
    m_rate->clear(); // the job has ended: no rate, no time left
    const auto& r = *m_report;
    std::size_t same = 0;
    for (const auto& t : r.tensors)
        same += t.status == shardscope::DiffStatus::identical;
    const shardscope::TensorDiff* largest = shardscope::largest_change(r);
    const QString how = r.options.bitwise() ? tr("bitwise") : tr("within the tolerance");
    showJobOutcome(m_progress,
                   r.cancelled         ? Severity::neutral
                       : r.identical() ? Severity::good
                                       : Severity::bad,
                   r.cancelled         ? tr("cancelled")
                       : r.identical() ? tr("identical")
                                       : tr("differences"));
    m_sides->setText(tr("A: %1 (%2)    B: %3 (%4)")
                         .arg(printableText(m_base), printableText(r.a.format), printableText(m_other->text()),
                              printableText(r.b.format)));
    if (r.cancelled) {
        m_banner->showResult(false, tr("Cancelled"), tr("Not every tensor was compared."));
    } else if (r.identical()) {
        m_banner->showResult(true, tr("All %1 tensors are identical (%2)").arg(formatCount(r.tensors.size()), how),
                             r.states_as_param ? tr("B has no optimizer states: A's parameters were compared.")
                                               : tr("Every tensor and state pairs up and matches."));
    } else {
        QString meaning = !r.problems.empty() ? printableText(r.problems.front().message)
            : largest
            ? tr("Largest relative change ‖a−b‖/‖a‖: %1 in %2")
                  .arg(largest->rel_l2() ? QString::number(*largest->rel_l2(), 'g', 3) : QStringLiteral("∞"),
                       printableText(largest->name + (largest->state.empty() ? "" : " [" + largest->state + "]")))
            : tr("Tensors are missing on one side or changed shape.");
        m_banner->showResult(false,
                             tr("%1 of %2 tensors differ (%3)")
                                 .arg(formatCount(r.tensors.size() - same), formatCount(r.tensors.size()), how),
                             meaning);
    }
    m_table->resizeColumnsToContents();
    m_table->setColumnWidth(DiffModel::Name, std::min(m_table->columnWidth(DiffModel::Name), 360));
    // The first tensor that differs is on screen and selected, so the banner's finding is visible.
    for (int row = 0; row < m_proxy->rowCount(); ++row)
        if (const auto* t = m_model->tensorAt(m_proxy->mapToSource(m_proxy->index(row, 0)).row());
            t && t->status != shardscope::DiffStatus::identical) {
            m_table->selectRow(row);
            m_table->scrollTo(m_proxy->index(row, 0), QAbstractItemView::PositionAtCenter);
            break;
        }
    emit compareFinished(r.identical());
}

} // namespace shardwidgets
