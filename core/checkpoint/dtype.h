#pragma once
// The two 16-bit parameter formats of mixed-precision training, kept as raw bits: the core
// moves and hashes parameters byte-exactly and never rounds them through float on the way.

#include <bit>
#include <cstdint>
#include <optional>
#include <string_view>

namespace shardscope {

enum class ParamDtype { F16, BF16 };

std::string_view to_string(ParamDtype dtype); // "F16" / "BF16", as safetensors spells them
std::optional<ParamDtype> param_dtype_from_string(std::string_view text); // accepts f16/bf16 too

// Round-to-nearest-even conversions used to make synthetic parameters from fp32 master weights.
uint16_t float_to_f16(float value);
float f16_to_float(uint16_t bits);

// BF16 is the top half of an F32, so both directions are a few bit operations: inline, because
// scans call them once per element.
inline uint16_t float_to_bf16(float value)
{
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN with its sign
        return static_cast<uint16_t>((bits >> 16) | 0x0040u);
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_float(uint16_t bits)
{
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
uint16_t float_to_param(float value, ParamDtype dtype);

} // namespace shardscope
