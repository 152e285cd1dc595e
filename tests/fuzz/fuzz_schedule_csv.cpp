// libFuzzer target: see fuzz_entries.h. Run with scripts/fuzz.sh fuzz_schedule_csv SECONDS.
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::schedule_csv_one(data, size);
    return 0;
}
