// Schedules as op lists: the orders of GPipe, 1F1B, Megatron's interleaving, ZB-H1, ZB-H2, ZB-V
// and DualPipeV, and the spec rules (with their messages).
#include "problemcheck.h"

#include "core/util/error.h"
#include "core/pipeline/schedule.h"

#include <QTest>
#include <optional>
#include <string>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

// "F0.1" = forward of microbatch 0 on chunk 1; the chunk is omitted when it is 0 and v == 1.
std::string render(const std::vector<Op>& ops, bool chunks)
{
    std::string text;
    for (const Op& op : ops) {
        if (!text.empty())
            text += ' ';
        text += to_char(op.kind) + std::to_string(op.microbatch);
        if (chunks)
            text += "." + std::to_string(op.chunk);
    }
    return text;
}

} // namespace

class TestPipelineSchedule : public QObject {
    Q_OBJECT

private slots:
    void kindNames()
    {
        for (ScheduleKind kind :
             {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1,
              ScheduleKind::zb_h2, ScheduleKind::zb_v, ScheduleKind::dualpipe_v})
            QCOMPARE(parse_schedule_kind(to_string(kind)), std::optional<ScheduleKind>(kind));
        QCOMPARE(to_string(ScheduleKind::zb_h1), std::string_view("zb-h1"));
        QCOMPARE(to_string(ScheduleKind::dualpipe_v), std::string_view("dualpipe-v"));
        QVERIFY(!parse_schedule_kind("custom").has_value()); // only a file makes one
        QCOMPARE(default_virtual_stages(ScheduleKind::zb_v), 2);
        QCOMPARE(default_virtual_stages(ScheduleKind::zb_h2), 1);
        QVERIFY(!parse_schedule_kind("pipedream").has_value());
        QVERIFY(!parse_schedule_kind("1F1B").has_value());
    }

    void gpipeRunsAllForwardsFirst()
    {
        const Schedule s = build_schedule({ScheduleKind::gpipe, 3, 4, 1, 0.0});
        QVERIFY(!s.split_backward);
        for (const auto& ops : s.stage_ops)
            QCOMPARE(render(ops, false), std::string("F0 F1 F2 F3 B0 B1 B2 B3"));
    }

    void oneFOneBWarmsUpThenAlternates()
    {
        const Schedule s = build_schedule({ScheduleKind::one_f_one_b, 4, 6, 1, 0.0});
        QCOMPARE(render(s.stage_ops[0], false), std::string("F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5"));
        QCOMPARE(render(s.stage_ops[2], false), std::string("F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5"));
        QCOMPARE(render(s.stage_ops[3], false), std::string("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"));
        // fewer microbatches than the warm-up wants
        const Schedule short_run = build_schedule({ScheduleKind::one_f_one_b, 4, 2, 1, 0.0});
        QCOMPARE(render(short_run.stage_ops[0], false), std::string("F0 F1 B0 B1"));
    }

    void interleavedFollowsMegatron()
    {
        // N = 2, M = 4, v = 2, written out by hand from Megatron-LM's
        // forward_backward_pipelining_with_interleaving: stage 0 warms up with
        // (N-0-1)*2 + (v-1)*N = 4 forwards, stage 1 with 2; forwards walk chunk 0 then chunk 1
        // in groups of N microbatches, backwards walk the chunks in reverse.
        const Schedule s = build_schedule({ScheduleKind::interleaved, 2, 4, 2, 0.0});
        QCOMPARE(render(s.stage_ops[0], true),
                 std::string("F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
                             "B2.1 B3.1 B2.0 B3.0"));
        QCOMPARE(render(s.stage_ops[1], true),
                 std::string("F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 "
                             "F3.1 B3.1 B2.0 B3.0"));
        // M == N: Megatron runs all forwards first
        const Schedule all_warm = build_schedule({ScheduleKind::interleaved, 2, 2, 2, 0.0});
        QCOMPARE(render(all_warm.stage_ops[1], true), std::string("F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0"));
    }

    void zbH1DefersWeightGradients()
    {
        const int n = 4, m = 6;
        const Schedule s = build_schedule({ScheduleKind::zb_h1, n, m, 1, 0.0});
        QVERIFY(s.split_backward);
        QCOMPARE(render(s.stage_ops[0], false), std::string("F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5"));
        QCOMPARE(render(s.stage_ops[3], false), std::string("F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"));
        for (int stage = 0; stage < n; ++stage) {
            const auto& ops = s.stage_ops[stage];
            QCOMPARE(ops.size(), std::size_t(3 * m));
            // Stage s has run exactly s more B's than W's before its first W.
            int b_before_first_w = 0;
            for (const Op& op : ops) {
                if (op.kind == OpKind::W)
                    break;
                b_before_first_w += op.kind == OpKind::B;
            }
            QCOMPARE(b_before_first_w, stage + 1);
        }
    }

    void zbH2WarmsUpDeeperAndDrainsBFirst()
    {
        // Written out by hand from the rule (B if ready, else F within 2N - 1 held, else W) at
        // F = B = W: stage 0 warms up with 2N - 1 = 5 forwards where ZB-H1 has 3, and in the
        // cool-down each B runs as soon as it arrives with the W passes after it.
        const Schedule s = build_schedule({ScheduleKind::zb_h2, 3, 6, 1, 0.0});
        QVERIFY(s.split_backward);
        QCOMPARE(render(s.stage_ops[0], false), std::string("F0 F1 F2 F3 F4 B0 W0 B1 F5 B2 W1 B3 W2 B4 W3 W4 B5 W5"));
        QCOMPARE(render(s.stage_ops[2], false), std::string("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 W0 F5 B5 W1 W2 W3 W4 W5"));
    }

    void zbVWalksTheV()
    {
        // N = 2, M = 4: stage 0 holds pieces 0 and 3, stage 1 pieces 1 and 2 (chunk 1 = the
        // V's way back). Stage 0 warms up chunk 0 with 2N - 1 = 3 forwards; stage 1 runs
        // chunk 1's first backwards with their W at once.
        const Schedule s = build_schedule({ScheduleKind::zb_v, 2, 4, 2, 0.0});
        QVERIFY(s.split_backward);
        QCOMPARE(placement_of(s.spec), Placement::vshape);
        QCOMPARE(render(s.stage_ops[0], true),
                 std::string("F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 B1.0 W1.0 "
                             "F3.1 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0"));
        QCOMPARE(render(s.stage_ops[1], true),
                 std::string("F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 F3.0 B1.0 W1.0 F3.1 B2.1 "
                             "W2.1 B2.0 B3.1 B3.0 W2.0 W3.1 W3.0"));
    }

    void dualPipeVPairsForwardsWithBackwards()
    {
        const Schedule s = build_schedule({ScheduleKind::dualpipe_v, 2, 4, 2, 0.0});
        QVERIFY(s.split_backward);
        QCOMPARE(placement_of(s.spec), Placement::vshape);
        // Every pair is a forward of one chunk with the other chunk's backward.
        int pairs = 0;
        for (const auto& ops : s.stage_ops)
            for (std::size_t i = 0; i + 1 < ops.size(); ++i)
                if (ops[i].overlap_next) {
                    ++pairs;
                    QCOMPARE(ops[i].kind, OpKind::F);
                    QCOMPARE(ops[i + 1].kind, OpKind::B);
                    QVERIFY(ops[i].chunk != ops[i + 1].chunk);
                }
        QVERIFY(pairs > 0);
        // Stage 1 (the V's turn), by hand from DeepSeek's phases: F0 F1 of both chunks; the first
        // steady pair is kept apart at the turn; then F&B pairs; the cool-down's second half splits
        // the backward and its W passes close the step.
        QCOMPARE(render(s.stage_ops[1], true),
                 std::string("F0.0 F0.1 F1.0 F1.1 F2.0 B0.1 W0.1 F2.1 B0.0 W0.0 F3.0 B1.1 W1.1 F3.1 B1.0 W1.0 B2.1 "
                             "W2.1 B2.0 W2.0 B3.1 B3.0 W3.1 W3.0"));
        QVERIFY(!s.stage_ops[1][4].overlap_next && s.stage_ops[1][7].overlap_next);
    }

    void specRulesAreExplained()
    {
        struct Case {
            ScheduleSpec spec;
            const char* mentions;
        };
        const Case cases[] = {
            {{ScheduleKind::interleaved, 4, 6, 2, 0.0}, "to be a multiple of the number of stages (4)"},
            {{ScheduleKind::interleaved, 4, 8, 1, 0.0}, "at least 2 virtual stages"},
            {{ScheduleKind::one_f_one_b, 4, 8, 2, 0.0}, "need the interleaved schedule"},
            {{ScheduleKind::gpipe, 0, 8, 1, 0.0}, "at least 1 stage"},
            {{ScheduleKind::gpipe, 2, 0, 1, 0.0}, "at least 1 microbatch"},
            {{ScheduleKind::gpipe, 2, 2, 1, -1.0}, "latency"},
            {{ScheduleKind::gpipe, 4096, 1 << 22, 1, 0.0}, "too large"},
            // 8 stages x 2^20 microbatches: 2^24 passes, 0.8 GB of ops for a single 1F1B timeline
            {{ScheduleKind::one_f_one_b, 8, 1 << 21, 1, 0.0}, "8 stages x 2097152 microbatches x 1 model chunks"},
            // three ints whose product overflows 64 bits
            {{ScheduleKind::interleaved, 1 << 30, 1 << 30, 1 << 30, 0.0}, "too large to simulate"},
            {{ScheduleKind::zb_v, 4, 8, 1, 0.0}, "exactly 2 model chunks per stage in a V, not 1"},
            {{ScheduleKind::dualpipe_v, 4, 6, 2, 0.0}, "at least 2N = 8 microbatches"},
            {{ScheduleKind::zb_h2, 4, 8, 2, 0.0}, "need the interleaved schedule"},
            {{ScheduleKind::custom, 2, 2, 1, 0.0}, "read from a file"},
        };
        for (const Case& c : cases) {
            const auto problem = error_of([&] { build_schedule(c.spec); });
            QVERIFY2(problem.has_value(), c.mentions);
            QCOMPARE(problem->kind, ProblemKind::invalid_schedule);
            QVERIFY2(problem->message.find(c.mentions) != std::string::npos, problem->message.c_str());
        }
    }

    void everyStageRunsEachOpOnce_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("v");
        for (int n : {1, 2, 3, 5, 8})
            for (int m : {1, 2, 7, 16}) {
                QTest::addRow("gpipe %d %d", n, m) << int(ScheduleKind::gpipe) << n << m << 1;
                QTest::addRow("1f1b %d %d", n, m) << int(ScheduleKind::one_f_one_b) << n << m << 1;
                QTest::addRow("zb-h1 %d %d", n, m) << int(ScheduleKind::zb_h1) << n << m << 1;
                QTest::addRow("zb-h2 %d %d", n, m) << int(ScheduleKind::zb_h2) << n << m << 1;
                QTest::addRow("zb-v %d %d", n, m) << int(ScheduleKind::zb_v) << n << m << 2;
                if (m >= 2 * n)
                    QTest::addRow("dualpipe-v %d %d", n, m) << int(ScheduleKind::dualpipe_v) << n << m << 2;
                for (int v : {2, 3})
                    if (m % n == 0)
                        QTest::addRow("interleaved %d %d %d", n, m, v) << int(ScheduleKind::interleaved) << n << m << v;
            }
    }
    void everyStageRunsEachOpOnce()
    {
        QFETCH(int, kind);
        QFETCH(int, n);
        QFETCH(int, m);
        QFETCH(int, v);
        const Schedule s = build_schedule({ScheduleKind(kind), n, m, v, 0.0});
        const int kinds = s.split_backward ? 3 : 2;
        QCOMPARE(static_cast<int>(s.stage_ops.size()), n);
        for (const auto& ops : s.stage_ops) {
            std::vector<int> seen(static_cast<std::size_t>(kinds * v * m), 0);
            for (const Op& op : ops)
                ++seen[(static_cast<int>(op.kind) * v + op.chunk) * m + op.microbatch];
            QVERIFY(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        }
    }
};

QTEST_GUILESS_MAIN(TestPipelineSchedule)
#include "tst_pipeline_schedule.moc"
