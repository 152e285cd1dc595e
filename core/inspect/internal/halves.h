#pragma once
// Internal to core/inspect: the scan's 16-bit float conversions, several lanes at a time
// (halves.cpp), exactly dtype.h's float_to_f16, float_to_bf16 and f16_to_float.

#include "core/inspect/elements.h"

#include <cstddef>
#include <cstdint>

namespace shardscope::inspect {

// Decodes `count` little-endian F16 values at `bytes` into binary32 (exact: every half is one).
void f16_to_f32(const std::byte* bytes, std::size_t count, float* out);

// How many of the `count` F16 or BF16 parameters at `param` are not the fp32 master weights at
// `master` rounded to nearest even in their dtype (float_to_param), NaN masters not counted:
// the native checkpoint's check that both were saved from the same optimizer step.
uint64_t count_unrounded(ElementType param_type, const std::byte* param, const std::byte* master, std::size_t count);

} // namespace shardscope::inspect
