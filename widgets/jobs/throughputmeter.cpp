#include "widgets/jobs/throughputmeter.h"

namespace shardwidgets {

void ThroughputMeter::sample(uint64_t bytesDone, int64_t milliseconds)
{
    if (milliseconds <= lastMilliseconds || bytesDone < lastBytes)
        return;
    const double instant = double(bytesDone - lastBytes) * 1000.0 / double(milliseconds - lastMilliseconds);
    rate = rate <= 0 ? instant : (1.0 - weight) * rate + weight * instant;
    lastBytes = bytesDone;
    lastMilliseconds = milliseconds;
}

double ThroughputMeter::etaSeconds(uint64_t bytesTotal) const
{
    return rate > 0 && bytesTotal >= lastBytes ? double(bytesTotal - lastBytes) / rate : -1.0;
}

} // namespace shardwidgets
