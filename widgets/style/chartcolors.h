#pragma once
// Colours of the painted views, one place for all: categorical hues that stay apart for
// neighbouring indices (golden-angle steps), at lightness levels that read on light and dark
// backgrounds, and the shades that tell forward, backward and weight passes apart.

#include "core/pipeline/schedule.h"

#include <QColor>
#include <QPalette>

class QPainter;
class QRect;

namespace shardwidgets {

bool isDark(const QPalette& palette);
QColor categoryColor(int index, const QPalette& palette);
QColor microbatchColor(int microbatch, shardscope::pipeline::OpKind kind, const QPalette& palette);
QColor textOn(const QColor& background); // black or white, whichever reads better
QColor idleHatchColor(const QPalette& palette);
// The Gantt's communication inside ops: tensor/context-parallel collectives, expert all-to-all.
QColor tensorCommColor(const QPalette& palette);
QColor expertCommColor(const QPalette& palette);

// Every chart starts on the window colour; without data it says why in the middle instead.
// Returns false when it painted that message (nothing else to draw).
bool paintChartBackground(QPainter& painter, const QRect& rect, const QPalette& palette, bool hasData,
                          const QString& emptyMessage);

} // namespace shardwidgets
