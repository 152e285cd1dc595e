#include "widgets/jobs/pipelineplanner.h"

#include "core/pipeline/schedule_csv.h"

#include <QSignalSpy>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestPipelinePlanner : public QObject {
    Q_OBJECT
private slots:
    void defaultsGiveAPlan()
    {
        PipelinePlanner planner;
        QVERIFY(planner.plan().has_value());
        QCOMPARE(int(planner.boundaries().size()), planner.spec().stages - 1);
    }

    void uniformOneFOneBMatchesTheClosedForm()
    {
        PipelinePlanner planner;
        planner.setProfile(pl::uniform_profile(8));
        planner.setSpec({pl::ScheduleKind::one_f_one_b, 4, 8, 1, 0.0});
        planner.rebalance(pl::PartitionMethod::uniform);
        QVERIFY(planner.plan());
        QCOMPARE(planner.boundaries(), (std::vector<int>{2, 4, 6}));
        QVERIFY(qAbs(planner.plan()->timeline.bubble_fraction - 3.0 / 11.0) < 1e-9);
        QVERIFY(qAbs(planner.plan()->timeline.closed_form_bubble - 3.0 / 11.0) < 1e-9);
    }

    void vKindsRunTwoChunksAndCsvSchedulesShowAsRead()
    {
        PipelinePlanner planner;
        planner.setProfile(pl::uniform_profile(16));
        planner.setSpec({pl::ScheduleKind::one_f_one_b, 4, 8, 1, 0.0});
        planner.setScheduleKind(pl::ScheduleKind::zb_v);
        QCOMPARE(planner.spec().virtual_stages, 2); // the V kinds always run two chunks
        QVERIFY(planner.plan());
        QCOMPARE(planner.plan()->pieces[7].stage, 0); // the V: stage 0 holds pieces 0 and 7
        const double zbv = planner.plan()->timeline.makespan;

        // The same op lists read back from their CSV are the same step.
        const pl::Schedule read = pl::parse_schedule_csv(
            pl::schedule_csv(pl::build_schedule({pl::ScheduleKind::zb_v, 4, 8, 2, 0.0})), "zbv.csv");
        QVERIFY(planner.setCustomSchedule(read));
        QCOMPARE(planner.spec().kind, pl::ScheduleKind::custom);
        QVERIFY(planner.plan());
        QCOMPARE(planner.plan()->timeline.makespan, zbv);
        planner.setStages(2); // a file fixes its stages
        QCOMPARE(planner.spec().stages, 4);
        planner.setScheduleKind(pl::ScheduleKind::one_f_one_b);
        QCOMPARE(planner.spec().virtual_stages, 1);
        planner.setScheduleKind(pl::ScheduleKind::custom); // comes back
        QCOMPARE(planner.plan()->timeline.makespan, zbv);

        QString error;
        pl::Schedule huge = read;
        huge.spec.microbatches = PipelinePlanner::kMaxMicrobatches + 1;
        QVERIFY(!planner.setCustomSchedule(huge, &error));
        QVERIFY2(error.contains(QStringLiteral("shardctl schedule --from-csv")), qPrintable(error));
    }

    void movingABoundaryReplansAndGoesManual()
    {
        PipelinePlanner planner;
        planner.setProfile(pl::uniform_profile(8));
        planner.setSpec({pl::ScheduleKind::gpipe, 2, 4, 1, 0.0});
        planner.rebalance(pl::PartitionMethod::uniform);
        const double balanced = planner.plan()->timeline.makespan;
        QSignalSpy changed(&planner, &PipelinePlanner::planChanged);
        QVERIFY(planner.moveBoundary(0, 6));
        QCOMPARE(changed.count(), 1);
        QCOMPARE(planner.partitionName(), QStringLiteral("manual:6"));
        QVERIFY(planner.plan()->timeline.makespan > balanced); // unbalanced is slower
        QVERIFY(!planner.moveBoundary(0, 6)); // no change, no signal
        QVERIFY(planner.moveBoundary(0, 100)); // clamped to the last layer edge
        QCOMPARE(planner.boundaries(), (std::vector<int>{7}));
    }

    void invalidSettingsExplainThemselves()
    {
        PipelinePlanner planner;
        planner.setProfile(pl::uniform_profile(16));
        planner.setSpec({pl::ScheduleKind::interleaved, 4, 6, 2, 0.0}); // M not a multiple of N
        QVERIFY(!planner.plan());
        QVERIFY(!planner.error().isEmpty());
        planner.setMicrobatches(8);
        QVERIFY(planner.plan());
        QVERIFY(planner.error().isEmpty());
        QCOMPARE(int(planner.boundaries().size()), 4 * 2 - 1);

        planner.setProfile(pl::uniform_profile(3));
        planner.setSpec({pl::ScheduleKind::gpipe, 4, 4, 1, 0.0}); // more stages than layers
        QVERIFY(!planner.plan());
        QVERIFY(!planner.error().isEmpty());
    }

    void loadsBundledAndRejectsBadProfiles()
    {
        PipelinePlanner planner;
        const QStringList bundled = PipelinePlanner::bundledProfiles();
        QVERIFY(!bundled.isEmpty());
        QString error;
        QVERIFY2(planner.loadProfile(bundled.first(), &error), qPrintable(error));
        QVERIFY(!planner.profile().layers.empty());
        QVERIFY(!planner.loadProfile(QStringLiteral("/nonexistent/profile.json"), &error));
        QVERIFY(error.contains(QStringLiteral("/nonexistent/profile.json")));
    }
};

QTEST_MAIN(TestPipelinePlanner)
#include "tst_pipelineplanner.moc"
