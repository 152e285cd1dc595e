#include "core/inspect/stats.h"
#include "core/util/internal/lanes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace shardscope {

namespace {

// The binary32 kernel works on W elements at a time (util/internal/lanes.h): the build has no
// -ffast-math, so the compiler may not vectorise (reorder) double sums on its own; here the order
// is ours, several independent accumulators summed at the end. The 4-lane copy is for SSE2 (wider
// vectors there spill).

// Elements per fused block: 64 KiB of F32 stays in L2 between the passes, and folding the key
// counts once per block costs little next to 16384 elements.
constexpr std::size_t kFusedBlock = 16384;

// F32 and BF16 read as binary32 bits (BF16 is the top half of a binary32, exactly).
struct F32Bits {
    static constexpr std::size_t size = 4;
    template <class V>
    [[gnu::always_inline]] static void load(const std::byte* p, V& out)
    {
        std::memcpy(&out, p, sizeof out);
    }
    [[gnu::always_inline]] static uint32_t load1(const std::byte* p)
    {
        uint32_t v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
};

struct BF16Bits {
    static constexpr std::size_t size = 2;
    template <class V>
    [[gnu::always_inline]] static void load(const std::byte* p, V& out)
    {
        constexpr std::size_t w = sizeof(V) / 4;
        typename Lanes<w>::u16 v;
        std::memcpy(&v, p, sizeof v);
        const typename Lanes<w>::u32 bits = __builtin_convertvector(v, typename Lanes<w>::u32) << 16;
        std::memcpy(&out, &bits, sizeof out);
    }
    [[gnu::always_inline]] static uint32_t load1(const std::byte* p)
    {
        uint16_t v;
        std::memcpy(&v, p, sizeof v);
        return uint32_t(v) << 16;
    }
};

[[gnu::always_inline]] inline float as_float(uint32_t bits)
{
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return x;
}

// The low and high halves widened to double, spelled lane by lane: GCC 12 turns this into one
// cvtps2pd each, where __builtin_convertvector takes two half-width ones and a shuffle.
[[gnu::always_inline]] inline void widen(const Lanes<8>::f32& x, Lanes<8>::f64& low, Lanes<8>::f64& high)
{
    low = Lanes<8>::f64{x[0], x[1], x[2], x[3]};
    high = Lanes<8>::f64{x[4], x[5], x[6], x[7]};
}

[[gnu::always_inline]] inline void widen(const Lanes<4>::f32& x, Lanes<4>::f64& low, Lanes<4>::f64& high)
{
    low = Lanes<4>::f64{x[0], x[1]};
    high = Lanes<4>::f64{x[2], x[3]};
}

template <class V>
[[gnu::always_inline]] inline double lanes_sum(const V& a, const V& b, const V& c, const V& d)
{
    const V t = (a + b) + (c + d);
    double sum = 0;
    for (std::size_t lane = 0; lane < sizeof(V) / sizeof(double); ++lane)
        sum += t[lane];
    return sum;
}

// The statistics of one block of n <= kFusedBlock binary32 values into `block`; false (and
// `block` unusable) when the block holds a NaN or an infinity, which the caller then takes
// through the double path: they are rare, and keeping them out lets the fast passes skip the
// finiteness test per element. Counts, min, max and the histogram equal the double path's;
// mean, m2 and the sum of squares differ from it by rounding only (another summation order).
template <class E, std::size_t W>
[[gnu::always_inline]] inline bool binary32_block(const std::byte* p, std::size_t n, ValueStats& block)
{
    // The sign-and-exponent key (bits >> 23) of every element, counted in eight tables so that
    // runs of equal keys do not serialise on one counter; it alone says whether there is a NaN or
    // an infinity, how many negatives, and the histogram.
    constexpr std::size_t kTables = 8;
    uint32_t counts[kTables][512] = {};
    std::size_t i = 0;
    constexpr std::size_t kPerWord = 8 / E::size; // read 64 bits at a time: fewer loads
    for (; i + kTables <= n; i += kTables)
        for (std::size_t w = 0; w < kTables / kPerWord; ++w) {
            uint64_t word;
            std::memcpy(&word, p + (i + w * kPerWord) * E::size, sizeof word);
            for (std::size_t j = 0; j < kPerWord; ++j)
                ++counts[w * kPerWord + j][(word >> (8 * E::size * (j + 1) - 9)) & 0x1ff];
        }
    for (; i < n; ++i)
        ++counts[0][E::load1(p + i * E::size) >> 23];
    uint32_t keys[512];
    for (std::size_t k = 0; k < 512; ++k) {
        keys[k] = 0;
        for (std::size_t t = 0; t < kTables; ++t)
            keys[k] += counts[t][k];
    }
    if (keys[0xff] + keys[0x1ff] > 0) // exponent all ones: NaN or infinity
        return false;

    // Sums, squares, min and max; two vectors a step, so four independent double sums.
    using f32 = typename Lanes<W>::f32;
    using f64 = typename Lanes<W>::f64;
    constexpr std::size_t kStep = 2 * W;
    f64 sum[4] = {}, squares[4] = {};
    constexpr float inf = std::numeric_limits<float>::infinity();
    f32 lo[2], hi[2];
    lo[0] = lo[1] = f32{} + inf;
    hi[0] = hi[1] = f32{} - inf;
    for (i = 0; i + kStep <= n; i += kStep)
        for (std::size_t k = 0; k < 2; ++k) {
            f32 x;
            E::load(p + (i + W * k) * E::size, x);
            f64 a, b;
            widen(x, a, b);
            sum[2 * k] += a;
            sum[2 * k + 1] += b;
            squares[2 * k] += a * a;
            squares[2 * k + 1] += b * b;
            lo[k] = x < lo[k] ? x : lo[k];
            hi[k] = hi[k] < x ? x : hi[k];
        }
    double tail_sum = 0, tail_squares = 0;
    float low = inf, high = -inf;
    for (; i < n; ++i) {
        const float x = as_float(E::load1(p + i * E::size));
        tail_sum += double(x);
        tail_squares += double(x) * double(x);
        low = std::min(low, x);
        high = std::max(high, x);
    }
    for (std::size_t k = 0; k < 2; ++k)
        for (std::size_t lane = 0; lane < W; ++lane) {
            low = std::min(low, lo[k][lane]);
            high = std::max(high, hi[k][lane]);
        }

    block.numel = block.finite = n;
    // Biased exponent 0 is zero or subnormal: zeros are counted apart, and every binary32
    // subnormal (< 2^-126) is far below the first bin, where floor(log2|x|) puts it anyway.
    uint64_t zeros = 0, negative_zeros = 0;
    if (keys[0] + keys[0x100] > 0)
        for (std::size_t j = 0; j < n; ++j) {
            const uint32_t bits = E::load1(p + j * E::size);
            zeros += (bits << 1) == 0;
            negative_zeros += bits == 0x80000000u;
        }
    block.zeros = zeros;
    uint64_t negatives = 0;
    for (int e = 0; e < 0xff; ++e) {
        negatives += keys[0x100 + e];
        // floor(log2|x|) of a normal binary32 is its biased exponent less 127.
        const int bin = std::clamp(e - 127 - kHistogramLowExponent, 0, kHistogramBins - 1);
        block.histogram[static_cast<std::size_t>(bin)] += keys[e] + keys[0x100 + e];
    }
    block.histogram[0] -= zeros;
    block.negatives = negatives - negative_zeros;

    // -0 and +0 tie; the double path keeps the first it meets, so when a zero is the minimum or
    // the maximum, take the first zero of the block (the lanes saw them out of order).
    if (low == 0 || high == 0) {
        std::size_t j = 0;
        while ((E::load1(p + j * E::size) << 1) != 0)
            ++j;
        const float first_zero = as_float(E::load1(p + j * E::size));
        low = low == 0 ? first_zero : low;
        high = high == 0 ? first_zero : high;
    }
    block.min = low;
    block.max = high;
    block.abs_max = std::max(std::abs(block.min), std::abs(block.max));
    block.mean = (lanes_sum(sum[0], sum[1], sum[2], sum[3]) + tail_sum) / double(n);
    block.sum_squares = lanes_sum(squares[0], squares[1], squares[2], squares[3]) + tail_squares;

    // Squared deviations around the block's own mean (no cancellation), the block still in L2.
    const double mean = block.mean;
    const f64 means = f64{} + mean;
    f64 m2[4] = {};
    for (i = 0; i + kStep <= n; i += kStep)
        for (std::size_t k = 0; k < 2; ++k) {
            f32 x;
            E::load(p + (i + W * k) * E::size, x);
            f64 a, b;
            widen(x, a, b);
            a -= means;
            b -= means;
            m2[2 * k] += a * a;
            m2[2 * k + 1] += b * b;
        }
    double tail_m2 = 0;
    for (; i < n; ++i) {
        const double d = double(as_float(E::load1(p + i * E::size))) - mean;
        tail_m2 += d * d;
    }
    block.m2 = lanes_sum(m2[0], m2[1], m2[2], m2[3]) + tail_m2;
    return true;
}

using BlockKernel = bool (*)(const std::byte*, std::size_t, ValueStats&);

template <class E>
bool sse2_block(const std::byte* p, std::size_t n, ValueStats& block)
{
    return binary32_block<E, 4>(p, n, block);
}

#if defined(__x86_64__)
template <class E>
[[gnu::target("avx2,fma")]] bool avx2_block(const std::byte* p, std::size_t n, ValueStats& block)
{
    return binary32_block<E, 8>(p, n, block);
}
#endif

template <class E>
BlockKernel block_kernel()
{
#if defined(__x86_64__)
    if (has_avx2_fma())
        return avx2_block<E>;
#endif
    return sse2_block<E>;
}

// Blocks of binary32 values: the fused kernel, or, for a block holding NaN or Inf, the double
// path over its decoded values.
template <class E>
void add_binary32(ValueStats& stats, const std::byte* bytes, std::size_t count)
{
    const BlockKernel kernel = block_kernel<E>();
    for (std::size_t at = 0; at < count; at += kFusedBlock) {
        const std::size_t n = std::min(kFusedBlock, count - at);
        const std::byte* p = bytes + at * E::size;
        ValueStats block;
        if (kernel(p, n, block)) {
            stats.merge(block);
            continue;
        }
        thread_local std::vector<double> values; // the whole block at once: the double path's figures
        values.resize(n);
        for (std::size_t j = 0; j < n; ++j)
            values[j] = as_float(E::load1(p + j * E::size));
        stats.add(values.data(), n);
    }
}

} // namespace

void ValueStats::add_f32(const std::byte* bytes, std::size_t count)
{
    add_binary32<F32Bits>(*this, bytes, count);
}

void ValueStats::add_bf16(const std::byte* bytes, std::size_t count)
{
    add_binary32<BF16Bits>(*this, bytes, count);
}

void ValueStats::add(const double* values, std::size_t count)
{
    // One pass over the bits (no frexp, no classification calls: this is the hot loop of a scan),
    // then the squared deviations around the block's own mean.
    ValueStats block;
    block.numel = count;
    double sum = 0, squares = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t i = 0; i < count; ++i) {
        const double x = values[i];
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        const unsigned biased = unsigned(bits >> 52) & 0x7ffu;
        if (biased == 0x7ffu) { // NaN or infinity
            if (bits & 0x000fffffffffffffull)
                ++block.nan;
            else
                ++(bits >> 63 ? block.neginf : block.posinf);
            continue;
        }
        ++block.finite;
        sum += x;
        squares += x * x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        if ((bits << 1) == 0) { // +0 or -0
            ++block.zeros;
            continue;
        }
        block.negatives += bits >> 63;
        // floor(log2|x|) is the unbiased exponent for normal numbers; subnormals (biased 0) are far
        // below the first bin and land in it either way.
        const int bin = std::clamp(int(biased) - 1023 - kHistogramLowExponent, 0, kHistogramBins - 1);
        ++block.histogram[static_cast<std::size_t>(bin)];
    }
    if (block.finite > 0) {
        block.min = lo;
        block.max = hi;
        block.mean = sum / double(block.finite);
        double m2 = 0; // second pass around the block's own mean: no cancellation
        for (std::size_t i = 0; i < count; ++i) {
            const double d = values[i] - block.mean;
            if (std::isfinite(values[i]))
                m2 += d * d;
        }
        block.m2 = m2;
        block.sum_squares = squares;
        block.abs_max = std::max(std::abs(block.min), std::abs(block.max));
    }
    merge(block);
}

void ValueStats::merge(const ValueStats& o)
{
    if (o.finite > 0) {
        if (finite == 0) {
            min = o.min;
            max = o.max;
            mean = o.mean;
            m2 = o.m2;
        } else {
            min = std::min(min, o.min);
            max = std::max(max, o.max);
            const double n = double(finite), m = double(o.finite);
            const double delta = o.mean - mean;
            mean += delta * m / (n + m);
            m2 += o.m2 + delta * delta * n * m / (n + m);
        }
        abs_max = std::max(abs_max, o.abs_max);
        sum_squares += o.sum_squares;
    }
    numel += o.numel;
    nan += o.nan;
    posinf += o.posinf;
    neginf += o.neginf;
    zeros += o.zeros;
    negatives += o.negatives;
    finite += o.finite;
    for (std::size_t b = 0; b < histogram.size(); ++b)
        histogram[b] += o.histogram[b];
}

double ValueStats::std_dev() const
{
    return finite > 0 ? std::sqrt(std::max(0.0, m2 / double(finite))) : 0.0;
}

double ValueStats::l2() const
{
    return std::sqrt(sum_squares);
}

} // namespace shardscope
