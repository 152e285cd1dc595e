// libFuzzer target: see fuzz_entries.h. Run with scripts/fuzz.sh fuzz_profile SECONDS.
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::profile_one(data, size);
    return 0;
}
