#include "core/inspect/stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace shardscope {

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
