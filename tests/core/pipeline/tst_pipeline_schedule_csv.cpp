// torch.distributed.pipelining's CSV schedule format: hand-written fixtures following the action
// grammar of torch 2.x (_Action.from_str: [stage][type][microbatch], "(a;b)OVERLAP_F_B"), the
// export of every built-in schedule and its round trip, and hostile files.
#include "problemcheck.h"

#include "core/pipeline/schedule_csv.h"
#include "core/pipeline/simulator.h"
#include "core/util/error.h"

#include <QTest>
#include <string>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

Timeline run(const Schedule& schedule)
{
    const int pieces = schedule.spec.stages * schedule.spec.virtual_stages;
    Profile profile = uniform_profile(pieces);
    for (std::size_t i = 0; i < profile.layers.size(); ++i) { // uneven, so a wrong piece shows
        profile.layers[i].fwd_ms = 1.0 + 0.25 * double(i);
        profile.layers[i].bwd_input_ms = 1.5 + 0.125 * double(i);
        profile.layers[i].bwd_weight_ms = 0.75;
        profile.layers[i].bwd_ms = profile.layers[i].bwd_input_ms + 0.75;
    }
    std::vector<int> boundaries;
    for (int p = 1; p < pieces; ++p)
        boundaries.push_back(p);
    return make_plan(profile, schedule, boundaries).timeline;
}

} // namespace

class TestPipelineScheduleCsv : public QObject {
    Q_OBJECT

private slots:
    void handWrittenLoopedFixture()
    {
        // 1F1B on 2 ranks, as torch's compute_comms format writes it: UNSHARD/RESHARD and the
        // sends and receives are skipped, an empty cell is an idle step.
        const std::string csv = "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,,0RECV_B0,0B0,0RECV_B1,0B1,0RESHARD\r\n"
                                "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\r\n";
        const Schedule s = parse_schedule_csv(csv, "fixture.csv");
        QCOMPARE(s.spec.kind, ScheduleKind::custom);
        QCOMPARE(s.spec.stages, 2);
        QCOMPARE(s.spec.microbatches, 2);
        QCOMPARE(s.spec.virtual_stages, 1);
        QVERIFY(!s.split_backward);
        const Schedule built = build_schedule({ScheduleKind::one_f_one_b, 2, 2, 1, 0.0});
        QVERIFY(s.stage_ops == built.stage_ops);
        QCOMPARE(run(s).makespan, run(built).makespan);
    }

    void handWrittenVFixture()
    {
        // A V on 2 ranks (stages 0 and 3 on rank 0, 1 and 2 on rank 1), backward split into I
        // and W except one full B, and one overlapped pair.
        const std::string csv = "0F0, 0F1, 3F0, 3I0, 3W0, 3F1, 3B1, 0I0, 0W0, 0I1, 0W1\n"
                                "1F0,2F0,1F1,2I0,2W0,(2F1;1I0)OVERLAP_F_B,2I1,1W0,2W1,1I1,1W1\n";
        const Schedule s = parse_schedule_csv(csv, "v.csv");
        QCOMPARE(s.spec.stages, 2);
        QCOMPARE(s.spec.virtual_stages, 2);
        QCOMPARE(s.spec.microbatches, 2);
        QCOMPARE(placement_of(s.spec), Placement::vshape);
        QVERIFY(s.split_backward);
        // 3B1, a full backward, is B then its W.
        QCOMPARE(s.stage_ops[0][6], (Op{.microbatch = 1, .chunk = 1, .kind = OpKind::B}));
        QCOMPARE(s.stage_ops[0][7], (Op{.microbatch = 1, .chunk = 1, .kind = OpKind::W}));
        QCOMPARE(s.stage_ops[0].size(), std::size_t(12));
        // Stage 2 is chunk 1 of rank 1; the pair starts both halves together.
        QCOMPARE(s.stage_ops[1][5], (Op{.microbatch = 1, .chunk = 1, .kind = OpKind::F, .overlap_next = true}));
        QCOMPARE(s.stage_ops[1][6], (Op{.microbatch = 0, .chunk = 0, .kind = OpKind::B}));
        const Timeline t = run(s);
        QVERIFY(t.makespan > 0);
        const TimedOp& f = t.ops[t.stage_begin[1] + 5];
        const TimedOp& b = t.ops[t.stage_begin[1] + 6];
        QCOMPARE(b.start, f.end); // drawn one after the other, started as one
    }

    void exportText()
    {
        QCOMPARE(schedule_csv(build_schedule({ScheduleKind::one_f_one_b, 2, 2, 1, 0.0})),
                 std::string("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"));
        // Split backwards are I and W; torch's stage index is the piece, so stage 0 of the V
        // runs 0 and 3.
        const std::string zbv = schedule_csv(build_schedule({ScheduleKind::zb_v, 2, 4, 2, 0.0}));
        QCOMPARE(zbv.substr(0, 27), std::string("0F0,0F1,0F2,3F0,3I0,3W0,3F1"));
        const std::string interleaved = schedule_csv(build_schedule({ScheduleKind::interleaved, 2, 2, 2, 0.0}));
        QCOMPARE(interleaved.substr(0, interleaved.find('\n')), std::string("0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1"));
        // DualPipeV's pairs are torch's overlapped F and FULL backward.
        const std::string dualpipe = schedule_csv(build_schedule({ScheduleKind::dualpipe_v, 2, 4, 2, 0.0}));
        QVERIFY2(dualpipe.find("(0F3;3B1)OVERLAP_F_B") != std::string::npos, dualpipe.c_str());
    }

    void roundTripKeepsTheTimeline_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("v");
        for (int n : {1, 2, 4})
            for (int m : {1, 3, 8}) {
                for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1,
                                       ScheduleKind::zb_h2, ScheduleKind::zb_v})
                    QTest::addRow("%s N=%d M=%d", to_string(k).data(), n, m)
                        << int(k) << n << m << default_virtual_stages(k);
                if (m % n == 0)
                    QTest::addRow("interleaved N=%d M=%d", n, m) << int(ScheduleKind::interleaved) << n << m << 3;
                if (m >= 2 * n)
                    QTest::addRow("dualpipe-v N=%d M=%d", n, m) << int(ScheduleKind::dualpipe_v) << n << m << 2;
            }
    }
    void roundTripKeepsTheTimeline()
    {
        QFETCH(int, kind);
        QFETCH(int, n);
        QFETCH(int, m);
        QFETCH(int, v);
        const Schedule built = build_schedule({ScheduleKind(kind), n, m, v, 0.0});
        const Schedule read = parse_schedule_csv(schedule_csv(built), "round.csv");
        QCOMPARE(read.spec.stages, n);
        QCOMPARE(read.spec.microbatches, m);
        QCOMPARE(read.spec.virtual_stages, v);
        QCOMPARE(placement_of(read.spec), n == 1 ? Placement::looped : placement_of(built.spec));
        QCOMPARE(read.split_backward, built.split_backward);
        QVERIFY(read.stage_ops == built.stage_ops);
        const Timeline a = run(built), b = run(read);
        QCOMPARE(a.makespan, b.makespan);
        QCOMPARE(a.ops.size(), b.ops.size());
        for (std::size_t i = 0; i < a.ops.size(); ++i) {
            QCOMPARE(a.ops[i].start, b.ops[i].start);
            QCOMPARE(a.ops[i].end, b.ops[i].end);
        }
        for (int s = 0; s < n; ++s)
            QCOMPARE(a.stage_stats[s].peak_activations, b.stage_stats[s].peak_activations);
    }

    void hostileFilesGetOneSentence_data()
    {
        QTest::addColumn<QString>("csv");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("empty") << "\n\n"
                               << "has no ranks";
        QTest::newRow("no type") << "0F0,0Q1\n"
                                 << "line 1 (rank 0), cell 2: '0Q1' has no action type";
        QTest::newRow("no stage") << "F0\n"
                                  << "cell 1: 'F0' is not an action like 0F1";
        QTest::newRow("no microbatch") << "0F0,0B\n"
                                       << "cell 2: '0B' needs a microbatch index";
        QTest::newRow("trailing") << "0F0x,0B0\n"
                                  << "cell 1: '0F0x' has something after";
        QTest::newRow("huge") << "0F99999999999\n"
                              << "needs a microbatch index of at most";
        QTest::newRow("bad pair") << "(0F0)OVERLAP_F_B,0B0\n"
                                  << "must pair exactly two compute actions";
        QTest::newRow("open pair") << "(0F0;0B0\n"
                                   << "is not an overlapped pair";
        QTest::newRow("two owners") << "0F0,0B0\n0F0,0B0\n"
                                    << "line 2 (rank 1), cell 1: stage 0 also runs on rank 0";
        QTest::newRow("gap") << "0F0,0B0\n2F0,2B0\n"
                             << "no rank runs stage 1";
        QTest::newRow("uneven") << "0F0,0B0,2F0,2B0\n1F0,1B0\n"
                                << "spreads 3 stages over 2 ranks";
        QTest::newRow("placement") << "0F0,0B0,1F0,1B0\n2F0,2B0,3F0,3B0\n"
                                   << "neither the looped placement";
        QTest::newRow("twice") << "0F0,0F0,0B0\n"
                               << "cell 2: F of stage 0, microbatch 0 comes again (first in cell 1)";
        QTest::newRow("missing") << "0F0,0B0,0F1\n"
                                 << "line 1 (rank 0) never runs 0B1";
        QTest::newRow("missing w") << "0F0,0I0\n"
                                   << "never runs 0W0";
        QTest::newRow("blank inside") << "0F0,1B0\n\n1F0,1B0\n"
                                      << "line 3 (rank 1), cell 1: a blank line";
        QTest::newRow("no compute") << "0F0,0B0\n1SEND_F0\n"
                                    << "line 2 (rank 1), cell 1: the rank has no compute";
        QTest::newRow("comm garbage") << "0SEND_Fx\n"
                                      << "has something after its microbatch index";
    }
    void hostileFilesGetOneSentence()
    {
        QFETCH(QString, csv);
        QFETCH(QString, mentions);
        const auto problem = error_of([&] { parse_schedule_csv(csv.toStdString(), "bad.csv"); });
        QVERIFY(problem.has_value());
        QCOMPARE(problem->kind, ProblemKind::invalid_schedule);
        QVERIFY2(problem->message.find(mentions.toStdString()) != std::string::npos, problem->message.c_str());
        QVERIFY2(problem->message.find("bad.csv") != std::string::npos, problem->message.c_str());
        QVERIFY(problem->message.find('\n') == std::string::npos);
    }

    void orderThatCannotRunIsADeadlock()
    {
        // Well-formed, but rank 1 wants microbatch 1 before rank 0 sends it.
        const Schedule s = parse_schedule_csv("0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n", "cycle.csv");
        const auto problem = error_of([&] { run(s); });
        QVERIFY(problem.has_value());
        QCOMPARE(problem->kind, ProblemKind::deadlock);
        QVERIFY2(problem->message.find("the custom op order deadlocks") != std::string::npos, problem->message.c_str());
    }

    void missingFileNamesIt()
    {
        const auto problem = error_of([&] { load_schedule_csv("/nonexistent/schedule.csv"); });
        QVERIFY(problem.has_value());
        QCOMPARE(problem->kind, ProblemKind::cannot_open);
        QVERIFY(problem->message.find("/nonexistent/schedule.csv") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestPipelineScheduleCsv)
#include "tst_pipeline_schedule_csv.moc"
