// libFuzzer target: see fuzz_foreign_entries.h. Run with scripts/fuzz.sh fuzz_zip SECONDS.
#include "fuzz_foreign_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::zip_one(data, size);
    return 0;
}
