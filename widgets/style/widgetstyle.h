#pragma once
// How the pages' data tables and job progress look, the same on every page.

#include "widgets/style/statusstyle.h"

#include <QtGlobal>

class QLabel;
class QProgressBar;
class QSplitter;
class QString;
class QTableView;

namespace shardwidgets {

// No row numbers, rows one line of text high, alternating colours, whole rows selected one at a
// time, no wrapping (names and figures stay on one line).
void setUpDataTable(QTableView* view);

// Never shorter than its header and `rows` rows (and a horizontal scroll bar): a table squeezed
// to one row in a small window shows nothing to act on.
void setMinimumRows(QTableView* view, int rows);

// A key/value table (the checkpoint summary): the key column as wide as its keys but at most
// `maxShare` of the view, so a long key ("Training state: lr_schedule.warmup_steps") never pushes
// the values out of a narrow pane; a cut key is elided in the middle, its tooltip whole. Follows
// the view's resizes and the model's resets.
void fitKeyColumn(QTableView* view, double maxShare = 0.6);

// A results table beside a chart in a horizontal splitter (table first): the table as wide as its
// shown columns, so that the last figures are not scrolled out of sight, the chart the rest, but
// never less than the chart's minimum size hint. Call after the table's contents change and when
// the splitter is resized.
void fitTableBesideChart(QSplitter* splitter, QTableView* table);

// A job's progress (bar range 0..1000): "1.2 GiB of 4 GiB" on the bar (`idle` before the total
// is known), "312 MiB/s · 8 s left" beside it.
void showJobProgress(QProgressBar* bar, QLabel* rateLabel, quint64 done, quint64 total, double rate, double eta,
                     const QString& idle);

// A job that ended: a full bar (so its text is one colour, not split at the fill) tinted by the
// outcome — good green, bad red, neutral the style's own — with `text` on it.
void showJobOutcome(QProgressBar* bar, Severity outcome, const QString& text);

} // namespace shardwidgets
