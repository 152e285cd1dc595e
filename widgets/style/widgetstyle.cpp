#include "widgets/style/widgetstyle.h"

#include "widgets/style/format.h"

#include <QCoreApplication>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QTableView>

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

void showJobProgress(QProgressBar* bar, QLabel* rateLabel, quint64 done, quint64 total, double rate, double eta,
                     const QString& idle)
{
    bar->setValue(total ? int(done * 1000 / total) : 0);
    bar->setFormat(total ? QCoreApplication::translate("shardwidgets", "%1 of %2").arg(formatBytes(done), formatBytes(total))
                         : idle);
    rateLabel->setText(QCoreApplication::translate("shardwidgets", "%1 · %2 left")
                           .arg(formatRate(rate), eta >= 0 ? formatDuration(eta) : QStringLiteral("–")));
}

} // namespace shardwidgets
