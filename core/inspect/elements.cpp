#include "core/inspect/elements.h"

#include "core/checkpoint/dtype.h"
#include "core/inspect/internal/halves.h"
#include "core/inspect/stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace shardscope {

namespace {

constexpr std::string_view kNames[] = {"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "I8",  "U8",
                                       "I16", "U16",  "I32", "U32", "I64",     "U64",     "BOOL"};
constexpr std::size_t kSizes[] = {2, 2, 4, 8, 1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 1};

// OCP 8-bit floats. E4M3 ("fn": finite, no infinities): bias 7, S.1111.111 is NaN. E5M2: bias 15,
// IEEE-like, exponent 11111 is infinity (mantissa 0) or NaN.
double decode_f8(uint8_t bits, int exponent_bits, int mantissa_bits, int bias, bool has_infinity)
{
    const bool negative = bits & 0x80;
    const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
    const int mantissa = bits & ((1 << mantissa_bits) - 1);
    const int max_exponent = (1 << exponent_bits) - 1;
    double value;
    if (has_infinity && exponent == max_exponent)
        value = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    else if (!has_infinity && exponent == max_exponent && mantissa == (1 << mantissa_bits) - 1)
        value = std::numeric_limits<double>::quiet_NaN();
    else if (exponent == 0)
        value = std::ldexp(double(mantissa), 1 - bias - mantissa_bits);
    else
        value = std::ldexp(double(mantissa + (1 << mantissa_bits)), exponent - bias - mantissa_bits);
    return negative ? -value : value;
}

// As double for decode_elements, as float (exact: 8-bit floats are far inside binary32) for the
// fused statistics kernel.
template <class T, int E, int M, int Bias, bool Inf>
const std::array<T, 256>& f8_table()
{
    static const std::array<T, 256> table = [] {
        std::array<T, 256> t{};
        for (int b = 0; b < 256; ++b)
            t[b] = static_cast<T>(decode_f8(uint8_t(b), E, M, Bias, Inf));
        return t;
    }();
    return table;
}

template <class T>
void decode_as(const std::byte* bytes, std::size_t count, double* out)
{
    for (std::size_t i = 0; i < count; ++i) {
        T value;
        std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
        out[i] = static_cast<double>(value);
    }
}

// F16 by the lane-parallel decoder of the scan (halves.cpp), widened to double in pieces.
void decode_f16(const std::byte* bytes, std::size_t count, double* out)
{
    constexpr std::size_t kPiece = 1024;
    float floats[kPiece];
    for (std::size_t at = 0; at < count; at += kPiece) {
        const std::size_t n = std::min(kPiece, count - at);
        inspect::f16_to_f32(bytes + 2 * at, n, floats);
        for (std::size_t i = 0; i < n; ++i)
            out[at + i] = floats[i];
    }
}

template <class T>
void decode_by_table(const std::array<T, 256>& table, const std::byte* bytes, std::size_t count, T* out)
{
    for (std::size_t i = 0; i < count; ++i)
        out[i] = table[static_cast<uint8_t>(bytes[i])];
}

// BF16: inline in dtype.h (a shift), exact.
void decode_bf16(const std::byte* bytes, std::size_t count, double* out)
{
    for (std::size_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        out[i] = bf16_to_float(bits);
    }
}

} // namespace

std::string_view to_string(ElementType type)
{
    return kNames[static_cast<std::size_t>(type)];
}

std::optional<ElementType> element_type_from_safetensors(std::string_view dtype)
{
    for (std::size_t i = 0; i < std::size(kNames); ++i)
        if (kNames[i] == dtype)
            return static_cast<ElementType>(i);
    return std::nullopt;
}

std::size_t element_size(ElementType type)
{
    return kSizes[static_cast<std::size_t>(type)];
}

bool is_floating(ElementType type)
{
    return type <= ElementType::F8_E5M2;
}

void decode_elements(ElementType type, const std::byte* bytes, std::size_t count, double* out)
{
    static_assert(std::endian::native == std::endian::little, "files are little-endian; so is every supported host");
    switch (type) {
    case ElementType::F16: return decode_f16(bytes, count, out);
    case ElementType::BF16: return decode_bf16(bytes, count, out);
    case ElementType::F32: return decode_as<float>(bytes, count, out);
    case ElementType::F64: return decode_as<double>(bytes, count, out);
    case ElementType::F8_E4M3: return decode_by_table(f8_table<double, 4, 3, 7, false>(), bytes, count, out);
    case ElementType::F8_E5M2: return decode_by_table(f8_table<double, 5, 2, 15, true>(), bytes, count, out);
    case ElementType::I8: return decode_as<int8_t>(bytes, count, out);
    case ElementType::U8: return decode_as<uint8_t>(bytes, count, out);
    case ElementType::I16: return decode_as<int16_t>(bytes, count, out);
    case ElementType::U16: return decode_as<uint16_t>(bytes, count, out);
    case ElementType::I32: return decode_as<int32_t>(bytes, count, out);
    case ElementType::U32: return decode_as<uint32_t>(bytes, count, out);
    case ElementType::I64: return decode_as<int64_t>(bytes, count, out);
    case ElementType::U64: return decode_as<uint64_t>(bytes, count, out);
    case ElementType::BOOL:
        for (std::size_t i = 0; i < count; ++i)
            out[i] = bytes[i] != std::byte{0} ? 1.0 : 0.0;
        return;
    }
}

void accumulate_elements(ElementType type, const std::byte* bytes, std::size_t count, ValueStats& stats)
{
    switch (type) {
    case ElementType::F32: return stats.add_f32(bytes, count);
    case ElementType::BF16: return stats.add_bf16(bytes, count);
    default: break;
    }
    // The other types through a buffer, in slices as long as the scan's blocks (so F64 and the
    // integers give exactly the figures they gave before there was a fused path): F16 and F8
    // exactly as binary32 into the fused kernel (an F16 subnormal becomes a normal binary32, so its
    // histogram bin is still right), the rest (F64's exponents and subnormals, integers) as double.
    constexpr std::size_t kSlice = 16384;
    const std::size_t size = element_size(type);
    const bool narrow_float = type == ElementType::F16 || type == ElementType::F8_E4M3 || type == ElementType::F8_E5M2;
    thread_local std::vector<float> floats;
    thread_local std::vector<double> values;
    for (std::size_t at = 0; at < count; at += kSlice) {
        const std::size_t n = std::min(kSlice, count - at);
        const std::byte* p = bytes + at * size;
        if (narrow_float) {
            floats.resize(kSlice);
            if (type == ElementType::F16)
                inspect::f16_to_f32(p, n, floats.data());
            else if (type == ElementType::F8_E4M3)
                decode_by_table(f8_table<float, 4, 3, 7, false>(), p, n, floats.data());
            else
                decode_by_table(f8_table<float, 5, 2, 15, true>(), p, n, floats.data());
            stats.add_f32(reinterpret_cast<const std::byte*>(floats.data()), n);
        } else {
            values.resize(kSlice);
            decode_elements(type, p, n, values.data());
            stats.add(values.data(), n);
        }
    }
}

} // namespace shardscope
