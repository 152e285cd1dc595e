#pragma once
// One place that decides how a shard status looks: a word, an icon and a colour, so that status
// is never told by colour alone and the table, the banner and the exports agree.

#include "core/checkpoint/verify.h"

#include <QColor>
#include <QCoreApplication>
#include <QIcon>
#include <QPalette>
#include <QString>

namespace shardwidgets {

enum class Severity { neutral, busy, good, bad };

Severity severity(shardscope::ShardStatus status);
QString statusText(shardscope::ShardStatus status); // "hash mismatch", human words
QIcon statusIcon(shardscope::ShardStatus status);
QIcon severityIcon(Severity severity);
// Readable on both light and dark window colours of `palette`.
QColor severityColor(Severity severity, const QPalette& palette);

} // namespace shardwidgets
