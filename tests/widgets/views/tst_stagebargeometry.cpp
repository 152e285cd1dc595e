#include "widgets/views/stagebargeometry.h"

#include <QTest>

using namespace shardwidgets;

class TestStageBarGeometry : public QObject {
    Q_OBJECT
private slots:
    void segmentsProportionalToCost()
    {
        const auto g = StageBarGeometry::layout({1, 1, 2, 4}, 10, 800);
        QCOMPARE(g.layerCount(), 4);
        QCOMPARE(g.edgeX(0), 10.0);
        QCOMPARE(g.edgeX(1), 110.0);
        QCOMPARE(g.edgeX(2), 210.0);
        QCOMPARE(g.edgeX(3), 410.0);
        QCOMPARE(g.edgeX(4), 810.0);
        QCOMPARE(g.layerAt(9.0), -1);
        QCOMPARE(g.layerAt(150.0), 1);
        QCOMPARE(g.layerAt(809.0), 3);
        // All-zero costs are laid out evenly rather than collapsing.
        const auto even = StageBarGeometry::layout({0, 0}, 0, 100);
        QCOMPARE(even.edgeX(1), 50.0);
    }

    void snapsToTheNearestInteriorEdge()
    {
        const auto g = StageBarGeometry::layout({1, 1, 1, 1}, 0, 400); // edges 0 100 200 300 400
        QCOMPARE(g.snapEdge(140), 1);
        QCOMPARE(g.snapEdge(160), 2);
        QCOMPARE(g.snapEdge(-50), 1); // never the outer edges: a piece must keep a layer
        QCOMPARE(g.snapEdge(1000), 3);
    }

    void grabsOnlyNearABoundary()
    {
        auto g = StageBarGeometry::layout({1, 1, 1, 1}, 0, 400);
        g.grabTolerance = 5;
        const std::vector<int> boundaries{1, 3};
        QCOMPARE(g.boundaryAt(boundaries, 103), 0);
        QCOMPARE(g.boundaryAt(boundaries, 296), 1);
        QCOMPARE(g.boundaryAt(boundaries, 200), -1); // a layer edge, but no boundary there
        QCOMPARE(g.boundaryAt(boundaries, 110), -1);
    }

    void movingKeepsEveryPieceNonEmpty()
    {
        const auto g = StageBarGeometry::layout(std::vector<double>(10, 1.0), 0, 1000);
        std::vector<int> boundaries{3, 6};
        QCOMPARE(g.moveBoundary(boundaries, 0, 5), 5);
        QCOMPARE(boundaries, (std::vector<int>{5, 6}));
        QCOMPARE(g.moveBoundary(boundaries, 0, 9), 5); // cannot pass the next boundary
        QCOMPARE(g.moveBoundary(boundaries, 1, 12), 9);
        QCOMPARE(g.moveBoundary(boundaries, 0, 0), 1);
        QCOMPARE(boundaries, (std::vector<int>{1, 9}));
        QCOMPARE(g.moveBoundary(boundaries, 7, 2), -1);
    }

    void oneCaptionFormForEveryPiece()
    {
        // Three pieces, the middle one narrow; forms: "Stage 1 · 4–5" (90 px), "S1 · 4–5" (50),
        // "1" (8).
        const std::vector<std::vector<double>> forms{{90, 90, 90}, {50, 50, 50}, {8, 8, 8}};
        QCOMPARE(StageBarGeometry::captionForm({120, 120, 120}, forms), 0); // the long form fits all
        // The narrow piece does not take the long form alone: every piece shows the short one.
        QCOMPARE(StageBarGeometry::captionForm({120, 60, 120}, forms), 1);
        QCOMPARE(StageBarGeometry::captionForm({120, 20, 120}, forms), 2);
        // Not even a bare number fits the middle one: the shortest form, shown where it fits.
        QCOMPARE(StageBarGeometry::captionForm({120, 5, 120}, forms), 2);
        QVERIFY(StageBarGeometry::captionFits(8, 120));
        QVERIFY(!StageBarGeometry::captionFits(8, 5));
    }
};

QTEST_GUILESS_MAIN(TestStageBarGeometry)
#include "tst_stagebargeometry.moc"
