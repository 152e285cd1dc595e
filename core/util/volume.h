#pragma once
// The element count of a shape read from a file: the product of its dimensions, unless it
// overflows 64 bits (a hostile header), which every reader must refuse before sizing anything.

#include <cstdint>
#include <span>

namespace shardscope {

// False when the product overflows; `out` is then meaningless.
inline bool checked_volume(std::span<const uint64_t> dims, uint64_t& out)
{
    out = 1;
    for (const uint64_t d : dims)
        if (__builtin_mul_overflow(out, d, &out))
            return false;
    return true;
}

} // namespace shardscope
