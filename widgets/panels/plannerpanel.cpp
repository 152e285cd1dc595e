#include "widgets/panels/plannerpanel.h"

#include "widgets/views/bubblereadout.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/views/stagebar.h"
#include "widgets/models/stagestatsmodel.h"
#include "widgets/style/flowlayout.h"
#include "widgets/jobs/bubblesweep.h"
#include "widgets/panels/modelplanpanel.h"
#include "widgets/panels/planpanel.h"
#include "widgets/views/bubblechart.h"
#include "widgets/settings/settings.h"
#include "widgets/style/format.h"

#include "core/pipeline/schedule_csv.h"

#include <QCheckBox>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <QDoubleSpinBox>
#include <QTabWidget>
#include <QTimer>
#include <cmath>

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QShortcut>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStyle>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {
// The profile box's entry for a profile without a file (no path can be this).
const QString kMadeProfile = QStringLiteral("\x01made-here");
} // namespace

PlannerPanel::PlannerPanel(QWidget* parent)
    : QWidget(parent), m_planner(new PipelinePlanner(this)), m_stats(new StageStatsModel(this)),
      m_stageBar(new StageBar(m_planner, this)), m_gantt(new GanttView(this)),
      m_readout(new BubbleReadout(m_planner, this))
{
    // The first bundled profile (the interesting, unbalanced one) rather than a uniform toy.
    const QStringList bundled = PipelinePlanner::bundledProfiles();
    for (const QString& path : bundled)
        if (m_planner->loadProfile(path))
            break;

    auto* layout = new QVBoxLayout(this);
    layout->setSpacing(4); // with the tabs below the timeline, the page must still fit 800 x 600
    layout->addWidget(buildToolbar());

    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setObjectName(QStringLiteral("plannerError"));
    m_error->hide();
    layout->addWidget(m_error);
    layout->addWidget(buildResetBar());
    layout->addWidget(m_stageBar);

    m_table = new QTableView(this);
    m_table->setModel(m_stats);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(false);
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);

    auto* bottom = new QWidget(this);
    auto* bottomLayout = new QHBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    bottomLayout->addWidget(m_readout);
    bottomLayout->addWidget(m_table, 1);

    // Below the timeline, one of three: the stages of the plan shown, the search that finds
    // one, and how every schedule's bubble falls with more microbatches.
    m_plan = new PlanPanel(m_planner, this);
    m_modelPlan = new ModelPlanPanel(m_planner, this);
    m_bubbleChart = new BubbleChart(this);
    m_sweep = new BubbleSweep(this);
    m_sweepTimer = new QTimer(this);
    m_sweepTimer->setSingleShot(true);
    m_sweepTimer->setInterval(120);
    connect(m_sweepTimer, &QTimer::timeout, this, &PlannerPanel::startSweep);
    connect(m_sweep, &BubbleSweep::finished, this, &PlannerPanel::showSweep);
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(bottom, tr("Stages"));
    m_tabs->addTab(m_plan, tr("Plan search"));
    m_tabs->addTab(m_modelPlan, tr("Model search"));
    m_tabs->addTab(m_bubbleChart, tr("Bubble vs microbatches"));
    // The loaded candidate's stages (and any over the limit) are what the user wants next.
    connect(m_plan, &PlanPanel::candidateLoaded, this, [this] { m_stageBar->update(); });
    connect(m_modelPlan, &ModelPlanPanel::candidateLoaded, this, [this] { m_stageBar->update(); });

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_gantt);
    splitter->addWidget(m_tabs);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setChildrenCollapsible(false);
    splitter->setSizes({380, 300});
    bottom->setMinimumHeight(m_readout->sizeHint().height());
    layout->addWidget(splitter, 1);

    connect(m_planner, &PipelinePlanner::planChanged, this, &PlannerPanel::onPlanChanged);
    connect(m_planner, &PipelinePlanner::profileChanged, this, &PlannerPanel::syncControls);
    // Connected after the default load above: every later profile was put there on purpose.
    connect(m_planner, &PipelinePlanner::profileChanged, this, [this] { m_profileChosen = true; });
    syncControls();
    onPlanChanged();
}

QWidget* PlannerPanel::buildResetBar()
{
    m_resetBar = new QFrame(this);
    m_resetBar->setObjectName(QStringLiteral("plannerResetBar"));
    m_resetBar->setFrameShape(QFrame::StyledPanel);
    auto* row = new QHBoxLayout(m_resetBar);
    row->setContentsMargins(4, 0, 4, 0);
    // A notice, not an error: the style's information icon (a glyph may be missing from the font).
    auto* icon = new QLabel(m_resetBar);
    const int side = fontMetrics().height();
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxInformation).pixmap(side, side));
    m_resetText = new QLabel(m_resetBar);
    m_resetText->setWordWrap(true);
    m_undo = new QPushButton(tr("Undo"), m_resetBar);
    m_undo->setToolTip(tr("Put the previous schedule and the dragged partition back (Ctrl+Z)"));
    auto* dismiss = new QToolButton(m_resetBar);
    dismiss->setText(QStringLiteral("✕"));
    dismiss->setAutoRaise(true);
    dismiss->setToolTip(tr("Keep the re-balanced partition"));
    row->addWidget(icon);
    row->addWidget(m_resetText, 1);
    row->addWidget(m_undo);
    row->addWidget(dismiss);
    m_resetBar->hide();
    connect(m_undo, &QPushButton::clicked, m_planner, &PipelinePlanner::undoReset);
    connect(dismiss, &QToolButton::clicked, m_resetBar, &QWidget::hide);
    // The page's own Ctrl+Z: only while there is a reset to undo, so it steals nothing otherwise.
    auto* shortcut = new QShortcut(QKeySequence::Undo, this);
    shortcut->setContext(Qt::WidgetWithChildrenShortcut);
    connect(shortcut, &QShortcut::activated, m_planner, &PipelinePlanner::undoReset);
    connect(m_planner, &PipelinePlanner::manualCutReset, this, [this](const QString& notice) {
        m_resetText->setText(notice);
        m_resetBar->show();
    });
    return m_resetBar;
}

QWidget* PlannerPanel::buildToolbar()
{
    m_profile = new QComboBox(this);
    m_profile->setToolTip(tr("Layer-cost profile"));
    m_profile->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    for (const QString& path : PipelinePlanner::bundledProfiles())
        m_profile->addItem(QFileInfo(path).completeBaseName(), path);
    connect(m_profile, &QComboBox::activated, this, [this](int index) {
        if (m_profile->itemData(index) == kMadeProfile)
            return; // already shown: it has no file to load again
        QString error;
        if (!m_planner->loadProfile(m_profile->itemData(index).toString(), &error))
            emit profileError(error);
    });
    auto* load = new QToolButton(this);
    load->setText(tr("Load…"));
    load->setToolTip(tr("Load a layer-cost profile (JSON or CSV)"));
    connect(load, &QToolButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Load profile"), {}, tr("Profiles (*.json *.csv);;All files (*)"));
        QString error;
        if (!path.isEmpty() && !openProfile(path, &error))
            emit profileError(error);
    });

    m_schedule = new QComboBox(this);
    m_schedule->addItem(tr("GPipe"), int(pl::ScheduleKind::gpipe));
    m_schedule->addItem(tr("1F1B"), int(pl::ScheduleKind::one_f_one_b));
    m_schedule->addItem(tr("Interleaved 1F1B"), int(pl::ScheduleKind::interleaved));
    m_schedule->addItem(tr("ZB-H1 (zero bubble)"), int(pl::ScheduleKind::zb_h1));
    m_schedule->addItem(tr("ZB-H2 (zero bubble, 2N\u22121 in flight)"), int(pl::ScheduleKind::zb_h2));
    m_schedule->addItem(tr("ZB-V (V-shaped, 2 chunks)"), int(pl::ScheduleKind::zb_v));
    m_schedule->addItem(tr("DualPipeV (V-shaped, 2 chunks)"), int(pl::ScheduleKind::dualpipe_v));
    m_schedule->addItem(tr("Custom (opened CSV)"), int(pl::ScheduleKind::custom));
    connect(m_schedule, &QComboBox::activated, this,
            [this](int index) { m_planner->setScheduleKind(pl::ScheduleKind(m_schedule->itemData(index).toInt())); });

    auto spin = [this](int min, int max, const QString& tip) {
        auto* box = new QSpinBox(this);
        box->setRange(min, max);
        box->setToolTip(tip);
        box->setKeyboardTracking(false);
        return box;
    };
    m_stages = spin(1, PipelinePlanner::kMaxStages, tr("Pipeline stages (N)"));
    m_microbatches = spin(1, PipelinePlanner::kMaxMicrobatches, tr("Microbatches per step (M)"));
    m_virtual = spin(2, PipelinePlanner::kMaxVirtualStages, tr("Model chunks per stage (v), interleaved only"));
    connect(m_stages, &QSpinBox::valueChanged, m_planner, &PipelinePlanner::setStages);
    connect(m_microbatches, &QSpinBox::valueChanged, m_planner, &PipelinePlanner::setMicrobatches);
    connect(m_virtual, &QSpinBox::valueChanged, m_planner, &PipelinePlanner::setVirtualStages);

    // Each label stays with its control when the row wraps: one small group per setting.
    auto* toolbar = new QWidget(this);
    auto* flow = new FlowLayout(toolbar);
    auto group = [&](const QString& text, std::initializer_list<QWidget*> widgets) {
        auto* box = new QWidget(toolbar);
        auto* row = new QHBoxLayout(box);
        row->setContentsMargins(0, 0, 0, 0);
        if (!text.isEmpty()) {
            auto* label = new QLabel(text, box);
            if (widgets.size() > 0)
                label->setBuddy(*widgets.begin());
            row->addWidget(label);
        }
        for (QWidget* widget : widgets)
            row->addWidget(widget);
        flow->addWidget(box);
        return row;
    };
    group(tr("&Profile"), {m_profile, load});
    flow->addSpacing(12);
    group(tr("Sc&hedule"), {m_schedule});
    group(tr("S&tages"), {m_stages});
    group(tr("&Microbatches"), {m_microbatches});
    group(tr("&v"), {m_virtual});
    flow->addSpacing(12);
    QHBoxLayout* balance = group(tr("Balance:"), {});
    const std::pair<QString, pl::PartitionMethod> methods[] = {{tr("Compute"), pl::PartitionMethod::compute},
                                                               {tr("Params"), pl::PartitionMethod::params},
                                                               {tr("Uniform"), pl::PartitionMethod::uniform}};
    for (const auto& [text, method] : methods) {
        auto* button = new QPushButton(text, this);
        button->setToolTip(tr("Re-balance the stage boundaries by %1").arg(text.toLower()));
        connect(button, &QPushButton::clicked, this, [this, method = method] { m_planner->rebalance(method); });
        balance->addWidget(button);
    }
    auto* fit = new QToolButton(this);
    fit->setText(tr("Fit"));
    fit->setToolTip(tr("Fit the timeline to the window (double-click it, or press 0)"));
    connect(fit, &QToolButton::clicked, m_gantt, &GanttView::fitToWindow);
    group({}, {fit});
    flow->addSpacing(12);
    addTrainingControls(toolbar, flow);
    return toolbar;
}

void PlannerPanel::addTrainingControls(QWidget* row, FlowLayout* flow)
{
    auto group = [&](const QString& text, QWidget* widget, const QString& tip) {
        auto* cell = new QWidget(row);
        auto* line = new QHBoxLayout(cell);
        line->setContentsMargins(0, 0, 0, 0);
        if (!text.isEmpty()) {
            auto* label = new QLabel(text, cell);
            label->setBuddy(widget);
            line->addWidget(label);
        }
        widget->setToolTip(tip);
        line->addWidget(widget);
        flow->addWidget(cell);
    };
    m_dp = new QSpinBox(row);
    m_dp->setRange(1, plannerrange::kMaxDp);
    m_dp->setKeyboardTracking(false);
    m_zero = new QComboBox(row);
    for (int z = 0; z <= 3; ++z)
        m_zero->addItem(tr("ZeRO %1").arg(z), z);
    m_recompute = new QComboBox(row);
    m_recompute->addItem(tr("no recompute"), int(pl::Recompute::none));
    m_recompute->addItem(tr("selective recompute"), int(pl::Recompute::selective));
    m_recompute->addItem(tr("full recompute"), int(pl::Recompute::full));
    m_gpuMemory = new QDoubleSpinBox(row);
    m_gpuMemory->setRange(0, plannerrange::kMaxGpuMemoryGiB);
    m_gpuMemory->setDecimals(2);
    m_gpuMemory->setSuffix(tr(" GiB"));
    m_gpuMemory->setSpecialValueText(tr("no limit"));
    m_gpuMemory->setKeyboardTracking(false);
    m_link = new QDoubleSpinBox(row);
    m_link->setRange(0, plannerrange::kMaxLinkGbps);
    m_link->setDecimals(0);
    m_link->setSuffix(tr(" Gbps"));
    m_link->setSpecialValueText(tr("instant"));
    m_link->setKeyboardTracking(false);
    m_overlap = new QCheckBox(tr("Overlap all-reduce"), row);
    m_fp32Grads = new QCheckBox(tr("fp32 gradients"), row);
    group(tr("&dp"), m_dp, tr("Data-parallel degree: replicas of the pipeline whose gradients are all-reduced"));
    group({}, m_zero, tr("ZeRO stage: optimizer state (1), gradients (2), weights (3) sharded over dp"));
    group({}, m_recompute, tr("Activation recomputation: keep less, recompute in the backward"));
    group(tr("GPU &memory"), m_gpuMemory, tr("Memory per GPU: stages needing more are shown red"));
    group(tr("&Link"), m_link, tr("Link bandwidth for sends between stages and the all-reduce"));
    group({}, m_overlap, tr("Stream each stage's all-reduce beside its last microbatch's backward"));
    group({}, m_fp32Grads,
          tr("Gradients kept and reduced in fp32, as Megatron does with bf16 (--fp32-grads): 4 bytes a parameter"));
    connect(m_dp, &QSpinBox::valueChanged, this, &PlannerPanel::applyTrainingControls);
    connect(m_zero, &QComboBox::activated, this, &PlannerPanel::applyTrainingControls);
    connect(m_recompute, &QComboBox::activated, this, &PlannerPanel::applyTrainingControls);
    connect(m_gpuMemory, &QDoubleSpinBox::valueChanged, this, &PlannerPanel::applyTrainingControls);
    connect(m_link, &QDoubleSpinBox::valueChanged, this, &PlannerPanel::applyTrainingControls);
    connect(m_overlap, &QCheckBox::toggled, this, &PlannerPanel::applyTrainingControls);
    connect(m_fp32Grads, &QCheckBox::toggled, this, &PlannerPanel::applyTrainingControls);
}

void PlannerPanel::applyTrainingControls()
{
    const double gib = m_gpuMemory->value();
    // What the controls do not show stays as it is: a Model search candidate's expert- and
    // context-parallel degrees and data-parallel link.
    pl::TrainingOptions options = m_planner->trainingOptions();
    options.dp = m_dp->value();
    options.zero = m_zero->currentData().toInt();
    options.recompute = pl::Recompute(m_recompute->currentData().toInt());
    options.link_gbps = m_link->value();
    options.overlap_allreduce = m_overlap->isChecked();
    options.fp32_grads = m_fp32Grads->isChecked();
    options.gpu_memory_bytes =
        gib > 0 ? std::optional<std::int64_t>(std::llround(gib * 1024.0 * 1024.0 * 1024.0)) : std::nullopt;
    m_planner->setTrainingOptions(options);
}

void PlannerPanel::startSweep()
{
    if (!m_planner->plan())
        return;
    m_bubbleChart->setBusy(m_bubbleChart->lines().empty());
    m_sweep->start(BubbleSweepInput{.profile = m_planner->profile(),
                                    .spec = m_planner->spec(),
                                    .boundaries = m_planner->boundaries(),
                                    .options = m_planner->trainingOptions()});
}

void PlannerPanel::showSweep()
{
    std::vector<ChartLine> lines;
    for (const BubbleLine& line : m_sweep->lines()) {
        ChartLine chart{.name =
                            m_schedule->itemText(m_schedule->findData(int(line.kind))).section(QLatin1Char(' '), 0, 0),
                        .current = line.kind == m_planner->spec().kind};
        if (line.kind == pl::ScheduleKind::interleaved)
            chart.name += tr(" v=%1").arg(line.virtualStages);
        for (std::size_t i = 0; i < line.microbatches.size(); ++i)
            chart.points.push_back({.x = double(line.microbatches[i]), .y = line.bubble[i]});
        lines.push_back(std::move(chart));
    }
    m_bubbleChart->setLines(std::move(lines));
}

void PlannerPanel::openScheduleCsv(const QString& path, const std::function<void(bool, const QString&)>& done)
{
    struct Read {
        std::optional<pl::Schedule> schedule;
        QString error;
    };
    static int generation = 0;
    const int mine = ++generation;
    auto* watcher = new QFutureWatcher<Read>(this);
    connect(watcher, &QFutureWatcher<Read>::finished, this, [this, watcher, mine, done] {
        watcher->deleteLater();
        if (mine != generation)
            return; // a newer file was asked for
        Read read = watcher->result();
        QString error = read.error;
        if (read.schedule && m_planner->setCustomSchedule(std::move(*read.schedule), &error)) {
            done(true, QString());
            return;
        }
        done(false, error);
    });
    watcher->setFuture(QtConcurrent::run([file = path.toStdString()] {
        Read read;
        try {
            read.schedule = pl::load_schedule_csv(file);
        } catch (const std::exception& e) { // shardscope::Error, or bad_alloc
            read.error = printableText(e.what());
        }
        return read;
    }));
}

void PlannerPanel::openModelConfig(const QString& path)
{
    m_modelPlan->setConfigPath(path);
    m_tabs->setCurrentWidget(m_modelPlan);
}

bool PlannerPanel::openProfile(const QString& path, QString* error)
{
    if (!m_planner->loadProfile(path, error))
        return false;
    if (m_profile->findData(path) < 0)
        m_profile->addItem(QFileInfo(path).completeBaseName(), path);
    return true;
}

void PlannerPanel::syncControls()
{
    const QSignalBlocker b1(m_profile), b2(m_schedule), b3(m_stages), b4(m_microbatches), b5(m_virtual);
    const auto& spec = m_planner->spec();
    m_schedule->setCurrentIndex(m_schedule->findData(int(spec.kind)));
    m_stages->setValue(spec.stages);
    m_microbatches->setValue(spec.microbatches);
    m_virtual->setValue(std::max(2, spec.virtual_stages));
    m_virtual->setEnabled(spec.kind == pl::ScheduleKind::interleaved);
    // A CSV schedule's op lists fix its stages and microbatches.
    m_stages->setEnabled(spec.kind != pl::ScheduleKind::custom);
    m_microbatches->setEnabled(spec.kind != pl::ScheduleKind::custom);
    const QSignalBlocker t1(m_dp), t2(m_zero), t3(m_recompute), t4(m_gpuMemory), t5(m_link), t6(m_overlap),
        t7(m_fp32Grads);
    const auto& options = m_planner->trainingOptions();
    m_dp->setValue(options.dp);
    m_zero->setCurrentIndex(m_zero->findData(options.zero));
    m_recompute->setCurrentIndex(m_recompute->findData(int(options.recompute)));
    m_gpuMemory->setValue(options.gpu_memory_bytes ? double(*options.gpu_memory_bytes) / (1024.0 * 1024.0 * 1024.0)
                                                   : 0.0);
    m_link->setValue(options.link_gbps);
    m_overlap->setChecked(options.overlap_allreduce);
    m_fp32Grads->setChecked(options.fp32_grads);
    int index = m_profile->findData(QString::fromStdString(m_planner->profile().source));
    if (index < 0) {
        // A profile made in the app (a model search's candidate, a checkpoint's, a trace's) has
        // no file to list: one entry names it, so the box never shows a profile that is not shown.
        index = m_profile->findData(kMadeProfile);
        if (index < 0) {
            m_profile->addItem(QString(), kMadeProfile);
            index = m_profile->count() - 1;
        }
        m_profile->setItemText(index, printableText(m_planner->profile().name));
    }
    m_profile->setCurrentIndex(index);
}

void PlannerPanel::onPlanChanged()
{
    syncControls();
    if (!m_planner->canUndoReset())
        m_resetBar->hide();
    const auto& step = m_planner->stepPlan();
    if (step) {
        m_gantt->setProfileName(printableText(m_planner->profile().name));
        m_gantt->setStepPlan(*step);
        m_gantt->setCommunication(m_planner->pieceCommunication(), step->plan.pieces);
        m_stats->setStepPlan(*step);
        m_bubbleChart->setCurrentMicrobatches(m_planner->spec().microbatches);
        m_sweepTimer->start();
        m_error->hide();
    } else {
        m_gantt->clear();
        m_stats->clear();
        m_error->setText(QStringLiteral("⚠ ") + m_planner->error());
        m_error->show();
    }
}

} // namespace shardwidgets
