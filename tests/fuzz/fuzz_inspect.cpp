// libFuzzer target: see fuzz_inspect_entries.h. Run with scripts/fuzz.sh fuzz_inspect SECONDS.
#include "fuzz_inspect_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::inspect_one(data, size);
    return 0;
}
