#pragma once
// Bytes/s and ETA of a background job, from samples of its byte counter taken at the GUI's pace.
// Plain value type (no Qt): the rate is exponentially smoothed so that the ETA does not jump with
// every chunk, or across the phases of a job (a reshard verifies, then copies).

#include <cstdint>

namespace shardwidgets {

struct ThroughputMeter {
    // Feeds the counter `bytesDone` read at `milliseconds` (any monotonic clock). Samples that do
    // not advance the clock, or that go backwards in bytes, leave the rate as it is.
    void sample(uint64_t bytesDone, int64_t milliseconds);
    double bytesPerSecond() const { return rate; }
    // Seconds until `bytesTotal` at the current rate; -1 while the rate is unknown.
    double etaSeconds(uint64_t bytesTotal) const;

    uint64_t lastBytes = 0;
    int64_t lastMilliseconds = 0;
    double rate = 0; // bytes/s, 0 until the first advancing sample
    double weight = 0.3; // of the newest sample in the smoothed rate
};

} // namespace shardwidgets
