#pragma once
// The two 16-bit parameter formats of mixed-precision training, kept as raw bits: the core
// moves and hashes parameters byte-exactly and never rounds them through float on the way.

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardscope {

enum class ParamDtype { F16, BF16 };

std::string_view to_string(ParamDtype dtype); // "F16" / "BF16", as safetensors spells them
std::optional<ParamDtype> param_dtype_from_string(std::string_view text); // accepts f16/bf16 too

// Round-to-nearest-even conversions used to make synthetic parameters from fp32 master weights.
uint16_t float_to_f16(float value);
uint16_t float_to_bf16(float value);
float f16_to_float(uint16_t bits);
float bf16_to_float(uint16_t bits);
uint16_t float_to_param(float value, ParamDtype dtype);

} // namespace shardscope
