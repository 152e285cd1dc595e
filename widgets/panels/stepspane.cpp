#include "widgets/panels/stepspane.h"

#include "widgets/models/steplistmodel.h"
#include "widgets/style/widgetstyle.h"

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QStyle>
#include <QStyleOptionViewItem>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent>

namespace shardwidgets {

StepsPane::StepsPane(QWidget* parent)
    : QWidget(parent), m_model(new StepListModel(this)), m_view(new QTableView(this)), m_title(new QLabel(this)),
      m_open(new QPushButton(tr("Open"), this)), m_refresh(new QPushButton(tr("Refresh"), this)),
      m_mirror(new QPushButton(tr("Mirror…"), this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    QFont bold = m_title->font();
    bold.setBold(true);
    m_title->setFont(bold);
    m_title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    layout->addWidget(m_title);

    m_view->setModel(m_model);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 8);
    m_view->setAlternatingRowColors(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::SingleSelection);
    m_view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_view->setWordWrap(false);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    setMinimumRows(m_view, 3); // the newest steps, the one open and the one before it
    layout->addWidget(m_view, 1);

    auto* buttons = new QHBoxLayout;
    m_open->setToolTip(tr("Open and verify the selected step (Enter or double-click)"));
    m_refresh->setToolTip(tr("List the root's steps again (a running job may have saved more)"));
    m_mirror->setToolTip(tr("Also list the steps of the second tier (the mirror folder)"));
    m_open->setEnabled(false);
    buttons->addWidget(m_open);
    buttons->addStretch(1);
    buttons->addWidget(m_refresh);
    buttons->addWidget(m_mirror);
    layout->addLayout(buttons);

    connect(m_view, &QAbstractItemView::activated, this, [this](const QModelIndex&) { openSelected(); });
    connect(m_open, &QPushButton::clicked, this, &StepsPane::openSelected);
    connect(m_refresh, &QPushButton::clicked, this, &StepsPane::refresh);
    connect(m_mirror, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Mirror of this checkpoint root"),
                                                              m_mirrorPath.isEmpty() ? m_model->root() : m_mirrorPath);
        if (!dir.isEmpty())
            setMirror(dir);
    });
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            [this] { m_open->setEnabled(m_view->selectionModel()->hasSelection()); });
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] { m_open->setEnabled(false); });
}

StepsPane::~StepsPane()
{
    if (m_watcher)
        m_watcher->waitForFinished(); // the worker holds no pointer to us, but keep shutdown orderly
}

void StepsPane::setSteps(std::vector<shardscope::StepInfo> steps, const QString& root)
{
    if (QDir::cleanPath(root) != m_model->root())
        m_mirrorPath.clear(); // another root: its mirror is not ours
    m_model->setSteps(std::move(steps), root, m_mirrorPath);
    m_model->setCurrentDirectory(m_currentDirectory);
    updateTitle();
}

void StepsPane::setVerdict(const QString& directory, bool ok)
{
    m_model->setVerdict(directory, ok);
}

void StepsPane::setCurrentDirectory(const QString& directory)
{
    m_currentDirectory = QDir::cleanPath(directory);
    m_model->setCurrentDirectory(m_currentDirectory);
    const int row = m_model->rowForDirectory(m_currentDirectory);
    if (row >= 0)
        m_view->scrollTo(m_model->index(row, 0));
}

void StepsPane::setMirror(const QString& mirror)
{
    m_mirrorPath = QDir::cleanPath(mirror);
    refresh();
}

void StepsPane::refresh()
{
    const QString root = m_model->root();
    if (root.isEmpty() || m_watcher)
        return;
    const std::filesystem::path rootPath = root.toStdString();
    std::optional<std::filesystem::path> mirrorPath;
    if (!m_mirrorPath.isEmpty())
        mirrorPath = m_mirrorPath.toStdString();
    m_refresh->setEnabled(false);
    m_watcher = new QFutureWatcher<std::vector<shardscope::StepInfo>>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this, root] {
        auto steps = m_watcher->result();
        m_watcher->deleteLater();
        m_watcher = nullptr;
        m_refresh->setEnabled(true);
        m_model->setSteps(std::move(steps), root, m_mirrorPath);
        m_model->setCurrentDirectory(m_currentDirectory);
        updateTitle();
        emit listed();
    });
    m_watcher->setFuture(QtConcurrent::run([rootPath, mirrorPath]() -> std::vector<shardscope::StepInfo> {
        try {
            return shardscope::list_steps(rootPath, mirrorPath);
        } catch (const std::exception&) {
            return {}; // the root vanished or became unreadable: an empty list says so
        }
    }));
}

void StepsPane::clear()
{
    m_model->clear();
    m_currentDirectory.clear();
    m_mirrorPath.clear();
    updateTitle();
}

void StepsPane::openSelected()
{
    const QModelIndexList rows = m_view->selectionModel()->selectedRows();
    const QModelIndex index = rows.isEmpty() ? m_view->currentIndex() : rows.first();
    if (!index.isValid())
        return;
    const QString dir = m_model->directory(index.row());
    if (!dir.isEmpty())
        emit openRequested(dir);
}

int StepsPane::tableWidth() const
{
    // Every row counts, also while the pane is hidden (the view's own hint looks only at the rows
    // on screen), and so does the vertical scroll bar of a long list.
    QStyleOptionViewItem option;
    option.initFrom(m_view);
    const int icon = m_view->style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, m_view);
    option.decorationSize = QSize(icon, icon); // the status icon takes room too
    int width = 2 * m_view->frameWidth() + 4 + m_view->style()->pixelMetric(QStyle::PM_ScrollBarExtent);
    for (int column = 0; column < m_model->columnCount(); ++column) {
        int cells = m_view->horizontalHeader()->sectionSizeHint(column);
        for (int row = 0; row < m_model->rowCount(); ++row) {
            const QModelIndex index = m_model->index(row, column);
            cells = std::max(cells, m_view->itemDelegateForIndex(index)->sizeHint(option, index).width() +
                                        (m_view->showGrid() ? 1 : 0)); // as the table counts its grid line
        }
        if (column == m_model->columnCount() - 1) // the stretched last column keeps its default size
            cells = std::max(cells, m_view->horizontalHeader()->defaultSectionSize());
        width += cells;
    }
    return width;
}

void StepsPane::updateTitle()
{
    // Wide enough for every column: a clipped Tier or Latest column would hide what matters. The
    // header sizes the columns to their contents itself; resizing them here as well would pin
    // the stretched last column to its contents until the next resize (it shrank on Refresh).
    m_view->setMinimumWidth(std::min(tableWidth(), 460));
    int complete = 0;
    for (int row = 0; row < m_model->rowCount(); ++row)
        complete += m_model->index(row, 0).data(StepListModel::CompleteRole).toBool() ? 1 : 0;
    m_title->setText(tr("Steps: %1 of %2 complete").arg(complete).arg(m_model->rowCount()));
    m_title->setToolTip(m_mirrorPath.isEmpty() ? m_model->root()
                                               : tr("%1\nmirror: %2").arg(m_model->root(), m_mirrorPath));
}

} // namespace shardwidgets
