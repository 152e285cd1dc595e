#pragma once
// Geometry of the reshard ribbons, without a window. Two bars: the source ranks above, the target
// ranks below, each rank a box whose width is proportional to its slice, with a small gap between
// neighbouring boxes. Because the gaps of the two bars fall at different places, a copy run's
// ribbon leans from where its bytes sit now to where they will sit. Ribbon edges follow a
// smoothstep between the bars; painting samples the same curve hit-testing uses.
// With many ranks (1,024 over a 1,400-pixel bar) one box and one ribbon per rank would be thinner
// than a pixel, a grey noise; then `rankGroup` neighbouring ranks share a box and their runs one
// ribbon (groupFor), and the view says so.

#include "core/checkpoint/reshard.h"

#include <QPointF>
#include <QRectF>
#include <cstdint>
#include <vector>

namespace shardwidgets {

struct ReshardRibbon {
    int sourceRank = 0; // the first rank of the source box (of its group)
    int targetRank = 0;
    uint64_t offset = 0; // global element offset in the flat parameter vector
    uint64_t numel = 0;
    bool staying = false; // same rank index before and after, all of it
    int sourceLast = 0; // the last rank of the source box (sourceRank unless grouped)
    int targetLast = 0;
    uint64_t stayingNumel = 0; // the elements that keep their rank index (a group's ribbon mixes)
    double sourceX0 = 0, sourceX1 = 0;
    double targetX0 = 0, targetX1 = 0;
};

struct ReshardBox {
    int rank = 0; // the box's first rank (its only one unless ranks are grouped)
    uint64_t offset = 0;
    uint64_t numel = 0;
    QRectF rect;
    int lastRank = -1; // the box's last rank; -1: the same as rank
};

struct ReshardGeometry {
    double left = 0;
    double width = 1;
    double sourceTop = 0; // top of the source bar
    double targetTop = 0; // top of the target bar
    double barHeight = 24;
    double maxGap = 10; // pixels between neighbouring boxes, shrunk when ranks are many
    int rankGroup = 1; // neighbouring ranks (in bar order) per box and ribbon

    // Ranks per group that keep the average ribbon at least `minWidth` pixels wide (a reshard
    // N -> M has about N + M runs side by side; rankGroupFor's rule): 1 for a few ranks.
    static int groupFor(int sourceCount, int targetCount, double width, double minWidth = 4);

    // The gap actually used for a bar of `count` boxes: at most a fifth of the width is gaps.
    double gapFor(int count) const;
    // x of the global element `offset` inside box `slot` (the slot-th box from the left) of a bar
    // of `count` boxes over `total` elements.
    double x(uint64_t total, int count, int slot, uint64_t offset) const;

    double ribbonTop() const { return sourceTop + barHeight; }
    double ribbonBottom() const { return targetTop; }
    // 0 at the source bar, 1 at the target bar; the eased fraction at which edges interpolate.
    static double ease(double t);
    // The left and right edge of a ribbon at height y (between ribbonTop and ribbonBottom).
    double edgeAt(double x0Source, double x0Target, double y) const;

    // Laid out from a plan and the source shards' slices (rank, offset, numel in any order), one
    // box and ribbon per `rankGroup` ranks.
    std::vector<ReshardBox> sourceBoxes(const shardscope::ReshardPlan& plan,
                                        const std::vector<ReshardBox>& sourceSlices) const;
    std::vector<ReshardBox> targetBoxes(const shardscope::ReshardPlan& plan) const;
    std::vector<ReshardRibbon> ribbons(const shardscope::ReshardPlan& plan,
                                       const std::vector<ReshardBox>& sourceSlices) const;

    // `boxes` (in bar order) placed side by side on the bar whose top is `top`.
    std::vector<ReshardBox> laidOut(std::vector<ReshardBox> boxes, double top, uint64_t total) const;

    // Hit tests: the index into `boxes` / `ribbons` under the point, or -1.
    static int boxAt(const std::vector<ReshardBox>& boxes, const QPointF& point);
    int ribbonAt(const std::vector<ReshardRibbon>& ribbons, const QPointF& point) const;
};

} // namespace shardwidgets
