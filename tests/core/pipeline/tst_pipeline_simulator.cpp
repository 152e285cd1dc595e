// The simulator against the papers: closed forms over a grid, the headline figures, peak
// activations, p2p latency, deadlock detection, timeline consistency, and the exports.
#include "problemcheck.h"

#include "core/util/error.h"
#include "core/pipeline/export.h"
#include "core/pipeline/simulator.h"

#include <QTest>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

// Uniform stages: one F = 1, B = 2 (B = W = 1 split) layer per piece, as shardctl's default.
Plan uniform_plan(ScheduleKind kind, int n, int m, int v = 0, double latency = 0.0)
{
    if (v == 0)
        v = default_virtual_stages(kind);
    const Profile profile = uniform_profile(n * v);
    return make_plan(profile, ScheduleSpec{kind, n, m, v, latency}, partition(profile, n * v, {}));
}

// One layer per piece with the given F, B (input gradient) and W times.
Plan costed_plan(ScheduleKind kind, int n, int m, double f, double b, double w)
{
    const int v = default_virtual_stages(kind);
    Profile profile = uniform_profile(n * v);
    for (Layer& layer : profile.layers) {
        layer.fwd_ms = f;
        layer.bwd_input_ms = b;
        layer.bwd_weight_ms = w;
        layer.bwd_ms = b + w;
    }
    return make_plan(profile, ScheduleSpec{kind, n, m, v, 0.0}, partition(profile, n * v, {}));
}

bool exact(double a, double b)
{
    return std::fabs(a - b) <= 1e-12;
}

QString describe(const Timeline& t)
{
    return QStringLiteral("%1 N=%2 M=%3 v=%4: simulated %5, closed form %6")
        .arg(QString::fromLatin1(to_string(t.spec.kind).data()))
        .arg(t.spec.stages)
        .arg(t.spec.microbatches)
        .arg(t.spec.virtual_stages)
        .arg(t.bubble_fraction, 0, 'g', 17)
        .arg(t.closed_form_bubble, 0, 'g', 17);
}

// Checks what any valid simulation must satisfy, from the op list alone: ops on a stage do not
// overlap and keep list order, every dependency (+ latency when it crosses stages) ends before
// its consumer starts, each op starts as early as that allows, an overlapped pair starts as one
// and hands its results on at its end, and durations match the pieces.
void check_timeline(const Schedule& schedule, const Plan& plan)
{
    const Timeline& t = plan.timeline;
    const int n = t.spec.stages;
    const Placement placement = placement_of(t.spec);
    const auto piece = [&](const TimedOp& op) { return piece_of(op.stage, op.chunk, n, placement); };
    const auto crossing = [&](int p) {
        return stage_of_piece(p, n, placement) != stage_of_piece(p + 1, n, placement) ? t.spec.p2p_latency_ms : 0.0;
    };
    std::map<std::tuple<int, int, int>, double> available; // (kind, piece, microbatch) -> time
    for (int s = 0; s < n; ++s)
        for (std::size_t i = t.stage_begin[s]; i < t.stage_begin[s + 1]; ++i) {
            const std::size_t k = i - t.stage_begin[s];
            const bool first = schedule.stage_ops[s][k].overlap_next;
            available[{int(t.ops[i].kind), piece(t.ops[i]), t.ops[i].microbatch}] =
                first ? t.ops[i + 1].end : t.ops[i].end;
        }
    const int pieces = n * t.spec.virtual_stages;
    for (int s = 0; s < n; ++s) {
        QCOMPARE(t.stage_begin[s + 1] - t.stage_begin[s], schedule.stage_ops[s].size());
        double free_at = 0.0;
        double pair_start = -1.0;
        for (std::size_t i = t.stage_begin[s]; i < t.stage_begin[s + 1]; ++i) {
            const TimedOp& op = t.ops[i];
            const std::size_t k = i - t.stage_begin[s];
            const Op& listed = schedule.stage_ops[s][k];
            QCOMPARE(op.stage, s);
            QCOMPARE(op.microbatch, listed.microbatch);
            QCOMPARE(op.chunk, listed.chunk);
            QCOMPARE(op.kind, listed.kind);
            const int p = piece(op);
            const PieceCost& cost = plan.pieces[p];
            auto ready_of = [&](const TimedOp& o, int q) {
                double ready = 0.0;
                if (o.kind == OpKind::F) {
                    if (q > 0)
                        ready = available.at({int(OpKind::F), q - 1, o.microbatch}) + crossing(q - 1);
                } else if (o.kind == OpKind::B) {
                    ready = available.at({int(OpKind::F), q, o.microbatch});
                    if (q + 1 < pieces)
                        ready = std::max(ready, available.at({int(OpKind::B), q + 1, o.microbatch}) + crossing(q));
                } else {
                    ready = available.at({int(OpKind::B), q, o.microbatch});
                }
                return ready;
            };
            double duration = op.kind == OpKind::F ? cost.fwd_ms
                : op.kind == OpKind::W             ? cost.bwd_weight_ms
                : t.split_backward                 ? cost.bwd_input_ms
                                                   : cost.bwd_ms;
            double ready = std::max(free_at, ready_of(op, p));
            if (listed.overlap_next) {
                ready = std::max(ready, ready_of(t.ops[i + 1], piece(t.ops[i + 1])));
                pair_start = ready;
            } else if (k > 0 && schedule.stage_ops[s][k - 1].overlap_next) {
                ready = free_at; // the pair's second half follows its first at once
                QVERIFY(pair_start >= 0.0);
            }
            QVERIFY(std::fabs(op.start - ready) <= 1e-9 * std::max(1.0, ready));
            QVERIFY(std::fabs(op.end - op.start - duration) <= 1e-9 * std::max(1.0, duration));
            free_at = op.end;
        }
    }
}

} // namespace

class TestPipelineSimulator : public QObject {
    Q_OBJECT

private slots:
    void closedFormsHoldOnTheGrid_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("v");
        for (int n : {2, 4, 8})
            for (int m : {1, 4, 8, 64}) {
                QTest::addRow("gpipe N=%d M=%d", n, m) << int(ScheduleKind::gpipe) << n << m << 1;
                QTest::addRow("1f1b N=%d M=%d", n, m) << int(ScheduleKind::one_f_one_b) << n << m << 1;
                QTest::addRow("zb-h1 N=%d M=%d", n, m) << int(ScheduleKind::zb_h1) << n << m << 1;
                QTest::addRow("zb-h2 N=%d M=%d", n, m) << int(ScheduleKind::zb_h2) << n << m << 1;
                QTest::addRow("zb-v N=%d M=%d", n, m) << int(ScheduleKind::zb_v) << n << m << 2;
                if (m >= 2 * n)
                    QTest::addRow("dualpipe-v N=%d M=%d", n, m) << int(ScheduleKind::dualpipe_v) << n << m << 2;
                if (m % n == 0) // Megatron's rule for interleaving
                    for (int v : {2, 3, 4})
                        QTest::addRow("interleaved N=%d M=%d v=%d", n, m, v)
                            << int(ScheduleKind::interleaved) << n << m << v;
            }
    }
    void closedFormsHoldOnTheGrid()
    {
        QFETCH(int, kind);
        QFETCH(int, n);
        QFETCH(int, m);
        QFETCH(int, v);
        const Plan plan = uniform_plan(ScheduleKind(kind), n, m, v);
        const Timeline& t = plan.timeline;
        QVERIFY2(exact(t.bubble_fraction, t.closed_form_bubble), qPrintable(describe(t)));
        // The formulas themselves, written out here rather than taken from the library.
        const double N = n, M = m, V = v;
        double expected = (N - 1) / (M + N - 1);
        if (ScheduleKind(kind) == ScheduleKind::interleaved)
            expected = ((N - 1) / V) / (M + (N - 1) / V);
        if (ScheduleKind(kind) == ScheduleKind::zb_h1 || ScheduleKind(kind) == ScheduleKind::zb_h2)
            expected = m >= n ? (N - 1) / (3 * M + N - 1) : 1 - 3 * M / (2 * M + 2 * N - 1);
        if (ScheduleKind(kind) == ScheduleKind::zb_v) { // in slots of one chunk's F
            const double idle = std::max(N - 1, 4 * N - 2 * M - 2);
            expected = idle / (6 * M + idle);
        }
        if (ScheduleKind(kind) == ScheduleKind::dualpipe_v)
            expected = (N - 1) / (6 * M + N - 1);
        QVERIFY2(exact(t.bubble_fraction, expected), qPrintable(describe(t)));
        // Megatron's form: bubble time / ideal compute time.
        const double ideal = 3.0 * m * v; // per stage: every chunk does F = 1 and B(+W) = 2
        QVERIFY(exact(t.megatron_bubble, (t.makespan - ideal) / ideal));
        check_timeline(build_schedule(t.spec), plan);
    }

    void zeroBubbleHandcraftedAgainstThePaper()
    {
        // Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), section 2: ZB-H1 leaves a
        // bubble of (p - 1)(T_F + T_B - T_W) at 1F1B's memory; ZB-H2, allowed 2p - 1
        // microbatches, fills the warm-up and turns the step into a parallelogram whose only
        // idle time is the forward chain's start, (p - 1) T_F. Checked where the paper's
        // derivations hold (T_W <= T_F, T_B <= T_F + T_W: the W passes can fill the gaps).
        const double costs[][3] = {{1, 1, 1}, {1, 2, 1}, {1.5, 2, 1}, {2, 1, 1}, {1.25, 1.5, 0.75}};
        for (const auto& c : costs)
            for (int n : {2, 4, 8}) {
                const int m = 3 * n;
                const double work = m * (c[0] + c[1] + c[2]);
                const Timeline h1 = costed_plan(ScheduleKind::zb_h1, n, m, c[0], c[1], c[2]).timeline;
                const Timeline h2 = costed_plan(ScheduleKind::zb_h2, n, m, c[0], c[1], c[2]).timeline;
                QVERIFY2(std::fabs(h1.makespan - work - (n - 1) * (c[0] + c[1] - c[2])) < 1e-9,
                         qPrintable(describe(h1)));
                QVERIFY2(std::fabs(h2.makespan - work - (n - 1) * c[0]) < 1e-9, qPrintable(describe(h2)));
                for (int s = 0; s < n; ++s) {
                    QVERIFY(h1.stage_stats[s].peak_activations <= n);
                    QVERIFY(h2.stage_stats[s].peak_activations <= 2 * n - 1);
                }
                QCOMPARE(h2.stage_stats[0].peak_activations, 2 * n - 1);
            }
    }

    void zbVHoldsOneFOneBMemory()
    {
        // ZB-V's claim: 1F1B's activation memory (N microbatches of a whole stage = 2N chunk
        // activations of half a stage each) with the bubble of the warm-up only.
        for (int n : {2, 4, 8})
            for (int m : {2 * n, 4 * n}) {
                const Plan plan = uniform_plan(ScheduleKind::zb_v, n, m);
                for (const StageStats& st : plan.timeline.stage_stats) {
                    QCOMPARE(st.peak_activations, 2 * n);
                    QCOMPARE(st.idle, double(n - 1)); // slots of one chunk's F
                }
                // The V: stage s holds pieces s and 2N - 1 - s, so the last stage runs the turn.
                QCOMPARE(plan.pieces[n - 1].stage, n - 1);
                QCOMPARE(plan.pieces[n].stage, n - 1);
                QCOMPARE(plan.pieces[2 * n - 1].stage, 0);
            }
    }

    void spanBubbleCountsEachStageFromItsFirstOp()
    {
        // Qi et al.'s bubble rate measures each stage from its own first op: 1F1B's stage 0 starts
        // at 0 and ends last, so it is the usual fraction; ZB-H2's parallelogram (F = B = W, M >=
        // N) has every stage busy from its first op to its last: zero, where the makespan counts
        // the forward chain's start (the figures against their Table 5: tst_pipeline_published).
        for (int n : {2, 4, 8}) {
            const Timeline f1b = uniform_plan(ScheduleKind::one_f_one_b, n, 3 * n).timeline;
            QVERIFY(std::fabs(f1b.span_bubble_fraction - f1b.closed_form_bubble) < 1e-12);
            QCOMPARE(f1b.stage_stats[0].span, f1b.makespan);
            const Timeline h2 = uniform_plan(ScheduleKind::zb_h2, n, 3 * n).timeline;
            QCOMPARE(h2.span_bubble_fraction, 0.0);
            QVERIFY(h2.bubble_fraction > 0.0);
            for (const StageStats& st : h2.stage_stats)
                QCOMPARE(st.span, st.busy);
        }
    }

    void headlineFigures()
    {
        const Timeline gpipe8 = uniform_plan(ScheduleKind::gpipe, 4, 8).timeline;
        QCOMPARE(QString::number(100 * gpipe8.bubble_fraction, 'f', 2), QStringLiteral("27.27"));
        const Timeline gpipe64 = uniform_plan(ScheduleKind::gpipe, 4, 64).timeline;
        QCOMPARE(QString::number(100 * gpipe64.bubble_fraction, 'f', 2), QStringLiteral("4.48"));
        const Timeline f1b8 = uniform_plan(ScheduleKind::one_f_one_b, 4, 8).timeline;
        const Timeline f1b64 = uniform_plan(ScheduleKind::one_f_one_b, 4, 64).timeline;
        QVERIFY(exact(f1b8.bubble_fraction, gpipe8.bubble_fraction));
        QVERIFY(exact(f1b64.bubble_fraction, gpipe64.bubble_fraction));
        QCOMPARE(gpipe8.makespan, 33.0); // 3 (M + N - 1)

        const Timeline inter = uniform_plan(ScheduleKind::interleaved, 4, 8, 2).timeline;
        QCOMPARE(QString::number(100 * inter.bubble_fraction, 'f', 2), QStringLiteral("15.79"));

        const Timeline zb = uniform_plan(ScheduleKind::zb_h1, 4, 8).timeline;
        QCOMPARE(QString::number(100 * zb.bubble_fraction, 'f', 2), QStringLiteral("11.11"));
    }

    void zbH1CutsTheBubbleTimeToAThird()
    {
        for (int n : {2, 4, 8})
            for (int m : {8, 16, 64}) {
                const Timeline f1b = uniform_plan(ScheduleKind::one_f_one_b, n, m).timeline;
                const Timeline zb = uniform_plan(ScheduleKind::zb_h1, n, m).timeline;
                double idle_1f1b = 0, idle_zb = 0;
                for (int s = 0; s < n; ++s) {
                    idle_1f1b += f1b.stage_stats[s].idle;
                    idle_zb += zb.stage_stats[s].idle;
                    QVERIFY2(zb.stage_stats[s].peak_activations <= n,
                             qPrintable(QStringLiteral("zb-h1 N=%1 M=%2 stage %3 holds %4")
                                            .arg(n)
                                            .arg(m)
                                            .arg(s)
                                            .arg(zb.stage_stats[s].peak_activations)));
                }
                QVERIFY(exact(3 * idle_zb, idle_1f1b));
            }
    }

    void peakActivations()
    {
        for (int n : {2, 4, 8})
            for (int m : {1, 4, 8, 64}) {
                const Timeline gpipe = uniform_plan(ScheduleKind::gpipe, n, m).timeline;
                const Timeline f1b = uniform_plan(ScheduleKind::one_f_one_b, n, m).timeline;
                const Timeline zb = uniform_plan(ScheduleKind::zb_h1, n, m).timeline;
                QCOMPARE(gpipe.stage_stats[0].peak_activations, m);
                QCOMPARE(f1b.stage_stats[0].peak_activations, std::min(n, m));
                for (int s = 0; s < n; ++s) {
                    QCOMPARE(f1b.stage_stats[s].peak_activations, std::min(n - s, m));
                    QVERIFY(zb.stage_stats[s].peak_activations <= n);
                    // one activation byte per layer in the uniform profile
                    QCOMPARE(f1b.stage_stats[s].peak_activation_bytes,
                             std::int64_t(f1b.stage_stats[s].peak_activations));
                }
            }
        // Bytes follow the pieces: on the decoder the LM head's stage holds the most per
        // microbatch even though 1F1B keeps only one of them in flight there.
        const Profile decoder =
            load_profile(std::string(SHARDSCOPE_SOURCE_DIR) + "/resources/profiles/decoder-7b-32.json");
        const auto boundaries = partition(decoder, 4, {PartitionMethod::compute, {}});
        const Plan plan = make_plan(decoder, ScheduleSpec{ScheduleKind::one_f_one_b, 4, 8, 1, 0.0}, boundaries);
        for (int s = 0; s < 4; ++s)
            QCOMPARE(plan.timeline.stage_stats[s].peak_activation_bytes, plan.pieces[s].activation_bytes * (4 - s));
    }

    void stageStatsAddUp()
    {
        const Profile uneven = load_profile(std::string(SHARDSCOPE_SOURCE_DIR) + "/resources/profiles/uneven.json");
        for (ScheduleKind kind :
             {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1}) {
            const int v = kind == ScheduleKind::interleaved ? 2 : 1;
            const ScheduleSpec spec{kind, 3, 6, v, 0.25};
            const auto boundaries = partition(uneven, 3 * v, {PartitionMethod::compute, {}});
            const Plan plan = make_plan(uneven, spec, boundaries);
            const Timeline& t = plan.timeline;
            double idle = 0;
            for (int s = 0; s < 3; ++s) {
                const StageStats& st = t.stage_stats[s];
                QCOMPARE(st.first_layer, plan.pieces[s].first_layer);
                QCOMPARE(st.last_layer, plan.pieces[(v - 1) * 3 + s].last_layer);
                const double work = 6 * (plan.stages[s].fwd_ms + plan.stages[s].bwd_ms);
                QVERIFY(std::fabs(st.busy - work) < 1e-9);
                QVERIFY(std::fabs(st.idle + st.busy - t.makespan) < 1e-9);
                idle += st.idle;
            }
            QVERIFY(std::fabs(t.bubble_fraction - idle / (3 * t.makespan)) < 1e-12);
            check_timeline(build_schedule(spec), plan);
        }
    }

    void randomProfilesGiveConsistentTimelines()
    {
        for (unsigned seed = 1; seed <= 105; ++seed) {
            std::mt19937 rng(seed);
            const int n = std::uniform_int_distribution<int>(1, 6)(rng);
            const int kind_index = seed % 7; // every built-in kind
            const ScheduleKind kind = ScheduleKind(kind_index);
            const int v = default_virtual_stages(kind);
            int m = std::uniform_int_distribution<int>(1, 12)(rng);
            if (kind == ScheduleKind::interleaved)
                m = n * std::uniform_int_distribution<int>(1, 3)(rng);
            if (kind == ScheduleKind::dualpipe_v)
                m = std::max(m, 2 * n);
            Profile profile;
            const int layers = n * v + std::uniform_int_distribution<int>(0, 8)(rng);
            for (int i = 0; i < layers; ++i) {
                const double fwd = std::uniform_real_distribution<double>(0.0, 3.0)(rng);
                const double b = std::uniform_real_distribution<double>(0.0, 3.0)(rng);
                const double w = std::uniform_real_distribution<double>(0.0, 3.0)(rng);
                profile.layers.push_back({"l", 1, fwd, b + w, b, w, 1});
            }
            const double latency = seed % 3 == 0 ? 0.3 : 0.0;
            const ScheduleSpec spec{kind, n, m, v, latency};
            const Plan plan = make_plan(profile, spec, partition(profile, n * v, {}));
            check_timeline(build_schedule(spec), plan);
        }
    }

    void p2pLatencyDelaysEveryCrossing()
    {
        // GPipe: the forward wave crosses N - 1 links, the backward wave N - 1 more.
        for (double d : {0.0, 0.5, 2.0}) {
            const Timeline t = uniform_plan(ScheduleKind::gpipe, 4, 8, 1, d).timeline;
            QVERIFY(exact(t.makespan, 3 * (8 + 4 - 1) + 2 * (4 - 1) * d));
        }
        // A single stage has no links.
        QCOMPARE(uniform_plan(ScheduleKind::one_f_one_b, 1, 5, 1, 3.0).timeline.makespan, 15.0);
        QVERIFY(uniform_plan(ScheduleKind::one_f_one_b, 4, 8, 1, 0.5).timeline.makespan >
                uniform_plan(ScheduleKind::one_f_one_b, 4, 8, 1, 0.0).timeline.makespan);
    }

    void deadlockIsReportedNotHung()
    {
        // Stage 1 wants microbatch 1's forward before microbatch 0's, but stage 0 only sends
        // microbatch 1 after receiving microbatch 0's backward: a cycle.
        Schedule schedule;
        schedule.spec = {ScheduleKind::one_f_one_b, 2, 2, 1, 0.0};
        schedule.stage_ops = {
            {{0, 0, OpKind::F}, {0, 0, OpKind::B}, {1, 0, OpKind::F}, {1, 0, OpKind::B}},
            {{1, 0, OpKind::F}, {0, 0, OpKind::F}, {0, 0, OpKind::B}, {1, 0, OpKind::B}},
        };
        const auto pieces = piece_costs(uniform_profile(2), 2, {1});
        const auto problem = error_of([&] { simulate(schedule, pieces); });
        QVERIFY(problem.has_value());
        QCOMPARE(problem->kind, ProblemKind::deadlock);
        QVERIFY2(problem->message.find("stage 0 is stuck at B(microbatch 0)") != std::string::npos,
                 problem->message.c_str());
        QVERIFY2(problem->message.find("stage 1 is stuck at F(microbatch 1)") != std::string::npos,
                 problem->message.c_str());

        // A backward listed before its own forward can never run either.
        schedule.stage_ops[1] = {{0, 0, OpKind::B}, {0, 0, OpKind::F}, {1, 0, OpKind::F}, {1, 0, OpKind::B}};
        schedule.stage_ops[0] = {{0, 0, OpKind::F}, {1, 0, OpKind::F}, {0, 0, OpKind::B}, {1, 0, OpKind::B}};
        const auto own = error_of([&] { simulate(schedule, pieces); });
        QVERIFY(own.has_value());
        QCOMPARE(own->kind, ProblemKind::deadlock);
        QVERIFY2(own->message.find("which comes later in its list") != std::string::npos, own->message.c_str());
    }

    void malformedOpListsAreRejected()
    {
        Schedule schedule = build_schedule({ScheduleKind::one_f_one_b, 2, 2, 1, 0.0});
        const auto pieces = piece_costs(uniform_profile(2), 2, {1});
        Schedule duplicate = schedule;
        duplicate.stage_ops[0][1] = duplicate.stage_ops[0][0];
        Schedule missing = schedule;
        missing.stage_ops[1].pop_back();
        Schedule stray_w = schedule; // W without a split backward
        stray_w.stage_ops[0][3].kind = OpKind::W;
        for (const Schedule* bad : {&duplicate, &missing, &stray_w}) {
            const auto problem = error_of([&] { simulate(*bad, pieces); });
            QVERIFY(problem.has_value());
            QCOMPARE(problem->kind, ProblemKind::invalid_schedule);
        }
        QVERIFY(error_of([&] { simulate(schedule, piece_costs(uniform_profile(3), 1, {})); }).has_value());
        QVERIFY(error_of([&] {
                    make_plan(uniform_profile(8), ScheduleSpec{ScheduleKind::gpipe, 4, 4, 1, 0.0}, {2, 4});
                }).has_value());
    }

    void exports()
    {
        const Plan plan = uniform_plan(ScheduleKind::interleaved, 2, 4, 2);
        const Timeline& t = plan.timeline;
        const nlohmann::json j = to_json(t, plan.pieces);
        for (const char* key : {"schedule", "stages", "microbatches", "virtual_stages", "makespan", "bubble_fraction",
                                "closed_form_bubble", "span_bubble_fraction", "stage_stats", "ops"})
            QVERIFY2(j.contains(key), key);
        QCOMPARE(j["schedule"].get<std::string>(), std::string("interleaved"));
        QCOMPARE(j["ops"].size(), t.ops.size());
        QCOMPARE(j["ops"][0]["kind"].get<std::string>(), std::string("F"));
        QVERIFY(j["stage_stats"][1]["layers"] == nlohmann::json({1, 3}));
        QVERIFY(j["stage_stats"][1]["chunk_layers"] == nlohmann::json({{1, 1}, {3, 3}}));

        const nlohmann::json trace = to_trace_json(t, "test");
        std::set<int> named_threads;
        std::size_t spans = 0;
        for (const auto& e : trace["traceEvents"]) {
            if (e["ph"] == "M" && e["name"] == "thread_name")
                named_threads.insert(e["tid"].get<int>());
            if (e["ph"] == "X") {
                const TimedOp& op = t.ops[spans++];
                QCOMPARE(e["ts"].get<double>(), op.start * 1000.0);
                QCOMPARE(e["dur"].get<double>(), (op.end - op.start) * 1000.0);
                QCOMPARE(e["tid"].get<int>(), op.stage);
            }
        }
        QCOMPARE(named_threads, (std::set<int>{0, 1}));
        QCOMPARE(spans, t.ops.size());
    }
};

QTEST_GUILESS_MAIN(TestPipelineSimulator)
#include "tst_pipeline_simulator.moc"
