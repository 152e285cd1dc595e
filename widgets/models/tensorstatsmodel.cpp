#include "widgets/models/tensorstatsmodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QBrush>
#include <QColor>
#include <QCoreApplication>
#include <QPalette>
#include <algorithm>

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

// The State cell: a native state, and for DeepSpeed ZeRO what the row is (assembled tensors and
// the flat partitions they are read from).
QString stateText(const shardscope::TensorContent& t)
{
    const QString state = printableText(t.state);
    if (t.assembled)
        return state.isEmpty() ? QCoreApplication::translate("TensorStatsModel", "assembled")
                               : QCoreApplication::translate("TensorStatsModel", "%1, assembled").arg(state);
    if (t.zero_partition)
        return QCoreApplication::translate("TensorStatsModel", "ZeRO partition");
    return state;
}

QString zeroNote(const shardscope::TensorContent& t)
{
    if (t.assembled)
        return QCoreApplication::translate("TensorStatsModel",
                                           "Put together from the ranks' flat partitions as DeepSpeed's "
                                           "zero_to_fp32 does: the padding is left out");
    if (t.zero_partition)
        return QCoreApplication::translate("TensorStatsModel",
                                           "A DeepSpeed ZeRO flat partition: its padding holds whatever was in "
                                           "memory, so its NaN / Inf are no finding; the assembled tensors read "
                                           "from it carry the findings");
    return {};
}

// The banner's tint (the status colour over the base colour): a marked row stands out in light and
// dark palettes, its text keeps its contrast, and its red NaN counts stay readable.
QBrush failedTint()
{
    const QPalette palette;
    const QColor base = palette.color(QPalette::Base);
    const QColor tone = severityColor(Severity::bad, palette);
    return QColor::fromRgbF(base.redF() * 0.85f + tone.redF() * 0.15f, base.greenF() * 0.85f + tone.greenF() * 0.15f,
                            base.blueF() * 0.85f + tone.blueF() * 0.15f);
}

// Min, max, mean and std leave NaN and ±Inf out (core's ValueStats): a plain "Min" would claim
// more than the figure is.
QString finiteHeader(const char* name)
{
    return QObject::tr("%1 (finite)").arg(QObject::tr(name));
}

QString finiteTip(const char* what)
{
    return QObject::tr("%1 of the finite values: NaN and ±Inf are left out (their count is under NaN / Inf).")
        .arg(QObject::tr(what));
}

QString failedFileText(const FailedFile& f)
{
    return QObject::tr("%1, which failed verification (%2)").arg(printableText(f.path), statusText(f.status));
}

} // namespace

TensorStatsModel::TensorStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorStatsModel::setReport(std::shared_ptr<const shardscope::ContentReport> report)
{
    beginResetModel();
    m_report = std::move(report);
    m_failed.clear(); // of the verification of whatever was open before
    m_from.clear();
    m_markOfRow.clear();
    endResetModel();
}

void TensorStatsModel::setFailedFiles(std::vector<FailedFile> files)
{
    m_failed = std::move(files);
    m_from.clear();
    m_markOfRow.clear();
    if (m_report && !m_failed.empty()) {
        std::vector<std::string> paths;
        for (const FailedFile& f : m_failed)
            paths.push_back(f.path);
        m_from = shardscope::tensors_read_from(*m_report, paths);
        m_markOfRow.assign(m_report->tensors.size(), -1);
        for (std::size_t i = 0; i < m_from.size(); ++i)
            m_markOfRow[m_from[i].tensor] = int(i);
    }
    if (rowCount() > 0)
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1),
                         {Qt::DecorationRole, Qt::BackgroundRole, Qt::ToolTipRole});
}

int TensorStatsModel::readFromFailedFileCount() const
{
    return int(std::count_if(m_from.begin(), m_from.end(), [](const auto& m) { return !m.files.empty(); }));
}

int TensorStatsModel::unreadFromFailedFileCount() const
{
    return int(std::count_if(m_from.begin(), m_from.end(), [](const auto& m) { return m.unread > 0; }));
}

const shardscope::TensorFromFiles* TensorStatsModel::markOf(int row) const
{
    if (row < 0 || std::size_t(row) >= m_markOfRow.size() || m_markOfRow[std::size_t(row)] < 0)
        return nullptr;
    return &m_from[std::size_t(m_markOfRow[std::size_t(row)])];
}

QString TensorStatsModel::failedFileNote(int row) const
{
    const shardscope::TensorFromFiles* mark = markOf(row);
    if (!mark)
        return {};
    QStringList files;
    for (std::size_t f : mark->files)
        files << failedFileText(m_failed[f]);
    const uint64_t numel = tensorAt(row)->stats.numel + mark->unread;
    QStringList said;
    if (!files.isEmpty())
        said << (mark->numel < numel ? tr("%1 of its %2 elements were read from %3")
                                           .arg(formatCount(mark->numel), formatCount(numel), files.join(tr("; ")))
                                     : tr("Read from %1").arg(files.join(tr("; "))));
    if (mark->unread > 0) {
        // The file's parts were dropped with its header, so which file held them is not in the
        // report: with one failed file it is that one.
        const QString where =
            m_failed.size() == 1 ? failedFileText(m_failed.front()) : tr("a file that failed verification");
        said << (mark->unread < numel
                     ? tr("%1 of its %2 elements were not read: they are in %3")
                           .arg(formatCount(mark->unread), formatCount(numel), where)
                     : tr("None of its %1 elements were read: they are in %2").arg(formatCount(numel), where));
    }
    return said.join(tr("; ")) + tr(": these figures are not the saved values.");
}

QIcon TensorStatsModel::failedFileIcon(int row) const
{
    const shardscope::TensorFromFiles* mark = markOf(row);
    if (!mark)
        return {};
    if (!mark->files.empty())
        return statusIcon(m_failed[mark->files.front()].status);
    return m_failed.size() == 1 ? statusIcon(m_failed.front().status) : severityIcon(Severity::bad);
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

bool TensorStatsModel::hasProblem(int row) const
{
    const shardscope::TensorContent* t = tensorAt(row);
    return t && shardscope::tensor_health(*t).problem();
}

int TensorStatsModel::problemCount() const
{
    int count = 0;
    for (int row = 0; row < rowCount(); ++row)
        count += hasProblem(row);
    return count;
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
        case State: return stateText(t);
        case Dtype: {
            const QString dtype = QString::fromUtf8(to_string(t.type).data(), qsizetype(to_string(t.type).size()));
            // The figures of a block-quantized FP8 weight are of its dequantized values: say so where the dtype is.
            return t.scale >= 0 ? tr("%1 × scale").arg(dtype) : dtype;
        }
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
        return t.zero_partition ? QVariant() : badForeground(s);
    } else if (role == Qt::TextAlignmentRole && index.column() != Name && index.column() != State &&
               index.column() != Dtype && index.column() != Shape) {
        return int(Qt::AlignRight | Qt::AlignVCenter);
    } else if (role == Qt::DecorationRole && index.column() == Name) {
        if (markOf(index.row()))
            return failedFileIcon(index.row());
    } else if (role == Qt::BackgroundRole) {
        if (markOf(index.row()))
            return failedTint();
    } else if (role == Qt::ToolTipRole) {
        const QString note = failedFileNote(index.row());
        if (index.column() == Dtype && t.scale >= 0 && m_report) {
            const QString by =
                tr("Dequantized by %1: each value is the stored FP8 value times the scale of its 128×128 block")
                    .arg(printableText(m_report->tensors[std::size_t(t.scale)].name));
            return note.isEmpty() ? by : note + QLatin1Char('\n') + by;
        }
        if ((index.column() == State || index.column() == NonFinite) && !zeroNote(t).isEmpty())
            return note.isEmpty() ? zeroNote(t) : note + QLatin1Char('\n') + zeroNote(t);
        if (index.column() != Name)
            return note.isEmpty() ? QVariant() : QVariant(note);
        // The view elides long names in the middle: the whole name is here.
        QString name = printableText(t.name);
        if (!t.state.empty())
            name += QStringLiteral(" [%1]").arg(printableText(t.state));
        const QString figures = tr("%1 elements in %2 part(s); finite values: |x| ≤ %3, L2 %4")
                                    .arg(formatCount(s.numel))
                                    .arg(t.parts.size())
                                    .arg(figure(s, s.abs_max), figure(s, s.l2()));
        return name + QLatin1Char('\n') + (note.isEmpty() ? figures : note + QLatin1Char('\n') + figures);
    }
    return {};
}

QVariant TensorStatsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Name: return tr("Tensor");
        case NonFinite: return tr("NaN / Inf");
        case Zeros: return tr("Zeros");
        case State: return tr("State");
        case Dtype: return tr("Dtype");
        case Shape: return tr("Shape");
        case Min: return finiteHeader("Min");
        case Max: return finiteHeader("Max");
        case Mean: return finiteHeader("Mean");
        case Std: return finiteHeader("Std");
        }
    } else if (role == Qt::ToolTipRole) {
        switch (section) {
        case NonFinite: return tr("NaN, +Inf and −Inf values; the first click sorts the most first.");
        case Zeros: return tr("Values equal to zero; the first click sorts the most first.");
        case Min: return finiteTip("The smallest");
        case Max: return finiteTip("The largest");
        case Mean: return finiteTip("The mean");
        case Std: return finiteTip("The population standard deviation");
        default: break;
        }
    } else if (role == Qt::InitialSortOrderRole && (section == NonFinite || section == Zeros)) {
        return int(Qt::DescendingOrder); // problems first: nobody sorts to see the healthy tensors
    }
    return QAbstractTableModel::headerData(section, orientation, role);
}

TensorPartsModel::TensorPartsModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorPartsModel::setTensor(const shardscope::TensorContent* tensor)
{
    beginResetModel();
    m_tensor = tensor;
    endResetModel();
}

void TensorPartsModel::setFailedFiles(std::vector<FailedFile> files)
{
    m_failed = std::move(files);
    if (rowCount() > 0)
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1),
                         {Qt::DecorationRole, Qt::BackgroundRole, Qt::ToolTipRole});
}

const FailedFile* TensorPartsModel::failedFileOf(int row) const
{
    const std::string& file = m_tensor->parts[std::size_t(row)].file;
    const auto it = std::find_if(m_failed.begin(), m_failed.end(), [&](const FailedFile& f) { return f.path == file; });
    return it == m_failed.end() ? nullptr : &*it;
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
    } else if (role == Qt::TextAlignmentRole && index.column() >= NonFinite) {
        return int(Qt::AlignRight | Qt::AlignVCenter);
    } else if (role == Qt::DecorationRole && index.column() == File) {
        if (const FailedFile* failed = failedFileOf(index.row()))
            return statusIcon(failed->status);
    } else if (role == Qt::BackgroundRole) {
        if (failedFileOf(index.row()))
            return failedTint();
    } else if (role == Qt::ToolTipRole) {
        if (const FailedFile* failed = failedFileOf(index.row()))
            return tr("Read from %1: these figures are not the saved values.").arg(failedFileText(*failed));
        if (index.column() == File) // the view elides it
            return printableText(part.file);
        if (index.column() == Elements && !part.box_offsets.empty()) { // a DCP chunk, a tensor-parallel slice
            QStringList ranges;
            for (std::size_t d = 0; d < part.box_offsets.size() && d < part.box_sizes.size(); ++d)
                ranges << QStringLiteral("%1:%2").arg(part.box_offsets[d]).arg(part.box_offsets[d] + part.box_sizes[d]);
            return tr("Its place in the tensor: [%1]").arg(ranges.join(QStringLiteral(", ")));
        }
    }
    return {};
}

QVariant TensorPartsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Rank: return tr("Rank");
        case File: return tr("File");
        case NonFinite: return tr("NaN / Inf");
        case Elements: return tr("Elements");
        case Min: return finiteHeader("Min");
        case Max: return finiteHeader("Max");
        case Mean: return finiteHeader("Mean");
        }
    } else if (role == Qt::ToolTipRole) {
        switch (section) {
        case Min: return finiteTip("The smallest");
        case Max: return finiteTip("The largest");
        case Mean: return finiteTip("The mean");
        default: break;
        }
    } else if (role == Qt::InitialSortOrderRole && section == NonFinite) {
        return int(Qt::DescendingOrder);
    }
    return QAbstractTableModel::headerData(section, orientation, role);
}

} // namespace shardwidgets
