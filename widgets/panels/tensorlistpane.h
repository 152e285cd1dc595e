#pragma once
// The checkpoint page's "Tensor list" tab for a format ShardScope did not write: every listed tensor
// (up to 10^5) in a virtualised, sortable table with a live name filter, and below it the chunks
// of the selected tensor where the format records chunks (DCP). Nothing here reads a file: the
// rows are the summary the verification already read in the background.

#include <QWidget>

class QLabel;
class QLineEdit;
class QTableView;

namespace shardscope {
struct ForeignSummary;
}

namespace shardwidgets {

class ForeignChunkModel;
class ForeignTensorModel;

class TensorListPane : public QWidget {
    Q_OBJECT
public:
    explicit TensorListPane(QWidget* parent = nullptr);

    // all: every tensor the metadata lists; first: the first of a long metadata, while core reads
    // the rest (the count says so).
    enum class Listing { all, first };
    // `summary` must outlive its use (see ForeignTensorModel::setSummary); nullptr clears.
    void setSummary(const shardscope::ForeignSummary* summary, Listing listing = Listing::all);
    void clear() { setSummary(nullptr); }

    // Children have objectNames too ("foreignTensorFilter", "foreignTensorTable", "foreignChunkTable",
    // "foreignTensorCount").
    ForeignTensorModel* model() const { return m_model; }
    ForeignChunkModel* chunkModel() const { return m_chunks; }
    QLineEdit* filter() const { return m_filter; }
    QTableView* table() const { return m_table; }

private:
    void showCount();
    void showSelected();

    ForeignTensorModel* m_model;
    ForeignChunkModel* m_chunks;
    QLineEdit* m_filter;
    QLabel* m_count;
    QTableView* m_table;
    QTableView* m_chunkView;
    Listing m_listing = Listing::all;
};

} // namespace shardwidgets
