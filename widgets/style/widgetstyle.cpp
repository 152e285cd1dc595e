#include "widgets/style/widgetstyle.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include <QCoreApplication>
#include <QHeaderView>
#include <QLabel>
#include <QApplication>
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
    if (bar->property("tinted").toBool()) { // a new job: the last outcome's tint goes
        bar->setPalette(QPalette());
        bar->setProperty("tinted", false);
    }
    bar->setValue(total ? int(done * 1000 / total) : 0);
    bar->setFormat(total ? QCoreApplication::translate("shardwidgets", "%1 of %2").arg(formatBytes(done), formatBytes(total))
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
