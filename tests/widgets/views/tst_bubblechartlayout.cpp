// BubbleChart's decisions as plain arithmetic: where the M axis ends, which curves coincide and
// how a stack of equal curves is dashed so that each stays visible.
#include "widgets/jobs/bubblesweep.h"
#include "widgets/views/bubblechartlayout.h"

#include <QTest>

using namespace shardwidgets;

class TestBubbleChartLayout : public QObject {
    Q_OBJECT

    static std::vector<ChartPoint> curve(int last, double scale)
    {
        std::vector<ChartPoint> points;
        for (int m = 1; m <= last; ++m)
            points.push_back({.x = double(m), .y = scale * 3.0 / (m + 3.0)});
        return points;
    }

private slots:
    void theAxisEndsAtTheFurthestOfLinesAndCurrentM()
    {
        QCOMPARE(BubbleChartLayout::xEnd({curve(16, 1), curve(12, 1)}, 8), 16.0);
        QCOMPARE(BubbleChartLayout::xEnd({curve(16, 1)}, 32), 32.0); // a stale sweep: the marker still shows
        QCOMPARE(BubbleChartLayout::xEnd({}, 1), 2.0);
    }

    void equalCurvesAreFoundAndStacked()
    {
        const std::vector<std::vector<ChartPoint>> lines{curve(16, 1), curve(16, 1), {}, curve(16, 0.5), curve(16, 1)};
        const std::vector<int> same = BubbleChartLayout::sameAs(lines);
        QCOMPARE(same, (std::vector<int>{-1, 0, -1, -1, 0}));
        QCOMPARE(BubbleChartLayout::stackRank(same, 0), 0);
        QCOMPARE(BubbleChartLayout::stackRank(same, 1), 1);
        QCOMPARE(BubbleChartLayout::stackRank(same, 4), 2);
        QCOMPARE(BubbleChartLayout::stackRank(same, 3), 0);
        QVERIFY(BubbleChartLayout::dashPattern(0).empty());
        QCOMPARE(BubbleChartLayout::dashPattern(1), (std::vector<double>{3.0, 3.0}));
        QCOMPARE(BubbleChartLayout::dashPattern(2), (std::vector<double>{3.0, 6.0}));
        // Different lengths or a small difference are different curves.
        QCOMPARE(BubbleChartLayout::sameAs({curve(16, 1), curve(12, 1)}), (std::vector<int>{-1, -1}));
        QCOMPARE(BubbleChartLayout::sameAs({curve(16, 1), curve(16, 1.001)}), (std::vector<int>{-1, -1}));
        // Within two pixels of a 200-pixel plot of [0, 0.8] (0.008): on top of each other.
        const double tolerance = BubbleChartLayout::pixelTolerance(2, 200, 0, 0.8);
        QCOMPARE(tolerance, 0.008);
        QCOMPARE(BubbleChartLayout::sameAs({curve(16, 1), curve(16, 1.001)}, tolerance), (std::vector<int>{-1, 0}));
        QCOMPARE(BubbleChartLayout::sameAs({curve(16, 1), curve(16, 1.1)}, tolerance), (std::vector<int>{-1, -1}));
    }

    void theSweepRunsToTheCurrentM()
    {
        // Dense up to 4N, then multiples of N up to the current M, which is always the last.
        const std::vector<int> four = sweepMicrobatches(4, 32);
        QCOMPARE(four.front(), 1);
        QCOMPARE(four.back(), 32);
        QCOMPARE(four[15], 16);
        for (std::size_t i = 16; i < four.size(); ++i)
            QCOMPARE(four[i] % 4, 0);
        QVERIFY(std::is_sorted(four.begin(), four.end()));
        QCOMPARE(sweepMicrobatches(4, 8).size(), std::size_t(16));
        // The planner's largest M stays a bounded sweep.
        const std::vector<int> big = sweepMicrobatches(8, 512);
        QCOMPARE(big.back(), 512);
        QVERIFY(big.size() <= 32 + 34);
        QVERIFY(std::adjacent_find(big.begin(), big.end()) == big.end());
    }
};

QTEST_MAIN(TestBubbleChartLayout)
#include "tst_bubblechartlayout.moc"
