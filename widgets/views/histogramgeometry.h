#pragma once
// Where the log2|x| histogram's bars go (no widget): bins side by side across the plot, bar
// heights proportional to counts, and which bin a point is over. Tested without a window.

#include <QRectF>
#include <cstdint>

namespace shardwidgets {

struct HistogramGeometry {
    QRectF plot;
    int bins = 64;
    uint64_t maxCount = 0;

    double binWidth() const { return bins > 0 ? plot.width() / bins : 0.0; }
    QRectF barRect(int bin, uint64_t count) const;
    int binAt(double x) const; // -1 outside the plot
    // Bins between axis labels: the smallest multiple of 8 (2^-56, 2^-48, ...; 2^-64, 2^-48, ...
    // when narrower) at which labels `labelWidth` wide, centred on their ticks and the last one
    // pulled inside the plot, never overlap.
    int labelStep(double labelWidth) const;
};

} // namespace shardwidgets
