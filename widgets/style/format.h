#pragma once
// Human formatting of sizes, counts, durations, rates and shares, and the one way text read from
// a file reaches the screen; shared by every view and export.

#include <QString>
#include <span>
#include <cstdint>
#include <string_view>
#include <vector>

namespace shardwidgets {

QString formatBytes(uint64_t bytes); // "1.5 MiB"
QString formatCount(uint64_t count); // "65,536"
QString formatDuration(double seconds); // "1 h 15 min", "42 s"
QString formatRate(double bytesPerSecond); // "312 MiB/s"
QString formatShape(std::span<const uint64_t> shape); // "4096 × 1024", "scalar"
// part/whole with one decimal ("12.5 %"), but "< 0.1 %" and "> 99.9 %" for the shares that would
// round to 0.0 or 100.0 without being exact: a share never reads as nothing or as all when it is
// not (a reshard "staying 13.3 KiB (0.0 %)" beside "100.0 % moves"). "–" when whole is 0.
QString formatPercent(uint64_t part, uint64_t whole);

// Text that came from a file — a tensor name, a path, a manifest string, a problem message — as
// the app shows it: core's printable() (the CLI's rule), so it is valid UTF-8, control characters
// (an escape sequence, a newline in a name) are shown as \xNN instead of acting, and bytes that
// are not UTF-8 read \xNN instead of vanishing into U+FFFD. The cap is far above any real name or
// path; it keeps a hostile megabyte name from freezing a table.
QString printableText(std::string_view text);
QString printableText(const QString& text); // a path or message already held as a QString
inline QString printableText(const char* text)
{
    return printableText(std::string_view(text));
} // e.what()

} // namespace shardwidgets
