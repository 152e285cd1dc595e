// The planner page as a person uses it (offscreen): drag a stage boundary, then change the
// schedule: a change that keeps the piece count keeps the cut; one that cannot keep it says so
// and Undo / Ctrl+Z puts it back. The readout's step time is makespan + exposed all-reduce, each
// figure core's make_step_plan (what `shardctl schedule` prints), with the fit verdict. The
// bubble sweep reaches the current M; equal curves are told apart. The timeline has a legend,
// chunk labels on interleaved forwards, and exported PNG/SVG pictures carry a caption.
#include "widgets/export/exporter.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/models/plancandidatemodel.h"
#include "widgets/panels/planpanel.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/views/bubblechart.h"
#include "widgets/views/bubblereadout.h"
#include "widgets/views/ganttview.h"
#include "widgets/views/stagebar.h"

#include "core/pipeline/training.h"

#include "widgettestutil.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QAbstractItemView>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestPlannerPanel : public QObject {
    Q_OBJECT

    // As with the mouse: open the box's list and click the item (one activation, no stops on the way).
    static void choose(QComboBox* box, const QString& text)
    {
        const int target = box->findText(text);
        QVERIFY2(target >= 0, qPrintable(text));
        box->showPopup();
        QAbstractItemView* list = box->view();
        QTRY_VERIFY(list->isVisible());
        const QRect rect = list->visualRect(box->model()->index(target, 0));
        QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, rect.center());
        QTRY_VERIFY(!list->isVisible());
        QCOMPARE(box->currentIndex(), target);
    }

    // Drags boundary `edge` of the stage bar to layer edge `to`, with the mouse.
    static void drag(StageBar* bar, int edge, int to)
    {
        const StageBarGeometry g = bar->barGeometry();
        const int y = int(bar->barTop() + bar->barHeight() / 2);
        const QPoint press(qRound(g.edgeX(edge)), y), target(qRound(g.edgeX(to)), y);
        QTest::mousePress(bar, Qt::LeftButton, Qt::NoModifier, press);
        QTest::mouseMove(bar, (press + target) / 2);
        QTest::mouseMove(bar, target);
        QTest::mouseRelease(bar, Qt::LeftButton, Qt::NoModifier, target);
    }

    static void showPanel(PlannerPanel& panel)
    {
        panel.resize(1400, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
    }

private slots:
    void aScheduleWithTheSamePiecesKeepsTheDraggedCut()
    {
        PlannerPanel panel;
        showPanel(panel);
        PipelinePlanner* planner = panel.planner();
        const std::vector<int> before = planner->boundaries();
        drag(panel.stageBar(), before[1], before[1] + 2);
        const std::vector<int> dragged = planner->boundaries();
        QVERIFY(dragged != before);
        QVERIFY(planner->partitionName().startsWith(QStringLiteral("manual:")));

        choose(panel.scheduleBox(), QStringLiteral("GPipe"));
        QCOMPARE(planner->spec().kind, pl::ScheduleKind::gpipe);
        QCOMPARE(planner->boundaries(), dragged);
        choose(panel.scheduleBox(), QStringLiteral("ZB-H1 (zero bubble)"));
        QCOMPARE(planner->spec().kind, pl::ScheduleKind::zb_h1);
        QCOMPARE(planner->boundaries(), dragged);
        QVERIFY(!panel.resetNotice()->isVisible());
        QVERIFY(panel.readout()->detailText().contains(planner->partitionName()));
    }

    void aResetCutIsSaidAndCtrlZRestoresIt()
    {
        PlannerPanel panel;
        showPanel(panel);
        PipelinePlanner* planner = panel.planner();
        const std::vector<int> before = planner->boundaries();
        drag(panel.stageBar(), before[0], before[0] + 1);
        const std::vector<int> dragged = planner->boundaries();
        const QString manual = planner->partitionName();
        QVERIFY(manual.startsWith(QStringLiteral("manual:")));
        choose(panel.scheduleBox(), QStringLiteral("GPipe"));

        // Interleaved has twice the pieces: the dragged cut cannot apply and the page says so.
        choose(panel.scheduleBox(), QStringLiteral("Interleaved 1F1B"));
        QCOMPARE(planner->spec().kind, pl::ScheduleKind::interleaved);
        QCOMPARE(planner->partitionName(), QStringLiteral("compute"));
        QVERIFY(panel.resetNotice()->isVisible());
        QVERIFY2(panel.resetNotice()->text().contains(QStringLiteral("re-balanced")),
                 qPrintable(panel.resetNotice()->text()));
        QVERIFY(panel.undoButton()->isVisible());

        QTest::keyClick(panel.scheduleBox(), Qt::Key_Z, Qt::ControlModifier);
        QCOMPARE(planner->spec().kind, pl::ScheduleKind::gpipe);
        QCOMPARE(planner->boundaries(), dragged);
        QCOMPARE(planner->partitionName(), manual);
        QCOMPARE(panel.scheduleBox()->currentText(), QStringLiteral("GPipe"));
        QVERIFY(!panel.resetNotice()->isVisible());
        QVERIFY(planner->stepPlan());
    }

    void theUndoButtonRestoresAStageCountChange()
    {
        PlannerPanel panel;
        showPanel(panel);
        PipelinePlanner* planner = panel.planner();
        const std::vector<int> before = planner->boundaries();
        drag(panel.stageBar(), before[2], before[2] - 2);
        const std::vector<int> dragged = planner->boundaries();
        const int stages = planner->spec().stages;
        widgettest::typeInto(panel.stagesBox(), QString::number(stages + 1));
        QCOMPARE(planner->spec().stages, stages + 1);
        QVERIFY(panel.resetNotice()->isVisible());
        QTest::mouseClick(panel.undoButton(), Qt::LeftButton);
        QCOMPARE(planner->spec().stages, stages);
        QCOMPARE(panel.stagesBox()->value(), stages);
        QCOMPARE(planner->boundaries(), dragged);
        QVERIFY(!panel.resetNotice()->isVisible());
        // Nothing left to undo: Ctrl+Z does nothing now.
        QTest::keyClick(panel.stagesBox(), Qt::Key_Z, Qt::ControlModifier);
        QCOMPARE(planner->boundaries(), dragged);
    }

    // The readout's figures are core's, through the overload `shardctl schedule` calls.
    void readoutStepTimeIsMakespanPlusExposedAllReduce()
    {
        PlannerPanel panel;
        showPanel(panel);
        PipelinePlanner* planner = panel.planner();
        widgettest::typeInto(panel.stagesBox(), QStringLiteral("4"));
        widgettest::typeInto(panel.dpBox(), QStringLiteral("8"));
        widgettest::typeInto(panel.linkBox(), QStringLiteral("100"));
        widgettest::typeInto(panel.gpuMemoryBox(), QStringLiteral("80"));

        const pl::TrainingOptions options{.dp = 8, .link_gbps = 100, .gpu_memory_bytes = std::int64_t(80) << 30};
        const pl::StepPlan core = pl::make_step_plan(
            planner->profile(), planner->spec(), pl::PartitionSpec{.method = pl::PartitionMethod::compute}, options);
        QVERIFY(core.exposed_allreduce_ms > 0);
        QCOMPARE(planner->stepPlan()->step_time, core.step_time);
        const QString text = panel.readout()->detailText();
        const QString sum = QStringLiteral("Step time: %1\n  = makespan %2\n  + exposed all-reduce %3")
                                .arg(BubbleReadout::ms(core.step_time), BubbleReadout::ms(core.plan.timeline.makespan),
                                     BubbleReadout::ms(core.exposed_allreduce_ms));
        QVERIFY2(text.contains(sum), qPrintable(text));
        QVERIFY2(text.contains(core.fits ? QStringLiteral("fits in 80.0 GiB") : QStringLiteral("does NOT fit")),
                 qPrintable(text));
        QVERIFY2(
            text.contains(
                QStringLiteral("Purple bands: all-reduce over dp 8, %1").arg(BubbleReadout::ms(core.allreduce_ms))),
            qPrintable(text));

        // A limit below the peak: the verdict turns, with what is too much.
        widgettest::typeInto(panel.gpuMemoryBox(), QStringLiteral("20"));
        QVERIFY(!planner->stepPlan()->fits);
        QVERIFY2(panel.readout()->detailText().contains(QStringLiteral("does NOT fit in 20.0 GiB")),
                 qPrintable(panel.readout()->detailText()));
    }

    // The user's path: search, click the best row; the readout's terms are the candidate's.
    void aChosenSearchResultAddsUpInTheReadout()
    {
        PlannerPanel panel;
        showPanel(panel);
        panel.tabs()->setCurrentWidget(panel.planPanel());
        PlanPanel* plan = panel.planPanel();
        widgettest::typeInto(plan->gpusBox(), QStringLiteral("8"));
        widgettest::typeInto(plan->memoryBox(), QStringLiteral("80"));
        widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("32"));
        widgettest::typeInto(plan->linkBox(), QStringLiteral("100"));
        QTest::mouseClick(plan->searchButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!plan->isSearching(), 60000);
        QVERIFY(plan->model()->rowCount() > 0);
        const QRect rect = plan->table()->visualRect(plan->model()->index(0, PlanCandidateModel::Pp));
        QTest::mouseClick(plan->table()->viewport(), Qt::LeftButton, {}, rect.center());
        const pl::Candidate* c = plan->model()->candidate(0);
        QVERIFY(c);
        QCOMPARE(panel.planner()->stepPlan()->step_time, c->step_time);
        const QString text = panel.readout()->detailText();
        const QString sum = QStringLiteral("Step time: %1\n  = makespan %2\n  + exposed all-reduce %3")
                                .arg(BubbleReadout::ms(c->step_time), BubbleReadout::ms(c->makespan),
                                     BubbleReadout::ms(c->exposed_allreduce_ms));
        QVERIFY2(text.contains(sum), qPrintable(text));
        QVERIFY2(text.contains(c->fits ? QStringLiteral("  fits in 80.0 GiB") : QStringLiteral("does NOT fit")),
                 qPrintable(text));
        QVERIFY(qAbs(c->makespan + c->exposed_allreduce_ms - c->step_time) < 1e-6 * c->step_time);
    }

    void theSweepReachesTheCurrentMicrobatches()
    {
        PlannerPanel panel;
        showPanel(panel);
        panel.tabs()->setCurrentWidget(panel.bubbleChart());
        widgettest::typeInto(panel.microbatchesBox(), QStringLiteral("32"));
        QCOMPARE(panel.planner()->spec().microbatches, 32);
        BubbleChart* chart = panel.bubbleChart();
        QTRY_VERIFY_WITH_TIMEOUT(!chart->lines().empty() && !chart->lines()[1].points.empty() &&
                                     chart->lines()[1].points.back().x == 32,
                                 20000);
        for (const ChartLine& line : chart->lines())
            if (!line.points.empty())
                QCOMPARE(line.points.back().x, 32.0);
        QCOMPARE(chart->geometry().xMax, 32.0);
        // GPipe and 1F1B lie within three pixels of each other on this profile (less than one
        // percentage point apart): the second is dashed over the first and the legend says so.
        QCOMPARE(chart->coinciding()[1], 0);
        QCOMPARE(chart->legendName(1), QStringLiteral("1F1B (≈ GPipe here)"));
        QCOMPARE(chart->legendName(0), QStringLiteral("GPipe"));
    }

    void theTimelineHasALegendChunkLabelsAndExportsACaption()
    {
        PlannerPanel panel;
        showPanel(panel);
        choose(panel.scheduleBox(), QStringLiteral("Interleaved 1F1B"));
        GanttView* gantt = panel.gantt();
        QStringList legend;
        for (const GanttView::LegendEntry& e : gantt->legend())
            legend << e.text;
        QVERIFY2(legend.join(QLatin1Char('|')).contains(QStringLiteral("chunk 1")),
                 qPrintable(legend.join(QLatin1Char('|'))));
        QVERIFY(legend.contains(QStringLiteral("idle (bubble)")));
        QVERIFY(gantt->legendHeight(1600) > 0);

        widgettest::typeInto(panel.dpBox(), QStringLiteral("2")); // dp 2: an all-reduce
        widgettest::typeInto(panel.gpuMemoryBox(), QStringLiteral("40"));
        legend.clear();
        for (const GanttView::LegendEntry& e : gantt->legend())
            legend << e.text;
        QVERIFY(legend.contains(QStringLiteral("gradient all-reduce")));
        QVERIFY(legend.contains(QStringLiteral("stage over the GPU memory")));

        const QString caption = gantt->caption();
        const auto& spec = panel.planner()->spec();
        QVERIFY2(caption.startsWith(QStringLiteral("Interleaved 1F1B (v = 2) · 4 stages · %1 microbatches · bubble ")
                                        .arg(spec.microbatches)),
                 qPrintable(caption));
        QVERIFY(caption.endsWith(QStringLiteral("profile decoder-7b-32")));

        QTemporaryDir dir;
        QString error;
        const QString svg = dir.filePath(QStringLiteral("t.svg"));
        QVERIFY2(Exporter::exportTimeline(svg, gantt, QStringLiteral("t"), &error), qPrintable(error));
        QFile file(svg);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(file.readAll());
        // The caption and the legend are text in the SVG, not only pixels.
        QVERIFY2(text.contains(QStringLiteral("Interleaved 1F1B (v = 2) · 4 stages")), "caption missing");
        QVERIFY(text.contains(QStringLiteral("gradient all-reduce")));
        const QString png = dir.filePath(QStringLiteral("t.png"));
        QVERIFY2(Exporter::exportTimeline(png, gantt, QStringLiteral("t"), &error), qPrintable(error));
        const QImage image(png);
        QCOMPARE(image.size(), gantt->exportSize(1600));
        QCOMPARE(image.text(QStringLiteral("Description")), caption);
    }
};

QTEST_MAIN(TestPlannerPanel)
#include "tst_plannerpanel.moc"
