#include "widgets/views/ganttview.h"

#include <QTest>
#include <algorithm>
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

    // GPipe over 4 uniform stages: each op lasts 1 ms (F) or 2 ms (B). With 8 microbatches the
    // step (33 ms) fitted to 800 px gives an F about 21 px: every op is its own block and the
    // legend has no grey entry. With 2048 (the step 6153 ms, about 0.12 px a forward) the ops
    // merge into grey runs: the legend says what the grey is, and the rows are drawn in it.
    void opsTooShortToDrawApartAreNamedInTheLegend()
    {
        const auto merged = [](const std::vector<GanttView::LegendEntry>& entries) {
            return std::any_of(entries.begin(), entries.end(),
                               [](const GanttView::LegendEntry& e) { return e.mark == GanttView::Mark::merged; });
        };
        GanttView view;
        view.resize(800, 240);
        view.setTimeline(timeline(4, 8));
        QVERIFY(!merged(view.legend()));
        view.setTimeline(timeline(4, 2048));
        QVERIFY(merged(view.legend()));
        QVERIFY(!merged(view.legend(1e6))); // wide enough for a 1 ms op to be 2 px
        // The legend is about the fitted scale, so zooming in does not change it.
        view.zoomBy(64);
        QVERIFY(merged(view.legend()));

        const QImage image = view.renderFitted(QSize(800, 240));
        const GanttGeometry& g = view.geometry();
        const QColor grey = view.palette().color(QPalette::Mid);
        // Stage 0's forwards fill its row from 0 to 2048 ms: at this scale one grey run.
        GanttGeometry fitted = g;
        fitted.fit(view.extent(), 800);
        const int y = int(fitted.rowTop(0) + fitted.rowHeight / 2);
        QCOMPARE(image.pixelColor(int(fitted.xForTime(1000)), y).rgb(), grey.rgb());
    }
};

QTEST_MAIN(TestGanttView)
#include "tst_ganttview.moc"
