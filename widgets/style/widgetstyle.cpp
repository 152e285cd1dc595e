#include "widgets/style/widgetstyle.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QCoreApplication>
#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QApplication>
#include <QProgressBar>
#include <QScrollBar>
#include <QSplitter>
#include <QStyle>
#include <QTableView>
#include <algorithm>

namespace shardwidgets {

void setUpDataTable(QTableView* view)
{
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
    view->setAlternatingRowColors(true);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->setWordWrap(false);
}

void setMinimumRows(QTableView* view, int rows)
{
    const int header = view->horizontalHeader()->sizeHint().height();
    const int scrollBar = view->style()->pixelMetric(QStyle::PM_ScrollBarExtent);
    view->setMinimumHeight(header + rows * view->verticalHeader()->defaultSectionSize() + scrollBar +
                           2 * view->frameWidth());
}

namespace {

class KeyColumnFitter : public QObject {
public:
    KeyColumnFitter(QTableView* view, double maxShare) : QObject(view), m_view(view), m_maxShare(maxShare) {}
    void fit() const
    {
        // Every key, not only the rows in sight (the view's own hint): scrolling must not
        // reveal a cut key. A summary has a few hundred rows at most.
        const QAbstractItemModel* model = m_view->model();
        const QFontMetrics metrics(m_view->font());
        int keys = m_view->horizontalHeader()->sectionSizeHint(0);
        for (int row = 0; row < std::min(model->rowCount(), 1000); ++row)
            keys = std::max(keys, metrics.horizontalAdvance(model->index(row, 0).data().toString()) + 16);
        const int available = int(m_view->viewport()->width() * m_maxShare);
        m_view->horizontalHeader()->resizeSection(0, std::min(keys, available));
    }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (event->type() == QEvent::Resize)
            fit();
        return QObject::eventFilter(watched, event);
    }

private:
    QTableView* m_view;
    double m_maxShare;
};

} // namespace

void fitKeyColumn(QTableView* view, double maxShare)
{
    auto* fitter = new KeyColumnFitter(view, maxShare);
    view->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Interactive);
    view->horizontalHeader()->setStretchLastSection(true);
    view->setTextElideMode(Qt::ElideMiddle);
    view->viewport()->installEventFilter(fitter);
    QObject::connect(view->model(), &QAbstractItemModel::modelReset, fitter, [fitter] { fitter->fit(); });
}

void fitTableBesideChart(QSplitter* splitter, QTableView* table)
{
    if (splitter->count() != 2 || splitter->widget(0) != table)
        return;
    QHeaderView* header = table->horizontalHeader();
    int need = 2 * table->frameWidth() + table->style()->pixelMetric(QStyle::PM_ScrollBarExtent) +
        (table->verticalHeader()->isVisible() ? table->verticalHeader()->width() : 0);
    for (int column = 0; column < header->count(); ++column)
        if (!header->isSectionHidden(column))
            need += header->sectionSize(column);
    const int total = splitter->width() - splitter->handleWidth();
    const int chart = splitter->widget(1)->minimumSizeHint().width();
    if (total <= chart)
        return;
    const int width = std::min(need, total - chart);
    splitter->setSizes({width, total - width});
}

void showJobProgress(QProgressBar* bar, QLabel* rateLabel, quint64 done, quint64 total, double rate, double eta,
                     const QString& idle)
{
    if (bar->property("tinted").toBool()) { // a new job: the last outcome's tint goes
        bar->setPalette(QPalette());
        bar->setProperty("tinted", false);
    }
    bar->setValue(total ? int(done * 1000 / total) : 0);
    bar->setFormat(
        total ? QCoreApplication::translate("shardwidgets", "%1 of %2").arg(formatBytes(done), formatBytes(total))
              : idle);
    rateLabel->setText(QCoreApplication::translate("shardwidgets", "%1 · %2 left")
                           .arg(formatRate(rate), eta >= 0 ? formatDuration(eta) : QStringLiteral("–")));
}

void showJobOutcome(QProgressBar* bar, Severity outcome, const QString& text)
{
    QPalette palette = QApplication::palette(bar);
    if (outcome == Severity::good || outcome == Severity::bad) {
        palette.setColor(QPalette::Highlight, severityColor(outcome, palette));
        palette.setColor(QPalette::HighlightedText, Qt::white);
    }
    bar->setPalette(palette);
    bar->setProperty("tinted", outcome == Severity::good || outcome == Severity::bad);
    bar->setValue(bar->maximum());
    bar->setFormat(text);
}

} // namespace shardwidgets
