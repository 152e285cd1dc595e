#include "widgets/style/statusstyle.h"

namespace shardwidgets {

using shardscope::ShardStatus;

Severity severity(ShardStatus status)
{
    switch (status) {
    case ShardStatus::ok: return Severity::good;
    case ShardStatus::pending: return Severity::neutral;
    case ShardStatus::hashing: return Severity::busy;
    case ShardStatus::missing:
    case ShardStatus::size_mismatch:
    case ShardStatus::hash_mismatch:
    case ShardStatus::unreadable:
    case ShardStatus::invalid: return Severity::bad;
    }
    return Severity::neutral;
}

QString statusText(ShardStatus status)
{
    switch (status) {
    case ShardStatus::pending: return QCoreApplication::translate("ShardStatus", "pending");
    case ShardStatus::hashing: return QCoreApplication::translate("ShardStatus", "hashing");
    case ShardStatus::ok: return QCoreApplication::translate("ShardStatus", "ok");
    case ShardStatus::missing: return QCoreApplication::translate("ShardStatus", "missing");
    case ShardStatus::size_mismatch: return QCoreApplication::translate("ShardStatus", "size mismatch");
    case ShardStatus::hash_mismatch: return QCoreApplication::translate("ShardStatus", "hash mismatch");
    case ShardStatus::unreadable: return QCoreApplication::translate("ShardStatus", "unreadable");
    case ShardStatus::invalid: return QCoreApplication::translate("ShardStatus", "invalid");
    }
    return {};
}

QIcon severityIcon(Severity severity)
{
    switch (severity) {
    case Severity::good: return QIcon(QStringLiteral(":/icons/status-ok.svg"));
    case Severity::bad: return QIcon(QStringLiteral(":/icons/status-bad.svg"));
    case Severity::busy: return QIcon(QStringLiteral(":/icons/status-busy.svg"));
    case Severity::neutral: return QIcon(QStringLiteral(":/icons/status-pending.svg"));
    }
    return {};
}

QIcon statusIcon(ShardStatus status)
{
    if (status == ShardStatus::missing)
        return QIcon(QStringLiteral(":/icons/status-missing.svg"));
    return severityIcon(severity(status));
}

QColor severityColor(Severity severity, const QPalette& palette)
{
    // Darker tones on a light background, lighter ones on a dark background: both keep a
    // contrast ratio of about 4.5:1 against the window colour.
    const bool dark = palette.color(QPalette::Base).lightness() < 128;
    switch (severity) {
    case Severity::good: return dark ? QColor(0x6d, 0xd5, 0x8c) : QColor(0x1a, 0x7f, 0x37);
    case Severity::bad: return dark ? QColor(0xff, 0x7b, 0x72) : QColor(0xc0, 0x1c, 0x28);
    case Severity::busy: return dark ? QColor(0x79, 0xc0, 0xff) : QColor(0x09, 0x69, 0xda);
    case Severity::neutral: return palette.color(QPalette::PlaceholderText);
    }
    return palette.color(QPalette::Text);
}

} // namespace shardwidgets
