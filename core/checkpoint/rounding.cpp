// The check that parameters are their fp32 master weights rounded (rounding.h): dtype.cpp's
// float_to_f16 and float_to_bf16 written without branches so that they run W lanes at a time
// (util/internal/lanes.h). It sees the bytes of two states and must keep the pace of a scan or
// a write of them.

#include "core/checkpoint/rounding.h"

#include "core/util/internal/lanes.h"

#include <cmath>
#include <cstring>

namespace shardscope {

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
[[gnu::always_inline]] inline uint64_t unrounded(const std::byte* param, const std::byte* master, std::size_t n,
                                                 uint64_t& nonfinite)
{
    using U = typename Lanes<W>::u32;
    using I = typename Lanes<W>::i32;
    using F = typename Lanes<W>::f32;
    using H = typename Lanes<W>::u16;
    uint64_t count = 0;
    std::size_t i = 0;
    while (i + W <= n) {
        // Lanes count down by one per finding (a true compare is -1); folded before they could wrap.
        I lanes{}, bad{};
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
            const U magnitude = bits & 0x7fffffffu;
            const I not_nan = (I)magnitude <= 0x7f800000; // NaN masters: nonfinite_values' business
            lanes += (I)(rounded != stored) & not_nan;
            bad += (I)(magnitude >= 0x7f800000u);
        }
        for (std::size_t lane = 0; lane < W; ++lane) {
            count += uint64_t(-int64_t(lanes[lane]));
            nonfinite += uint64_t(-int64_t(bad[lane]));
        }
    }
    for (; i < n; ++i) {
        float m;
        uint16_t p;
        std::memcpy(&m, master + 4 * i, 4);
        std::memcpy(&p, param + 2 * i, 2);
        count += !std::isnan(m) && (F16 ? float_to_f16(m) : float_to_bf16(m)) != p;
        nonfinite += !std::isfinite(m);
    }
    return count;
}

template <bool F16>
uint64_t unrounded_sse2(const std::byte* param, const std::byte* master, std::size_t n, uint64_t& nonfinite)
{
    return unrounded<F16, 4>(param, master, n, nonfinite);
}

#if defined(__x86_64__)
template <bool F16>
[[gnu::target("avx2,fma")]] uint64_t unrounded_avx2(const std::byte* param, const std::byte* master, std::size_t n,
                                                    uint64_t& nonfinite)
{
    return unrounded<F16, 8>(param, master, n, nonfinite);
}
#endif

} // namespace

uint64_t count_unrounded(ParamDtype dtype, const std::byte* param, const std::byte* master, std::size_t n,
                         uint64_t* nonfinite_master)
{
    uint64_t ignored = 0;
    uint64_t& nonfinite = nonfinite_master ? *nonfinite_master : ignored;
    const bool f16 = dtype == ParamDtype::F16;
#if defined(__x86_64__)
    if (has_avx2_fma())
        return f16 ? unrounded_avx2<true>(param, master, n, nonfinite)
                   : unrounded_avx2<false>(param, master, n, nonfinite);
#endif
    return f16 ? unrounded_sse2<true>(param, master, n, nonfinite) : unrounded_sse2<false>(param, master, n, nonfinite);
}

} // namespace shardscope
