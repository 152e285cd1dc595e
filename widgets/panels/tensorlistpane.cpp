#include "widgets/panels/tensorlistpane.h"

#include "widgets/models/foreigntensormodel.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace shardwidgets {

TensorListPane::TensorListPane(QWidget* parent)
    : QWidget(parent), m_model(new ForeignTensorModel(this)), m_chunks(new ForeignChunkModel(this)),
      m_filter(new QLineEdit(this)), m_count(new QLabel(this)), m_table(new QTableView(this)),
      m_chunkView(new QTableView(this))
{
    m_filter->setObjectName(QStringLiteral("foreignTensorFilter"));
    m_table->setObjectName(QStringLiteral("foreignTensorTable"));
    m_chunkView->setObjectName(QStringLiteral("foreignChunkTable"));
    m_count->setObjectName(QStringLiteral("foreignTensorCount"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_filter->setPlaceholderText(tr("Filter tensors by name"));
    m_filter->setClearButtonEnabled(true);
    row->addWidget(m_filter, 1);
    row->addWidget(m_count);
    layout->addLayout(row);

    m_table->setModel(m_model);
    setUpDataTable(m_table);
    // Names that differ at the end (exp_avg, exp_avg_sq) stay told apart; the tooltip has it all.
    m_table->setTextElideMode(Qt::ElideMiddle);
    // Fixed heights and widths: a view of 10^5 rows never measures its rows' contents.
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_table->horizontalHeader()->setStretchLastSection(true);
    // The core's order (no column, -1) until a header is clicked.
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    m_table->setSortingEnabled(true);
    m_table->setColumnWidth(ForeignTensorModel::Name, 360);
    m_table->setColumnWidth(ForeignTensorModel::Dtype, 70);
    m_table->setColumnWidth(ForeignTensorModel::Shape, 110);
    m_table->setColumnWidth(ForeignTensorModel::Bytes, 80);
    m_table->setColumnWidth(ForeignTensorModel::File, 220);
    setMinimumRows(m_table, 3);

    m_chunkView->setModel(m_chunks);
    setUpDataTable(m_chunkView);
    m_chunkView->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_chunkView->horizontalHeader()->setStretchLastSection(true);
    m_chunkView->setColumnWidth(ForeignChunkModel::Offsets, 110);
    m_chunkView->setColumnWidth(ForeignChunkModel::Sizes, 110);
    m_chunkView->setColumnWidth(ForeignChunkModel::File, 160);
    m_chunkView->setColumnWidth(ForeignChunkModel::Offset, 100);
    setMinimumRows(m_chunkView, 3);
    m_chunkView->hide(); // only a tensor stored in chunks has any

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_table);
    splitter->addWidget(m_chunkView);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setChildrenCollapsible(false);
    layout->addWidget(splitter, 1);

    connect(m_filter, &QLineEdit::textChanged, m_model, &ForeignTensorModel::setNameFilter);
    connect(m_model, &ForeignTensorModel::rowsFiltered, this, &TensorListPane::showCount);
    // A reset or a sort leaves no current row that still means the same tensor: follow it anew.
    connect(m_model, &QAbstractItemModel::modelReset, this, &TensorListPane::showSelected);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &TensorListPane::showSelected);
    showCount();
}

void TensorListPane::setSummary(const shardscope::ForeignSummary* summary, Listing listing)
{
    m_listing = listing;
    m_chunks->setTensor(std::nullopt); // before the tensor it points into can go
    m_model->setSummary(summary);
}

void TensorListPane::showCount()
{
    const std::size_t listed = m_model->listedCount();
    const uint64_t total = m_model->totalCount();
    QString text = m_model->nameFilter().isEmpty()
        ? tr("%1 tensors").arg(formatCount(listed))
        : tr("%1 of %2 tensors").arg(formatCount(uint64_t(m_model->rowCount())), formatCount(listed));
    if (m_listing == Listing::first)
        text += tr(" so far (reading the rest of the metadata…)");
    else if (total > listed) // the core lists the first kMaxListedTensors
        text += tr(" (of %1; the rest not listed)").arg(formatCount(total));
    m_count->setText(text);
}

void TensorListPane::showSelected()
{
    const QModelIndex current = m_table->selectionModel()->currentIndex();
    const auto tensor = current.isValid() ? m_model->tensorAt(current.row()) : std::nullopt;
    const bool chunked = tensor && tensor->chunks.size() > 1;
    m_chunks->setTensor(chunked ? tensor : std::nullopt);
    m_chunkView->setVisible(chunked);
}

} // namespace shardwidgets
