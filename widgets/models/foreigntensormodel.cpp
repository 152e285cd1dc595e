#include "widgets/models/foreigntensormodel.h"

#include "widgets/style/format.h"

#include "core/util/printable.h"

#include <algorithm>
#include <numeric>

namespace shardwidgets {

namespace {

char foldAscii(char c)
{
    return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
}

// Sort keys compare the core's fields directly: no QString is made to sort 10^5 rows.
bool less(const shardscope::ForeignTensorView& a, const shardscope::ForeignTensorView& b, int column)
{
    switch (column) {
    case ForeignTensorModel::Dtype: return a.dtype < b.dtype;
    case ForeignTensorModel::Shape:
        return std::lexicographical_compare(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end());
    case ForeignTensorModel::Bytes: return a.bytes < b.bytes;
    case ForeignTensorModel::File: return a.file < b.file || (a.file == b.file && a.offset < b.offset);
    case ForeignTensorModel::Detail:
        return a.chunks.size() < b.chunks.size() || (a.chunks.size() == b.chunks.size() && a.detail < b.detail);
    default: return a.name < b.name;
    }
}

} // namespace

bool nameContains(std::string_view name, std::string_view needle)
{
    if (needle.empty())
        return true;
    if (needle.size() > name.size())
        return false;
    const char first = foldAscii(needle[0]);
    const std::size_t last = name.size() - needle.size();
    for (std::size_t i = 0; i <= last; ++i) {
        if (foldAscii(name[i]) != first)
            continue;
        std::size_t k = 1;
        while (k < needle.size() && foldAscii(name[i + k]) == foldAscii(needle[k]))
            ++k;
        if (k == needle.size())
            return true;
    }
    return false;
}

ForeignTensorModel::ForeignTensorModel(QObject* parent) : QAbstractTableModel(parent) {}

void ForeignTensorModel::setSummary(const shardscope::ForeignSummary* summary)
{
    beginResetModel();
    m_summary = summary;
    order();
    filter();
    endResetModel();
    emit rowsFiltered();
}

void ForeignTensorModel::setNameFilter(const QString& text)
{
    const QByteArray needle = text.toUtf8();
    if (needle == m_needle)
        return;
    // A longer needle can only drop rows, so the scan narrows what is shown instead of going over
    // every name again (typing a name letter by letter is the common case).
    const bool narrowing = needle.startsWith(m_needle) && !m_needle.isEmpty();
    m_needle = needle;
    beginResetModel();
    if (narrowing && m_summary) {
        const std::string_view n(m_needle.constData(), std::size_t(m_needle.size()));
        std::erase_if(m_rows, [&](uint32_t i) { return !nameContains(m_summary->tensors[i].name, n); });
    } else {
        filter();
    }
    endResetModel();
    emit rowsFiltered();
}

void ForeignTensorModel::order()
{
    m_sorted.clear();
    if (!m_summary || m_sortColumn < 0 || m_sortColumn >= ColumnCount)
        return;
    const auto& tensors = m_summary->tensors;
    m_sorted.resize(tensors.size());
    std::iota(m_sorted.begin(), m_sorted.end(), 0u);
    const int column = m_sortColumn;
    auto before = [&](uint32_t a, uint32_t b) { return less(tensors[a], tensors[b], column); };
    // The core lists safetensors by name already: checking is linear, sorting again is not.
    if (!std::is_sorted(m_sorted.begin(), m_sorted.end(), before))
        std::stable_sort(m_sorted.begin(), m_sorted.end(), before);
    if (m_sortOrder == Qt::DescendingOrder)
        std::reverse(m_sorted.begin(), m_sorted.end());
}

void ForeignTensorModel::filter()
{
    m_rows.clear();
    if (!m_summary)
        return;
    const auto& tensors = m_summary->tensors;
    const std::string_view needle(m_needle.constData(), std::size_t(m_needle.size()));
    const std::size_t n = tensors.size();
    m_rows.reserve(needle.empty() ? n : 0);
    for (std::size_t k = 0; k < n; ++k) {
        const uint32_t i = m_sorted.empty() ? uint32_t(k) : m_sorted[k];
        if (nameContains(tensors[i].name, needle))
            m_rows.push_back(i);
    }
}

void ForeignTensorModel::sort(int column, Qt::SortOrder order)
{
    if (column == m_sortColumn && order == m_sortOrder)
        return;
    emit layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
    const QModelIndexList before = persistentIndexList();
    std::vector<int> tensorOf;
    for (const QModelIndex& index : before)
        tensorOf.push_back(tensorIndex(index.row()));
    m_sortColumn = column;
    m_sortOrder = order;
    this->order();
    filter();
    // Selected rows follow their tensor to its new place.
    std::vector<int> rowOf(m_summary ? m_summary->tensors.size() : 0, -1);
    for (std::size_t r = 0; r < m_rows.size(); ++r)
        rowOf[m_rows[r]] = int(r);
    QModelIndexList after;
    for (std::size_t k = 0; k < std::size_t(before.size()); ++k) {
        const int row = tensorOf[k] >= 0 ? rowOf[std::size_t(tensorOf[k])] : -1;
        after << (row >= 0 ? index(row, before[qsizetype(k)].column()) : QModelIndex());
    }
    changePersistentIndexList(before, after);
    emit layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

int ForeignTensorModel::tensorIndex(int row) const
{
    return row >= 0 && std::size_t(row) < m_rows.size() ? int(m_rows[std::size_t(row)]) : -1;
}

std::optional<shardscope::ForeignTensorView> ForeignTensorModel::tensorAt(int row) const
{
    const int i = tensorIndex(row);
    if (i < 0)
        return std::nullopt;
    return m_summary->tensors[std::size_t(i)];
}

int ForeignTensorModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int ForeignTensorModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ForeignTensorModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const shardscope::ForeignTensorView t = *tensorAt(index.row());
    const int column = index.column();
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (column) {
        case Name: return printableText(t.name);
        case Dtype: return printableText(t.dtype);
        // No dtype: the index's early row, its header not read yet (nor its shape).
        case Shape: return t.dtype.empty() || t.dtype == "bytes" ? QString() : formatShape(t.shape);
        case Bytes:
            if (t.dtype.empty())
                return QString();
            return role == Qt::ToolTipRole ? tr("%1 bytes").arg(t.bytes) : formatBytes(t.bytes);
        case File:
            if (t.file.empty())
                return QString();
            return role == Qt::ToolTipRole ? tr("%1 at byte %2").arg(printableText(t.file)).arg(t.offset)
                                           : printableText(t.file);
        case Detail: return printableText(t.detail);
        }
    } else if (role == SortRole) {
        switch (column) {
        case Bytes: return QVariant::fromValue<qulonglong>(t.bytes);
        case Detail: return QVariant::fromValue<qulonglong>(t.chunks.size());
        default: return data(index, Qt::DisplayRole);
        }
    } else if (role == Qt::TextAlignmentRole && column == Bytes) {
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    return {};
}

QVariant ForeignTensorModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Name: return tr("Tensor");
    case Dtype: return tr("Dtype");
    case Shape: return tr("Shape");
    case Bytes: return tr("Bytes");
    case File: return tr("File");
    case Detail: return tr("Detail");
    }
    return {};
}

ForeignChunkModel::ForeignChunkModel(QObject* parent) : QAbstractTableModel(parent) {}

void ForeignChunkModel::setTensor(std::optional<shardscope::ForeignTensorView> tensor)
{
    beginResetModel();
    m_tensor = tensor;
    endResetModel();
}

int ForeignChunkModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_tensor ? 0 : int(m_tensor->chunks.size());
}

int ForeignChunkModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ForeignChunkModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const shardscope::ForeignChunkView c = m_tensor->chunks[std::size_t(index.row())];
    if (role == Qt::TextAlignmentRole && index.column() >= Offset)
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole)
        return {};
    switch (index.column()) {
    case Offsets: return QString::fromStdString(shardscope::join_dims(c.offsets));
    case Sizes: return QString::fromStdString(shardscope::join_dims(c.sizes));
    case File: return c.file.empty() ? tr("no storage") : printableText(c.file);
    case Offset: return c.file.empty() ? QString() : formatCount(c.offset);
    case Length: return c.file.empty() ? QString() : formatBytes(c.length);
    }
    return {};
}

QVariant ForeignChunkModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Offsets: return tr("At");
    case Sizes: return tr("Size");
    case File: return tr("File");
    case Offset: return tr("Byte offset");
    case Length: return tr("Length");
    }
    return {};
}

} // namespace shardwidgets
