#pragma once
// The tensors a foreign checkpoint lists (core's ForeignSummary: up to 10^5 of them), one row per
// tensor, and the chunks of one tensor (DCP). Virtualised: a row is an index into the core's
// array and its text is formatted in data() when a view asks for it, so nothing per row is built
// up front; the only per-row storage is the 4-byte index vector that the name filter and the
// column sort produce. Filtering is a case-insensitive (ASCII) substring scan over the raw name
// bytes, a few milliseconds for 10^5 names, so it runs on every keystroke without a proxy model.

#include "core/checkpoint/foreign_summary.h"

#include <QAbstractTableModel>
#include <QByteArray>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace shardwidgets {

// True when `name` contains `needle`, ASCII letters compared without case; the model's filter and
// the tests' reference scan share it.
bool nameContains(std::string_view name, std::string_view needle);

class ForeignTensorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Dtype, Shape, Bytes, File, Detail, ColumnCount };
    static constexpr int SortRole = Qt::UserRole; // raw numbers, for tests and exports

    explicit ForeignTensorModel(QObject* parent = nullptr);

    // `summary` must outlive its use here (the checkpoint page keeps it and clears the model
    // before dropping it); nullptr empties the model. The filter and the sort order are kept.
    void setSummary(const shardscope::ForeignSummary* summary);
    void clear() { setSummary(nullptr); }
    void setNameFilter(const QString& text);
    QString nameFilter() const { return QString::fromUtf8(m_needle); }

    // The core's index of the tensor on `row`, or -1.
    int tensorIndex(int row) const;
    std::optional<shardscope::ForeignTensorView> tensorAt(int row) const;
    std::size_t listedCount() const { return m_summary ? m_summary->tensors.size() : 0; }
    uint64_t totalCount() const { return m_summary ? m_summary->tensors_total : 0; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

signals:
    void rowsFiltered(); // the filter or the data changed: the visible count is new

private:
    void order(); // m_sorted from m_sortColumn / m_sortOrder
    void filter(); // m_rows from m_sorted and m_needle

    const shardscope::ForeignSummary* m_summary = nullptr;
    std::vector<uint32_t> m_sorted; // every tensor, in the view's sort order (empty: core order)
    std::vector<uint32_t> m_rows; // the rows shown: m_sorted filtered by name
    QByteArray m_needle; // the filter as UTF-8
    int m_sortColumn = -1; // -1: the order the core lists them in
    Qt::SortOrder m_sortOrder = Qt::AscendingOrder;
};

// The chunks of one tensor (DCP): where in the tensor, which file, which bytes.
class ForeignChunkModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Offsets, Sizes, File, Offset, Length, ColumnCount };

    explicit ForeignChunkModel(QObject* parent = nullptr);

    // `tensor` points into a summary that must outlive its use here, as ForeignTensorModel's.
    void setTensor(std::optional<shardscope::ForeignTensorView> tensor);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::optional<shardscope::ForeignTensorView> m_tensor;
};

} // namespace shardwidgets
