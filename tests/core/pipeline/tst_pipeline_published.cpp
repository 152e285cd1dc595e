// The planner against the papers' own published tables (docs/cost-model.md, "Published tables"):
//  - Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024; arXiv 2401.10241): Table 9's
//    profiled T_F, T_B, T_W, T_comm fed to the simulator give Table 5's bubble rates of 1F1B,
//    ZB-H1 and ZB-H2, every row, to the four decimals printed;
//  - DeepSeek-V3 technical report (arXiv 2412.19437), Table 2 (also the DualPipe README): the
//    bubble and memory columns of 1F1B, ZB1P and DualPipe(V);
//  - Narayanan et al. 2021 (SC '21), Table 1: every published Megatron configuration fits, the
//    planner's own best keeps t within a node, and its predicted TFLOP/s per GPU of the published
//    configuration is within a stated band of the published figure.
// The Megatron rows print the markdown table of docs/cost-model.md:
//   build/bin/tst_pipeline_published megatronTable1 | grep '^|'
#include "testutil.h"

#include "core/pipeline/model_config.h"
#include "core/pipeline/model_search.h"
#include "core/pipeline/model_shape.h"
#include "core/pipeline/simulator.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string_view>

using namespace shardscope::pipeline;

namespace {

// One layer per piece with the given F, B (input gradient) and W times; the unsplit backward of
// gpipe/1f1b/interleaved is B + W.
Timeline costed(ScheduleKind kind, int n, int m, double f, double b, double w, double comm = 0.0)
{
    const int v = default_virtual_stages(kind);
    Profile profile = uniform_profile(n * v);
    for (Layer& layer : profile.layers) {
        layer.fwd_ms = f;
        layer.bwd_input_ms = b;
        layer.bwd_weight_ms = w;
        layer.bwd_ms = b + w;
    }
    return make_plan(profile, ScheduleSpec{kind, n, m, v, comm}, partition(profile, n * v, {})).timeline;
}

std::string four(double x)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", x);
    return text;
}

} // namespace

class TestPipelinePublished : public QObject {
    Q_OBJECT

private slots:
    void zeroBubbleTable5_data()
    {
        QTest::addColumn<int>("p");
        QTest::addColumn<int>("m");
        QTest::addColumn<double>("f");
        QTest::addColumn<double>("b");
        QTest::addColumn<double>("w");
        QTest::addColumn<double>("comm");
        QTest::addColumn<QString>("one_f_one_b");
        QTest::addColumn<QString>("zb_h1");
        QTest::addColumn<QString>("zb_h2");
        // Qi et al. (arXiv 2401.10241v1): model, p, m and Table 9's T_F, T_B, T_W, T_comm (ms),
        // then Table 5's bubble rates of 1F1B, ZB-H1 and ZB-H2 for the same row.
        struct Row {
            const char* model;
            int p, m;
            double f, b, w, comm;
            const char *r1f1b, *h1, *h2;
        };
        const Row rows[] = {
            {"1.5B", 8, 24, 18.522, 18.086, 9.337, 0.601, "0.2431", "0.1585", "0.1083"},
            {"1.5B", 8, 32, 18.513, 18.086, 9.331, 0.626, "0.1985", "0.1242", "0.0837"},
            {"1.5B", 8, 64, 18.546, 18.097, 9.321, 0.762, "0.1240", "0.0674", "0.0444"},
            {"6.2B", 8, 24, 29.718, 29.444, 19.927, 0.527, "0.2347", "0.1323", "0.0698"},
            {"6.2B", 8, 32, 29.802, 29.428, 19.530, 0.577, "0.1898", "0.1045", "0.0559"},
            {"6.2B", 8, 64, 29.935, 29.621, 19.388, 0.535, "0.1091", "0.0554", "0.0294"},
            {"14.6B", 16, 48, 11.347, 11.248, 8.132, 0.377, "0.2552", "0.1397", "0.0672"},
            {"14.6B", 16, 64, 11.307, 11.254, 8.101, 0.379, "0.2082", "0.1088", "0.0516"},
            {"14.6B", 16, 128, 11.325, 11.308, 8.109, 0.378, "0.1251", "0.0576", "0.0266"},
            {"28.3B", 32, 96, 10.419, 10.207, 7.715, 0.408, "0.2646", "0.1421", "0.0641"},
            {"28.3B", 32, 128, 10.408, 10.204, 7.703, 0.408, "0.2168", "0.1106", "0.0490"},
            {"28.3B", 32, 256, 10.402, 10.248, 7.698, 0.460, "0.1352", "0.0594", "0.0257"},
        };
        for (const Row& r : rows)
            QTest::addRow("%s p=%d m=%d", r.model, r.p, r.m)
                << r.p << r.m << r.f << r.b << r.w << r.comm << QString::fromLatin1(r.r1f1b)
                << QString::fromLatin1(r.h1) << QString::fromLatin1(r.h2);
    }
    void zeroBubbleTable5()
    {
        QFETCH(int, p);
        QFETCH(int, m);
        QFETCH(double, f);
        QFETCH(double, b);
        QFETCH(double, w);
        QFETCH(double, comm);
        QFETCH(QString, one_f_one_b);
        QFETCH(QString, zb_h1);
        QFETCH(QString, zb_h2);
        // Their model (section 5.3 and Appendix G's ILP): T_comm is a latency on every
        // dependency that crosses stages, and the bubble rate is (cost - m(T_F + T_B + T_W)) /
        // cost with cost the longest stage's own execution time: span_bubble_fraction.
        const std::pair<ScheduleKind, QString> cases[] = {
            {ScheduleKind::one_f_one_b, one_f_one_b}, {ScheduleKind::zb_h1, zb_h1}, {ScheduleKind::zb_h2, zb_h2}};
        std::string line = "  p=" + std::to_string(p) + " m=" + std::to_string(m);
        for (const auto& [kind, paper] : cases) {
            const Timeline t = costed(kind, p, m, f, b, w, comm);
            const double work = m * (f + b + w);
            line += "  " + std::string(to_string(kind)) + " " + four(t.span_bubble_fraction) + " (paper " +
                paper.toStdString() + "; from the makespan " + four((t.makespan - work) / t.makespan) + ")";
            QCOMPARE(QString::fromStdString(four(t.span_bubble_fraction)), paper);
        }
        std::printf("%s\n", line.c_str());
    }

    void deepSeekTable2()
    {
        // DeepSeek-V3 technical report, Table 2 (and deepseek-ai/DualPipe's README): F a forward
        // chunk, B a full backward chunk, W its weight part, F&B an overlapped pair (here F + B:
        // the overlap hides communication, not compute). Bubble (the busiest device's time beyond
        // its work), parameters and activations per device:
        //   1F1B      (PP - 1)(F + B)            1x  PP
        //   ZB1P      (PP - 1)(F + B - 2W)       1x  PP      (ZB-H1, the 1F1B-memory schedule)
        //   DualPipe  (PP/2 - 1)(F&B + B - 3W)   2x  PP + 1  (DualPipeV: PP/2 devices of 2 chunks)
        // F, B_input, W per chunk. Exact for 1F1B; ZB1P's holds while W <= B_input, where the
        // deferred W passes fit the gaps of the drain (else the bubble is (PP - 1) F, the forward
        // chain's start); DualPipeV's simulated bubble never exceeds the report's and equals it in
        // the rows marked (docs/cost-model.md).
        struct Costs {
            double f, b_input, w;
            bool dualpipe_exact;
        };
        const Costs costs[] = {{1, 1, 1, false},       {1, 2, 1, false},     {2, 1, 1, true},     {1, 0.5, 0.5, true},
                               {2, 1, 2, true},        {1, 1, 2, true},      {0.5, 0.5, 1, true}, {1, 1, 0.5, false},
                               {1.5, 1.2, 0.8, false}, {1, 1.1, 0.7, false}, {1, 1, 1.2, false}};
        for (const Costs& c : costs)
            for (int pp : {4, 8, 16})
                for (int mult : {1, 2, 4}) {
                    const int m = mult * pp;
                    const double F = c.f, B = c.b_input + c.w, W = c.w;
                    const Timeline f1b = costed(ScheduleKind::one_f_one_b, pp, m, F, c.b_input, W);
                    const Timeline zb1p = costed(ScheduleKind::zb_h1, pp, m, F, c.b_input, W);
                    const Timeline dual = costed(ScheduleKind::dualpipe_v, pp / 2, m, F, c.b_input, W);
                    const double bubble_1f1b = f1b.makespan - m * (F + B);
                    const double bubble_zb1p = zb1p.makespan - m * (F + B);
                    const double bubble_dual = dual.makespan - 2 * m * (F + B);
                    const double table_dual = (pp / 2.0 - 1) * ((F + B) + B - 3 * W);
                    const QString what = QStringLiteral("F=%1 B=%2 W=%3 PP=%4 m=%5: 1f1b %6, zb1p %7, dualpipe-v %8 "
                                                        "(Table 2: %9)")
                                             .arg(F)
                                             .arg(B)
                                             .arg(W)
                                             .arg(pp)
                                             .arg(m)
                                             .arg(bubble_1f1b)
                                             .arg(bubble_zb1p)
                                             .arg(bubble_dual)
                                             .arg(table_dual);
                    QVERIFY2(std::fabs(bubble_1f1b - (pp - 1) * (F + B)) < 1e-9, qPrintable(what));
                    const double zb1p_expected = W <= c.b_input ? (pp - 1) * (F + B - 2 * W) : (pp - 1) * F;
                    QVERIFY2(std::fabs(bubble_zb1p - zb1p_expected) < 1e-9, qPrintable(what));
                    QVERIFY2(bubble_dual <= table_dual + 1e-9, qPrintable(what));
                    if (c.dualpipe_exact)
                        QVERIFY2(std::fabs(bubble_dual - table_dual) < 1e-9, qPrintable(what));
                    if (mult == 2 && pp == 8)
                        std::printf("  %s\n", qPrintable(what));

                    // Activations, in stages' (chunks') activation sets on the busiest device.
                    QCOMPARE(f1b.stage_stats[0].peak_activations, pp);
                    QCOMPARE(zb1p.stage_stats[0].peak_activations, pp);
                    for (const StageStats& st : zb1p.stage_stats)
                        QVERIFY(st.peak_activations <= pp);
                    for (const StageStats& st : dual.stage_stats)
                        QCOMPARE(st.peak_activations, pp + 1);
                }
        // Parameters: one stage's on 1F1B and ZB1P, two chunks' (two of the PP stages) on DualPipeV.
        const Plan one = make_plan(uniform_profile(8), ScheduleSpec{ScheduleKind::zb_h1, 8, 16, 1, 0.0},
                                   partition(uniform_profile(8), 8, {}));
        const Plan dual = make_plan(uniform_profile(8), ScheduleSpec{ScheduleKind::dualpipe_v, 4, 16, 2, 0.0},
                                    partition(uniform_profile(8), 8, {}));
        for (const StageCost& stage : one.stages)
            QCOMPARE(stage.params, one.pieces[0].params);
        for (const StageCost& stage : dual.stages)
            QCOMPARE(stage.params, 2 * one.pieces[0].params);
    }

    void megatronTable1_data()
    {
        QTest::addColumn<double>("billions");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("t");
        QTest::addColumn<int>("p");
        QTest::addColumn<int>("gpus");
        QTest::addColumn<int>("batch");
        QTest::addColumn<double>("published");
        // Narayanan et al. 2021, Table 1 (GPT, V = 51,200, s = 2048, A100 80 GB on Selene): params
        // (billions), heads, hidden, layers, t, p, GPUs, batch, achieved TFLOP/s per GPU.
        struct Row {
            double billions;
            int heads, hidden, layers, t, p, gpus, batch;
            double tflops;
        };
        const Row rows[] = {
            {1.7, 24, 2304, 24, 1, 1, 32, 512, 137},          {3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
            {7.5, 32, 4096, 36, 4, 1, 128, 512, 142},         {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
            {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},       {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
            {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148},    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
            {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
        };
        for (const Row& r : rows)
            QTest::addRow("%.1fB", r.billions)
                << r.billions << r.heads << r.hidden << r.layers << r.t << r.p << r.gpus << r.batch << r.tflops;
    }
    void megatronTable1()
    {
        QFETCH(double, billions);
        QFETCH(int, heads);
        QFETCH(int, hidden);
        QFETCH(int, layers);
        QFETCH(int, t);
        QFETCH(int, p);
        QFETCH(int, gpus);
        QFETCH(int, batch);
        QFETCH(double, published);
        const int d = gpus / (t * p);
        QCOMPARE(t * p * d, gpus);
        constexpr int kSeq = 2048, kVocab = 51200;
        // The band: the A100 preset runs every FLOP at 50 % of peak, 156 TFLOP/s, while the
        // published figures are 43-52 % of peak after bubbles and communication, so the model's
        // matmuls are slower than theirs were; charging 1F1B's bubble (up to (p - 1) / (M + p - 1)
        // = 11 % here) and the tensor-parallel all-reduces without overlap takes up to about a
        // fifth more. 30 % holds that with room; a larger miss means the model broke
        // (docs/cost-model.md, "Published tables").
        constexpr double kBand = 0.30;

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string path = dir.filePath(QStringLiteral("config.json")).toStdString();
        const nlohmann::json config_json = {{"model_type", "gpt2"}, {"n_embd", hidden},     {"n_layer", layers},
                                            {"n_head", heads},      {"vocab_size", kVocab}, {"n_positions", kSeq}};
        std::ofstream(path) << config_json.dump();
        const ModelConfig config = parse_model_config(config_json.dump(), path);

        // The shape is theirs: eq. 2's parameter count, to the table's 0.1 B.
        const ModelProfile shape = shape_profile(config, Workload{.seq_len = kSeq, .micro_batch_size = 1}, {});
        QVERIFY2(std::fabs(shape.total_params / 1e9 - billions) < 0.06,
                 qPrintable(QStringLiteral("%1 parameters, not %2 B").arg(shape.total_params).arg(billions)));

        // The published configuration through `shardctl schedule --model` on the A100 preset:
        // micro batch 1 (their Table 2's PTD-P runs), full recomputation (eq. 3 counts its extra
        // forward), no ZeRO and no sequence parallelism (neither in Megatron-LM then), and both
        // pipeline schedules of the paper: 1F1B and, with p > 1, interleaved with the fewest
        // chunks v >= 2 that divide a stage's l / p layers (Megatron-LM's rule for interleaving).
        const int microbatches = batch / d;
        const double model_flops = model_flops_per_sample(config, kSeq) * batch;
        // Eq. 3 over the model FLOPs above: 96 (1 + s/6h + V/16lh) over 72 (1 + s/6h + V/12lh).
        const double s = kSeq, h = hidden, l = layers, V = kVocab;
        const double eq3 = 96 * (1 + s / (6 * h) + V / (16 * l * h)) / (72 * (1 + s / (6 * h) + V / (12 * l * h)));
        int chunks = 2;
        while (p > 1 && (layers / p) % chunks != 0)
            ++chunks;
        auto predicted = [&](const char* schedule, bool& fits, double& peak_gib) {
            QStringList args{QStringLiteral("schedule"),
                             QStringLiteral("--model"),
                             QString::fromStdString(path),
                             QStringLiteral("--seq-len"),
                             QString::number(kSeq),
                             QStringLiteral("--micro-batch-size"),
                             QStringLiteral("1"),
                             QStringLiteral("--tp"),
                             QString::number(t),
                             QStringLiteral("--stages"),
                             QString::number(p),
                             QStringLiteral("--dp"),
                             QString::number(d),
                             QStringLiteral("--microbatches"),
                             QString::number(microbatches),
                             QStringLiteral("--schedule"),
                             QString::fromLatin1(schedule),
                             QStringLiteral("--virtual"),
                             QString::number(std::string_view(schedule) == "interleaved" ? chunks : 1),
                             QStringLiteral("--recompute"),
                             QStringLiteral("full"),
                             QStringLiteral("--partition"),
                             QStringLiteral("compute"),
                             QStringLiteral("--cluster"),
                             QStringLiteral("a100-80gb"),
                             QStringLiteral("--json")};
            const testutil::Run run = testutil::shardctl(args);
            if (run.exit_code != 0)
                return -1.0;
            const nlohmann::json j = run.json();
            fits = j["fits"].get<bool>();
            peak_gib = j["peak_memory_bytes"].get<double>() / (1 << 30);
            const double seconds = j["step_time"].get<double>() / 1e3;
            return model_flops / (gpus * seconds) / 1e12 * eq3;
        };
        bool fits_1f1b = false, fits_inter = true;
        double peak_1f1b = 0.0, peak_inter = 0.0;
        const double ours_1f1b = predicted("1f1b", fits_1f1b, peak_1f1b);
        const double ours_inter = p > 1 ? predicted("interleaved", fits_inter, peak_inter) : ours_1f1b;
        QVERIFY(ours_1f1b > 0.0 && ours_inter > 0.0);
        QVERIFY2(fits_1f1b && fits_inter, qPrintable(QStringLiteral("peak %1 GiB").arg(peak_1f1b)));

        // The planner's own best for the same GPUs and batch keeps tensor parallelism in a node.
        const testutil::Run plan = testutil::shardctl(
            {QStringLiteral("plan"), QStringLiteral("--model"), QString::fromStdString(path),
             QStringLiteral("--seq-len"), QString::number(kSeq), QStringLiteral("--gpus"), QString::number(gpus),
             QStringLiteral("--global-batch"), QString::number(batch), QStringLiteral("--cluster"),
             QStringLiteral("a100-80gb"), QStringLiteral("--top"), QStringLiteral("1"), QStringLiteral("--json")});
        QCOMPARE(plan.exit_code, 0);
        const nlohmann::json best = plan.json()["candidates"].at(0);
        QVERIFY(best["tp"].get<int>() <= 8); // gpus_per_node of the a100-80gb preset

        const double gap_1f1b = ours_1f1b / published - 1, gap_inter = ours_inter / published - 1;
        char row[512];
        std::snprintf(
            row, sizeof row,
            "| %.1f | %d, %d, %d | %d | %d | yes, %.1f GiB | %.0f | %s | %.0f | %+.0f %% / %s | %.0f | t=%d p=%d "
            "d=%d v=%d %s, %s, ZeRO %d, b=%d: %.0f |\n",
            billions, t, p, d, gpus, batch, peak_1f1b, ours_1f1b,
            p > 1 ? (std::to_string(std::lround(ours_inter)) + " (v=" + std::to_string(chunks) + ")").c_str() : "–",
            published, 100 * gap_1f1b, p > 1 ? (std::to_string(std::lround(100 * gap_inter)) + " %").c_str() : "–",
            published / eq3, best["tp"].get<int>(), best["pp"].get<int>(), best["dp"].get<int>(),
            best["virtual"].get<int>(), best["schedule"].get<std::string>().c_str(),
            best["recompute"].get<std::string>().c_str(), best["zero"].get<int>(), best["micro_batch_size"].get<int>(),
            best["tflops_per_gpu"].get<double>());
        std::printf("%s", row);
        QVERIFY2(std::fabs(gap_1f1b) <= kBand && std::fabs(gap_inter) <= kBand, row);
    }
};

QTEST_GUILESS_MAIN(TestPipelinePublished)
#include "tst_pipeline_published.moc"
