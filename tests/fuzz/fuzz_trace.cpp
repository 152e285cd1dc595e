// libFuzzer target: see fuzz_trace_entries.h. Run with scripts/fuzz.sh fuzz_trace SECONDS.
#include "fuzz_trace_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::trace_one(data, size);
    return 0;
}
