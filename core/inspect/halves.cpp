// The scan's F16 decoding (internal/halves.h), dtype.cpp's f16_to_float written without branches
// so that it runs W lanes at a time, as the statistics kernels do (util/internal/lanes.h), ahead
// of the binary32 kernel. The check that parameters are their masters rounded is
// checkpoint/rounding.h's, which writers share.

#include "core/checkpoint/dtype.h"
#include "core/inspect/internal/halves.h"
#include "core/util/internal/lanes.h"

#include <cmath>
#include <cstring>

namespace shardscope::inspect {

namespace {

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

} // namespace shardscope::inspect
