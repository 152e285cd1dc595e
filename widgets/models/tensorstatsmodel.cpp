#include "widgets/models/tensorstatsmodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QColor>
#include <QPalette>

namespace shardwidgets {

using shardscope::ValueStats;

namespace {

QString figure(const ValueStats& s, double value)
{
    return s.finite > 0 ? QString::number(value, 'g', 6) : QStringLiteral("–");
}

QString nonFiniteText(const ValueStats& s)
{
    if (s.nonfinite() == 0)
        return QStringLiteral("0");
    QStringList parts;
    if (s.nan)
        parts << QStringLiteral("%1 NaN").arg(s.nan);
    if (s.posinf)
        parts << QStringLiteral("%1 +Inf").arg(s.posinf);
    if (s.neginf)
        parts << QStringLiteral("%1 −Inf").arg(s.neginf);
    return parts.join(QStringLiteral(", "));
}

QVariant badForeground(const ValueStats& s)
{
    return s.nonfinite() > 0 ? QVariant(severityColor(Severity::bad, QPalette())) : QVariant();
}

} // namespace

TensorStatsModel::TensorStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorStatsModel::setReport(std::shared_ptr<const shardscope::ContentReport> report)
{
    beginResetModel();
    m_report = std::move(report);
    endResetModel();
}

void TensorStatsModel::clear()
{
    setReport(nullptr);
}

const shardscope::TensorContent* TensorStatsModel::tensorAt(int row) const
{
    if (!m_report || row < 0 || std::size_t(row) >= m_report->tensors.size())
        return nullptr;
    return &m_report->tensors[std::size_t(row)];
}

int TensorStatsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_report ? 0 : int(m_report->tensors.size());
}

int TensorStatsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant TensorStatsModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const shardscope::TensorContent& t = *tensorAt(index.row());
    const ValueStats& s = t.stats;
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Name: return printableText(t.name);
        case State: return printableText(t.state);
        case Dtype: return QString::fromUtf8(to_string(t.type).data(), qsizetype(to_string(t.type).size()));
        case Shape: return formatShape(t.shape);
        case Min: return figure(s, s.min);
        case Max: return figure(s, s.max);
        case Mean: return figure(s, s.mean);
        case Std: return figure(s, s.std_dev());
        case NonFinite: return nonFiniteText(s);
        case Zeros: return formatCount(s.zeros);
        }
    } else if (role == Qt::UserRole) {
        switch (index.column()) {
        case Shape: return qulonglong(s.numel);
        case Min: return s.finite ? s.min : 0.0;
        case Max: return s.finite ? s.max : 0.0;
        case Mean: return s.finite ? s.mean : 0.0;
        case Std: return s.std_dev();
        case NonFinite: return qulonglong(s.nonfinite());
        case Zeros: return qulonglong(s.zeros);
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == Qt::ForegroundRole && index.column() == NonFinite) {
        return badForeground(s);
    } else if (role == Qt::TextAlignmentRole && index.column() >= Min) {
        return int(Qt::AlignRight | Qt::AlignVCenter);
    } else if (role == Qt::ToolTipRole && index.column() == Name) {
        return tr("%1 elements in %2 part(s); |x| ≤ %3, L2 %4")
            .arg(formatCount(s.numel))
            .arg(t.parts.size())
            .arg(figure(s, s.abs_max), figure(s, s.l2()));
    }
    return {};
}

QVariant TensorStatsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char* const names[] = {"Tensor", "State", "Dtype", "Shape",     "Min",
                                        "Max",    "Mean",  "Std",   "NaN / Inf", "Zeros"};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

TensorPartsModel::TensorPartsModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorPartsModel::setTensor(const shardscope::TensorContent* tensor)
{
    beginResetModel();
    m_tensor = tensor;
    endResetModel();
}

int TensorPartsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_tensor ? 0 : int(m_tensor->parts.size());
}

int TensorPartsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant TensorPartsModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& part = m_tensor->parts[std::size_t(index.row())];
    const ValueStats& s = m_tensor->part_stats[std::size_t(index.row())];
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Rank: return part.rank >= 0 ? QVariant(part.rank) : QVariant(QStringLiteral("–"));
        case File: return printableText(part.file);
        case Elements: return formatCount(part.numel);
        case Min: return figure(s, s.min);
        case Max: return figure(s, s.max);
        case Mean: return figure(s, s.mean);
        case NonFinite: return nonFiniteText(s);
        }
    } else if (role == Qt::ForegroundRole && index.column() == NonFinite) {
        return badForeground(s);
    } else if (role == Qt::TextAlignmentRole && index.column() >= Elements) {
        return int(Qt::AlignRight | Qt::AlignVCenter);
    }
    return {};
}

QVariant TensorPartsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char* const names[] = {"Rank", "File", "Elements", "Min", "Max", "Mean", "NaN / Inf"};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

} // namespace shardwidgets
