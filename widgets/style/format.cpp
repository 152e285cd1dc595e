#include "widgets/style/format.h"

#include "core/util/printable.h"

#include <QLocale>
#include <algorithm>
#include <cmath>

namespace shardwidgets {

QString formatBytes(uint64_t bytes)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = double(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 5) {
        value /= 1024.0;
        ++unit;
    }
    if (unit == 0)
        return QStringLiteral("%1 B").arg(bytes);
    return QStringLiteral("%1 %2").arg(value, 0, 'f', value < 10 ? 2 : 1).arg(QLatin1String(units[unit]));
}

QString formatCount(uint64_t count)
{
    return QLocale(QLocale::English).toString(qulonglong(count));
}

QString formatDuration(double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return QStringLiteral("–");
    const auto total = qint64(std::llround(seconds));
    if (total < 60)
        return QStringLiteral("%1 s").arg(total);
    if (total < 3600)
        return QStringLiteral("%1 min %2 s").arg(total / 60).arg(total % 60);
    if (total < 86400)
        return QStringLiteral("%1 h %2 min").arg(total / 3600).arg((total % 3600) / 60);
    return QStringLiteral("%1 d %2 h").arg(total / 86400).arg((total % 86400) / 3600);
}

QString formatRate(double bytesPerSecond)
{
    if (!std::isfinite(bytesPerSecond) || bytesPerSecond <= 0)
        return QStringLiteral("–");
    return formatBytes(uint64_t(bytesPerSecond)) + QStringLiteral("/s");
}

QString formatShape(std::span<const uint64_t> shape)
{
    QStringList dims;
    for (const uint64_t d : shape)
        dims << QString::number(d);
    return dims.isEmpty() ? QStringLiteral("scalar") : dims.join(QStringLiteral(" × "));
}

QString formatPercent(uint64_t part, uint64_t whole)
{
    if (whole == 0)
        return QStringLiteral("–");
    const double share = 100.0 * double(std::min(part, whole)) / double(whole);
    if (part > 0 && share < 0.05)
        return QStringLiteral("< 0.1 %");
    if (part < whole && share >= 99.95)
        return QStringLiteral("> 99.9 %");
    return QStringLiteral("%1 %").arg(share, 0, 'f', 1);
}

namespace {
constexpr std::size_t kMaxShownBytes = 4096; // a path at PATH_MAX still shows whole
} // namespace

QString printableText(std::string_view text)
{
    return QString::fromStdString(shardscope::printable(text, kMaxShownBytes));
}

QString printableText(const QString& text)
{
    return printableText(text.toStdString());
}

} // namespace shardwidgets
