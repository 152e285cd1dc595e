// libFuzzer target: see fuzz_entries.h. Run with scripts/fuzz.sh fuzz_s3_answer SECONDS.
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    shardscope::fuzz::s3_answer_one(data, size);
    return 0;
}
