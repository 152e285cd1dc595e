// ChartGeometry, the planner charts' layout without a window: value <-> pixel both ways, the
// memory limit's vertical line, nice ticks, and hit-testing the nearest point within a radius.
#include "widgets/views/chartgeometry.h"

#include <QTest>

using namespace shardwidgets;

class TestChartGeometry : public QObject {
    Q_OBJECT

    static ChartGeometry plot() // a 400 x 200 px plot area: 0..100 across, 0..50 up
    {
        ChartGeometry g{.width = 480, .height = 260, .left = 64, .right = 16, .top = 20, .bottom = 40};
        g.xMin = 0;
        g.xMax = 100;
        g.yMin = 0;
        g.yMax = 50;
        return g;
    }

private slots:
    void valueAndPixelRoundTrip()
    {
        const ChartGeometry g = plot();
        QCOMPARE(g.xForValue(0), 64.0);
        QCOMPARE(g.xForValue(100), 464.0);
        QCOMPARE(g.yForValue(0), 220.0); // larger values higher up
        QCOMPARE(g.yForValue(50), 20.0);
        for (double v : {0.0, 12.5, 37.0, 100.0}) {
            QVERIFY(qAbs(g.valueForX(g.xForValue(v)) - v) < 1e-9);
            QVERIFY(qAbs(g.valueForY(g.yForValue(v / 2)) - v / 2) < 1e-9);
        }
    }

    // The limit line sits where its value maps, and fitting keeps it in view even when every
    // candidate needs less memory.
    void limitLineIsInView()
    {
        ChartGeometry g = plot();
        QCOMPARE(g.xForValue(80), 64.0 + 0.8 * 400);
        g.fitX({10, 20, 30, 80 /* the limit */}, 0.05, true);
        QCOMPARE(g.xMin, 0.0);
        QVERIFY(g.xMax > 80);
        QVERIFY(g.xForValue(80) < g.plotRight());
        QVERIFY(g.xForValue(80) > g.xForValue(30));
    }

    void fitSurvivesOneValueAndNone()
    {
        ChartGeometry g = plot();
        g.fitY({5.0});
        QVERIFY(g.yMax > g.yMin);
        QVERIFY(g.yForValue(5.0) > g.plotTop() && g.yForValue(5.0) < g.plotBottom());
        g.fitY({});
        QCOMPARE(g.yMin, 0.0);
        QCOMPARE(g.yMax, 1.0);
    }

    void hitTestFindsTheNearestWithinTheRadius()
    {
        const ChartGeometry g = plot();
        const std::vector<ChartPoint> points{{.x = 10, .y = 10}, {.x = 12, .y = 10}, {.x = 50, .y = 25}};
        // (10, 10) is at (104, 180); (12, 10) at (112, 180).
        QCOMPARE(g.hitTest(points, 105, 181), 0);
        QCOMPARE(g.hitTest(points, 111, 179), 1);
        QCOMPARE(g.hitTest(points, g.xForValue(50) + 3, g.yForValue(25) - 3), 2);
        QCOMPARE(g.hitTest(points, 300, 60), -1); // nothing near
        QCOMPARE(g.hitTest(points, 104, 180 + 9, 8), -1); // just outside the radius
        // Two points on the same pixel: the first (the better-ranked candidate) wins.
        const std::vector<ChartPoint> stacked{{.x = 50, .y = 25}, {.x = 50, .y = 25}};
        QCOMPARE(g.hitTest(stacked, g.xForValue(50), g.yForValue(25)), 0);
    }

    void ticksAreNiceAndInside()
    {
        const auto ticks = ChartGeometry::ticks(0, 87, 5);
        QCOMPARE(ticks, (std::vector<double>{0, 20, 40, 60, 80}));
        const auto small = ChartGeometry::ticks(0.05, 0.31, 4);
        QCOMPARE(int(small.size()), 3); // 0.1, 0.2, 0.3
        QVERIFY(qAbs(small.front() - 0.1) < 1e-12);
        QVERIFY(ChartGeometry::ticks(3, 3).empty());
    }

    // The bubble chart: M on x from 1, the current M's line exactly where M maps.
    void microbatchAxis()
    {
        ChartGeometry g{.width = 600, .height = 300, .left = 62, .right = 150, .top = 12, .bottom = 40};
        g.xMin = 1;
        g.xMax = 64;
        QCOMPARE(g.xForValue(1), 62.0);
        QCOMPARE(g.xForValue(64), 450.0);
        QVERIFY(qAbs(g.valueForX(g.xForValue(8)) - 8) < 1e-9);
    }
};

QTEST_MAIN(TestChartGeometry)
#include "tst_chartgeometry.moc"
