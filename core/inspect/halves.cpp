// The scan's 16-bit float conversions (internal/halves.h), dtype.cpp's written without branches
// so that they run W lanes at a time, as the statistics kernels do (internal/lanes.h): F16
// decoding, ahead of the binary32 kernel, and the check that parameters are their fp32 master
// weights rounded, which sees the bytes of two states and must keep the scan's pace.

#include "core/checkpoint/dtype.h"
#include "core/inspect/internal/halves.h"
#include "core/inspect/internal/lanes.h"

#include <cmath>
#include <cstring>

namespace shardscope::inspect {

namespace {

// float_to_bf16 of non-NaN binary32 bits. (Vectors out through references: see lanes.h.)
template <class U>
[[gnu::always_inline]] inline void to_bf16(const U& bits, U& out)
{
    out = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
}

// float_to_f16 of non-NaN binary32 bits, each case computed and the right one chosen per lane:
// beyond the largest half, infinity; below the smallest normal half, the magnitude added to 0.5
// leaves the count of 2^-24 steps, rounded to nearest even, in the low mantissa bits (the sum's
// ulp is 2^-24), as nearbyint(x * 2^24) does; otherwise rebias the exponent and round the mantissa.
template <class U, class I, class F>
[[gnu::always_inline]] inline void to_f16(const U& bits, U& out)
{
    const U sign = (bits >> 16) & 0x8000u;
    const U abs = bits & 0x7fffffffu;
    const U normal = (abs - 0x38000000u + 0x0fffu + ((abs >> 13) & 1u)) >> 13;
    F magnitude;
    std::memcpy(&magnitude, &abs, sizeof magnitude);
    const F shifted = magnitude + 0.5f;
    U subnormal;
    std::memcpy(&subnormal, &shifted, sizeof subnormal);
    subnormal -= 0x3f000000u;
    const I a = (I)abs; // below 2^31: signed compares are exact
    const U finite = a < 0x38800000 ? subnormal : normal;
    out = sign | (a >= 0x477ff000 ? U{} + 0x7c00u : finite);
}

template <bool F16, std::size_t W>
[[gnu::always_inline]] inline uint64_t unrounded(const std::byte* param, const std::byte* master, std::size_t n)
{
    using U = typename Lanes<W>::u32;
    using I = typename Lanes<W>::i32;
    using F = typename Lanes<W>::f32;
    using H = typename Lanes<W>::u16;
    uint64_t count = 0;
    std::size_t i = 0;
    while (i + W <= n) {
        // Lanes count down by one per mismatch (a true compare is -1); folded before they could wrap.
        I lanes{};
        for (std::size_t end = std::min(n, i + (std::size_t(1) << 30)); i + W <= end; i += W) {
            U bits;
            std::memcpy(&bits, master + 4 * i, sizeof bits);
            H stored16;
            std::memcpy(&stored16, param + 2 * i, sizeof stored16);
            const U stored = __builtin_convertvector(stored16, U);
            U rounded;
            if constexpr (F16)
                to_f16<U, I, F>(bits, rounded);
            else
                to_bf16(bits, rounded);
            const I not_nan = (I)(bits & 0x7fffffffu) <= 0x7f800000; // NaN masters: nonfinite_values' business
            lanes += (I)(rounded != stored) & not_nan;
        }
        for (std::size_t lane = 0; lane < W; ++lane)
            count += uint64_t(-int64_t(lanes[lane]));
    }
    for (; i < n; ++i) {
        float m;
        uint16_t p;
        std::memcpy(&m, master + 4 * i, 4);
        std::memcpy(&p, param + 2 * i, 2);
        count += !std::isnan(m) && (F16 ? float_to_f16(m) : float_to_bf16(m)) != p;
    }
    return count;
}

// f16_to_float per lane: zero and subnormals are their mantissa times 2^-24 (exact in binary32),
// infinities and NaN keep their payload, normal numbers rebias the exponent (15 -> 127).
template <std::size_t W>
[[gnu::always_inline]] inline void decode_f16(const std::byte* bytes, std::size_t n, float* out)
{
    using U = typename Lanes<W>::u32;
    using I = typename Lanes<W>::i32;
    using F = typename Lanes<W>::f32;
    using H = typename Lanes<W>::u16;
    std::size_t i = 0;
    for (; i + W <= n; i += W) {
        H h16;
        std::memcpy(&h16, bytes + 2 * i, sizeof h16);
        const U h = __builtin_convertvector(h16, U);
        const U sign = (h & 0x8000u) << 16;
        const U exponent = (h >> 10) & 0x1fu;
        const U mantissa = h & 0x3ffu;
        const F tiny = __builtin_convertvector((I)mantissa, F) * 0x1p-24f;
        U subnormal;
        std::memcpy(&subnormal, &tiny, sizeof subnormal);
        const U special = 0x7f800000u | (mantissa << 13);
        const U normal = ((exponent + 112u) << 23) | (mantissa << 13);
        const U bits = sign | ((I)exponent == 0 ? subnormal : (I)exponent == 31 ? special : normal);
        std::memcpy(out + i, &bits, sizeof bits);
    }
    for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = f16_to_float(h);
    }
}

template <bool F16>
uint64_t unrounded_sse2(const std::byte* param, const std::byte* master, std::size_t n)
{
    return unrounded<F16, 4>(param, master, n);
}

#if defined(__x86_64__)
template <bool F16>
[[gnu::target("avx2,fma")]] uint64_t unrounded_avx2(const std::byte* param, const std::byte* master, std::size_t n)
{
    return unrounded<F16, 8>(param, master, n);
}
#endif

void decode_f16_sse2(const std::byte* bytes, std::size_t n, float* out)
{
    decode_f16<4>(bytes, n, out);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void decode_f16_avx2(const std::byte* bytes, std::size_t n, float* out)
{
    decode_f16<8>(bytes, n, out);
}
#endif

} // namespace

void f16_to_f32(const std::byte* bytes, std::size_t count, float* out)
{
#if defined(__x86_64__)
    if (has_avx2_fma())
        return decode_f16_avx2(bytes, count, out);
#endif
    decode_f16_sse2(bytes, count, out);
}

uint64_t count_unrounded(ElementType param_type, const std::byte* param, const std::byte* master, std::size_t n)
{
    const bool f16 = param_type == ElementType::F16;
#if defined(__x86_64__)
    if (has_avx2_fma())
        return f16 ? unrounded_avx2<true>(param, master, n) : unrounded_avx2<false>(param, master, n);
#endif
    return f16 ? unrounded_sse2<true>(param, master, n) : unrounded_sse2<false>(param, master, n);
}

} // namespace shardscope::inspect
