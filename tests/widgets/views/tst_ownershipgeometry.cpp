#include "widgets/views/ownershipgeometry.h"

#include <QTest>

using namespace shardwidgets;

class TestOwnershipGeometry : public QObject {
    Q_OBJECT
private slots:
    void offsetsAndPixels()
    {
        OwnershipGeometry g{1000, 100, 500};
        QCOMPARE(g.xForOffset(0), 100.0);
        QCOMPARE(g.xForOffset(500), 350.0);
        QCOMPARE(g.xForOffset(1000), 600.0);
        QCOMPARE(g.offsetAt(350), uint64_t(500));
        QCOMPARE(g.offsetAt(0), uint64_t(0));
        QCOMPARE(g.offsetAt(10000), uint64_t(999));
    }

    void rangeUnderAPixel()
    {
        OwnershipGeometry g{1000, 0, 1000};
        const std::vector<OwnershipRange> ranks{{0, 250, 0}, {250, 250, 1}, {500, 250, 2}, {750, 250, 3}};
        QCOMPARE(g.rangeAt(ranks, 10), 0);
        QCOMPARE(g.rangeAt(ranks, 249.5), 0);
        QCOMPARE(g.rangeAt(ranks, 250.5), 1);
        QCOMPARE(g.rangeAt(ranks, 999), 3);
        QCOMPARE(g.rangeAt(ranks, -1), -1);
        QCOMPARE(g.rangeAt(ranks, 1001), -1);
        // Tensors need not tile: a gap has no owner.
        const std::vector<OwnershipRange> tensors{{0, 100, 0}, {300, 100, 1}};
        QCOMPARE(g.rangeAt(tensors, 200), -1);
        QCOMPARE(g.rangeAt(tensors, 350), 1);
    }
};

QTEST_GUILESS_MAIN(TestOwnershipGeometry)
#include "tst_ownershipgeometry.moc"
