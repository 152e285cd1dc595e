// PlanCandidateModel over core's search: the model tester attached before any data, the rows
// in core's order and the figures exactly core's.
#include "widgets/models/plancandidatemodel.h"

#include <QAbstractItemModelTester>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestPlanCandidateModel : public QObject {
    Q_OBJECT

    static pl::SearchSpec spec(std::int64_t memory)
    {
        return pl::SearchSpec{
            .gpus = 4, .global_batch = 16, .micro_batch_size = 1, .gpu_memory_bytes = memory, .link_gbps = 100};
    }

private slots:
    void followsTheSearch()
    {
        PlanCandidateModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        const pl::Profile profile = pl::uniform_profile(16);
        const pl::SearchResult result = pl::search_plans(profile, spec(std::int64_t(1) << 40));
        QVERIFY(result.candidates.size() > 5);
        model.setResult(result, std::int64_t(1) << 40, 5);
        QCOMPARE(model.rowCount(), 5); // the best five of them
        QCOMPARE(model.columnCount(), int(PlanCandidateModel::ColumnCount));
        for (int row = 0; row < 5; ++row) {
            const pl::Candidate& c = result.candidates[std::size_t(row)];
            QCOMPARE(model.index(row, PlanCandidateModel::Pp).data().toInt(), c.pp);
            QCOMPARE(model.index(row, PlanCandidateModel::Dp).data().toInt(), c.dp);
            QCOMPARE(model.index(row, PlanCandidateModel::Microbatches).data().toInt(), c.microbatches);
            QCOMPARE(model.index(row, PlanCandidateModel::Schedule).data().toString(),
                     QString::fromUtf8(pl::to_string(c.schedule)));
            QCOMPARE(model.index(row, PlanCandidateModel::StepTime).data(Qt::UserRole).toDouble(), c.step_time);
            QCOMPARE(model.index(row, PlanCandidateModel::PeakMemory).data(Qt::UserRole).toLongLong(),
                     qlonglong(c.peak_memory_bytes));
            QCOMPARE(model.candidate(row)->step_time, c.step_time);
        }
        // Ranked by step time: the table never shows a faster one below a slower one.
        QVERIFY(model.index(0, PlanCandidateModel::StepTime).data(Qt::UserRole).toDouble() <=
                model.index(4, PlanCandidateModel::StepTime).data(Qt::UserRole).toDouble());
        QCOMPARE(model.index(0, PlanCandidateModel::Fits).data(Qt::UserRole).toBool(), true);
        QVERIFY(model.index(0, PlanCandidateModel::Fits).data().toString().contains(QStringLiteral("fits")));
        QVERIFY(!model.candidate(5));

        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void overTheLimitIsSaidInWords()
    {
        PlanCandidateModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const pl::SearchResult result = pl::search_plans(pl::uniform_profile(16), spec(1));
        QCOMPARE(result.fitting, std::size_t(0));
        model.setResult(result, 1);
        QVERIFY(model.rowCount() > 0);
        QCOMPARE(model.index(0, PlanCandidateModel::Fits).data(Qt::UserRole).toBool(), false);
        QVERIFY(model.index(0, PlanCandidateModel::Fits).data().toString().contains(QStringLiteral("over")));
        QVERIFY(model.index(0, PlanCandidateModel::Fits).data(Qt::ForegroundRole).isValid());
        QVERIFY(model.index(0, PlanCandidateModel::Pp)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("over the")));
    }
};

QTEST_MAIN(TestPlanCandidateModel)
#include "tst_plancandidatemodel.moc"
