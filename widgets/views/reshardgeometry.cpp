#include "widgets/views/reshardgeometry.h"

#include "widgets/views/rankgroup.h"

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

int ReshardGeometry::groupFor(int sourceCount, int targetCount, double width, double minWidth)
{
    // About N + M runs side by side; a group never spans more than the larger bar.
    return std::min(rankGroupFor(sourceCount + targetCount, width, minWidth),
                    std::max(1, std::max(sourceCount, targetCount)));
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

// `slices` (in bar order) merged `group` at a time; a bar's slices are contiguous, so a group's
// elements are too.
std::vector<ReshardBox> grouped(const std::vector<ReshardBox>& slices, int group)
{
    std::vector<ReshardBox> boxes;
    for (std::size_t i = 0; i < slices.size(); ++i) {
        if (i % std::size_t(group) == 0) {
            boxes.push_back(slices[i]);
            boxes.back().lastRank = group > 1 ? slices[i].rank : -1;
            continue;
        }
        ReshardBox& box = boxes.back();
        box.numel = slices[i].offset + slices[i].numel - box.offset;
        box.lastRank = slices[i].rank;
    }
    return boxes;
}

std::vector<ReshardBox> targetSlices(const shardscope::ReshardPlan& plan)
{
    std::vector<ReshardBox> slices;
    slices.reserve(plan.targets.size());
    for (const auto& t : plan.targets)
        slices.push_back({t.rank, t.offset, t.numel, {}});
    return slices;
}

} // namespace

std::vector<ReshardBox> ReshardGeometry::laidOut(std::vector<ReshardBox> boxes, double top, uint64_t total) const
{
    const int count = int(boxes.size());
    for (int slot = 0; slot < count; ++slot) {
        ReshardBox& b = boxes[std::size_t(slot)];
        const double x0 = x(total, count, slot, b.offset);
        const double x1 = x(total, count, slot, b.offset + b.numel);
        b.rect = QRectF(x0, top, x1 - x0, barHeight);
    }
    return boxes;
}

std::vector<ReshardBox> ReshardGeometry::sourceBoxes(const shardscope::ReshardPlan& plan,
                                                     const std::vector<ReshardBox>& sourceSlices) const
{
    return laidOut(grouped(ordered(sourceSlices), rankGroup), sourceTop, plan.numel_total);
}

std::vector<ReshardBox> ReshardGeometry::targetBoxes(const shardscope::ReshardPlan& plan) const
{
    return laidOut(grouped(targetSlices(plan), rankGroup), targetTop, plan.numel_total);
}

std::vector<ReshardRibbon> ReshardGeometry::ribbons(const shardscope::ReshardPlan& plan,
                                                    const std::vector<ReshardBox>& sourceSlices) const
{
    const std::vector<ReshardBox> sources = ordered(sourceSlices);
    const std::vector<ReshardBox> sourceGroups = grouped(sources, rankGroup);
    const std::vector<ReshardBox> targetGroups = grouped(targetSlices(plan), rankGroup);
    std::map<int, std::pair<int, uint64_t>> slotOf; // rank -> (slot, offset of its slice)
    for (int slot = 0; slot < int(sources.size()); ++slot)
        slotOf[sources[std::size_t(slot)].rank] = {slot, sources[std::size_t(slot)].offset};
    const int sourceCount = int(sourceGroups.size());
    const int targetCount = int(targetGroups.size());
    auto last = [](const ReshardBox& b) { return b.lastRank < 0 ? b.rank : b.lastRank; };
    std::vector<ReshardRibbon> result;
    for (int tslot = 0; tslot < int(plan.targets.size()); ++tslot) {
        const auto& t = plan.targets[std::size_t(tslot)];
        const int tgroup = tslot / rankGroup;
        for (const auto& run : t.runs) {
            const auto it = slotOf.find(run.source_rank);
            if (it == slotOf.end())
                continue; // a plan for another manifest: nothing sensible to draw
            const auto [sslot, sourceOffset] = it->second;
            const int sgroup = sslot / rankGroup;
            const uint64_t from = sourceOffset + run.source_offset; // where the run's bytes sit now
            const uint64_t to = t.offset + run.target_offset; // and where they will sit
            const uint64_t staying = run.source_rank == t.rank ? run.numel : 0;
            ReshardRibbon* r = result.empty() ? nullptr : &result.back();
            // Runs between the same two groups are neighbours on both bars: one ribbon.
            if (rankGroup > 1 && r && r->sourceRank == sourceGroups[std::size_t(sgroup)].rank &&
                r->targetRank == targetGroups[std::size_t(tgroup)].rank && r->offset + r->numel == to) {
                r->numel += run.numel;
                r->stayingNumel += staying;
                r->staying = r->stayingNumel == r->numel;
                r->sourceX1 = x(plan.numel_total, sourceCount, sgroup, from + run.numel);
                r->targetX1 = x(plan.numel_total, targetCount, tgroup, to + run.numel);
                continue;
            }
            ReshardRibbon ribbon;
            ribbon.sourceRank = sourceGroups[std::size_t(sgroup)].rank;
            ribbon.sourceLast = last(sourceGroups[std::size_t(sgroup)]);
            ribbon.targetRank = targetGroups[std::size_t(tgroup)].rank;
            ribbon.targetLast = last(targetGroups[std::size_t(tgroup)]);
            ribbon.offset = to;
            ribbon.numel = run.numel;
            ribbon.stayingNumel = staying;
            ribbon.staying = staying == run.numel;
            ribbon.sourceX0 = x(plan.numel_total, sourceCount, sgroup, from);
            ribbon.sourceX1 = x(plan.numel_total, sourceCount, sgroup, from + run.numel);
            ribbon.targetX0 = x(plan.numel_total, targetCount, tgroup, to);
            ribbon.targetX1 = x(plan.numel_total, targetCount, tgroup, to + run.numel);
            result.push_back(ribbon);
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
