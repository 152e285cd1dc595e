#include "widgets/models/stagestatsmodel.h"

#include "widgets/style/format.h"

namespace shardwidgets {

namespace {

// Each stage's layers as core says them: with interleaved chunks, one range per chunk.
QStringList layersOf(const shardscope::pipeline::Plan& plan)
{
    QStringList layers;
    for (const auto& s : plan.timeline.stage_stats)
        layers << QString::fromStdString(shardscope::pipeline::stage_layers(plan, s.stage));
    return layers;
}

} // namespace

StageStatsModel::StageStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void StageStatsModel::setPlan(const shardscope::pipeline::Plan& plan)
{
    const auto& stats = plan.timeline.stage_stats;
    if (stats.size() == m_stats.size() && plan.stages.size() == m_costs.size()) {
        m_stats = stats;
        m_costs = plan.stages;
        m_layers = layersOf(plan);
        if (!m_stats.empty())
            emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
        return;
    }
    beginResetModel();
    m_stats = stats;
    m_costs = plan.stages;
    m_layers = layersOf(plan);
    endResetModel();
}

void StageStatsModel::clear()
{
    beginResetModel();
    m_stats.clear();
    m_costs.clear();
    m_layers.clear();
    endResetModel();
}

int StageStatsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_stats.size());
}

int StageStatsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant StageStatsModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& s = m_stats[std::size_t(index.row())];
    const auto* cost = std::size_t(index.row()) < m_costs.size() ? &m_costs[std::size_t(index.row())] : nullptr;
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Stage: return s.stage;
        case Layers: return std::size_t(index.row()) < std::size_t(m_layers.size()) ? m_layers[index.row()] : QString();
        case Params: return cost ? formatCount(uint64_t(std::max<int64_t>(0, cost->params))) : QString();
        case Busy: return QString::number(s.busy, 'f', 2);
        case Idle: return QString::number(s.idle, 'f', 2);
        case Bubble: return QStringLiteral("%1 %").arg(s.bubble_fraction * 100.0, 0, 'f', 1);
        case PeakActivations: return s.peak_activations;
        case PeakMemory: return formatBytes(uint64_t(std::max<int64_t>(0, s.peak_activation_bytes)));
        }
    } else if (role == Qt::UserRole) { // raw numbers, for sorting and tests
        switch (index.column()) {
        case Stage: return s.stage;
        case Params: return cost ? qlonglong(cost->params) : 0;
        case Busy: return s.busy;
        case Idle: return s.idle;
        case Bubble: return s.bubble_fraction;
        case PeakActivations: return s.peak_activations;
        case PeakMemory: return qlonglong(s.peak_activation_bytes);
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == Qt::TextAlignmentRole) {
        return QVariant(index.column() == Layers ? (Qt::AlignLeft | Qt::AlignVCenter)
                                                 : (Qt::AlignRight | Qt::AlignVCenter));
    } else if (role == Qt::ToolTipRole && index.column() == PeakActivations) {
        return tr("Most microbatches whose activations stage %1 holds at once").arg(s.stage);
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
    case PeakMemory: return tr("Peak act. memory");
    }
    return {};
}

} // namespace shardwidgets
