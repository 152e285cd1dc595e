#include "core/checkpoint/dtype.h"

#include <bit>
#include <cmath>

namespace shardscope {

std::string_view to_string(ParamDtype dtype)
{
    return dtype == ParamDtype::F16 ? "F16" : "BF16";
}

std::optional<ParamDtype> param_dtype_from_string(std::string_view text)
{
    if (text == "F16" || text == "f16" || text == "fp16" || text == "float16")
        return ParamDtype::F16;
    if (text == "BF16" || text == "bf16" || text == "bfloat16")
        return ParamDtype::BF16;
    return std::nullopt;
}

uint16_t float_to_f16(float value)
{
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u)
        return static_cast<uint16_t>(sign | 0x7e00u);
    if (abs >= 0x477ff000u) // rounds to a value beyond the largest half: infinity
        return static_cast<uint16_t>(sign | 0x7c00u);
    if (abs < 0x38800000u) { // below the smallest normal half: subnormal or zero
        const float magnitude = std::bit_cast<float>(abs);
        // 2^-24 is the subnormal step; nearbyint rounds half to even in the default mode.
        const auto steps = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));
        return static_cast<uint16_t>(sign | steps);
    }
    const uint32_t mantissa_rounding = 0x0fffu + ((abs >> 13) & 1u);
    const uint32_t rebased = abs - 0x38000000u + mantissa_rounding; // exponent bias 127 -> 15
    return static_cast<uint16_t>(sign | (rebased >> 13));
}

float f16_to_float(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = static_cast<float>(mantissa) / 16777216.0f;
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31)
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_param(float value, ParamDtype dtype)
{
    return dtype == ParamDtype::F16 ? float_to_f16(value) : float_to_bf16(value);
}

} // namespace shardscope
