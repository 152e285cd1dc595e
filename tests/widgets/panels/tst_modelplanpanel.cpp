// The planner's search from a model's shape as a person uses it (offscreen): open a config.json,
// pick a cluster preset, type the GPUs, sequence length and global batch, click Search, wait;
// the table's first row is what core's search_model_plans returns for the same inputs, and
// clicking it puts exactly that candidate on the timeline: the readout's step time, its terms,
// the fit and the MFU are core's, and the Gantt draws each op's collectives as the cost model's
// closed forms give them.
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/models/plancandidatemodel.h"
#include "widgets/panels/modelplanpanel.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/settings/settings.h"
#include "widgets/views/bubblereadout.h"
#include "widgets/views/candidatescatter.h"
#include "widgets/views/ganttview.h"

#include "core/pipeline/cluster.h"
#include "core/pipeline/model_config.h"
#include "core/pipeline/model_search.h"
#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/profile.h"

#include "widgettestutil.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

namespace {

const QString kMixtral = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/models/mixtral-8x7b.json");
constexpr int kGpus = 16, kSeqLen = 4096, kGlobalBatch = 64;

// The search `shardctl plan --model CONFIG --cluster h100-sxm-80gb --gpus 16 --seq-len 4096
// --global-batch 64` runs, built here from the preset's own fields.
pl::ModelSearchSpec expectedSpec(const pl::Cluster& c)
{
    return pl::ModelSearchSpec{.gpus = kGpus,
                               .global_batch = kGlobalBatch,
                               .seq_len = kSeqLen,
                               .device_tflops = c.peak_tflops * c.matmul_fraction,
                               .peak_tflops = c.peak_tflops,
                               .gpu_memory_bytes = std::int64_t(std::llround(c.hbm_gib * 1073741824.0)),
                               .links = pl::LinkChoice{.cluster = c}};
}

pl::ModelConfig readMixtral()
{
    const std::string path = kMixtral.toStdString();
    return pl::parse_model_config(pl::read_input_file(path, pl::kMaxModelConfigBytes, "config"), path);
}

} // namespace

class TestModelPlanPanel : public QObject {
    Q_OBJECT

    static void showPanel(PlannerPanel& panel)
    {
        panel.resize(1400, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
    }

    // Config, preset and sizes as a person enters them, then Search and wait.
    static void searchMixtral(PlannerPanel& panel, bool fp32_grads = false)
    {
        panel.openModelConfig(kMixtral);
        ModelPlanPanel* plan = panel.modelPlanPanel();
        QCOMPARE(panel.tabs()->currentWidget(), plan);
        QCOMPARE(plan->configPath(), kMixtral);
        QCOMPARE(plan->configBox()->currentText(), QStringLiteral("mixtral-8x7b"));
        QVERIFY(plan->setCluster(QStringLiteral("h100-sxm-80gb")));
        widgettest::typeInto(plan->gpusBox(), QString::number(kGpus));
        widgettest::typeInto(plan->seqLenBox(), QString::number(kSeqLen));
        widgettest::typeInto(plan->globalBatchBox(), QString::number(kGlobalBatch));
        if (plan->fp32GradsBox()->isChecked() != fp32_grads)
            QTest::mouseClick(plan->fp32GradsBox(), Qt::LeftButton);
        QTest::mouseClick(plan->searchButton(), Qt::LeftButton);
        QVERIFY(plan->isSearching());
        QTRY_VERIFY_WITH_TIMEOUT(!plan->isSearching(), 120000);
    }

private slots:
    void theFirstRowIsCoresBestAndItsTimelineAddsUp()
    {
        PlannerPanel panel;
        showPanel(panel);
        searchMixtral(panel);
        ModelPlanPanel* plan = panel.modelPlanPanel();

        const pl::Cluster h100 = *pl::cluster_preset("h100-sxm-80gb");
        const pl::ModelSearchSpec spec = expectedSpec(h100);
        const pl::ModelConfig config = readMixtral();
        const pl::ModelSearchResult expected = pl::search_model_plans(config, spec);
        QVERIFY(expected.search.fitting > 0);
        const pl::Candidate& want = expected.search.candidates.front();
        QVERIFY2(plan->model()->rowCount() > 1, qPrintable(plan->message()->text()));
        const pl::Candidate* got = plan->model()->candidate(0);
        QVERIFY(got);
        const auto cell = [&](PlanCandidateModel::Column column, int role = Qt::DisplayRole) {
            return plan->model()->index(0, column).data(role);
        };
        QCOMPARE(cell(PlanCandidateModel::Tp).toInt(), want.tp);
        QCOMPARE(cell(PlanCandidateModel::Sp, Qt::UserRole).toBool(), want.sp);
        QCOMPARE(cell(PlanCandidateModel::Cp).toInt(), want.cp);
        QCOMPARE(cell(PlanCandidateModel::Ep).toInt(), want.ep);
        QCOMPARE(cell(PlanCandidateModel::Pp).toInt(), want.pp);
        QCOMPARE(cell(PlanCandidateModel::Dp).toInt(), want.dp);
        QCOMPARE(cell(PlanCandidateModel::Zero).toInt(), want.zero);
        QCOMPARE(cell(PlanCandidateModel::MicroBatch).toInt(), want.micro_batch_size);
        QCOMPARE(cell(PlanCandidateModel::Schedule).toString(), QString::fromUtf8(pl::to_string(want.schedule)));
        QCOMPARE(cell(PlanCandidateModel::Virtual).toInt(), want.virtual_stages);
        QCOMPARE(cell(PlanCandidateModel::StepTime, Qt::UserRole).toDouble(), want.step_time);
        QCOMPARE(cell(PlanCandidateModel::PeakMemory, Qt::UserRole).toLongLong(), qlonglong(want.peak_memory_bytes));
        QCOMPARE(cell(PlanCandidateModel::Fits, Qt::UserRole).toBool(), want.fits);
        QCOMPARE(cell(PlanCandidateModel::TflopsPerGpu, Qt::UserRole).toDouble(), want.tflops_per_gpu);
        QCOMPARE(cell(PlanCandidateModel::Mfu, Qt::UserRole).toDouble(), want.mfu);
        QVERIFY(want.mfu > 0.0 && want.mfu < 1.0);
        // The model-only columns are shown here (hidden on the profile search's table).
        QVERIFY(!plan->table()->isColumnHidden(PlanCandidateModel::Ep));
        QVERIFY(!plan->table()->isColumnHidden(PlanCandidateModel::Mfu));

        // Click the best row: the timeline is that candidate's, bit for bit.
        const QRect rect = plan->table()->visualRect(plan->model()->index(0, PlanCandidateModel::Pp));
        QTest::mouseClick(plan->table()->viewport(), Qt::LeftButton, {}, rect.center());
        const auto& step = panel.planner()->stepPlan();
        QVERIFY(step);
        QCOMPARE(step->step_time, want.step_time);
        QCOMPARE(step->plan.timeline.makespan, want.makespan);
        QCOMPARE(step->exposed_allreduce_ms, want.exposed_allreduce_ms);
        QCOMPARE(step->peak_memory_bytes, want.peak_memory_bytes);
        QCOMPARE(step->fits, want.fits);
        QCOMPARE(panel.planner()->spec().stages, want.pp);
        QCOMPARE(panel.planner()->trainingOptions().dp, want.dp);
        QCOMPARE(panel.planner()->trainingOptions().ep, want.ep);
        const auto rate = panel.planner()->throughput();
        QVERIFY(rate);
        QCOMPARE(rate->tflops_per_gpu, want.tflops_per_gpu);
        QCOMPARE(rate->mfu, want.mfu);

        const QString text = panel.readout()->detailText();
        const QString sum = QStringLiteral("Step time: %1\n  = makespan %2\n  + exposed all-reduce %3")
                                .arg(BubbleReadout::ms(want.step_time), BubbleReadout::ms(want.makespan),
                                     BubbleReadout::ms(want.exposed_allreduce_ms));
        QVERIFY2(text.contains(sum), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("  fits in 79.6 GiB")), qPrintable(text)); // the H100 preset's 81559 MiB
        const QString mfu = QStringLiteral("MFU %1\u00a0%").arg(want.mfu * 100.0, 0, 'f', 1);
        QVERIFY2(text.contains(mfu), qPrintable(text));
        QVERIFY2(plan->message()->text().contains(mfu), qPrintable(plan->message()->text()));
        QVERIFY2(plan->message()->text().contains(
                     QStringLiteral("step time %1 = makespan %2")
                         .arg(BubbleReadout::ms(want.step_time), BubbleReadout::ms(want.makespan))),
                 qPrintable(plan->message()->text()));
        QCOMPARE(panel.planner()->partitionName(), QStringLiteral("compute"));

        // A row the search ran on a fitted cut (its even cut does not fit) shows that cut, and the
        // readout names it: the planner keeps it as manual boundaries.
        int fitted = -1;
        for (int row = 0; row < plan->model()->rowCount() && fitted < 0; ++row)
            if (plan->model()->candidate(row)->partition.rfind("manual:", 0) == 0)
                fitted = row;
        QVERIFY2(fitted > 0, "the search shows no candidate on a fitted cut");
        const pl::Candidate& other = expected.search.candidates[std::size_t(fitted)];
        QCOMPARE(plan->model()->candidate(fitted)->partition, other.partition);
        const QRect row = plan->table()->visualRect(plan->model()->index(fitted, PlanCandidateModel::Pp));
        QTest::mouseClick(plan->table()->viewport(), Qt::LeftButton, {}, row.center());
        QVERIFY(panel.planner()->stepPlan());
        QCOMPARE(panel.planner()->stepPlan()->step_time, other.step_time);
        QCOMPARE(panel.planner()->stepPlan()->peak_memory_bytes, other.peak_memory_bytes);
        QCOMPARE(panel.planner()->partitionName(), QString::fromStdString(other.partition));
        QVERIFY2(panel.readout()->detailText().contains(QString::fromStdString(other.partition)),
                 qPrintable(panel.readout()->detailText()));
    }

    // The first row of a search with fp32 gradients is shown with them (the planner's own box
    // says so), and keeps them and its expert-parallel degree when another control of the
    // training step is changed: the controls set only what they show.
    void aCandidatesHiddenChoicesSurviveTheControls()
    {
        PlannerPanel panel;
        showPanel(panel);
        searchMixtral(panel, true);
        ModelPlanPanel* plan = panel.modelPlanPanel();
        QVERIFY(plan->model()->rowCount() > 0);
        const QRect rect = plan->table()->visualRect(plan->model()->index(0, PlanCandidateModel::Pp));
        QTest::mouseClick(plan->table()->viewport(), Qt::LeftButton, {}, rect.center());
        const pl::TrainingOptions shown = panel.planner()->trainingOptions();
        QVERIFY(shown.fp32_grads);
        QVERIFY(panel.planner()->stepPlan());
        QVERIFY2(panel.readout()->detailText().contains(QStringLiteral("Gradients in fp32")),
                 qPrintable(panel.readout()->detailText()));
        QVERIFY(panel.fp32GradsBox()->isChecked());
        widgettest::typeInto(panel.dpBox(), QString::number(shown.dp * 2));
        const pl::TrainingOptions changed = panel.planner()->trainingOptions();
        QCOMPARE(changed.dp, shown.dp * 2);
        QVERIFY(changed.fp32_grads);
        QCOMPARE(changed.ep, shown.ep);
        // Another profile is not the candidate's: its expert parallelism goes with it; the box,
        // a choice of the person's, stays.
        panel.planner()->setProfile(pl::uniform_profile(8));
        QCOMPARE(panel.planner()->trainingOptions().ep, 1);
        QVERIFY(panel.planner()->trainingOptions().fp32_grads);
        QTest::mouseClick(panel.fp32GradsBox(), Qt::LeftButton);
        QVERIFY(!panel.planner()->trainingOptions().fp32_grads);
    }

    // Mixtral's every block routes its tokens: with ep > 1 each block's forward spends the
    // dispatch and combine all-to-all of docs/cost-model.md, on the link its group spans, and with
    // t > 1 two all-reduces of the block's activations. The Gantt's op tooltip says both.
    void theGanttDrawsTheCollectivesInsideTheOps()
    {
        PlannerPanel panel;
        showPanel(panel);
        searchMixtral(panel);
        ModelPlanPanel* plan = panel.modelPlanPanel();
        // The first candidate with both tensor and expert parallelism (the search varies both).
        int row = -1;
        for (int r = 0; r < plan->model()->rowCount() && row < 0; ++r)
            if (plan->model()->candidate(r)->ep > 1 && plan->model()->candidate(r)->tp > 1)
                row = r;
        QVERIFY2(row >= 0, "no candidate with tp > 1 and ep > 1 among the listed ones");
        const pl::Candidate c = *plan->model()->candidate(row);
        plan->table()->setCurrentIndex(plan->model()->index(row, 0));
        QCOMPARE(panel.planner()->stepPlan()->step_time, c.step_time);

        GanttView* gantt = panel.gantt();
        QVERIFY(gantt->hasCommunication());
        QStringList legend;
        for (const GanttView::LegendEntry& e : gantt->legend())
            legend << e.text;
        QVERIFY2(legend.contains(QStringLiteral("expert all-to-all inside F and B")),
                 qPrintable(legend.join(QStringLiteral(", "))));
        QVERIFY2(legend.contains(QStringLiteral("tp/cp collectives inside F and B (at the op's end)")),
                 qPrintable(legend.join(QStringLiteral(", "))));

        // The closed forms for one block, per microbatch (cp 1 here, or the ring adds to it).
        const pl::Cluster h100 = *pl::cluster_preset("h100-sxm-80gb");
        const pl::GroupLinks links =
            pl::group_links(h100, pl::Mesh{.tp = c.tp, .cp = c.cp, .ep = c.ep, .dp = c.dp, .pp = c.pp});
        const double tokens = double(c.micro_batch_size) * kSeqLen / c.cp;
        const double allToAll = 2.0 * pl::allgather_ms(tokens / c.tp * 2 /* k */ * 4096 * 2.0, c.ep, links.ep);
        const double tensor = 2.0 * pl::allreduce_ms(2.0 * tokens * 4096, c.tp, links.tp);
        QVERIFY(allToAll > 0 && tensor > 0);
        // The last stage's first F: its piece's blocks (the head has no forward collective).
        const pl::Plan& shown = panel.planner()->stepPlan()->plan;
        const pl::Timeline& t = shown.timeline;
        const int stage = c.pp - 1;
        const int op = int(t.stage_begin[std::size_t(stage)]);
        QCOMPARE(t.ops[std::size_t(op)].kind, pl::OpKind::F);
        int blocks = 0;
        bool embedding = false; // its forward all-reduces once (pp 1: the stage holds it too)
        for (const pl::PieceCost& piece : shown.pieces)
            if (piece.stage == stage && piece.chunk == t.ops[std::size_t(op)].chunk)
                for (int l = piece.first_layer; l <= piece.last_layer; ++l) {
                    blocks += l > 0 && l <= 32; // layers.0 .. layers.31
                    embedding = embedding || l == 0;
                }
        QVERIFY(blocks > 0);
        const pl::LayerComm* comm = gantt->opCommunication(op);
        QVERIFY(comm);
        QVERIFY(qAbs(comm->ep_fwd - blocks * allToAll) <= 1e-12 * blocks * allToAll);
        const double wantTensor = blocks * tensor + (embedding ? tensor / 2 : 0.0);
        QVERIFY(qAbs(comm->tp_fwd - wantTensor) <= 1e-12 * std::max(1.0, wantTensor));
        const QString tip = gantt->describeOp(op);
        QVERIFY2(tip.contains(QStringLiteral("expert all-to-all %1 ms").arg(blocks * allToAll, 0, 'f', 3)),
                 qPrintable(tip));
        // The readout's collectives of the busiest stage are core's sum over the step's ops.
        int busiest = 0;
        for (std::size_t s = 0; s < t.stage_stats.size(); ++s)
            if (t.stage_stats[s].busy > t.stage_stats[std::size_t(busiest)].busy)
                busiest = int(s);
        const pl::CandidateRun run = pl::candidate_run(readMixtral(), expectedSpec(h100), c);
        const pl::LayerComm sums =
            pl::stage_comm(pl::piece_comm(run.comm, shown.pieces, c.recompute), shown)[std::size_t(busiest)];
        QVERIFY(sums.ep_fwd >= c.microbatches * comm->ep_fwd * 0.999 / c.virtual_stages);
        const QString readout = panel.readout()->detailText();
        const QString line =
            QStringLiteral("Inside the makespan, stage %1 (busiest) spends %2 in tp/cp collectives, %3 "
                           "in expert all-to-all")
                .arg(busiest)
                .arg(BubbleReadout::ms(sums.tp_fwd + sums.tp_bwd + sums.cp_fwd + sums.cp_bwd),
                     BubbleReadout::ms(sums.ep_fwd + sums.ep_bwd));
        QVERIFY2(readout.contains(line), qPrintable(readout));
        // Inside the op: the op lasts longer than its collectives.
        QVERIFY(t.ops[std::size_t(op)].end - t.ops[std::size_t(op)].start > comm->fwd());
    }

    // In the window a 1280 x 720 screen gives (90 %: 1152 x 648), every column of the table,
    // MFU the last, is in sight beside the scatter after a search, and stays so when resized
    // (narrower than about 1100 the scatter's minimum width wins and the table scrolls).
    void everyColumnIsInSightAtLaptopSize()
    {
        PlannerPanel panel;
        panel.resize(1152, 560);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        searchMixtral(panel);
        ModelPlanPanel* plan = panel.modelPlanPanel();
        QTableView* table = plan->table();
        QVERIFY(plan->model()->rowCount() > 0);
        const auto lastInSight = [&] {
            const int column = PlanCandidateModel::Mfu;
            return table->columnViewportPosition(column) + table->columnWidth(column) <= table->viewport()->width();
        };
        QVERIFY2(lastInSight(),
                 qPrintable(QStringLiteral("MFU ends at %1 of %2")
                                .arg(table->columnViewportPosition(PlanCandidateModel::Mfu) +
                                     table->columnWidth(PlanCandidateModel::Mfu))
                                .arg(table->viewport()->width())));
        QVERIFY(plan->findChild<CandidateScatter*>()->width() >=
                plan->findChild<CandidateScatter*>()->minimumSizeHint().width());
        panel.resize(1400, 560);
        QTRY_VERIFY(lastInSight());
        panel.resize(1152, 560);
        QTRY_VERIFY(lastInSight());
    }

    void aConfigThatIsNotOneSaysSoInOneSentence()
    {
        PlannerPanel panel;
        showPanel(panel);
        const QString bad = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/clusters/h100-sxm-80gb.json");
        panel.openModelConfig(bad);
        ModelPlanPanel* plan = panel.modelPlanPanel();
        QTest::mouseClick(plan->searchButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!plan->isSearching(), 30000);
        QCOMPARE(plan->model()->rowCount(), 0);
        const QString text = plan->message()->text();
        QVERIFY2(text.startsWith(QStringLiteral("⚠ ")) && text.contains(QStringLiteral("h100-sxm-80gb.json")),
                 qPrintable(text));
    }

    // What a person typed into the tab is there again after a restart (the main window stores
    // inputs() on close and calls setInputs() with what Settings read back). A config file deleted
    // since, or a preset name no longer known, leaves that input at what the tab shows.
    void theInputsSurviveARestart()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("settings.ini"));
        const QString config = dir.filePath(QStringLiteral("mixtral-copy.json"));
        QVERIFY(QFile::copy(kMixtral, config));
        {
            PlannerPanel panel;
            showPanel(panel);
            panel.openModelConfig(config);
            ModelPlanPanel* plan = panel.modelPlanPanel();
            QComboBox* cluster = plan->clusterBox();
            cluster->setCurrentIndex(cluster->findText(QStringLiteral("a100-80gb")));
            widgettest::typeInto(plan->gpusBox(), QStringLiteral("3072"));
            widgettest::typeInto(plan->seqLenBox(), QStringLiteral("8192"));
            widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("1536"));
            QTest::mouseClick(plan->fp32GradsBox(), Qt::LeftButton);
            QVERIFY(plan->fp32GradsBox()->isChecked());
            Settings settings(ini);
            settings.setModelSearch(plan->inputs());
            settings.sync();
        }
        const auto stored = Settings(ini).modelSearch();
        QVERIFY(stored);
        {
            PlannerPanel panel;
            ModelPlanPanel* plan = panel.modelPlanPanel();
            QVERIFY(plan->configPath() != config); // a fresh tab shows its defaults
            plan->setInputs(*stored);
            QCOMPARE(plan->configPath(), config);
            QCOMPARE(plan->configBox()->currentText(), QStringLiteral("mixtral-copy"));
            QCOMPARE(plan->clusterBox()->currentText(), QStringLiteral("a100-80gb"));
            QCOMPARE(plan->gpusBox()->value(), 3072);
            QCOMPARE(plan->seqLenBox()->value(), 8192);
            QCOMPARE(plan->globalBatchBox()->value(), 1536);
            QVERIFY(plan->fp32GradsBox()->isChecked());
            // The search the restored tab runs is the preset's, at the restored sizes.
            const pl::ModelSearchSpec spec = plan->searchSpec();
            const pl::Cluster a100 = *pl::cluster_preset("a100-80gb");
            QCOMPARE(spec.gpus, 3072);
            QCOMPARE(spec.seq_len, 8192);
            QCOMPARE(spec.global_batch, 1536);
            QVERIFY(spec.fp32_grads);
            QCOMPARE(spec.peak_tflops, a100.peak_tflops);
            QCOMPARE(spec.gpu_memory_bytes, std::int64_t(std::llround(a100.hbm_gib * 1073741824.0)));
        }
        QVERIFY(QFile::remove(config));
        ModelSearchInputs gone = *stored;
        gone.cluster = QStringLiteral("no-such-preset");
        PlannerPanel panel;
        ModelPlanPanel* plan = panel.modelPlanPanel();
        const QString defaultConfig = plan->configPath();
        const QString defaultCluster = plan->clusterBox()->currentText();
        plan->setInputs(gone);
        QCOMPARE(plan->configPath(), defaultConfig);
        QCOMPARE(plan->clusterBox()->currentText(), defaultCluster);
        QCOMPARE(plan->gpusBox()->value(), 3072);
    }
};

QTEST_MAIN(TestModelPlanPanel)
#include "tst_modelplanpanel.moc"
