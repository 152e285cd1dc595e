#include "widgets/views/ganttgeometry.h"

#include <QTest>

using namespace shardwidgets;

class TestGanttGeometry : public QObject {
    Q_OBJECT
private slots:
    void legendFlowsAndWraps()
    {
        // 100 + 50 + 100 from x = 8 with gaps of 10: the third passes 250 and starts line 1.
        const auto places = GanttGeometry::flowLegend({100, 50, 100, 300}, 8, 250, 10);
        QCOMPARE(int(places.size()), 4);
        QCOMPARE(places[0].x, 8.0);
        QCOMPARE(places[1].x, 118.0);
        QCOMPARE(places[1].line, 0);
        QCOMPARE(places[2].x, 8.0);
        QCOMPARE(places[2].line, 1);
        // Wider than a line: a line of its own, never an empty line before it.
        QCOMPARE(places[3].line, 2);
        QCOMPARE(places[3].x, 8.0);
        QCOMPARE(GanttGeometry::flowLegend({300}, 8, 250, 10)[0].line, 0);
    }

    void timeAndPixelRoundTrip()
    {
        GanttGeometry g;
        g.fit(100.0, 872 + 72); // plot width 872 minus a 12 px margin: 860 px for 100 ms
        QCOMPARE(g.viewStart, 0.0);
        QVERIFY(qAbs(g.xForTime(0) - g.labelWidth) < 1e-9);
        QVERIFY(qAbs(g.xForTime(100.0) - (g.labelWidth + 860)) < 1e-6);
        for (double t : {0.0, 12.5, 99.0})
            QVERIFY(qAbs(g.timeForX(g.xForTime(t)) - t) < 1e-9);
    }

    void zoomKeepsTheAnchor()
    {
        GanttGeometry g;
        g.fit(1000.0, 1000);
        const double x = 400;
        const double before = g.timeForX(x);
        g.zoomAt(4.0, x);
        QVERIFY(qAbs(g.timeForX(x) - before) < 1e-6);
        QVERIFY(g.msPerPixel < 1000.0 / 900.0);
        const double zoomed = g.msPerPixel;
        g.zoomAt(0.25, x);
        QVERIFY(qAbs(g.msPerPixel - zoomed * 4) < 1e-9);
    }

    // The zoomed view's position indicator: fitted, the whole step shows (no indicator); zoomed 4x
    // about the centre, the middle quarter or so; panned to the end, a span that ends at 1.
    void visibleSpanForTheIndicator()
    {
        GanttGeometry g;
        g.fit(1000.0, 1072);
        double from = 0, to = 0;
        QVERIFY(!g.visibleSpan(from, to));
        g.zoomAt(4.0, g.labelWidth + g.plotWidth() / 2);
        QVERIFY(g.visibleSpan(from, to));
        QVERIFY(from > 0.3 && from < 0.4);
        QVERIFY(to > 0.6 && to < 0.7);
        QVERIFY(qAbs((to - from) - g.plotWidth() * g.msPerPixel / 1000.0) < 1e-9);
        g.panPixels(-1e6); // as far right as the clamp allows
        QVERIFY(g.visibleSpan(from, to));
        QVERIFY(to > 0.99);
    }

    void panIsClamped()
    {
        GanttGeometry g;
        g.fit(100.0, 600);
        g.zoomAt(10.0, 300);
        g.panPixels(1e6); // far to the right: cannot go before time 0
        QCOMPARE(g.viewStart, 0.0);
        g.panPixels(-1e9); // far left: some of the timeline stays visible
        QVERIFY(g.viewStart < 100.0);
        QVERIFY(g.viewStart > 50.0);
    }

    void rowsAndRuler()
    {
        GanttGeometry g;
        QCOMPARE(g.rowAt(g.rulerHeight / 2, 4), -1);
        QCOMPARE(g.rowAt(g.rowTop(0) + 1, 4), 0);
        QCOMPARE(g.rowAt(g.rowTop(3) + g.rowHeight - 1, 4), 3);
        QCOMPARE(g.rowAt(g.rowTop(1) - g.rowGap / 2, 4), -1); // the gap between rows
        QCOMPARE(g.rowAt(g.rowTop(4) + 1, 4), -1);
        g.msPerPixel = 0.37;
        const double step = g.tickStep(80);
        QVERIFY(step / g.msPerPixel >= 80);
        QCOMPARE(step, 50.0); // 80 px = 29.6 ms -> the next nice step is 50
    }

    void blockHitTestingUsesBinarySearch()
    {
        std::vector<GanttBlock> row;
        for (int i = 0; i < 100000; ++i)
            row.push_back({i * 3.0, i * 3.0 + 2.0, i}); // a 1 ms gap after each block
        QCOMPARE(GanttGeometry::blockAt(row, 0.5), 0);
        QCOMPARE(GanttGeometry::blockAt(row, 2.5), -1); // idle
        QCOMPARE(GanttGeometry::blockAt(row, 3.0 * 77777 + 1.9), 77777);
        QCOMPARE(GanttGeometry::blockAt(row, 1e9), -1);
        QCOMPARE(GanttGeometry::firstVisible(row, 3.0 * 500 + 2.5), std::size_t(501));
    }
};

QTEST_GUILESS_MAIN(TestGanttGeometry)
#include "tst_ganttgeometry.moc"
