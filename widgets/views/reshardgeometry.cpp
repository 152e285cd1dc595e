#include "widgets/views/reshardgeometry.h"

#include <algorithm>
#include <map>

namespace shardwidgets {

double ReshardGeometry::gapFor(int count) const
{
    if (count <= 1)
        return 0;
    return std::min(maxGap, width * 0.2 / double(count - 1));
}

double ReshardGeometry::x(uint64_t total, int count, int slot, uint64_t offset) const
{
    const double gap = gapFor(count);
    const double usable = std::max(0.0, width - gap * std::max(0, count - 1));
    const double fraction = total ? double(offset) / double(total) : 0.0;
    return left + gap * slot + usable * fraction;
}

double ReshardGeometry::ease(double t)
{
    t = std::clamp(t, 0.0, 1.0);
    return t * t * (3 - 2 * t);
}

double ReshardGeometry::edgeAt(double xSource, double xTarget, double y) const
{
    const double span = ribbonBottom() - ribbonTop();
    const double t = span > 0 ? (y - ribbonTop()) / span : 0.0;
    return xSource + (xTarget - xSource) * ease(t);
}

namespace {

// Source slices in bar order (by offset; empty shards keep their rank order among equals).
std::vector<ReshardBox> ordered(std::vector<ReshardBox> slices)
{
    std::stable_sort(slices.begin(), slices.end(), [](const ReshardBox& a, const ReshardBox& b) {
        return a.offset != b.offset ? a.offset < b.offset : a.rank < b.rank;
    });
    return slices;
}

} // namespace

std::vector<ReshardBox> ReshardGeometry::sourceBoxes(const shardscope::ReshardPlan& plan,
                                                     const std::vector<ReshardBox>& sourceSlices) const
{
    std::vector<ReshardBox> boxes = ordered(sourceSlices);
    const int count = int(boxes.size());
    for (int slot = 0; slot < count; ++slot) {
        ReshardBox& b = boxes[std::size_t(slot)];
        const double x0 = x(plan.numel_total, count, slot, b.offset);
        const double x1 = x(plan.numel_total, count, slot, b.offset + b.numel);
        b.rect = QRectF(x0, sourceTop, x1 - x0, barHeight);
    }
    return boxes;
}

std::vector<ReshardBox> ReshardGeometry::targetBoxes(const shardscope::ReshardPlan& plan) const
{
    std::vector<ReshardBox> boxes;
    const int count = int(plan.targets.size());
    boxes.reserve(plan.targets.size());
    for (int slot = 0; slot < count; ++slot) {
        const auto& t = plan.targets[std::size_t(slot)];
        const double x0 = x(plan.numel_total, count, slot, t.offset);
        const double x1 = x(plan.numel_total, count, slot, t.offset + t.numel);
        boxes.push_back({t.rank, t.offset, t.numel, QRectF(x0, targetTop, x1 - x0, barHeight)});
    }
    return boxes;
}

std::vector<ReshardRibbon> ReshardGeometry::ribbons(const shardscope::ReshardPlan& plan,
                                                    const std::vector<ReshardBox>& sourceSlices) const
{
    const std::vector<ReshardBox> sources = ordered(sourceSlices);
    std::map<int, std::pair<int, uint64_t>> slotOf; // rank -> (slot, offset of its slice)
    for (int slot = 0; slot < int(sources.size()); ++slot)
        slotOf[sources[std::size_t(slot)].rank] = {slot, sources[std::size_t(slot)].offset};
    const int sourceCount = int(sources.size());
    const int targetCount = int(plan.targets.size());
    std::vector<ReshardRibbon> result;
    for (int tslot = 0; tslot < targetCount; ++tslot) {
        const auto& t = plan.targets[std::size_t(tslot)];
        for (const auto& run : t.runs) {
            const auto it = slotOf.find(run.source_rank);
            if (it == slotOf.end())
                continue; // a plan for another manifest: nothing sensible to draw
            const auto [sslot, sourceOffset] = it->second;
            ReshardRibbon r;
            r.sourceRank = run.source_rank;
            r.targetRank = t.rank;
            r.offset = t.offset + run.target_offset;
            r.numel = run.numel;
            r.staying = run.source_rank == t.rank;
            r.sourceX0 = x(plan.numel_total, sourceCount, sslot, sourceOffset + run.source_offset);
            r.sourceX1 = x(plan.numel_total, sourceCount, sslot, sourceOffset + run.source_offset + run.numel);
            r.targetX0 = x(plan.numel_total, targetCount, tslot, r.offset);
            r.targetX1 = x(plan.numel_total, targetCount, tslot, r.offset + r.numel);
            result.push_back(r);
        }
    }
    return result;
}

int ReshardGeometry::boxAt(const std::vector<ReshardBox>& boxes, const QPointF& point)
{
    for (std::size_t i = 0; i < boxes.size(); ++i) {
        const QRectF& r = boxes[i].rect;
        // Half a pixel of slack so that hairline boxes of many-rank bars can still be hovered.
        if (point.y() >= r.top() && point.y() <= r.bottom() && point.x() >= r.left() - 0.5 &&
            point.x() <= r.right() + 0.5)
            return int(i);
    }
    return -1;
}

int ReshardGeometry::ribbonAt(const std::vector<ReshardRibbon>& ribbons, const QPointF& point) const
{
    if (point.y() < ribbonTop() || point.y() > ribbonBottom())
        return -1;
    int best = -1;
    double bestDistance = 1e300;
    for (std::size_t i = 0; i < ribbons.size(); ++i) {
        const ReshardRibbon& r = ribbons[i];
        const double x0 = edgeAt(r.sourceX0, r.targetX0, point.y());
        const double x1 = edgeAt(r.sourceX1, r.targetX1, point.y());
        if (point.x() >= x0 && point.x() <= x1)
            return int(i);
        // Ribbons thinner than a pixel: take the nearest within half a pixel.
        const double distance = point.x() < x0 ? x0 - point.x() : point.x() - x1;
        if (distance < 0.5 && distance < bestDistance) {
            bestDistance = distance;
            best = int(i);
        }
    }
    return best;
}

} // namespace shardwidgets
