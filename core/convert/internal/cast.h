#pragma once
// Internal to core/convert: elements converted from one stored type to another, rounding once.

#include "core/inspect/elements.h"

#include <cstddef>

namespace shardscope::convert {

// The type a tensor of `from` is written as: integers and BOOL are never cast; floating tensors
// take the target (F32, F16, BF16), or stay as they are for keep (`to` = from).
ElementType cast_type(ElementType from, ElementType to);

// `count` values written as `to` (F32, F64, F16, BF16) at `out`, each rounded once to nearest even
// (an F64's value is not rounded twice through F32).
void encode_elements(const double* values, std::size_t count, ElementType to, std::byte* out);

// `count` elements of `from` at `in` written as `to` at `out`, rounded to nearest even from the
// exact value (an F64 is not rounded twice through F32). `from` == `to` copies the bytes.
void cast_elements(ElementType from, const std::byte* in, std::size_t count, ElementType to, std::byte* out);

} // namespace shardscope::convert
