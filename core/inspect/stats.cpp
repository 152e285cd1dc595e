#include "core/inspect/stats.h"

#include <algorithm>
#include <cmath>

namespace shardscope {

void ValueStats::add(const double* values, std::size_t count)
{
    ValueStats block;
    block.numel = count;
    double sum = 0, squares = 0;
    bool first = true;
    for (std::size_t i = 0; i < count; ++i) {
        const double x = values[i];
        if (std::isnan(x)) {
            ++block.nan;
            continue;
        }
        if (std::isinf(x)) {
            ++(x > 0 ? block.posinf : block.neginf);
            continue;
        }
        ++block.finite;
        sum += x;
        squares += x * x;
        if (first) {
            block.min = block.max = x;
            first = false;
        } else {
            block.min = std::min(block.min, x);
            block.max = std::max(block.max, x);
        }
        if (x == 0) {
            ++block.zeros;
            continue;
        }
        block.negatives += x < 0;
        int exponent = 0;
        std::frexp(x, &exponent); // |x| = m * 2^exponent with m in [0.5, 1): floor(log2|x|) = exponent - 1
        const int bin = std::clamp(exponent - 1 - kHistogramLowExponent, 0, kHistogramBins - 1);
        ++block.histogram[static_cast<std::size_t>(bin)];
    }
    if (block.finite > 0) {
        block.mean = sum / double(block.finite);
        double m2 = 0; // second pass around the block's own mean: no cancellation
        for (std::size_t i = 0; i < count; ++i)
            if (std::isfinite(values[i]))
                m2 += (values[i] - block.mean) * (values[i] - block.mean);
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
