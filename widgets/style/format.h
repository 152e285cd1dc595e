#pragma once
// Human formatting of sizes, counts, durations and rates, shared by every view and export.

#include <QString>
#include <cstdint>
#include <vector>

namespace shardwidgets {

QString formatBytes(uint64_t bytes);      // "1.5 MiB"
QString formatCount(uint64_t count);      // "65,536"
QString formatDuration(double seconds);   // "1 h 15 min", "42 s"
QString formatRate(double bytesPerSecond); // "312 MiB/s"
QString formatShape(const std::vector<uint64_t>& shape); // "4096 × 1024", "scalar"

} // namespace shardwidgets
