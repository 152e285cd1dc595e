#include "widgets/views/ganttview.h"

#include <QTest>
#include <QWheelEvent>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestGanttView : public QObject {
    Q_OBJECT

    static pl::Timeline timeline(int stages, int microbatches)
    {
        pl::ScheduleSpec spec{pl::ScheduleKind::gpipe, stages, microbatches, 1, 0.0};
        const auto profile = pl::uniform_profile(stages);
        std::vector<int> boundaries;
        for (int s = 1; s < stages; ++s)
            boundaries.push_back(s);
        return pl::make_plan(profile, spec, boundaries).timeline;
    }

private slots:
    void tooltipFindsTheOpUnderTheMouse()
    {
        GanttView view;
        view.resize(900, 300);
        view.setTimeline(timeline(4, 4)); // GPipe: F of microbatch m on stage 0 runs [m, m+1)
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const GanttGeometry& g = view.geometry();
        const QPointF p(g.xForTime(2.5), g.rowTop(0) + g.rowHeight / 2);
        const int op = view.opAt(p);
        QVERIFY(op >= 0);
        const auto& o = view.timeline().ops[std::size_t(op)];
        QCOMPARE(o.stage, 0);
        QCOMPARE(o.microbatch, 2);
        QCOMPARE(o.kind, pl::OpKind::F);
        QVERIFY(view.describeOp(op).contains(QStringLiteral("microbatch 2")));
        // Stage 3 is idle at t = 0.5 (its first forward starts at 3): the hatched bubble.
        QCOMPARE(view.opAt(QPointF(g.xForTime(0.5), g.rowTop(3) + 2)), -1);
    }

    void ctrlWheelZoomsAboutTheCursorAndFitRestores()
    {
        GanttView view;
        view.resize(900, 300);
        view.setTimeline(timeline(4, 8));
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const double fitted = view.geometry().msPerPixel;
        const QPointF at(500, 100);
        const double anchor = view.geometry().timeForX(at.x());
        QWheelEvent wheel(at, view.mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::ControlModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(&view, &wheel);
        QVERIFY(view.geometry().msPerPixel < fitted / 1.5);
        QVERIFY(qAbs(view.geometry().timeForX(at.x()) - anchor) < 1e-6);
        view.fitToWindow();
        QCOMPARE(view.geometry().msPerPixel, fitted);
    }

    void rendersOffscreenForExport()
    {
        GanttView view;
        view.setTimeline(timeline(4, 8));
        const QImage image = view.renderFitted(QSize(800, 240));
        QCOMPARE(image.size(), QSize(800, 240));
        // Something was drawn in the rows: not a single flat colour.
        const QColor corner = image.pixelColor(1, 1);
        bool varied = false;
        for (int x = 100; x < 780 && !varied; x += 7)
            varied = image.pixelColor(x, 60) != corner;
        QVERIFY(varied);
    }
};

QTEST_MAIN(TestGanttView)
#include "tst_ganttview.moc"
