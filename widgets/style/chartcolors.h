#pragma once
// Colours of the painted views, one place for all: categorical hues that stay apart for
// neighbouring indices (golden-angle steps), at lightness levels that read on light and dark
// backgrounds, and the shades that tell forward, backward and weight passes apart.

#include "core/pipeline/schedule.h"

#include <QColor>
#include <QPalette>

namespace shardwidgets {

bool isDark(const QPalette& palette);
QColor categoryColor(int index, const QPalette& palette);
QColor microbatchColor(int microbatch, shardscope::pipeline::OpKind kind, const QPalette& palette);
QColor textOn(const QColor& background); // black or white, whichever reads better
QColor idleHatchColor(const QPalette& palette);

} // namespace shardwidgets
