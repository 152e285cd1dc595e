#pragma once
// Whether 16-bit parameters are their fp32 master weights rounded: the native checkpoint's check
// that both were saved from the same optimizer step, run by every writer (health.h) and by the
// statistics scan (core/inspect).

#include "core/checkpoint/dtype.h"

#include <cstddef>
#include <cstdint>

namespace shardscope {

// How many of the `count` little-endian F16 or BF16 parameters at `param` are not the fp32 master
// weights at `master` rounded to nearest even in their dtype (float_to_param), NaN masters not
// counted. With `nonfinite_master`, the NaN and Inf masters are added to it in the same pass (a
// writer counts both as each piece goes out). Vectorised, AVX2 when the CPU has it.
uint64_t count_unrounded(ParamDtype dtype, const std::byte* param, const std::byte* master, std::size_t count,
                         uint64_t* nonfinite_master = nullptr);

} // namespace shardscope
