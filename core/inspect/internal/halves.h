#pragma once
// Internal to core/inspect: the scan's F16 decoding, several lanes at a time (halves.cpp),
// exactly dtype.h's f16_to_float.

#include "core/inspect/elements.h"

#include <cstddef>
#include <cstdint>

namespace shardscope::inspect {

// Decodes `count` little-endian F16 values at `bytes` into binary32 (exact: every half is one).
void f16_to_f32(const std::byte* bytes, std::size_t count, float* out);

} // namespace shardscope::inspect
