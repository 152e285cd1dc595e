// libFuzzer target: see fuzz_foreign_entries.h. Run with scripts/fuzz.sh fuzz_pickle SECONDS.
#include "fuzz_foreign_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::pickle_one(data, size);
    return 0;
}
