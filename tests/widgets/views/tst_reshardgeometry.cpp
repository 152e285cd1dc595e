// ReshardGeometry without a window: boxes proportional to slices with gaps, ribbons that start
// where a run's bytes sit now and end where they will sit, and hit testing along the same curve
// the view paints, and the grouping of many ranks into boxes and ribbons a few pixels wide.

#include "widgets/views/reshardgeometry.h"

#include "core/checkpoint/manifest.h"

#include <QTest>

using namespace shardwidgets;
using shardscope::ReshardPlan;

namespace {

// A 4-rank manifest over `numel` elements, split evenly as save does.
shardscope::Manifest manifest(int worldSize, uint64_t numel)
{
    shardscope::Manifest m;
    m.world_size = worldSize;
    m.param_numel_total = numel;
    for (int r = 0; r < worldSize; ++r) {
        const uint64_t begin = shardscope::even_shard_offset(numel, worldSize, r);
        const uint64_t end = shardscope::even_shard_offset(numel, worldSize, r + 1);
        m.shards.push_back({r, shardscope::shard_file_name(r), std::string(64, 'a'), "", 100, begin, end - begin});
    }
    return m;
}

std::vector<ReshardBox> slices(const shardscope::Manifest& m)
{
    std::vector<ReshardBox> out;
    for (const auto& s : m.shards)
        out.push_back({s.rank, s.param_shard_offset, s.param_shard_numel, {}});
    return out;
}

ReshardGeometry geometry()
{
    ReshardGeometry g;
    g.left = 100;
    g.width = 1000;
    g.sourceTop = 0;
    g.barHeight = 20;
    g.targetTop = 120;
    g.maxGap = 10;
    return g;
}

} // namespace

class TestReshardGeometry : public QObject {
    Q_OBJECT
private slots:
    void gapsShrinkWithManyRanks()
    {
        const ReshardGeometry g = geometry();
        QCOMPARE(g.gapFor(1), 0.0);
        QCOMPARE(g.gapFor(4), 10.0);
        // 1,001 boxes: at most a fifth of the width may be gaps.
        QVERIFY(g.gapFor(1001) * 1000 <= 0.2 * g.width + 1e-9);
    }

    void boxesTileTheBarWithGaps()
    {
        const auto m = manifest(4, 1000);
        const ReshardPlan plan = shardscope::plan_reshard(m, 8);
        const ReshardGeometry g = geometry();
        const auto sources = g.sourceBoxes(plan, slices(m));
        QCOMPARE(sources.size(), std::size_t(4));
        QCOMPARE(sources.front().rect.left(), 100.0);
        QCOMPARE(sources.back().rect.right(), 1100.0);
        for (std::size_t i = 1; i < sources.size(); ++i) {
            QCOMPARE(sources[i].rect.left() - sources[i - 1].rect.right(), 10.0); // one gap between neighbours
            QCOMPARE(sources[i].rect.width(), sources[0].rect.width()); // equal slices, equal boxes
        }
        const auto targets = g.targetBoxes(plan);
        QCOMPARE(targets.size(), std::size_t(8));
        QCOMPARE(targets.front().rect.top(), 120.0);
        QCOMPARE(targets.back().rect.right(), 1100.0);
        QCOMPARE(targets[3].rank, 3);
    }

    void ribbonsFollowTheRuns()
    {
        // 4 -> 3 over 1,200 elements: each source owns 300, each target 400, so every target but
        // none of the sources is split in two runs.
        const auto m = manifest(4, 1200);
        const ReshardPlan plan = shardscope::plan_reshard(m, 3);
        const ReshardGeometry g = geometry();
        const auto ribbons = g.ribbons(plan, slices(m));
        std::size_t runs = 0;
        for (const auto& t : plan.targets)
            runs += t.runs.size();
        QCOMPARE(ribbons.size(), runs);
        const auto sources = g.sourceBoxes(plan, slices(m));
        const auto targets = g.targetBoxes(plan);
        uint64_t covered = 0;
        for (const auto& r : ribbons) {
            covered += r.numel;
            // Each ribbon starts inside its source box and ends inside its target box.
            const QRectF& s = sources[std::size_t(r.sourceRank)].rect;
            const QRectF& t = targets[std::size_t(r.targetRank)].rect;
            QVERIFY(r.sourceX0 >= s.left() - 1e-9 && r.sourceX1 <= s.right() + 1e-9);
            QVERIFY(r.targetX0 >= t.left() - 1e-9 && r.targetX1 <= t.right() + 1e-9);
            QCOMPARE(r.staying, r.sourceRank == r.targetRank);
        }
        QCOMPARE(covered, uint64_t(1200));
        // Target 0 = rank 0 whole + rank 1's first 100; target 1 = [400, 800): rank 1's
        // [100, 300) (same index: stays) and rank 2's [0, 200) (moves).
        QCOMPARE(ribbons[1].sourceRank, 1);
        QCOMPARE(ribbons[1].targetRank, 0);
        QVERIFY(!ribbons[1].staying);
        QCOMPARE(ribbons[2].sourceRank, 1);
        QCOMPARE(ribbons[2].targetRank, 1);
        QCOMPARE(ribbons[2].offset, uint64_t(400));
        QCOMPARE(ribbons[2].numel, uint64_t(200));
        QVERIFY(ribbons[2].staying);
        QCOMPARE(ribbons[3].sourceRank, 2);
        QCOMPARE(ribbons[3].targetRank, 1);
        QVERIFY(!ribbons[3].staying);
    }

    void edgesEaseBetweenTheBars()
    {
        const ReshardGeometry g = geometry();
        QCOMPARE(g.ribbonTop(), 20.0);
        QCOMPARE(g.ribbonBottom(), 120.0);
        QCOMPARE(g.edgeAt(100, 300, 20), 100.0);
        QCOMPARE(g.edgeAt(100, 300, 120), 300.0);
        QCOMPARE(g.edgeAt(100, 300, 70), 200.0); // smoothstep is symmetric about the middle
        QVERIFY(g.edgeAt(100, 300, 30) < 100 + 200 * 0.1); // leaves the bar gently
    }

    void hitTesting()
    {
        const auto m = manifest(4, 1000);
        const ReshardPlan plan = shardscope::plan_reshard(m, 2);
        const ReshardGeometry g = geometry();
        const auto ribbons = g.ribbons(plan, slices(m));
        QCOMPARE(ribbons.size(), std::size_t(4)); // every source goes whole to one target
        // Just under the source bar, a point over rank 2's box is on rank 2's ribbon.
        const auto sources = g.sourceBoxes(plan, slices(m));
        const QPointF underRank2(sources[2].rect.center().x(), g.ribbonTop() + 0.5);
        QCOMPARE(ribbons[std::size_t(g.ribbonAt(ribbons, underRank2))].sourceRank, 2);
        // Just above the target bar, the middle of target 0 is fed by rank 0 or 1.
        const auto targets = g.targetBoxes(plan);
        const int i = g.ribbonAt(ribbons, QPointF(targets[0].rect.left() + 5, g.ribbonBottom() - 0.5));
        QVERIFY(i >= 0);
        QCOMPARE(ribbons[std::size_t(i)].targetRank, 0);
        QCOMPARE(g.ribbonAt(ribbons, QPointF(500, 5)), -1); // inside a bar, not between them
        QCOMPARE(ReshardGeometry::boxAt(sources, QPointF(sources[3].rect.center())), 3);
        QCOMPARE(ReshardGeometry::boxAt(targets, QPointF(targets[1].rect.center())), 1);
        QCOMPARE(ReshardGeometry::boxAt(targets, QPointF(50, 130)), -1); // left of the bars
    }

    void manyRanksShareBoxesAndRibbons()
    {
        // A few ranks: one box and one ribbon per rank, as above.
        QCOMPARE(ReshardGeometry::groupFor(4, 8, 1000), 1);
        // 1,024 -> 2,048 over 1,400 pixels: a ribbon per run would be under half a pixel wide.
        const auto m = manifest(1024, 2'000'000);
        const ReshardPlan plan = shardscope::plan_reshard(m, 2048);
        ReshardGeometry g = geometry();
        g.width = 1400;
        g.rankGroup = ReshardGeometry::groupFor(1024, 2048, g.width);
        QCOMPARE(g.rankGroup, 16); // the smallest power of two that gives ribbons a few pixels
        const auto sources = g.sourceBoxes(plan, slices(m));
        const auto targets = g.targetBoxes(plan);
        QCOMPARE(sources.size(), std::size_t(64));
        QCOMPARE(targets.size(), std::size_t(128));
        QCOMPARE(sources[1].rank, 16);
        QCOMPARE(sources[1].lastRank, 31);
        QCOMPARE(targets.back().lastRank, 2047);
        uint64_t inBoxes = 0;
        for (const auto& b : sources)
            inBoxes += b.numel;
        QCOMPARE(inBoxes, uint64_t(2'000'000));
        const auto ribbons = g.ribbons(plan, slices(m));
        QVERIFY2(ribbons.size() < 200, qPrintable(QString::number(ribbons.size())));
        uint64_t covered = 0, staying = 0;
        double widest = 0;
        for (const auto& r : ribbons) {
            covered += r.numel;
            staying += r.stayingNumel;
            widest = std::max(widest, r.targetX1 - r.targetX0);
            // A group's ribbon starts in its group's box and ends in the other's.
            const auto& s = sources[std::size_t(r.sourceRank / 16)];
            const auto& t = targets[std::size_t(r.targetRank / 16)];
            QCOMPARE(r.sourceLast, s.lastRank);
            QVERIFY(r.sourceX0 >= s.rect.left() - 1e-9 && r.sourceX1 <= s.rect.right() + 1e-9);
            QVERIFY(r.targetX0 >= t.rect.left() - 1e-9 && r.targetX1 <= t.rect.right() + 1e-9);
        }
        QCOMPARE(covered, uint64_t(2'000'000));
        QCOMPARE(staying * plan.bytes_per_element, plan.bytes_staying); // what stays is counted, not lost
        QVERIFY(widest >= 4);
    }

    void emptyTargetShardsHaveNoRibbon()
    {
        const auto m = manifest(2, 3); // fewer elements than target ranks
        const ReshardPlan plan = shardscope::plan_reshard(m, 5);
        const ReshardGeometry g = geometry();
        const auto ribbons = g.ribbons(plan, slices(m));
        uint64_t covered = 0;
        for (const auto& r : ribbons) {
            QVERIFY(r.numel > 0);
            covered += r.numel;
        }
        QCOMPARE(covered, uint64_t(3));
        const auto targets = g.targetBoxes(plan);
        QCOMPARE(targets.size(), std::size_t(5));
        int empty = 0;
        for (const auto& t : targets)
            empty += t.numel == 0 ? 1 : 0;
        QCOMPARE(empty, 2);
    }
};

QTEST_GUILESS_MAIN(TestReshardGeometry)
#include "tst_reshardgeometry.moc"
