// The planner's search: in-flight counts from the op order equal the simulator's, the
// memory-fitting cut fits and is the fastest that does, the ranking, and the bad-input errors.
#include "problemcheck.h"

#include "core/pipeline/search.h"
#include "core/util/error.h"

#include <QTest>
#include <algorithm>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

// A small decoder: an embedding, `blocks` equal blocks, a head.
Profile decoder(int blocks)
{
    Profile profile;
    profile.name = "decoder";
    auto layer = [](std::string name, std::int64_t params, double fwd, std::int64_t act) {
        return Layer{.name = std::move(name), .params = params, .fwd_ms = fwd, .bwd_ms = 2 * fwd,
                     .bwd_input_ms = fwd, .bwd_weight_ms = fwd, .activation_bytes = act};
    };
    profile.layers.push_back(layer("embed", 50'000'000, 0.1, 10'000'000));
    for (int i = 0; i < blocks; ++i)
        profile.layers.push_back(layer("block" + std::to_string(i), 20'000'000, 1.0, 100'000'000));
    profile.layers.push_back(layer("head", 50'000'000, 2.0, 40'000'000));
    return profile;
}

} // namespace

class TestPipelineSearch : public QObject {
    Q_OBJECT

private slots:
    void inFlightFromTheOpOrderMatchesTheSimulator()
    {
        for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                  ScheduleKind::interleaved, ScheduleKind::zb_h1})
            for (int n : {1, 2, 4, 8})
                for (int m : {n, 2 * n, 3 * n + 1}) {
                    const int v = kind == ScheduleKind::interleaved ? 2 : 1;
                    if (kind == ScheduleKind::interleaved && m % n != 0)
                        continue;
                    const ScheduleSpec spec{.kind = kind, .stages = n, .microbatches = m,
                                            .virtual_stages = v};
                    const Schedule schedule = build_schedule(spec);
                    const Profile profile = uniform_profile(n * v);
                    const Plan plan = make_plan(profile, schedule, partition(profile, n * v, {}));
                    const std::vector<int> peaks = in_flight_peaks(schedule);
                    for (int s = 0; s < n; ++s)
                        QCOMPARE(peaks[s], plan.timeline.stage_stats[s].peak_activations);
                }
    }

    void memoryFitCutFitsAndIsFastest()
    {
        const Profile profile = decoder(14); // 16 layers
        const Schedule schedule = build_schedule({.kind = ScheduleKind::one_f_one_b, .stages = 4,
                                                  .microbatches = 16});
        const TrainingOptions options{.dp = 1};
        // The compute-balanced cut and its memory; then a limit just below it.
        const StepPlan fastest = make_step_plan(profile, schedule,
                                                partition(profile, 4, {.method = PartitionMethod::compute}),
                                                options);
        const std::int64_t limit = fastest.peak_memory_bytes - 1;
        const auto cut = memory_fit_boundaries(profile, schedule, options, limit);
        QVERIFY(cut.has_value());
        const StepPlan fitted = make_step_plan(profile, schedule, *cut,
                                               TrainingOptions{.gpu_memory_bytes = limit});
        QVERIFY(fitted.fits);
        // Stage 0 keeps 4 microbatches in flight, the last 1: the fitting cut moves layers back.
        QVERIFY(fitted.plan.stages[0].layer_count <= fastest.plan.stages[0].layer_count);
        QVERIFY(fitted.plan.timeline.makespan >= fastest.plan.timeline.makespan);
        // No cut with a smaller busiest stage fits: brute force over all 455 cuts of 16 into 4.
        double best_bound = 1e300;
        for (int a = 1; a < 16; ++a)
            for (int b = a + 1; b < 16; ++b)
                for (int c = b + 1; c < 16; ++c) {
                    const StepPlan p = make_step_plan(profile, schedule, {a, b, c},
                                                      TrainingOptions{.gpu_memory_bytes = limit});
                    if (!p.fits)
                        continue;
                    double bound = 0;
                    for (const StageCost& s : p.plan.stages)
                        bound = std::max(bound, s.fwd_ms + s.bwd_ms);
                    best_bound = std::min(best_bound, bound);
                }
        double fitted_bound = 0;
        for (const StageCost& s : fitted.plan.stages)
            fitted_bound = std::max(fitted_bound, s.fwd_ms + s.bwd_ms);
        QVERIFY(std::abs(fitted_bound - best_bound) <= 1e-9 * best_bound);
        // Nothing fits in 1 byte.
        QVERIFY(!memory_fit_boundaries(profile, schedule, options, 1));
    }

    void searchRanksAndCounts()
    {
        const Profile profile = decoder(14);
        SearchSpec spec{.gpus = 8, .global_batch = 32, .micro_batch_size = 1,
                        .gpu_memory_bytes = std::int64_t(8) << 30, .link_gbps = 100.0};
        const SearchResult result = search_plans(profile, spec);
        QVERIFY(result.fitting > 0);
        QVERIFY(result.candidates.size() >= result.fitting);
        for (std::size_t i = 0; i + 1 < result.fitting; ++i)
            QVERIFY(result.candidates[i].step_time <= result.candidates[i + 1].step_time);
        for (std::size_t i = 0; i < result.candidates.size(); ++i) {
            const Candidate& c = result.candidates[i];
            QCOMPARE(c.fits, i < result.fitting);
            QCOMPARE(c.pp * c.dp, 8);
            QCOMPARE(c.microbatches * c.dp * 1, 32);
            QVERIFY(c.fits == (c.peak_memory_bytes <= spec.gpu_memory_bytes));
        }
        const Candidate& best = result.candidates[0];
        QVERIFY(std::abs(best.samples_per_second - 32 / (best.step_time / 1000)) < 1e-9 * best.samples_per_second);
        for (std::size_t i = 1; i < result.fitting; ++i) {
            const std::string why = why_slower(result.candidates[i], best);
            if (result.candidates[i].step_time > best.step_time)
                QVERIFY2(why.rfind("+", 0) == 0 && why.find(" ms") != std::string::npos, why.c_str());
            else
                QVERIFY2(why.rfind("ties with #1", 0) == 0, why.c_str());
        }
        // Without a shape selective recomputation changes nothing, so it is not searched twice.
        for (const Candidate& c : result.candidates)
            QVERIFY(c.recompute != Recompute::selective);
        // Restricting the lists restricts the candidates.
        spec.schedules = {ScheduleKind::zb_h1};
        spec.recompute = {Recompute::full};
        for (const Candidate& c : search_plans(profile, spec).candidates)
            QVERIFY(c.schedule == ScheduleKind::zb_h1 && c.recompute == Recompute::full);
    }

    void whyRunnersUpLose()
    {
        const Candidate best{.pp = 4, .dp = 2, .step_time = 100, .makespan = 90, .compute_ms = 80,
                             .bubble_fraction = 0.1, .exposed_allreduce_ms = 10};
        Candidate slower = best;
        slower.dp = 8;
        slower.step_time = 110;
        slower.exposed_allreduce_ms = 20;
        QCOMPARE(why_slower(slower, best), std::string("+10 ms (+10 %): 10 ms more exposed gradient all-reduce (dp 8 vs 2)"));
        slower = best;
        slower.recompute = Recompute::full;
        slower.step_time = slower.makespan = 130;
        slower.compute_ms = 120;
        slower.exposed_allreduce_ms = 0;
        QCOMPARE(why_slower(slower, best),
                 std::string("+30 ms (+30 %): its busiest stage computes 40 ms more (recompute full vs none), "
                             "despite 10 ms less exposed all-reduce"));
        slower = best;
        slower.step_time = 105;
        slower.makespan = 95;
        slower.bubble_fraction = 0.15;
        QCOMPARE(why_slower(slower, best), std::string("+5 ms (+5 %): bubble 15.0 % vs 10.0 % (1f1b, 1 microbatches)"));
        QCOMPARE(why_slower(best, best).rfind("ties with #1", 0), std::size_t(0));
    }

    void badInputIsOneSentence()
    {
        const Profile profile = decoder(2);
        const SearchSpec ok{.gpus = 4, .global_batch = 8, .micro_batch_size = 2,
                            .gpu_memory_bytes = std::int64_t(80) << 30};
        SearchSpec spec = ok;
        spec.global_batch = 9;
        auto problem = error_of([&] { search_plans(profile, spec); });
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("not a multiple of the micro batch size") != std::string::npos,
                 problem->message.c_str());
        spec = ok;
        spec.gpus = 7; // pp 7 > 4 layers; pp 1 leaves dp 7, which does not divide 4 microbatches
        problem = error_of([&] { search_plans(profile, spec); });
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("no way to split 7 GPUs") != std::string::npos, problem->message.c_str());
        Profile measured = profile;
        measured.micro_batch_size = 4;
        problem = error_of([&] { search_plans(measured, ok); });
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("measured at micro batch size 4") != std::string::npos,
                 problem->message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestPipelineSearch)
#include "tst_pipeline_search.moc"
