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

    // The training step's memory per stage: core's figures in the five columns, and a stage over
    // the GPU memory limit red (foreground on the stage and total, a tint on the row) with a sign.
    void memoryColumnsAndTheLimit()
    {
        StageStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const pl::ScheduleSpec spec{.kind = pl::ScheduleKind::one_f_one_b, .stages = 4, .microbatches = 8};
        const pl::PartitionSpec uniform{.method = pl::PartitionMethod::uniform};
        pl::TrainingOptions options{.dp = 2, .zero = 1};
        const pl::StepPlan free = pl::make_step_plan(pl::uniform_profile(12), spec, uniform, options);
        // 1F1B keeps N - s microbatches on stage s: stage 0 holds the most.
        QVERIFY(free.memory[0].total > free.memory[3].total);
        options.gpu_memory_bytes = (free.memory[0].total + free.memory[3].total) / 2;
        const pl::StepPlan step = pl::make_step_plan(pl::uniform_profile(12), spec, uniform, options);
        model.setStepPlan(step);
        QCOMPARE(model.rowCount(), 4);
        for (int s = 0; s < 4; ++s) {
            const auto& m = step.memory[std::size_t(s)];
            QCOMPARE(model.index(s, StageStatsModel::Weights).data(Qt::UserRole).toLongLong(), qlonglong(m.weights));
            QCOMPARE(model.index(s, StageStatsModel::Gradients).data(Qt::UserRole).toLongLong(),
                     qlonglong(m.gradients));
            QCOMPARE(model.index(s, StageStatsModel::Optimizer).data(Qt::UserRole).toLongLong(),
                     qlonglong(m.optimizer));
            QCOMPARE(model.index(s, StageStatsModel::Activations).data(Qt::UserRole).toLongLong(),
                     qlonglong(m.activations));
            QCOMPARE(model.index(s, StageStatsModel::Total).data(Qt::UserRole).toLongLong(), qlonglong(m.total));
            QCOMPARE(model.overLimit(s), !m.fits);
            QCOMPARE(model.index(s, StageStatsModel::Total).data(Qt::ForegroundRole).isValid(), !m.fits);
            QCOMPARE(model.index(s, StageStatsModel::Busy).data(Qt::BackgroundRole).isValid(), !m.fits);
        }
        QVERIFY(model.overLimit(0));
        QVERIFY(!model.overLimit(3));
        QVERIFY(model.index(0, StageStatsModel::Total).data().toString().startsWith(QStringLiteral("⚠")));
        QVERIFY(
            model.index(0, StageStatsModel::Total).data(Qt::ToolTipRole).toString().contains(QStringLiteral("limit")));
        // A plan without the training step: no memory figures, nothing red.
        model.setPlan(step.plan);
        QVERIFY(model.index(0, StageStatsModel::Total).data().toString().isEmpty());
        QVERIFY(!model.overLimit(0));
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
