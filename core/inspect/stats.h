#pragma once
// Statistics of a tensor's values (docs/shardctl.md, "stats"): counts of NaN, +Inf, -Inf, zeros
// and negatives over every element, and over the finite ones min, max, abs_max, mean, population
// standard deviation, L2 norm and a histogram of log2|x|. Accumulated in double, block by block:
// each block's mean and squared deviations are computed exactly around its own mean, and blocks
// (and the parts of a sharded tensor) are merged with Chan et al.'s pairwise update, so mean and
// std agree with a float64 reference to ~1e-12 relative however many elements there are.

#include <array>
#include <cstddef>
#include <cstdint>

namespace shardscope {

// Bin b counts finite nonzero |x| with floor(log2|x|) = kHistogramLowExponent + b; smaller
// magnitudes fall into bin 0 and larger ones into the last bin.
inline constexpr int kHistogramBins = 64;
inline constexpr int kHistogramLowExponent = -56;

struct ValueStats {
    uint64_t numel = 0;
    uint64_t nan = 0, posinf = 0, neginf = 0;
    uint64_t zeros = 0, negatives = 0; // among the finite values
    uint64_t finite = 0;
    double min = 0, max = 0, abs_max = 0; // of the finite values (0 when there are none)
    double mean = 0; // of the finite values
    double m2 = 0; // sum of squared deviations from `mean`
    double sum_squares = 0;
    std::array<uint64_t, kHistogramBins> histogram{};

    // Adds `count` decoded values (any count; blocks of a few thousand keep it exact and fast).
    void add(const double* values, std::size_t count);
    // Adds `count` little-endian binary32 (F32) or bfloat16 (BF16) values stored at `bytes`, with
    // no double buffer: the counts, min, max and histogram of decoding them and calling add(), and
    // its mean, m2 and sum of squares up to rounding (vector lanes sum in another order).
    void add_f32(const std::byte* bytes, std::size_t count);
    void add_bf16(const std::byte* bytes, std::size_t count);
    void merge(const ValueStats& other);

    double std_dev() const; // population standard deviation of the finite values
    double l2() const;
    uint64_t nonfinite() const { return nan + posinf + neginf; }
};

} // namespace shardscope
