#include "widgets/panels/modelplanpanel.h"

#include "widgets/jobs/pipelineplanner.h"
#include "widgets/models/plancandidatemodel.h"
#include "widgets/settings/settings.h"
#include "widgets/style/flowlayout.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"
#include "widgets/views/bubblereadout.h"
#include "widgets/views/candidatescatter.h"

#include "core/pipeline/model_config.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {
constexpr int kTableRows = 20; // the best configurations listed; the scatter shows them all

// Read through QFile so that the bundled examples (":/models/...") open like files.
pl::ModelConfig readConfig(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw std::runtime_error(
            QObject::tr("%1: cannot open the config: %2").arg(path, file.errorString()).toStdString());
    if (quint64(file.size()) > pl::kMaxModelConfigBytes)
        throw std::runtime_error(QObject::tr("%1: larger than a config.json can be").arg(path).toStdString());
    const QByteArray bytes = file.readAll();
    return pl::parse_model_config(std::string_view(bytes.constData(), std::size_t(bytes.size())), path.toStdString());
}

QString configName(const QString& path)
{
    return QFileInfo(path).completeBaseName();
}
} // namespace

ModelPlanPanel::ModelPlanPanel(PipelinePlanner* planner, QWidget* parent)
    : QWidget(parent), m_planner(planner), m_model(new PlanCandidateModel(this)), m_scatter(new CandidateScatter(this)),
      m_runner(this, [] {})
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    layout->setSpacing(4);
    layout->addWidget(buildInputs());
    m_message = new QLabel(tr("Search every tensor × context × expert × pipeline × data-parallel split, ZeRO stage, "
                              "recomputation and micro batch for the fastest step that fits."),
                           this);
    m_message->setObjectName(QStringLiteral("modelPlanMessage"));
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_message);

    m_table = new QTableView(this);
    m_table->setModel(m_model);
    setUpDataTable(m_table);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setMinimumHeight(88);
    // Samples/s says what the step time does; the rest of the row is what the search varies.
    m_table->setColumnHidden(PlanCandidateModel::SamplesPerSecond, true);
    m_splitter = new QSplitter(Qt::Horizontal, this);
    m_splitter->addWidget(m_table);
    m_splitter->addWidget(m_scatter);
    m_splitter->setStretchFactor(0, 4);
    m_splitter->setStretchFactor(1, 1);
    m_splitter->setChildrenCollapsible(false);
    layout->addWidget(m_splitter, 1);

    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid())
                    loadCandidate(current.row());
            });
    connect(m_scatter, &CandidateScatter::candidateClicked, this, [this](int index) {
        if (index < m_model->rowCount())
            m_table->setCurrentIndex(m_model->index(index, 0));
        else
            loadCandidate(index);
    });
}

QStringList ModelPlanPanel::bundledConfigs()
{
    QStringList paths;
    const QDir dir(QStringLiteral(":/models"));
    for (const QString& name : dir.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name))
        paths.append(dir.filePath(name));
    return paths;
}

QWidget* ModelPlanPanel::buildInputs()
{
    auto* box = new QWidget(this);
    auto* flow = new FlowLayout(box);
    auto group = [&](const QString& text, std::initializer_list<QWidget*> widgets, const QString& tip) {
        auto* cell = new QWidget(box);
        auto* row = new QHBoxLayout(cell);
        row->setContentsMargins(0, 0, 0, 0);
        if (!text.isEmpty()) {
            auto* label = new QLabel(text, cell);
            label->setBuddy(*widgets.begin());
            row->addWidget(label);
        }
        for (QWidget* widget : widgets) {
            widget->setToolTip(tip);
            row->addWidget(widget);
        }
        flow->addWidget(cell);
    };
    auto spin = [&](int lo, int hi, int value) {
        auto* s = new QSpinBox(box);
        s->setRange(lo, hi);
        s->setValue(value);
        return s;
    };
    m_config = new QComboBox(box);
    m_config->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    for (const QString& path : bundledConfigs())
        m_config->addItem(configName(path), path);
    auto* open = new QToolButton(box);
    open->setText(tr("Open…"));
    connect(open, &QToolButton::clicked, this, &ModelPlanPanel::chooseConfigFile);
    m_cluster = new QComboBox(box);
    for (const std::string& name : pl::cluster_preset_names())
        m_cluster->addItem(QString::fromStdString(name), QString::fromStdString(name));
    m_cluster->setCurrentIndex(std::max(0, m_cluster->findData(QStringLiteral("h100-sxm-80gb"))));
    m_gpus = spin(1, plannerrange::kMaxGpus, 64);
    m_seqLen = spin(1, plannerrange::kMaxSeqLen, 4096);
    m_globalBatch = spin(1, plannerrange::kMaxGlobalBatch, 512);
    group(tr("Model"), {m_config, open}, tr("A Hugging Face config.json: the layers' costs from the model's shape"));
    group(tr("Cluster"), {m_cluster},
          tr("GPU memory, matmul rate, peak and the NVLink / inter-node links (resources/clusters)"));
    group(tr("GPUs"), {m_gpus}, tr("GPUs to split into t × cp × pp × dp"));
    group(tr("Seq len"), {m_seqLen}, tr("Tokens per sample"));
    group(tr("Global batch"), {m_globalBatch}, tr("Samples per step"));
    m_fp32Grads = new QCheckBox(tr("fp32 gradients"), box);
    group({}, {m_fp32Grads},
          tr("Gradients kept and reduced in fp32, as Megatron does with bf16 (--fp32-grads): ZeRO 1 is then Megatron's "
             "distributed optimizer, 6 + 12/d bytes a parameter"));
    m_searchButton = new QPushButton(tr("Search"), box);
    m_cancelButton = new QPushButton(tr("Cancel"), box);
    m_cancelButton->setEnabled(false);
    group({}, {m_searchButton}, tr("Rank every configuration by step time (in the background)"));
    group({}, {m_cancelButton}, tr("Stop the running search"));
    connect(m_searchButton, &QPushButton::clicked, this, &ModelPlanPanel::search);
    connect(m_cancelButton, &QPushButton::clicked, this, &ModelPlanPanel::cancel);
    return box;
}

void ModelPlanPanel::chooseConfigFile()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model config"), {},
                                                      tr("Hugging Face config (*.json);;All files (*)"));
    if (!path.isEmpty())
        setConfigPath(path);
}

void ModelPlanPanel::setConfigPath(const QString& path)
{
    int index = m_config->findData(path);
    if (index < 0) {
        m_config->addItem(configName(path), path);
        index = m_config->count() - 1;
    }
    m_config->setCurrentIndex(index);
    m_config->setToolTip(path);
}

QString ModelPlanPanel::configPath() const
{
    return m_config->currentData().toString();
}

bool ModelPlanPanel::setCluster(const QString& name)
{
    const int index = m_cluster->findData(name);
    if (index >= 0)
        m_cluster->setCurrentIndex(index);
    return index >= 0;
}

pl::Cluster ModelPlanPanel::cluster() const
{
    return pl::cluster_preset(m_cluster->currentData().toString().toStdString()).value_or(pl::Cluster{});
}

pl::ModelSearchSpec ModelPlanPanel::searchSpec() const
{
    // As `shardctl plan --model --cluster NAME` reads a preset: its HBM, its achieved rate, its
    // peak for the MFU, each group's link by where its ranks sit.
    const pl::Cluster c = cluster();
    return pl::ModelSearchSpec{.gpus = m_gpus->value(),
                               .global_batch = m_globalBatch->value(),
                               .seq_len = m_seqLen->value(),
                               .device_tflops = c.achieved_tflops(),
                               .peak_tflops = c.peak_tflops,
                               .gpu_memory_bytes = std::int64_t(std::llround(c.hbm_gib * 1073741824.0)),
                               .links = pl::LinkChoice{.cluster = c},
                               .fp32_grads = m_fp32Grads->isChecked()};
}

ModelSearchInputs ModelPlanPanel::inputs() const
{
    return ModelSearchInputs{.configPath = configPath(),
                             .cluster = m_cluster->currentData().toString(),
                             .gpus = m_gpus->value(),
                             .seqLen = m_seqLen->value(),
                             .globalBatch = m_globalBatch->value(),
                             .fp32Grads = m_fp32Grads->isChecked()};
}

void ModelPlanPanel::setInputs(const ModelSearchInputs& inputs)
{
    // QFileInfo sees the bundled ":/models/..." resources as files too.
    if (QFileInfo(inputs.configPath).isFile())
        setConfigPath(inputs.configPath);
    setCluster(inputs.cluster);
    m_gpus->setValue(inputs.gpus);
    m_seqLen->setValue(inputs.seqLen);
    m_globalBatch->setValue(inputs.globalBatch);
    m_fp32Grads->setChecked(inputs.fp32Grads);
}

void ModelPlanPanel::search()
{
    const pl::ModelSearchSpec spec = searchSpec();
    const QString path = configPath();
    const quint64 generation = ++m_generation;
    m_searching = true;
    m_cancelButton->setEnabled(true);
    m_message->setText(tr("Searching %1 on %2 GPUs…").arg(configName(path)).arg(spec.gpus));
    auto progress = std::make_shared<JobProgress>();
    m_runner.start(
        progress,
        [path, spec, progress] {
            ModelSearchOutcome outcome;
            try {
                outcome.config = readConfig(path);
                outcome.result = pl::search_model_plans(*outcome.config, spec, &progress->cancel);
            } catch (const std::exception& e) {
                outcome.error = printableText(e.what());
            }
            return outcome;
        },
        [this, generation, spec](ModelSearchOutcome outcome) {
            if (generation == m_generation)
                onFinished(std::move(outcome), spec);
        });
}

void ModelPlanPanel::cancel()
{
    ++m_generation;
    m_runner.cancel();
    m_searching = false;
    m_cancelButton->setEnabled(false);
    m_message->setText(tr("Search cancelled."));
}

void ModelPlanPanel::onFinished(ModelSearchOutcome outcome, const pl::ModelSearchSpec& spec)
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
    m_shownConfig = std::move(outcome.config);
    m_shownName = configName(QString::fromStdString(m_shownConfig->source));
    const pl::ModelSearchResult& found = *outcome.result;
    const pl::SearchResult& r = found.search;
    const QString limit = formatBytes(uint64_t(spec.gpu_memory_bytes));
    QString text = tr("%1 configurations, %2 pruned by memory, %3 by a step-time bound, %4 simulated, %5 fit in %6.")
                       .arg(found.space)
                       .arg(found.pruned_memory)
                       .arg(found.pruned_time)
                       .arg(r.candidates.size())
                       .arg(r.fitting)
                       .arg(limit);
    if (r.fitting == 0) {
        const pl::Candidate& c = r.candidates.front();
        text += tr(" Nothing fits: the closest (tp %1, pp %2, dp %3, ZeRO %4, recompute %5) needs %6, %7 too much.")
                    .arg(c.tp)
                    .arg(c.pp)
                    .arg(c.dp)
                    .arg(c.zero)
                    .arg(QString::fromUtf8(pl::to_string(c.recompute)), formatBytes(uint64_t(c.peak_memory_bytes)),
                         formatBytes(uint64_t(c.peak_memory_bytes - spec.gpu_memory_bytes)));
    } else {
        text += tr(" The best takes %1 a step. Choose a row or a dot to see its timeline.")
                    .arg(BubbleReadout::ms(r.candidates.front().step_time));
    }
    m_message->setText(text);
    m_scatter->setCandidates(r.candidates, spec.gpu_memory_bytes);
    m_model->setResult(std::move(outcome.result->search), spec.gpu_memory_bytes, kTableRows);
    // At 1280 x 720 the table's fixed 4:1 share would scroll TFLOP/s and MFU out of sight.
    m_table->resizeColumnsToContents();
    fitTableBesideChart(m_splitter, m_table);
    emit searchFinished();
}

void ModelPlanPanel::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    if (m_model->rowCount() > 0)
        fitTableBesideChart(m_splitter, m_table);
}

bool ModelPlanPanel::loadCandidate(int index)
{
    const auto& candidates = m_model->result().candidates;
    if (!m_shownConfig || index < 0 || index >= int(candidates.size()))
        return false;
    m_scatter->setSelected(index);
    const pl::Candidate& c = candidates[std::size_t(index)];
    try {
        // One plan, not a search: the profile and the cut of one configuration (microseconds).
        pl::CandidateRun run = pl::candidate_run(*m_shownConfig, m_shown, c);
        PipelinePlanner::ModelContext context;
        context.name = m_shownName;
        context.flops_per_sample = pl::model_flops_per_sample(*m_shownConfig, m_shown.seq_len);
        context.peak_tflops = m_shown.peak_tflops;
        if (!m_planner->applyModelCandidate(c, std::move(run), std::move(context))) {
            m_message->setText(QStringLiteral("⚠ ") + m_planner->error());
            return false;
        }
    } catch (const std::exception& e) {
        m_message->setText(QStringLiteral("⚠ ") + printableText(e.what()));
        return false;
    }
    m_message->setText(tr("#%1 on the timeline: %2").arg(index + 1).arg(BubbleReadout::modelSummary(*m_planner)));
    emit candidateLoaded(index);
    return true;
}

} // namespace shardwidgets
