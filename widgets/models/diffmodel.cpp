#include "widgets/models/diffmodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QPalette>
#include <cmath>
#include <limits>

namespace shardwidgets {

using shardscope::DiffStatus;
using shardscope::TensorDiff;

namespace {

bool compared(const TensorDiff& t)
{
    return t.status == DiffStatus::changed || t.status == DiffStatus::dtype_changed ||
        t.status == DiffStatus::identical;
}

QString typeName(shardscope::ElementType type)
{
    const auto name = to_string(type);
    return QString::fromUtf8(name.data(), qsizetype(name.size()));
}

} // namespace

DiffModel::DiffModel(QObject* parent) : QAbstractTableModel(parent) {}

void DiffModel::setReport(std::shared_ptr<const shardscope::DiffReport> report)
{
    beginResetModel();
    m_report = std::move(report);
    endResetModel();
}

const TensorDiff* DiffModel::tensorAt(int row) const
{
    if (!m_report || row < 0 || std::size_t(row) >= m_report->tensors.size())
        return nullptr;
    return &m_report->tensors[std::size_t(row)];
}

int DiffModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_report ? 0 : int(m_report->tensors.size());
}

int DiffModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant DiffModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const TensorDiff& t = m_report->tensors[std::size_t(index.row())];
    const shardscope::TensorContent* a = t.a ? &m_report->a.tensors[*t.a] : nullptr;
    const shardscope::TensorContent* b = t.b ? &m_report->b.tensors[*t.b] : nullptr;
    const auto rel = t.rel_l2();
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Name: return printableText(t.name);
        case State: return printableText(t.state);
        case Status: return QString::fromUtf8(to_string(t.status).data()).replace(QLatin1Char('_'), QLatin1Char(' '));
        case Dtype:
            if (a && b && a->type != b->type)
                return QStringLiteral("%1 → %2").arg(typeName(a->type), typeName(b->type));
            return typeName((a ? a : b)->type);
        case Shape:
            if (a && b && a->shape != b->shape)
                return QStringLiteral("%1 → %2").arg(formatShape(a->shape), formatShape(b->shape));
            return formatShape((a ? a : b)->shape);
        case Changed:
            if (!compared(t))
                return QStringLiteral("–");
            return t.sums.nonfinite_changed > 0
                ? tr("%1 of %2 (%3 NaN/Inf)")
                      .arg(formatCount(t.sums.changed), formatCount(t.numel), formatCount(t.sums.nonfinite_changed))
                : tr("%1 of %2").arg(formatCount(t.sums.changed), formatCount(t.numel));
        case MaxAbs: return compared(t) ? QString::number(t.sums.max_abs_diff, 'g', 4) : QStringLiteral("–");
        case RelativeChange:
            return !compared(t) ? QStringLiteral("–") : rel ? QString::number(*rel, 'g', 3) : QStringLiteral("∞");
        }
    } else if (role == Qt::UserRole) {
        switch (index.column()) {
        case Changed: return qulonglong(t.sums.changed);
        case MaxAbs: return t.sums.max_abs_diff;
        case RelativeChange: return data(index, RelativeChangeRole);
        case Status: return int(t.status);
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == RelativeChangeRole) {
        return !compared(t) ? -1.0 : rel ? *rel : std::numeric_limits<double>::infinity();
    } else if (role == Qt::ForegroundRole && index.column() == Status) {
        return t.status == DiffStatus::identical ? QVariant(severityColor(Severity::good, QPalette()))
                                                 : QVariant(severityColor(Severity::bad, QPalette()));
    } else if (role == Qt::TextAlignmentRole && index.column() >= Changed) {
        return int(Qt::AlignRight | Qt::AlignVCenter);
    } else if (role == Qt::ToolTipRole && (index.column() == Name || index.column() == Changed) &&
               t.sums.first_changed) {
        QString tip = tr("First changed element: flat index %1").arg(formatCount(*t.sums.first_changed));
        if (t.sums.nonfinite_changed > 0)
            tip += tr("\n%1 changed where a side is NaN or Inf (not in max |a−b| or ‖a−b‖)")
                       .arg(formatCount(t.sums.nonfinite_changed));
        return tip;
    }
    return {};
}

QVariant DiffModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char* const names[] = {"Tensor", "State",   "Status",    "Dtype",
                                        "Shape",  "Changed", "Max |a−b|", "‖a−b‖ / ‖a‖"};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

} // namespace shardwidgets
