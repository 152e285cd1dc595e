#include "widgets/models/stagestatsmodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QApplication>
#include <QPalette>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {

// Each stage's layers as core says them: with interleaved chunks, one range per chunk.
QStringList layersOf(const pl::Plan& plan)
{
    QStringList layers;
    for (const auto& s : plan.timeline.stage_stats)
        layers << QString::fromStdString(pl::stage_layers(plan, s.stage));
    return layers;
}

QString bytesText(std::int64_t bytes)
{
    return formatBytes(uint64_t(std::max<std::int64_t>(0, bytes)));
}

} // namespace

StageStatsModel::StageStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void StageStatsModel::setPlan(const pl::Plan& plan)
{
    take(plan, {}, std::nullopt);
}

void StageStatsModel::setStepPlan(const pl::StepPlan& step)
{
    take(step.plan, step.memory, step.options.gpu_memory_bytes);
}

void StageStatsModel::take(const pl::Plan& plan, std::vector<pl::StageMemory> memory, std::optional<std::int64_t> limit)
{
    const auto& stats = plan.timeline.stage_stats;
    const bool inPlace = stats.size() == m_stats.size() && plan.stages.size() == m_costs.size();
    if (!inPlace)
        beginResetModel();
    m_stats = stats;
    m_costs = plan.stages;
    m_memory = std::move(memory);
    m_limit = limit;
    m_layers = layersOf(plan);
    if (!inPlace)
        endResetModel();
    else if (!m_stats.empty())
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

void StageStatsModel::clear()
{
    beginResetModel();
    m_stats.clear();
    m_costs.clear();
    m_memory.clear();
    m_limit.reset();
    m_layers.clear();
    endResetModel();
}

bool StageStatsModel::overLimit(int stage) const
{
    return stage >= 0 && std::size_t(stage) < m_memory.size() && !m_memory[std::size_t(stage)].fits;
}

int StageStatsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_stats.size());
}

int StageStatsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant StageStatsModel::memoryValue(int column, const pl::StageMemory& m) const
{
    switch (column) {
    case Weights: return qlonglong(m.weights);
    case Gradients: return qlonglong(m.gradients);
    case Optimizer: return qlonglong(m.optimizer);
    case Activations: return qlonglong(m.activations);
    case Total: return qlonglong(m.total);
    }
    return {};
}

QVariant StageStatsModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const std::size_t row = std::size_t(index.row());
    const auto& s = m_stats[row];
    const auto* cost = row < m_costs.size() ? &m_costs[row] : nullptr;
    const auto* memory = row < m_memory.size() ? &m_memory[row] : nullptr;
    const bool isMemory = index.column() >= Weights;
    const bool over = memory && !memory->fits;
    if (role == Qt::DisplayRole) {
        if (isMemory) {
            if (!memory)
                return QString();
            const QString text = bytesText(memoryValue(index.column(), *memory).toLongLong());
            // The sign as well as the colour: a red cell alone is lost on some screens and eyes.
            return index.column() == Total && over ? QStringLiteral("⚠ ") + text : text;
        }
        switch (index.column()) {
        case Stage: return s.stage;
        case Layers: return row < std::size_t(m_layers.size()) ? m_layers[index.row()] : QString();
        case Params: return cost ? formatCount(uint64_t(std::max<int64_t>(0, cost->params))) : QString();
        case Busy: return QString::number(s.busy, 'f', 2);
        case Idle: return QString::number(s.idle, 'f', 2);
        case Bubble: return QStringLiteral("%1 %").arg(s.bubble_fraction * 100.0, 0, 'f', 1);
        case PeakActivations: return s.peak_activations;
        }
    } else if (role == Qt::UserRole) { // raw numbers, for sorting and tests
        if (isMemory)
            return memory ? memoryValue(index.column(), *memory) : QVariant();
        switch (index.column()) {
        case Stage: return s.stage;
        case Params: return cost ? qlonglong(cost->params) : 0;
        case Busy: return s.busy;
        case Idle: return s.idle;
        case Bubble: return s.bubble_fraction;
        case PeakActivations: return s.peak_activations;
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == Qt::TextAlignmentRole) {
        return QVariant(index.column() == Layers ? (Qt::AlignLeft | Qt::AlignVCenter)
                                                 : (Qt::AlignRight | Qt::AlignVCenter));
    } else if (role == Qt::ForegroundRole && over && (index.column() == Stage || index.column() == Total)) {
        return severityColor(Severity::bad, QApplication::palette());
    } else if (role == Qt::BackgroundRole && over) {
        // A tint over the whole row, the strong colour on the stage and total: readable on both
        // light and dark palettes.
        QColor tint = severityColor(Severity::bad, QApplication::palette());
        tint.setAlpha(48);
        return tint;
    } else if (role == Qt::ToolTipRole) {
        if (index.column() == PeakActivations)
            return tr("Most microbatches whose activations stage %1 holds at once").arg(s.stage);
        if (over && m_limit)
            return tr("Stage %1 needs %2 per GPU, %3 more than the %4 limit")
                .arg(s.stage)
                .arg(bytesText(memory->total), bytesText(memory->total - *m_limit), bytesText(*m_limit));
        if (isMemory && index.column() == Activations)
            return tr("Activations held at the stage's peak, plus one layer's recomputed working set");
    }
    return {};
}

QVariant StageStatsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Stage: return tr("Stage");
    case Layers: return tr("Layers");
    case Params: return tr("Params");
    case Busy: return tr("Busy ms");
    case Idle: return tr("Idle ms");
    case Bubble: return tr("Bubble");
    case PeakActivations: return tr("Peak act.");
    case Weights: return tr("Weights");
    case Gradients: return tr("Gradients");
    case Optimizer: return tr("Optimizer");
    case Activations: return tr("Activations");
    case Total: return tr("Total / GPU");
    }
    return {};
}

} // namespace shardwidgets
