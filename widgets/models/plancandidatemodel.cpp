#include "widgets/models/plancandidatemodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QApplication>
#include <QPalette>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

PlanCandidateModel::PlanCandidateModel(QObject* parent) : QAbstractTableModel(parent) {}

bool PlanCandidateModel::isModelColumn(int column)
{
    switch (column) {
    case Tp:
    case Sp:
    case Cp:
    case Ep:
    case MicroBatch:
    case TflopsPerGpu:
    case Mfu: return true;
    default: return false;
    }
}

void PlanCandidateModel::setResult(pl::SearchResult result, std::int64_t memoryLimit, int limit)
{
    beginResetModel();
    m_result = std::move(result);
    m_limit = memoryLimit;
    m_rows = int(std::min<std::size_t>(m_result.candidates.size(), std::size_t(std::max(0, limit))));
    endResetModel();
}

void PlanCandidateModel::clear()
{
    beginResetModel();
    m_result = {};
    m_rows = 0;
    endResetModel();
}

const pl::Candidate* PlanCandidateModel::candidate(int row) const
{
    return row >= 0 && row < m_rows ? &m_result.candidates[std::size_t(row)] : nullptr;
}

int PlanCandidateModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : m_rows;
}

int PlanCandidateModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant PlanCandidateModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const pl::Candidate& c = m_result.candidates[std::size_t(index.row())];
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Rank: return index.row() + 1;
        case Tp: return c.tp;
        case Sp: return c.sp ? tr("sp") : QStringLiteral("–");
        case Cp: return c.cp;
        case Ep: return c.ep;
        case Zero: return c.zero;
        case MicroBatch: return c.micro_batch_size;
        case Pp: return c.pp;
        case Dp: return c.dp;
        case Virtual: return c.virtual_stages;
        case Microbatches: return c.microbatches;
        case Schedule: return QString::fromUtf8(pl::to_string(c.schedule));
        case Recompute: return QString::fromUtf8(pl::to_string(c.recompute));
        case StepTime: return QStringLiteral("%1 ms").arg(c.step_time, 0, 'f', 2);
        case PeakMemory: return formatBytes(uint64_t(std::max<std::int64_t>(0, c.peak_memory_bytes)));
        // A word with the mark, never the colour alone.
        case Fits: return c.fits ? tr("✓ fits") : tr("✗ over");
        case SamplesPerSecond: return QString::number(c.samples_per_second, 'f', 1);
        case TflopsPerGpu: return QString::number(c.tflops_per_gpu, 'f', 1);
        case Mfu: return c.mfu > 0 ? QStringLiteral("%1 %").arg(c.mfu * 100.0, 0, 'f', 1) : QStringLiteral("–");
        }
    } else if (role == Qt::UserRole) { // raw values, for tests and sorting
        switch (index.column()) {
        case Sp: return c.sp;
        case TflopsPerGpu: return c.tflops_per_gpu;
        case Mfu: return c.mfu;
        case StepTime: return c.step_time;
        case PeakMemory: return qlonglong(c.peak_memory_bytes);
        case Fits: return c.fits;
        case SamplesPerSecond: return c.samples_per_second;
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == Qt::ForegroundRole && index.column() == Fits) {
        return severityColor(c.fits ? Severity::good : Severity::bad, QApplication::palette());
    } else if (role == Qt::TextAlignmentRole) {
        const bool text =
            index.column() == Schedule || index.column() == Recompute || index.column() == Fits || index.column() == Sp;
        return QVariant(text ? (Qt::AlignLeft | Qt::AlignVCenter) : (Qt::AlignRight | Qt::AlignVCenter));
    } else if (role == Qt::ToolTipRole) {
        QString tip = c.tp * c.cp * c.ep > 1 || c.sp ? tr("tp %1%2 × cp %3 (ep %4), ZeRO %5, micro batch %6\n")
                                                           .arg(c.tp)
                                                           .arg(c.sp ? tr(" with sequence parallelism") : QString())
                                                           .arg(c.cp)
                                                           .arg(c.ep)
                                                           .arg(c.zero)
                                                           .arg(c.micro_batch_size)
                                                     : QString();
        tip += tr("pp %1 × dp %2 (ZeRO %3), %4, %5 microbatches, recompute %6, partition %7")
                   .arg(c.pp)
                   .arg(c.dp)
                   .arg(c.zero)
                   .arg(QString::fromUtf8(pl::to_string(c.schedule)))
                   .arg(c.microbatches)
                   .arg(QString::fromUtf8(pl::to_string(c.recompute)), QString::fromStdString(c.partition));
        if (!c.fits && m_limit > 0)
            tip += tr("\n%1 over the %2 limit")
                       .arg(formatBytes(uint64_t(c.peak_memory_bytes - m_limit)), formatBytes(uint64_t(m_limit)));
        else if (index.row() > 0 && m_result.candidates.front().fits && c.fits)
            tip += QStringLiteral("\n") + QString::fromStdString(pl::why_slower(c, m_result.candidates.front()));
        return tip;
    }
    return {};
}

QVariant PlanCandidateModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Rank: return tr("#");
    case Tp: return tr("t");
    case Sp: return tr("sp");
    case Cp: return tr("cp");
    case Ep: return tr("ep");
    case Zero: return tr("ZeRO");
    case MicroBatch: return tr("mbs");
    case Pp: return tr("pp");
    case Dp: return tr("dp");
    case Virtual: return tr("v");
    case Microbatches: return tr("M");
    case Schedule: return tr("Schedule");
    case Recompute: return tr("Recompute");
    case StepTime: return tr("Step time");
    case PeakMemory: return tr("Peak memory");
    case Fits: return tr("Fits");
    case SamplesPerSecond: return tr("Samples/s");
    case TflopsPerGpu: return tr("TFLOP/s/GPU");
    case Mfu: return tr("MFU");
    }
    return {};
}

} // namespace shardwidgets
