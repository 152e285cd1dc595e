#include "widgets/panels/planpanel.h"

#include "widgets/jobs/pipelineplanner.h"
#include "widgets/models/plancandidatemodel.h"
#include "widgets/style/flowlayout.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/views/candidatescatter.h"
#include "widgets/settings/settings.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kTableRows = 20; // the best configurations listed; the scatter shows them all
} // namespace

PlanPanel::PlanPanel(PipelinePlanner* planner, QWidget* parent)
    : QWidget(parent), m_planner(planner), m_model(new PlanCandidateModel(this)), m_scatter(new CandidateScatter(this)),
      m_runner(this, [] {})
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0); // the tab frame is margin enough
    layout->setSpacing(4);
    layout->addWidget(buildInputs());
    m_message =
        new QLabel(tr("Search every pipeline × data-parallel split of the GPUs for the fastest step that fits."), this);
    m_message->setObjectName(QStringLiteral("planMessage"));
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_message);

    m_table = new QTableView(this);
    m_table->setModel(m_model);
    setUpDataTable(m_table);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setMinimumHeight(88); // header and three rows: the page fits the window's minimum size
    // A measured profile fixes t, cp, ep and the micro batch and has no FLOPs (ModelPlanPanel
    // shows those columns).
    for (int column = 0; column < PlanCandidateModel::ColumnCount; ++column)
        m_table->setColumnHidden(column, PlanCandidateModel::isModelColumn(column));
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(m_table);
    splitter->addWidget(m_scatter);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    splitter->setChildrenCollapsible(false);
    layout->addWidget(splitter, 1);

    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid())
                    loadCandidate(current.row());
            });
    connect(m_scatter, &CandidateScatter::candidateClicked, this, [this](int index) {
        // The same as choosing its row; beyond the listed rows the dot loads it directly.
        if (index < m_model->rowCount())
            m_table->setCurrentIndex(m_model->index(index, 0));
        else
            loadCandidate(index);
    });
}

QWidget* PlanPanel::buildInputs()
{
    auto* box = new QWidget(this);
    auto* flow = new FlowLayout(box);
    auto group = [&](const QString& text, QWidget* widget, const QString& tip) {
        auto* cell = new QWidget(box);
        auto* row = new QHBoxLayout(cell);
        row->setContentsMargins(0, 0, 0, 0);
        if (!text.isEmpty()) {
            auto* label = new QLabel(text, cell);
            label->setBuddy(widget);
            row->addWidget(label);
        }
        widget->setToolTip(tip);
        row->addWidget(widget);
        flow->addWidget(cell);
    };
    auto spin = [&](int lo, int hi, int value) {
        auto* s = new QSpinBox(box);
        s->setRange(lo, hi);
        s->setValue(value);
        return s;
    };
    m_gpus = spin(1, plannerrange::kMaxGpus, 8);
    m_globalBatch = spin(1, plannerrange::kMaxGlobalBatch, 64);
    const auto& profile = m_planner->profile();
    m_microBatch = spin(1, plannerrange::kMaxMicroBatch, profile.micro_batch_size.value_or(1));
    m_memory = new QDoubleSpinBox(box);
    m_memory->setRange(plannerrange::kMinSearchMemoryGiB, plannerrange::kMaxGpuMemoryGiB);
    m_memory->setDecimals(2);
    m_memory->setValue(80);
    m_memory->setSuffix(tr(" GiB"));
    m_link = new QDoubleSpinBox(box);
    m_link->setRange(0, plannerrange::kMaxLinkGbps);
    m_link->setDecimals(0);
    m_link->setValue(100);
    m_link->setSuffix(tr(" Gbps"));
    m_zero = new QComboBox(box);
    m_zero->addItem(tr("Any ZeRO"), -1); // the search tries 0..3, as shardctl plan does
    for (int z = 0; z <= 3; ++z)
        m_zero->addItem(tr("ZeRO %1").arg(z), z);
    m_overlap = new QCheckBox(tr("Overlap all-reduce"), box);
    m_fp32Grads = new QCheckBox(tr("fp32 gradients"), box);
    group(tr("GPUs"), m_gpus, tr("GPUs to split into pipeline × data parallel"));
    group(tr("Memory"), m_memory, tr("Memory per GPU"));
    group(tr("Global batch"), m_globalBatch, tr("Samples per step"));
    group(tr("Micro-batch"), m_microBatch, tr("Samples per microbatch (the profile's, when it names one)"));
    group(tr("Link"), m_link, tr("Link bandwidth between GPUs; 0: infinitely fast"));
    group({}, m_zero,
          tr("ZeRO stage: how the optimizer state, gradients and weights are sharded over dp; Any tries each"));
    group({}, m_overlap, tr("Stream each stage's gradient all-reduce beside its last microbatch's backward"));
    group({}, m_fp32Grads, tr("Gradients kept and reduced in fp32, as Megatron does with bf16 (--fp32-grads)"));
    m_searchButton = new QPushButton(tr("&Search"), box);
    m_searchButton->setDefault(true);
    m_cancelButton = new QPushButton(tr("Cancel"), box);
    m_cancelButton->setEnabled(false);
    group({}, m_searchButton, tr("Rank every configuration by step time (in the background)"));
    group({}, m_cancelButton, tr("Stop waiting for the running search"));
    connect(m_searchButton, &QPushButton::clicked, this, &PlanPanel::search);
    connect(m_cancelButton, &QPushButton::clicked, this, &PlanPanel::cancel);
    // A profile measured at another micro batch size would be refused: follow the profile.
    connect(m_planner, &PipelinePlanner::profileChanged, this, [this] {
        if (const auto mbs = m_planner->profile().micro_batch_size)
            m_microBatch->setValue(*mbs);
    });
    return box;
}

pl::SearchSpec PlanPanel::searchSpec() const
{
    return pl::SearchSpec{.gpus = m_gpus->value(),
                          .global_batch = m_globalBatch->value(),
                          .micro_batch_size = m_microBatch->value(),
                          .gpu_memory_bytes = std::int64_t(std::llround(m_memory->value() * kGiB)),
                          .link_gbps = m_link->value(),
                          .p2p_latency_ms = m_planner->spec().p2p_latency_ms,
                          .zero = m_zero->currentData().toInt() < 0 ? std::vector<int>{}
                                                                    : std::vector<int>{m_zero->currentData().toInt()},
                          .overlap_allreduce = m_overlap->isChecked(),
                          .fp32_grads = m_fp32Grads->isChecked()};
}

void PlanPanel::setSearchInputs(const pl::SearchSpec& spec)
{
    m_gpus->setValue(spec.gpus);
    m_globalBatch->setValue(spec.global_batch);
    m_microBatch->setValue(m_planner->profile().micro_batch_size.value_or(spec.micro_batch_size));
    m_memory->setValue(double(spec.gpu_memory_bytes) / kGiB);
    m_link->setValue(spec.link_gbps);
    m_zero->setCurrentIndex(std::max(0, m_zero->findData(spec.zero.size() == 1 ? spec.zero.front() : -1)));
    m_overlap->setChecked(spec.overlap_allreduce);
    m_fp32Grads->setChecked(spec.fp32_grads);
}

void PlanPanel::search()
{
    const pl::SearchSpec spec = searchSpec();
    const quint64 generation = ++m_generation;
    m_searching = true;
    m_cancelButton->setEnabled(true);
    m_message->setText(tr("Searching %1 GPUs…").arg(spec.gpus));
    // The worker gets its own copy of the profile: the user may load another one meanwhile.
    auto progress = std::make_shared<JobProgress>();
    m_runner.start(
        progress,
        [profile = m_planner->profile(), spec, progress] {
            PlanSearchOutcome outcome;
            try {
                outcome.result = pl::search_plans(profile, spec, &progress->cancel);
            } catch (const std::exception& e) {
                outcome.error = printableText(e.what());
            }
            return outcome;
        },
        [this, generation, spec](PlanSearchOutcome outcome) {
            if (generation == m_generation) // cancelled or superseded: dropped
                onFinished(std::move(outcome), spec);
        });
}

void PlanPanel::cancel()
{
    // The running search stops at its next configuration; whatever it returns is dropped.
    ++m_generation;
    m_runner.cancel();
    m_searching = false;
    m_cancelButton->setEnabled(false);
    m_message->setText(tr("Search cancelled."));
}

void PlanPanel::onFinished(PlanSearchOutcome outcome, const pl::SearchSpec& spec)
{
    m_searching = false;
    m_cancelButton->setEnabled(false);
    if (!outcome.result) {
        m_model->clear();
        m_scatter->clear();
        m_message->setText(QStringLiteral("⚠ ") + outcome.error);
        emit searchFinished();
        return;
    }
    m_shown = spec;
    m_message->setText(describeResult(*outcome.result, spec));
    m_scatter->setCandidates(outcome.result->candidates, spec.gpu_memory_bytes);
    m_model->setResult(std::move(*outcome.result), spec.gpu_memory_bytes, kTableRows);
    emit searchFinished();
}

QString PlanPanel::describeResult(const pl::SearchResult& result, const pl::SearchSpec& spec) const
{
    const QString limit = formatBytes(uint64_t(spec.gpu_memory_bytes));
    if (result.fitting == 0 && !result.candidates.empty()) {
        // Core ranks the closest first (for one chunk per stage its least-memory cut), as
        // `shardctl plan --json` reports it in `closest` and `over_bytes`.
        const pl::Candidate& c = result.candidates.front();
        return tr("Nothing fits in %1 per GPU: the closest, pp %2 × dp %3 with %4 and recompute %5, needs "
                  "%6, %7 too much.")
            .arg(limit)
            .arg(c.pp)
            .arg(c.dp)
            .arg(QString::fromUtf8(pl::to_string(c.schedule)), QString::fromUtf8(pl::to_string(c.recompute)),
                 formatBytes(uint64_t(c.peak_memory_bytes)),
                 formatBytes(uint64_t(c.peak_memory_bytes - spec.gpu_memory_bytes)));
    }
    QString text = tr("%1 of %2 configurations fit in %3 per GPU; the best takes %4 ms a step.")
                       .arg(result.fitting)
                       .arg(result.candidates.size())
                       .arg(limit)
                       .arg(result.candidates.front().step_time, 0, 'f', 2);
    if (result.skipped > 0)
        text += tr(" %1 too large to simulate.").arg(result.skipped);
    return text + tr(" Choose a row or a dot to load it into the timeline.");
}

bool PlanPanel::loadCandidate(int index)
{
    const auto& candidates = m_model->result().candidates;
    if (index < 0 || index >= int(candidates.size()))
        return false;
    m_scatter->setSelected(index);
    if (!m_planner->applyCandidate(candidates[std::size_t(index)], m_shown)) {
        m_message->setText(QStringLiteral("⚠ ") + m_planner->error());
        return false;
    }
    emit candidateLoaded(index);
    return true;
}

} // namespace shardwidgets
