// Drives the planner as a person would: press on a stage boundary, drag it, release, and check
// the partition and the bubble readout that the user sees.

#include "widgets/views/bubblereadout.h"
#include "widgets/views/ganttview.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/views/stagebar.h"

#include <QRegularExpression>
#include <QSet>
#include <QSignalSpy>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestStageBar : public QObject {
    Q_OBJECT
private slots:
    void draggingABoundaryRepartitionsAndUpdatesTheBubble()
    {
        PlannerPanel panel;
        panel.resize(1200, 800);
        PipelinePlanner* planner = panel.planner();
        planner->setProfile(pl::uniform_profile(12));
        planner->setSpec({pl::ScheduleKind::one_f_one_b, 4, 8, 1, 0.0});
        planner->rebalance(pl::PartitionMethod::uniform);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QCOMPARE(planner->boundaries(), (std::vector<int>{3, 6, 9}));

        // Uniform stages: the textbook 1F1B bubble, 3/11 = 27.3 %.
        QCOMPARE(panel.readout()->bubbleText(), QStringLiteral("27.3\u00a0%"));
        const double balancedMakespan = planner->plan()->timeline.makespan;

        StageBar* bar = panel.stageBar();
        const StageBarGeometry geometry = bar->barGeometry();
        const int y = int(bar->barTop() + bar->barHeight() / 2);
        const QPoint press(qRound(geometry.edgeX(6)), y);
        const QPoint target(qRound(geometry.edgeX(8)) - 3, y); // a little short of the edge: snaps
        QSignalSpy dragged(bar, &StageBar::boundaryDragged);
        QTest::mousePress(bar, Qt::LeftButton, Qt::NoModifier, press);
        QTest::mouseMove(bar, (press + target) / 2);
        QTest::mouseMove(bar, target);
        QTest::mouseRelease(bar, Qt::LeftButton, Qt::NoModifier, target);

        QVERIFY(dragged.count() >= 1);
        QCOMPARE(planner->boundaries(), (std::vector<int>{3, 8, 9}));
        QCOMPARE(planner->partitionName(), QStringLiteral("manual:3,8,9"));
        // Stage 1 now runs 5 layers: it is the bottleneck and the bubble grows.
        const auto& timeline = planner->plan()->timeline;
        QVERIFY(timeline.makespan > balancedMakespan);
        const QString expected = QStringLiteral("%1\u00a0%").arg(timeline.bubble_fraction * 100.0, 0, 'f', 1);
        QCOMPARE(panel.readout()->bubbleText(), expected);
        QVERIFY(panel.readout()->bubbleText() != QStringLiteral("27.3\u00a0%"));
        // The Gantt follows the same plan.
        QCOMPARE(panel.gantt()->timeline().makespan, timeline.makespan);
    }

    void pressingAwayFromABoundaryDoesNothing()
    {
        PlannerPanel panel;
        panel.resize(1000, 700);
        PipelinePlanner* planner = panel.planner();
        planner->setProfile(pl::uniform_profile(12));
        planner->setSpec({pl::ScheduleKind::gpipe, 3, 4, 1, 0.0});
        planner->rebalance(pl::PartitionMethod::uniform);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        const auto before = planner->boundaries();
        StageBar* bar = panel.stageBar();
        const StageBarGeometry geometry = bar->barGeometry();
        const int y = int(bar->barTop() + 5);
        const QPoint press(qRound((geometry.edgeX(1) + geometry.edgeX(2)) / 2), y); // mid-layer
        QTest::mousePress(bar, Qt::LeftButton, Qt::NoModifier, press);
        QTest::mouseMove(bar, press + QPoint(200, 0));
        QTest::mouseRelease(bar, Qt::LeftButton, Qt::NoModifier, press + QPoint(200, 0));
        QCOMPARE(planner->boundaries(), before);
    }

    void arrowKeysMoveTheSelectedBoundary()
    {
        PipelinePlanner planner;
        planner.setProfile(pl::uniform_profile(12));
        planner.setSpec({pl::ScheduleKind::gpipe, 3, 4, 1, 0.0});
        planner.rebalance(pl::PartitionMethod::uniform);
        StageBar bar(&planner);
        bar.resize(800, 70);
        bar.show();
        QVERIFY(QTest::qWaitForWindowExposed(&bar));
        bar.setSelectedBoundary(1);
        QTest::keyClick(&bar, Qt::Key_Left);
        QCOMPARE(planner.boundaries(), (std::vector<int>{4, 7}));
        QTest::keyClick(&bar, Qt::Key_Up); // select the previous boundary
        QTest::keyClick(&bar, Qt::Key_Right);
        QCOMPARE(planner.boundaries(), (std::vector<int>{5, 7}));
    }

    void captionsShareOneForm()
    {
        // 16 stages over the bundled 32-layer profile: uneven pieces, some far narrower than
        // others. Every caption is in the same form ("S3 · 6–7" everywhere, or bare numbers
        // everywhere), never "Stage 0 · 0–2" beside "5".
        PipelinePlanner planner;
        QVERIFY(planner.loadProfile(QStringLiteral(":/profiles/decoder-7b-32.json")));
        planner.setSpec({pl::ScheduleKind::one_f_one_b, 16, 32, 1, 0.0});
        planner.rebalance(pl::PartitionMethod::compute);
        QCOMPARE(int(planner.boundaries().size()), 15);
        for (const int width : {1500, 900, 600}) {
            StageBar bar(&planner);
            bar.resize(width, 70);
            const QStringList captions = bar.captions();
            QCOMPARE(captions.size(), 16);
            QSet<QString> shapes; // a caption with its digits taken out: which form it is
            for (const QString& caption : captions)
                if (!caption.isEmpty())
                    shapes.insert(QString(caption).remove(QRegularExpression(QStringLiteral("[0-9]+"))));
            QVERIFY2(shapes.size() <= 1,
                     qPrintable(QStringLiteral("%1 px: %2").arg(width).arg(captions.join(QLatin1Char('|')))));
        }
        StageBar wide(&planner);
        wide.resize(3000, 70);
        QCOMPARE(wide.captions().first(), QStringLiteral("Stage 0 · 0–%1").arg(planner.boundaries().front() - 1));
    }
};

QTEST_MAIN(TestStageBar)
#include "tst_stagebar.moc"
