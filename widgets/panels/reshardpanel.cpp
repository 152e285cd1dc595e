#include "widgets/panels/reshardpanel.h"

#include "core/checkpoint/manifest.h"
#include "widgets/style/flowlayout.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/jobs/reshardcontroller.h"
#include "widgets/models/reshardplanmodel.h"
#include "widgets/views/reshardview.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

namespace shardwidgets {

namespace {

// The one world-size limit (core/checkpoint/manifest.h): any target the core can write.
constexpr int kMaxTarget = shardscope::kMaxWorldSize;

} // namespace

ReshardPanel::ReshardPanel(QWidget* parent)
    : QWidget(parent), m_controller(new ReshardController(this)), m_model(new ReshardPlanModel(this)),
      m_view(new ReshardView(this)), m_table(new QTableView(this)), m_target(new QSpinBox(this)),
      m_source(new QLabel(this)), m_totals(new QLabel(this)), m_reshard(new QPushButton(tr("Reshard…"), this)),
      m_cancel(new QPushButton(tr("Cancel"), this)), m_openResult(new QPushButton(tr("Open Result"), this)),
      m_progress(new QProgressBar(this)), m_rate(new QLabel(this))
{
    auto* layout = new QVBoxLayout(this);
    auto* targetLabel = new QLabel(tr("&Target world size:"), this);
    targetLabel->setBuddy(m_target);
    m_target->setRange(1, kMaxTarget);
    m_target->setValue(1);
    m_target->setToolTip(tr("The number of ranks the job will restart on"));
    m_source->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_source->setTextFormat(Qt::PlainText); // a folder name is never markup
    m_source->setMinimumWidth(40); // a long path is cut, rather than making the window that wide
    m_reshard->setToolTip(tr("Write a new checkpoint with this world size into a folder you choose; the "
                             "source is verified first and never modified"));
    m_cancel->setEnabled(false);
    m_openResult->hide();
    m_progress->setRange(0, 1000);
    m_progress->setMinimumWidth(180);
    m_progress->setFormat(tr("idle"));
    m_progress->setValue(0);
    m_rate->setMinimumWidth(150);
    // The row wraps in a narrow window rather than cutting "from 1024 ranks in ..." short; the
    // job's controls stay together.
    auto* controls = new QWidget(this);
    auto* flow = new FlowLayout(controls);
    auto row = [&](std::initializer_list<QWidget*> widgets) {
        auto* box = new QWidget(controls);
        auto* line = new QHBoxLayout(box);
        line->setContentsMargins(0, 0, 0, 0);
        for (QWidget* widget : widgets)
            line->addWidget(widget);
        flow->addWidget(box);
    };
    row({targetLabel, m_target, m_source});
    flow->addSpacing(12);
    row({m_reshard, m_progress, m_rate, m_cancel, m_openResult});
    layout->addWidget(controls);
    layout->addWidget(m_view);
    m_totals->setTextFormat(Qt::RichText);
    m_totals->setWordWrap(true);
    m_totals->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_totals);

    m_table->setModel(m_model);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setColumnWidth(ReshardPlanModel::Rank, 80);
    m_table->setColumnWidth(ReshardPlanModel::Elements, 220);
    m_table->setColumnWidth(ReshardPlanModel::Bytes, 100);
    m_table->setColumnWidth(ReshardPlanModel::Sources, 320);
    m_table->setColumnWidth(ReshardPlanModel::Staying, 100);
    layout->addWidget(m_table, 1);

    connect(m_target, &QSpinBox::valueChanged, this, [this](int value) {
        m_userChoseTarget = true;
        replan();
        emit targetChanged(value);
    });
    connect(m_reshard, &QPushButton::clicked, this, &ReshardPanel::chooseDestinationAndReshard);
    connect(m_cancel, &QPushButton::clicked, this, &ReshardPanel::cancelReshard);
    connect(m_openResult, &QPushButton::clicked, this, [this] { emit openRequested(m_controller->destination()); });
    connect(m_controller, &ReshardController::progressChanged, this, &ReshardPanel::onProgress);
    connect(m_controller, &ReshardController::finished, this, &ReshardPanel::onFinished);
    clear();
}

void ReshardPanel::setCheckpoint(const QString& directory, const shardscope::Manifest& manifest)
{
    m_directory = directory;
    m_manifest = manifest;
    m_sourceProblem.clear(); // a new checkpoint: not verified yet
    const QString shown = printableText(directory);
    m_source->setText(manifest.world_size == 1 ? tr("from 1 rank in %1").arg(shown)
                                               : tr("from %1 ranks in %2").arg(manifest.world_size).arg(shown));
    m_source->setToolTip(shown);
    if (!m_userChoseTarget) {
        const QSignalBlocker blocker(m_target);
        m_target->setValue(std::clamp(manifest.world_size * 2, 1, kMaxTarget));
    }
    replan();
}

void ReshardPanel::setSourceProblem(const QString& problem)
{
    m_sourceProblem = problem;
    if (!problem.isEmpty() && m_model->plan()) // without a plan there was nothing to reshard anyway
        emit statusMessage(tr("Reshard… is disabled: the source failed verification"));
    updateButtons();
}

void ReshardPanel::clear()
{
    m_directory.clear();
    m_manifest.reset();
    m_model->clear();
    m_view->clear();
    m_source->setText(tr("no checkpoint open"));
    m_totals->setText(tr("Open a checkpoint to preview how its bytes move to another world size."));
    updateButtons();
}

void ReshardPanel::setNoManifest(const QString& directory)
{
    clear();
    m_source->setText(tr("in %1").arg(printableText(directory)));
    m_totals->setText(tr("<b>No reshard preview:</b> %1 has no ShardScope manifest (manifest.json), the record of "
                         "which slice of the parameters each rank holds that a reshard is planned from.")
                          .arg(printableText(directory).toHtmlEscaped()));
    m_view->clear(tr("No ShardScope manifest: nothing to plan a reshard from"));
}

void ReshardPanel::setTargetWorldSize(int worldSize)
{
    m_target->setValue(worldSize); // valueChanged replans
}

int ReshardPanel::targetWorldSize() const
{
    return m_target->value();
}

const std::optional<shardscope::ReshardPlan>& ReshardPanel::plan() const
{
    return m_model->plan();
}

QString ReshardPanel::totalsText() const
{
    return m_totals->text();
}

void ReshardPanel::replan()
{
    if (!m_manifest) {
        updateButtons();
        return;
    }
    try {
        // plan_reshard is O(N + M) arithmetic on the manifest: fine on the GUI thread.
        shardscope::ReshardPlan plan = shardscope::plan_reshard(*m_manifest, m_target->value());
        std::vector<ReshardBox> sources;
        for (const auto& shard : m_manifest->shards)
            sources.push_back({shard.rank, shard.param_shard_offset, shard.param_shard_numel, {}});
        m_view->setPlan(plan, std::move(sources));
        m_totals->setText(tr("<b>%1 → %2 ranks</b> · read %3 · write %4 · "
                             "<b>staying</b> on the same rank index %5 (%6) · <b>moving</b> %7 (%8)")
                              .arg(plan.source_world_size)
                              .arg(plan.target_world_size)
                              .arg(formatBytes(plan.bytes_read), formatBytes(plan.bytes_written),
                                   formatBytes(plan.bytes_staying),
                                   formatPercent(plan.bytes_staying, plan.bytes_written).toHtmlEscaped(), // "< 0.1 %"
                                   formatBytes(plan.bytes_moving),
                                   formatPercent(plan.bytes_moving, plan.bytes_written).toHtmlEscaped()));
        m_model->setPlan(std::move(plan));
    } catch (const shardscope::Error& error) {
        m_model->clear();
        m_view->clear(tr("Cannot plan this reshard (see below)"));
        m_totals->setText(tr("<b>Cannot plan a reshard:</b> %1").arg(printableText(error.what()).toHtmlEscaped()));
    }
    updateButtons();
}

void ReshardPanel::updateButtons()
{
    const bool running = m_controller->isRunning();
    // A checkpoint read in place from a bucket or a URL is previewed, not resharded (a reshard
    // writes beside its source).
    const std::optional<QString> remote = localOnly(m_directory, tr("Reshard"));
    m_reshard->setEnabled(!running && m_model->plan().has_value() && !m_directory.isEmpty() &&
                          m_sourceProblem.isEmpty() && !remote);
    m_reshard->setToolTip(remote ? *remote
                              : m_sourceProblem.isEmpty()
                              ? tr("Write the checkpoint at the target world size into a new folder")
                              : tr("The source failed verification (%1): a reshard verifies every source shard "
                                   "and would stop. Fix or replace the checkpoint first.")
                                    .arg(m_sourceProblem));
    m_cancel->setEnabled(running);
    m_target->setEnabled(!running);
}

bool ReshardPanel::startReshard(const QString& destination, QString* error)
{
    if (!m_model->plan() || m_directory.isEmpty()) {
        if (error)
            *error = tr("There is no checkpoint to reshard");
        return false;
    }
    if (!m_sourceProblem.isEmpty()) {
        if (error)
            *error = tr("The source failed verification (%1); a reshard would stop at its first bad shard")
                         .arg(m_sourceProblem);
        return false;
    }
    if (!m_controller->start(m_directory, m_target->value(), destination)) {
        if (error)
            *error = tr("A reshard is already running");
        return false;
    }
    m_openResult->hide();
    showJobProgress(m_progress, m_rate, 0, 0, 0, -1, tr("verifying the source"));
    updateButtons();
    emit statusMessage(
        tr("Resharding %1 to %2 ranks into %3…").arg(m_directory).arg(m_target->value()).arg(destination));
    return true;
}

void ReshardPanel::chooseDestinationAndReshard()
{
    if (!m_model->plan() || m_directory.isEmpty() || m_controller->isRunning() || !m_sourceProblem.isEmpty()) {
        if (m_interactive)
            QMessageBox::information(this, tr("Reshard"),
                                     m_controller->isRunning() ? tr("A reshard is already running.")
                                         : !m_sourceProblem.isEmpty()
                                         ? m_reshard->toolTip()
                                         : tr("Open a checkpoint with a valid manifest first."));
        return;
    }
    const QFileInfo source(m_directory);
    const QString suggestion =
        source.dir().filePath(QStringLiteral("%1-ws%2").arg(source.fileName()).arg(m_target->value()));
    // A new folder name (core refuses a non-empty existing one): a save dialog lets the user type it.
    const QString destination = QFileDialog::getSaveFileName(this, tr("Reshard into a new folder"), suggestion,
                                                             QString(), nullptr, QFileDialog::DontConfirmOverwrite);
    if (destination.isEmpty())
        return;
    QString error;
    if (!startReshard(destination, &error))
        QMessageBox::warning(this, tr("Cannot reshard"), error);
}

void ReshardPanel::cancelReshard()
{
    m_controller->cancel();
}

void ReshardPanel::onProgress(quint64 done, quint64 total, double rate, double eta)
{
    showJobProgress(m_progress, m_rate, done, total, rate, eta, tr("starting"));
    // core counts the source verification as the first half, the copy as the second.
    if (total)
        m_progress->setFormat(
            tr("%1 · %2").arg(done * 2 < total ? tr("verifying") : tr("copying"), m_progress->format()));
}

void ReshardPanel::onFinished()
{
    const auto& outcome = m_controller->outcome();
    const QString destination = m_controller->destination();
    m_rate->clear();
    updateButtons();
    if (outcome.result) {
        showJobOutcome(m_progress, Severity::good, tr("done"));
        m_openResult->show();
        emit statusMessage(
            tr("Resharded into %1 (%2 ranks)").arg(destination).arg(outcome.result->manifest.world_size));
        emit reshardFinished(true);
        if (m_interactive &&
            QMessageBox::question(this, tr("Reshard finished"),
                                  tr("The checkpoint was resharded to %1 ranks in\n%2\n\nOpen it now?")
                                      .arg(outcome.result->manifest.world_size)
                                      .arg(destination)) == QMessageBox::Yes)
            emit openRequested(destination);
        return;
    }
    showJobOutcome(m_progress, outcome.cancelled ? Severity::neutral : Severity::bad,
                   outcome.cancelled ? tr("cancelled") : tr("failed"));
    const QString message = outcome.error ? printableText(outcome.error->message) : tr("unknown error");
    emit statusMessage(outcome.cancelled ? tr("Reshard cancelled; %1 holds no checkpoint").arg(destination)
                                         : tr("Reshard failed: %1").arg(message));
    emit reshardFinished(false);
    if (m_interactive && !outcome.cancelled)
        QMessageBox::warning(this, tr("Reshard failed"), message);
}

} // namespace shardwidgets
