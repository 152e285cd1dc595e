#include "widgets/models/reshardplanmodel.h"

#include "widgets/style/format.h"

namespace shardwidgets {

ReshardPlanModel::ReshardPlanModel(QObject* parent) : QAbstractTableModel(parent) {}

void ReshardPlanModel::setPlan(shardscope::ReshardPlan plan)
{
    // A new target world size changes the row count and every row: a reset is the honest signal.
    beginResetModel();
    m_plan = std::move(plan);
    endResetModel();
}

void ReshardPlanModel::clear()
{
    beginResetModel();
    m_plan.reset();
    endResetModel();
}

int ReshardPlanModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_plan ? 0 : int(m_plan->targets.size());
}

int ReshardPlanModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QString ReshardPlanModel::sources(const shardscope::TargetPlan& target) const
{
    if (target.runs.empty())
        return tr("nothing (empty shard)");
    QStringList parts;
    for (std::size_t i = 0; i < target.runs.size() && i < 4; ++i) {
        const auto& run = target.runs[i];
        parts << tr("r%1 (%2)").arg(run.source_rank).arg(formatPercent(run.numel, target.numel));
    }
    if (target.runs.size() > 4)
        parts << tr("+%1 more").arg(target.runs.size() - 4);
    return parts.join(QStringLiteral(", "));
}

QString ReshardPlanModel::sourcesTooltip(const shardscope::TargetPlan& target) const
{
    QStringList lines;
    lines << tr("New rank %1 owns elements [%2, %3)")
                 .arg(target.rank)
                 .arg(formatCount(target.offset), formatCount(target.offset + target.numel));
    for (std::size_t i = 0; i < target.runs.size() && i < 32; ++i) {
        const auto& run = target.runs[i];
        lines << tr("from rank %1, its elements [%2, %3): %4")
                     .arg(run.source_rank)
                     .arg(formatCount(run.source_offset), formatCount(run.source_offset + run.numel),
                          formatBytes(run.numel * m_plan->bytes_per_element));
    }
    if (target.runs.size() > 32)
        lines << tr("… and %1 more runs").arg(target.runs.size() - 32);
    return lines.join(QLatin1Char('\n'));
}

QVariant ReshardPlanModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid) || !m_plan)
        return {};
    const auto& t = m_plan->targets[std::size_t(index.row())];
    const uint64_t moving = t.bytes - t.bytes_staying;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Rank: return t.rank;
        case Elements: return QStringLiteral("[%1, %2)").arg(formatCount(t.offset), formatCount(t.offset + t.numel));
        case Bytes: return formatBytes(t.bytes);
        case Sources: return sources(t);
        case Staying: return formatBytes(t.bytes_staying);
        case Moving: return formatBytes(moving);
        }
        break;
    case RawRole:
        switch (index.column()) {
        case Rank: return t.rank;
        case Elements: return qulonglong(t.numel);
        case Bytes: return qulonglong(t.bytes);
        case Sources: return int(t.runs.size());
        case Staying: return qulonglong(t.bytes_staying);
        case Moving: return qulonglong(moving);
        }
        break;
    case Qt::ToolTipRole:
        if (index.column() == Sources || index.column() == Elements)
            return sourcesTooltip(t);
        if (index.column() == Bytes)
            return tr("%1 bytes: %2 elements × %3 bytes (parameter and optimizer state)")
                .arg(formatCount(t.bytes), formatCount(t.numel))
                .arg(m_plan->bytes_per_element);
        break;
    case Qt::TextAlignmentRole:
        if (index.column() != Sources && index.column() != Elements)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        break;
    }
    return {};
}

QVariant ReshardPlanModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Rank: return tr("New rank");
    case Elements: return tr("Elements");
    case Bytes: return tr("Bytes");
    case Sources: return tr("Sources");
    case Staying: return tr("Staying");
    case Moving: return tr("Moving");
    }
    return {};
}

} // namespace shardwidgets
