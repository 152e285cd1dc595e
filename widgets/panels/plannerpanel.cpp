#include "widgets/panels/plannerpanel.h"

#include "widgets/views/bubblereadout.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/views/stagebar.h"
#include "widgets/models/stagestatsmodel.h"
#include "widgets/style/flowlayout.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

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
    layout->addWidget(buildToolbar());

    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setObjectName(QStringLiteral("plannerError"));
    m_error->hide();
    layout->addWidget(m_error);
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

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_gantt);
    splitter->addWidget(bottom);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setChildrenCollapsible(false);
    splitter->setSizes({380, 240});
    bottom->setMinimumHeight(m_readout->sizeHint().height());
    layout->addWidget(splitter, 1);

    connect(m_planner, &PipelinePlanner::planChanged, this, &PlannerPanel::onPlanChanged);
    connect(m_planner, &PipelinePlanner::profileChanged, this, &PlannerPanel::syncControls);
    syncControls();
    onPlanChanged();
}

QWidget* PlannerPanel::buildToolbar()
{
    m_profile = new QComboBox(this);
    m_profile->setToolTip(tr("Layer-cost profile"));
    m_profile->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    for (const QString& path : PipelinePlanner::bundledProfiles())
        m_profile->addItem(QFileInfo(path).completeBaseName(), path);
    connect(m_profile, &QComboBox::activated, this, [this](int index) {
        QString error;
        if (!m_planner->loadProfile(m_profile->itemData(index).toString(), &error))
            emit profileError(error);
    });
    auto* load = new QToolButton(this);
    load->setText(tr("Load…"));
    load->setToolTip(tr("Load a layer-cost profile (JSON or CSV)"));
    connect(load, &QToolButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Load profile"), {},
                                                          tr("Profiles (*.json *.csv);;All files (*)"));
        QString error;
        if (!path.isEmpty() && !openProfile(path, &error))
            emit profileError(error);
    });

    m_schedule = new QComboBox(this);
    m_schedule->addItem(tr("GPipe"), int(pl::ScheduleKind::gpipe));
    m_schedule->addItem(tr("1F1B"), int(pl::ScheduleKind::one_f_one_b));
    m_schedule->addItem(tr("Interleaved 1F1B"), int(pl::ScheduleKind::interleaved));
    m_schedule->addItem(tr("ZB-H1 (zero bubble)"), int(pl::ScheduleKind::zb_h1));
    connect(m_schedule, &QComboBox::activated, this, [this](int index) {
        m_planner->setScheduleKind(pl::ScheduleKind(m_schedule->itemData(index).toInt()));
    });

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
    const std::pair<QString, pl::PartitionMethod> methods[] = {
        {tr("Compute"), pl::PartitionMethod::compute},
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
    return toolbar;
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
    const int index = m_profile->findData(QString::fromStdString(m_planner->profile().source));
    if (index >= 0)
        m_profile->setCurrentIndex(index);
}

void PlannerPanel::onPlanChanged()
{
    syncControls();
    const auto& plan = m_planner->plan();
    if (plan) {
        m_gantt->setTimeline(plan->timeline);
        m_stats->setPlan(*plan);
        m_error->hide();
    } else {
        m_gantt->clear();
        m_stats->clear();
        m_error->setText(QStringLiteral("⚠ ") + m_planner->error());
        m_error->show();
    }
}

} // namespace shardwidgets
