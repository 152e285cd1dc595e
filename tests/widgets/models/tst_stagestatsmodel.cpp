#include "widgets/models/stagestatsmodel.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestStageStatsModel : public QObject {
    Q_OBJECT

    static pl::Plan plan(int stages, int microbatches, const std::vector<int>& boundaries)
    {
        pl::ScheduleSpec spec;
        spec.kind = pl::ScheduleKind::gpipe;
        spec.stages = stages;
        spec.microbatches = microbatches;
        return pl::make_plan(pl::uniform_profile(12), spec, boundaries);
    }

private slots:
    void followsThePlan()
    {
        StageStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setPlan(plan(4, 8, {3, 6, 9}));
        QCOMPARE(model.rowCount(), 4);
        // Uniform GPipe: every stage has the textbook bubble (N-1)/(M+N-1) = 3/11.
        for (int s = 0; s < 4; ++s)
            QVERIFY(qAbs(model.index(s, StageStatsModel::Bubble).data(Qt::UserRole).toDouble() - 3.0 / 11.0) < 1e-9);
        QCOMPARE(model.index(1, StageStatsModel::Layers).data().toString(), QStringLiteral("3–5"));

        // Same stage count: an in-place update, which keeps a view's selection.
        QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        model.setPlan(plan(4, 8, {2, 6, 9}));
        QCOMPARE(reset.count(), 0);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(model.index(0, StageStatsModel::Layers).data().toString(), QStringLiteral("0–1"));

        model.setPlan(plan(2, 8, {6}));
        QCOMPARE(reset.count(), 1);
        QCOMPARE(model.rowCount(), 2);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    // Interleaved 1F1B, 4 stages of 2 chunks over 16 layers (uniform: 2 layers a piece): stage 0
    // runs pieces 0 and 4, layers 0-1 and 8-9, not "0-9".
    void interleavedStagesListEachChunk()
    {
        pl::ScheduleSpec spec;
        spec.kind = pl::ScheduleKind::interleaved;
        spec.stages = 4;
        spec.microbatches = 8;
        spec.virtual_stages = 2;
        const pl::Plan plan = pl::make_plan(pl::uniform_profile(16), spec, {2, 4, 6, 8, 10, 12, 14});
        StageStatsModel model;
        model.setPlan(plan);
        QCOMPARE(model.index(0, StageStatsModel::Layers).data().toString(), QStringLiteral("0–1, 8–9"));
        QCOMPARE(model.index(3, StageStatsModel::Layers).data().toString(), QStringLiteral("6–7, 14–15"));
        QCOMPARE(pl::stage_layers(plan, 0, true), std::string("0-1,8-9"));
    }
};

QTEST_MAIN(TestStageStatsModel)
#include "tst_stagestatsmodel.moc"
