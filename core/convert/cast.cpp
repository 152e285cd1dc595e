#include "core/convert/internal/cast.h"

#include "core/checkpoint/dtype.h"
#include "core/util/error.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace shardscope::convert {

namespace {

// `value` as a float rounded to odd: truncated toward zero, the last bit set when that was
// inexact. Rounding this float to nearest even at 16 bits gives what rounding the double
// directly would (binary32 keeps more than two extra bits over F16 and BF16), so an F64 is
// rounded once, not twice.
float to_float_odd(double value)
{
    float f = static_cast<float>(value);
    if (std::isnan(value) || std::isinf(f) || static_cast<double>(f) == value)
        return f;
    if (std::fabs(static_cast<double>(f)) > std::fabs(value))
        f = std::nextafter(f, 0.0f);
    return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

} // namespace

ElementType cast_type(ElementType from, ElementType to)
{
    return is_floating(from) ? to : from;
}

void encode_elements(const double* values, std::size_t count, ElementType to, std::byte* out)
{
    for (std::size_t i = 0; i < count; ++i) {
        const double v = values[i];
        switch (to) {
        case ElementType::F32: {
            const float f = static_cast<float>(v);
            std::memcpy(out + 4 * i, &f, 4);
            break;
        }
        case ElementType::F64: std::memcpy(out + 8 * i, &v, 8); break;
        case ElementType::BF16: {
            const uint16_t bits = float_to_bf16(to_float_odd(v));
            std::memcpy(out + 2 * i, &bits, 2);
            break;
        }
        case ElementType::F16: {
            const uint16_t bits = float_to_f16(to_float_odd(v));
            std::memcpy(out + 2 * i, &bits, 2);
            break;
        }
        default: // cast_type never asks for another target
            throw Error(ProblemKind::invalid_argument, "values cannot be written as " + std::string(to_string(to)));
        }
    }
}

void cast_elements(ElementType from, const std::byte* in, std::size_t count, ElementType to, std::byte* out)
{
    if (from == to) {
        std::memcpy(out, in, count * element_size(from));
        return;
    }
    std::vector<double> values(count);
    decode_elements(from, in, count, values.data());
    encode_elements(values.data(), count, to, out);
}

} // namespace shardscope::convert
