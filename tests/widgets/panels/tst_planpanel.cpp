// The planner's search and memory as a person uses them (offscreen): type the inputs, click
// Search, wait, check the top row is what core's search_plans says for the same inputs, click a
// row and check the timeline now shows exactly that candidate; a limit nothing fits gives the
// one sentence; a stage over the GPU memory limit is red in the stage table and marked on the
// timeline; the bubble chart's lines are the simulator's.
#include "widgets/jobs/bubblesweep.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/models/plancandidatemodel.h"
#include "widgets/models/stagestatsmodel.h"
#include "widgets/panels/planpanel.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"
#include "widgets/views/bubblechart.h"
#include "widgets/views/candidatescatter.h"
#include "widgets/views/ganttview.h"

#include "widgettestutil.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestPlanPanel : public QObject {
    Q_OBJECT

    static void clickRow(QTableView* table, int row)
    {
        const QRect rect = table->visualRect(table->model()->index(row, PlanCandidateModel::Pp));
        QVERIFY(rect.isValid());
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, rect.center());
    }

    static void searchAndWait(PlanPanel* plan)
    {
        QTest::mouseClick(plan->searchButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!plan->isSearching(), 60000);
    }

private slots:
    void searchListsCoreRankingAndLoadsARow()
    {
        PlannerPanel panel;
        panel.resize(1400, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.tabs()->setCurrentWidget(panel.planPanel());
        PlanPanel* plan = panel.planPanel();
        widgettest::typeInto(plan->gpusBox(), QStringLiteral("8"));
        widgettest::typeInto(plan->memoryBox(), QStringLiteral("80"));
        widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("32"));
        widgettest::typeInto(plan->microBatchBox(), QStringLiteral("1"));
        widgettest::typeInto(plan->linkBox(), QStringLiteral("100"));
        QCOMPARE(plan->zeroBox()->currentData().toInt(), -1); // every stage, as shardctl plan
        QVERIFY(plan->searchSpec().zero.empty());
        plan->zeroBox()->setCurrentIndex(plan->zeroBox()->findData(1));
        searchAndWait(plan);

        const pl::SearchSpec spec{.gpus = 8,
                                  .global_batch = 32,
                                  .micro_batch_size = 1,
                                  .gpu_memory_bytes = std::int64_t(80) << 30,
                                  .link_gbps = 100,
                                  .zero = {1}};
        const pl::SearchResult expected = pl::search_plans(panel.planner()->profile(), spec);
        QVERIFY(expected.fitting > 1);
        QVERIFY(plan->model()->rowCount() > 1);
        for (int row : {0, 1}) {
            const pl::Candidate& want = expected.candidates[std::size_t(row)];
            const pl::Candidate* got = plan->model()->candidate(row);
            QVERIFY(got);
            QCOMPARE(got->pp, want.pp);
            QCOMPARE(got->dp, want.dp);
            QCOMPARE(got->schedule, want.schedule);
            QCOMPARE(got->virtual_stages, want.virtual_stages);
            QCOMPARE(got->recompute, want.recompute);
            QCOMPARE(got->partition, want.partition);
            QCOMPARE(got->step_time, want.step_time);
        }
        QCOMPARE(int(plan->scatter()->points().size()), int(expected.candidates.size()));
        QVERIFY(plan->message()->text().contains(QStringLiteral("the best takes")));
        // The ZeRO stage is a choice of this search too: its column is shown, the rest of the
        // model-only ones are not.
        QVERIFY(!plan->table()->isColumnHidden(PlanCandidateModel::Zero));
        QVERIFY(plan->table()->isColumnHidden(PlanCandidateModel::Tp));
        QCOMPARE(plan->model()->index(0, PlanCandidateModel::Zero).data().toInt(), expected.candidates[0].zero);

        // Row 1 first, then row 0: each click must load its own candidate, not the last one.
        for (int row : {1, 0}) {
            clickRow(plan->table(), row);
            const pl::Candidate& c = expected.candidates[std::size_t(row)];
            const PipelinePlanner* planner = panel.planner();
            QCOMPARE(planner->spec().kind, c.schedule);
            QCOMPARE(planner->spec().stages, c.pp);
            QCOMPARE(planner->spec().microbatches, c.microbatches);
            QCOMPARE(planner->spec().virtual_stages, c.virtual_stages);
            QCOMPARE(planner->trainingOptions().dp, c.dp);
            QCOMPARE(planner->trainingOptions().recompute, c.recompute);
            QCOMPARE(planner->partitionName(), QString::fromStdString(c.partition));
            QVERIFY(planner->stepPlan());
            QCOMPARE(planner->stepPlan()->step_time, c.step_time); // bit for bit: the same core call
            QCOMPARE(planner->stepPlan()->peak_memory_bytes, c.peak_memory_bytes);
            QCOMPARE(panel.gantt()->extent(), c.step_time);
            QCOMPARE(panel.statsModel()->rowCount(), c.pp);
            QCOMPARE(plan->scatter()->selected(), row);
        }
        // The loaded plan's link and dp are shown on the timeline: sends, and an all-reduce per stage.
        const auto& step = *panel.planner()->stepPlan();
        QCOMPARE(panel.gantt()->sendCount(), pl::transfers(step).size());
        QCOMPARE(panel.gantt()->allReduceCount(), step.allreduce.size());
    }

    void clickingADotSelectsItsRow()
    {
        PlannerPanel panel;
        panel.resize(1400, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.tabs()->setCurrentWidget(panel.planPanel());
        PlanPanel* plan = panel.planPanel();
        widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("32"));
        searchAndWait(plan);
        CandidateScatter* scatter = plan->scatter();
        const ChartGeometry g = scatter->geometry();
        // The second-ranked dot, unless another one is drawn on the same spot.
        const ChartPoint p = scatter->points()[1];
        const int hit = scatter->candidateAt(QPointF(g.xForValue(p.x), g.yForValue(p.y)));
        QVERIFY(hit >= 0);
        QTest::mouseClick(scatter, Qt::LeftButton, {},
                          QPoint(int(std::lround(g.xForValue(p.x))), int(std::lround(g.yForValue(p.y)))));
        QCOMPARE(plan->table()->currentIndex().row(), hit);
        QCOMPARE(panel.planner()->stepPlan()->step_time, plan->model()->candidate(hit)->step_time);
    }

    void nothingFitsSaysSoInOneSentence()
    {
        PlannerPanel panel;
        panel.show();
        PlanPanel* plan = panel.planPanel();
        widgettest::typeInto(plan->memoryBox(), QStringLiteral("0.25"));
        widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("32"));
        searchAndWait(plan);
        const pl::SearchResult expected = pl::search_plans(panel.planner()->profile(), plan->searchSpec());
        QCOMPARE(expected.fitting, std::size_t(0));
        const pl::Candidate& closest = expected.candidates.front();
        const QString text = plan->message()->text();
        QVERIFY2(text.startsWith(QStringLiteral("Nothing fits in %1 per GPU: the closest").arg(formatBytes(1 << 28))),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("pp %1 × dp %2").arg(closest.pp).arg(closest.dp)), qPrintable(text));
        const QString over = formatBytes(uint64_t(closest.peak_memory_bytes - (std::int64_t(1) << 28)));
        QVERIFY2(text.endsWith(over + QStringLiteral(" too much.")), qPrintable(text));
        QVERIFY2(!text.contains(QStringLiteral(". ")), qPrintable(text)); // one sentence
        QVERIFY(!plan->message()->text().contains(QStringLiteral("\n")));
    }

    // decoder-7b-32, 1F1B on 4 stages, no ZeRO: stage 0 holds the most (four microbatches in
    // flight and the embedding), the last stage the least; a limit between them reddens the
    // first stages only, in the table and on the timeline.
    void aStageOverTheLimitIsRed()
    {
        PlannerPanel panel;
        panel.show();
        PipelinePlanner* planner = panel.planner();
        planner->setSpec({.kind = pl::ScheduleKind::one_f_one_b, .stages = 4, .microbatches = 8});
        planner->rebalance(pl::PartitionMethod::compute);
        const auto& memory = planner->stepPlan()->memory;
        const std::int64_t highest = memory.front().total, lowest = memory.back().total;
        QVERIFY(highest > lowest);
        const double limitGiB = double(lowest + highest) / 2.0 / double(std::int64_t(1) << 30);
        widgettest::typeInto(panel.gpuMemoryBox(), QString::number(limitGiB, 'f', 2));
        QVERIFY(planner->trainingOptions().gpu_memory_bytes);
        StageStatsModel* stats = panel.statsModel();
        const QColor red = severityColor(Severity::bad, QApplication::palette());
        const auto& now = planner->stepPlan()->memory;
        QVERIFY(!now.front().fits);
        QVERIFY(now.back().fits);
        for (int s = 0; s < stats->rowCount(); ++s) {
            const bool over = !now[std::size_t(s)].fits;
            QCOMPARE(stats->index(s, StageStatsModel::Total).data(Qt::UserRole).toLongLong(),
                     qlonglong(now[std::size_t(s)].total));
            QCOMPARE(stats->index(s, StageStatsModel::Total).data(Qt::ForegroundRole).value<QColor>() == red, over);
            QCOMPARE(stats->index(s, StageStatsModel::Weights).data(Qt::BackgroundRole).isValid(), over);
            QCOMPARE(stats->index(s, StageStatsModel::Total).data().toString().startsWith(QStringLiteral("⚠")), over);
            QCOMPARE(panel.gantt()->stageOverLimit(s), over);
        }
        // The memory columns are core's figures, split as make_step_plan splits them.
        const auto& m0 = now.front();
        QCOMPARE(stats->index(0, StageStatsModel::Weights).data(Qt::UserRole).toLongLong(), qlonglong(m0.weights));
        QCOMPARE(stats->index(0, StageStatsModel::Optimizer).data(Qt::UserRole).toLongLong(), qlonglong(m0.optimizer));
        QCOMPARE(stats->index(0, StageStatsModel::Activations).data(Qt::UserRole).toLongLong(),
                 qlonglong(m0.activations));
    }

    // The sweep is the simulator's: uniform 1F1B on N stages has the textbook (N-1)/(M+N-1) at
    // every M; interleaved only at multiples of N. And the chart gets four lines.
    void bubbleAgainstMicrobatches()
    {
        const BubbleSweepInput input{.profile = pl::uniform_profile(16),
                                     .spec = {.kind = pl::ScheduleKind::one_f_one_b, .stages = 4, .microbatches = 8},
                                     .boundaries = {4, 8, 12}};
        const auto lines = sweepBubbles(input);
        QCOMPARE(int(lines.size()), 4);
        const BubbleLine& ofob = lines[1];
        QCOMPARE(ofob.kind, pl::ScheduleKind::one_f_one_b);
        QCOMPARE(ofob.microbatches, sweepMicrobatches(4, 8));
        for (std::size_t i = 0; i < ofob.microbatches.size(); ++i) {
            const double m = ofob.microbatches[i];
            QVERIFY(qAbs(ofob.bubble[i] - 3.0 / (m + 3.0)) < 1e-9);
        }
        for (int m : lines[2].microbatches)
            QCOMPARE(m % 4, 0);

        PlannerPanel panel;
        panel.show();
        panel.tabs()->setCurrentWidget(panel.bubbleChart());
        QTRY_COMPARE_WITH_TIMEOUT(int(panel.bubbleChart()->lines().size()), 4, 20000);
        QCOMPARE(panel.bubbleChart()->currentMicrobatches(), panel.planner()->spec().microbatches);
        // The current schedule's line at the current M is the readout's bubble.
        const ChartLine* current = nullptr;
        for (const ChartLine& line : panel.bubbleChart()->lines())
            if (line.current)
                current = &line;
        QVERIFY(current);
        bool found = false;
        for (const ChartPoint& p : current->points)
            if (int(p.x) == panel.planner()->spec().microbatches) {
                found = true;
                QVERIFY(qAbs(p.y - panel.planner()->plan()->timeline.bubble_fraction) < 1e-12);
            }
        QVERIFY(found);
    }
};

QTEST_MAIN(TestPlanPanel)
#include "tst_planpanel.moc"
