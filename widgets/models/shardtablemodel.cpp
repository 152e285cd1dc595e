#include "widgets/models/shardtablemodel.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QApplication>
#include <QFont>
#include <QPalette>

namespace shardwidgets {

using shardscope::ShardStatus;

ShardTableModel::ShardTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ShardTableModel::setManifest(const shardscope::Manifest& manifest)
{
    beginResetModel();
    m_foreign = false;
    m_rows.clear();
    m_rows.reserve(manifest.shards.size());
    for (const auto& record : manifest.shards) {
        Row row;
        row.record = record;
        row.check.rank = record.rank;
        row.check.path = record.path;
        row.check.expected_bytes = record.bytes;
        m_rows.push_back(std::move(row));
    }
    endResetModel();
}

void ShardTableModel::setChecks(const std::vector<shardscope::ShardCheck>& checks)
{
    beginResetModel();
    m_foreign = true;
    m_rows.clear();
    m_rows.reserve(checks.size());
    for (const auto& check : checks) {
        Row row;
        row.record.rank = check.rank;
        row.record.path = check.path;
        row.record.bytes = check.expected_bytes;
        row.check = check;
        row.percent = check.status == ShardStatus::pending ? 0 : 100;
        m_rows.push_back(std::move(row));
    }
    endResetModel();
}

void ShardTableModel::clear()
{
    beginResetModel();
    m_foreign = false;
    m_rows.clear();
    endResetModel();
}

void ShardTableModel::setShardPercent(int index, int percent)
{
    if (index < 0 || index >= int(m_rows.size()))
        return;
    Row& row = m_rows[std::size_t(index)];
    if (severity(row.check.status) == Severity::good || severity(row.check.status) == Severity::bad || row.unchecked)
        return; // a late progress report must not undo a result, nor a cancel
    if (row.check.status == ShardStatus::hashing && row.percent == percent)
        return;
    row.check.status = ShardStatus::hashing;
    row.percent = std::clamp(percent, 0, 100);
    emit dataChanged(this->index(index, Status), this->index(index, Status));
}

void ShardTableModel::setShardResult(int index, const shardscope::ShardCheck& check)
{
    if (index < 0 || index >= int(m_rows.size()))
        return;
    Row& row = m_rows[std::size_t(index)];
    row.check = check;
    row.percent = 100;
    row.unchecked = false;
    emit dataChanged(this->index(index, 0), this->index(index, ColumnCount - 1));
}

void ShardTableModel::markUnchecked()
{
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        Row& row = m_rows[i];
        if (row.check.status != ShardStatus::pending && row.check.status != ShardStatus::hashing)
            continue;
        row.check.status = ShardStatus::pending;
        row.percent = 0;
        row.unchecked = true;
        emit dataChanged(index(int(i), Status), index(int(i), Status));
    }
}

ShardStatus ShardTableModel::status(int row) const
{
    return m_rows.at(std::size_t(row)).check.status;
}

int ShardTableModel::percent(int row) const
{
    return m_rows.at(std::size_t(row)).percent;
}

const shardscope::ShardRecord& ShardTableModel::record(int row) const
{
    return m_rows.at(std::size_t(row)).record;
}

int ShardTableModel::rowForRank(int rank) const
{
    for (std::size_t i = 0; i < m_rows.size(); ++i)
        if (m_rows[i].record.rank == rank)
            return int(i);
    return -1;
}

int ShardTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int ShardTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ShardTableModel::display(const Row& row, int column) const
{
    switch (column) {
    case Rank: // formats without ranks (safetensors, an HF index) have none to show
        return row.record.rank >= 0 ? QVariant(row.record.rank) : QVariant(QStringLiteral("–"));
    case Status:
        if (row.check.status == ShardStatus::hashing)
            return tr("hashing %1%").arg(row.percent);
        if (row.unchecked)
            return tr("not checked (cancelled)");
        return statusText(row.check.status);
    case File: return printableText(row.record.path);
    case Bytes: // a truncated or grown shard: what is on disk, then what the manifest records
        if (row.check.status == ShardStatus::size_mismatch && row.check.actual_bytes != row.record.bytes)
            return tr("%1 of %2").arg(formatBytes(row.check.actual_bytes), formatBytes(row.record.bytes));
        return formatBytes(row.record.bytes);
    case Offset: return m_foreign ? QVariant() : formatCount(row.record.param_shard_offset);
    case Numel: return m_foreign ? QVariant() : formatCount(row.record.param_shard_numel);
    case Sha256:
        if (m_foreign) {
            // Problems start with "rank R: /dir/file: "; the row already names the file.
            const std::string& detail = row.check.detail;
            const auto at = detail.find(row.record.path + ": ");
            return printableText(at == std::string::npos
                                     ? std::string_view(detail)
                                     : std::string_view(detail).substr(at + row.record.path.size() + 2));
        }
        return printableText(row.record.sha256.substr(0, 12)) + QChar(0x2026);
    }
    return {};
}

QVariant ShardTableModel::tooltip(const Row& row, int column) const
{
    switch (column) {
    case Status:
        if (!row.check.detail.empty())
            return printableText(row.check.detail);
        return statusText(row.check.status);
    case Sha256: {
        if (m_foreign)
            return row.check.detail.empty() ? QVariant() : printableText(row.check.detail);
        QString text = tr("recorded: %1").arg(printableText(row.record.sha256));
        if (!row.check.actual_digest.empty() && row.check.actual_digest != row.record.sha256)
            text += tr("\non disk:  %1").arg(printableText(row.check.actual_digest));
        return text;
    }
    case Bytes:
        if (row.check.actual_bytes != row.record.bytes && severity(row.check.status) == Severity::bad)
            return tr("recorded %1 bytes, %2 bytes on disk").arg(row.record.bytes).arg(row.check.actual_bytes);
        return tr("%1 bytes").arg(row.record.bytes);
    case Offset:
        if (m_foreign)
            return {};
        return tr("elements [%1, %2)")
            .arg(row.record.param_shard_offset)
            .arg(row.record.param_shard_offset + row.record.param_shard_numel);
    default: return {};
    }
}

QVariant ShardTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& row = m_rows[std::size_t(index.row())];
    const int column = index.column();
    switch (role) {
    case Qt::DisplayRole: return display(row, column);
    case Qt::ToolTipRole: return tooltip(row, column);
    case FullValueRole:
        if (column == Sha256 && !m_foreign)
            return printableText(row.record.sha256);
        return display(row, column);
    case StatusRole: return int(row.check.status);
    case SortRole:
        switch (column) {
        case Rank: return row.record.rank;
        case Status: return int(severity(row.check.status)) * 100 + int(row.check.status);
        case Bytes: return qulonglong(row.record.bytes);
        case Offset: return qulonglong(row.record.param_shard_offset);
        case Numel: return qulonglong(row.record.param_shard_numel);
        default: return display(row, column);
        }
    case Qt::DecorationRole:
        if (column == Status)
            return statusIcon(row.check.status);
        return {};
    case Qt::ForegroundRole:
        if (column == Status)
            return severityColor(severity(row.check.status), QApplication::palette());
        return {};
    case Qt::FontRole:
        if (column == Sha256 && !m_foreign) {
            QFont font(QStringLiteral("monospace"));
            font.setStyleHint(QFont::Monospace);
            return font;
        }
        return {};
    case Qt::TextAlignmentRole:
        if (column == Rank || column == Bytes || column == Offset || column == Numel)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    }
    return {};
}

QVariant ShardTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Rank: return tr("Rank");
    case Status: return tr("Status");
    case File: return tr("File");
    case Bytes: return tr("Size");
    case Offset: return tr("Param offset");
    case Numel: return tr("Elements");
    case Sha256: return m_foreign ? tr("Detail") : tr("SHA-256");
    }
    return {};
}

} // namespace shardwidgets
