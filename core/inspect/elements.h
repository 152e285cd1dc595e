#pragma once
// Tensor elements as stored on disk (little-endian), decoded to double for statistics: the
// floating types of training (F16, BF16, F32, F64 and the two F8 variants safetensors and torch
// name), the integer types and BOOL. Decoding is exact except for 64-bit integers beyond 2^53.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace shardscope {

struct ValueStats;

enum class ElementType { F16, BF16, F32, F64, F8_E4M3, F8_E5M2, I8, U8, I16, U16, I32, U32, I64, U64, BOOL };

// "F16", "BF16", "F32", ... as safetensors spells them.
std::string_view to_string(ElementType type);
std::optional<ElementType> element_type_from_safetensors(std::string_view dtype);
std::size_t element_size(ElementType type);
bool is_floating(ElementType type);

// Decodes `count` elements at `bytes` into `out`.
void decode_elements(ElementType type, const std::byte* bytes, std::size_t count, double* out);
// Adds the `count` elements at `bytes` to `stats`: what decode_elements then ValueStats::add
// give, F32 and BF16 (and F16 and F8 through binary32) by the fused kernels of
// ValueStats::add_f32 and add_bf16 (the hot loop of a scan).
void accumulate_elements(ElementType type, const std::byte* bytes, std::size_t count, ValueStats& stats);

} // namespace shardscope
