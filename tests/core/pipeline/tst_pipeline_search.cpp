// The planner's search: in-flight counts from the op order equal the simulator's, the
// memory-fitting cut fits and is the fastest that does, the ranking, and the bad-input errors.
#include "problemcheck.h"

#include "core/pipeline/fit_partition.h"
#include "core/pipeline/search.h"
#include "core/util/error.h"

#include <QTest>
#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <set>

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
        return Layer{.name = std::move(name),
                     .params = params,
                     .fwd_ms = fwd,
                     .bwd_ms = 2 * fwd,
                     .bwd_input_ms = fwd,
                     .bwd_weight_ms = fwd,
                     .activation_bytes = act};
    };
    profile.layers.push_back(layer("embed", 50'000'000, 0.1, 10'000'000));
    for (int i = 0; i < blocks; ++i)
        profile.layers.push_back(layer("block" + std::to_string(i), 20'000'000, 1.0, 100'000'000));
    profile.layers.push_back(layer("head", 50'000'000, 2.0, 40'000'000));
    return profile;
}

constexpr std::int64_t GiB = std::int64_t(1) << 30;

// The review's counterexample: activations 1, 1, 5, 1 GiB; forward 1, 1, 2, 2 ms (B = 2F), 1000
// params a layer. Under 1F1B on 3 stages (M = 6) stage s keeps 3 - s microbatches, so only the
// cut 1,2 fits 8 GiB: stage 0 keeps 3 x 1, stage 1 2 x 1, stage 2 1 x (5 + 1) GiB. A greedy
// fill gives stage 0 layers 0-1 (6 GiB fits) and then finds no room for layer 2 on stage 1.
Profile counterexample()
{
    Profile profile;
    profile.name = "counterexample";
    const int act[] = {1, 1, 5, 1};
    const double fwd[] = {1, 1, 2, 2};
    for (int i = 0; i < 4; ++i)
        profile.layers.push_back(Layer{.name = "l" + std::to_string(i),
                                       .params = 1000,
                                       .fwd_ms = fwd[i],
                                       .bwd_ms = 2 * fwd[i],
                                       .bwd_input_ms = fwd[i],
                                       .bwd_weight_ms = fwd[i],
                                       .activation_bytes = act[i] * GiB});
    return profile;
}

// The busiest piece's compute: what the fitting cut minimises (with one chunk a stage, the
// busiest stage).
double busiest(const StepPlan& step)
{
    double bound = 0;
    for (const PieceCost& p : step.plan.pieces)
        bound = std::max(bound, p.fwd_ms + p.bwd_ms);
    return bound;
}

// A random non-uniform profile; integer costs, so that sums are exact and ties are real ties.
template <class Pick>
Profile random_profile(int layer_count, Pick& pick)
{
    Profile profile;
    profile.name = "random";
    for (int l = 0; l < layer_count; ++l) {
        const double fwd = pick(1, 6);
        profile.layers.push_back(Layer{.name = "l" + std::to_string(l),
                                       .params = std::int64_t(pick(1, 4000)) * 1000,
                                       .fwd_ms = fwd,
                                       .bwd_ms = 2 * fwd,
                                       .bwd_input_ms = fwd,
                                       .bwd_weight_ms = fwd,
                                       .activation_bytes = std::int64_t(pick(1, 3000)) * 1'000'000});
    }
    return profile;
}

// Every cut of `layers` layers into `pieces` pieces, as boundary lists.
void each_cut(int layers, int pieces, std::vector<int>& cut, const std::function<void()>& visit)
{
    if (static_cast<int>(cut.size()) == pieces - 1)
        return visit();
    const int from = cut.empty() ? 1 : cut.back() + 1;
    for (int b = from; b <= layers - (pieces - 1 - static_cast<int>(cut.size())); ++b) {
        cut.push_back(b);
        each_cut(layers, pieces, cut, visit);
        cut.pop_back();
    }
}

struct Seen {
    std::vector<int> cut;
    double bound; // busiest piece
    std::int64_t peak; // peak memory
};

// Brute force: every cut of the profile into the schedule's pieces, through make_step_plan.
std::vector<Seen> every_cut(const Profile& profile, const Schedule& schedule, const TrainingOptions& options)
{
    std::vector<Seen> all;
    std::vector<int> cut;
    each_cut(static_cast<int>(profile.layers.size()), schedule.spec.stages * schedule.spec.virtual_stages, cut, [&] {
        const StepPlan step = make_step_plan(profile, schedule, cut, options);
        all.push_back({cut, busiest(step), step.peak_memory_bytes});
    });
    return all;
}

// What brute force says: the least peak of any cut; a limit drawn at some cut's peak (so at least
// one fits) or, one time in five, just under the least (so none does); the smallest busiest piece
// among the cuts within the limit, and the least peak among those.
struct Truth {
    std::int64_t least = 0;
    std::int64_t limit = 0;
    std::optional<double> best_bound;
    std::int64_t best_peak = std::numeric_limits<std::int64_t>::max();
};

template <class Pick>
Truth brute_force(const std::vector<Seen>& all, Pick& pick)
{
    Truth t;
    t.least = all.front().peak;
    for (const Seen& c : all)
        t.least = std::min(t.least, c.peak);
    t.limit = pick(0, 4) == 0 ? t.least - 1 : all[pick(0, int(all.size()) - 1)].peak;
    for (const Seen& c : all)
        if (c.peak <= t.limit)
            t.best_bound = std::min(t.best_bound.value_or(1e300), c.bound);
    for (const Seen& c : all)
        if (c.peak <= t.limit && t.best_bound && c.bound == *t.best_bound)
            t.best_peak = std::min(t.best_peak, c.peak);
    return t;
}

// memory_fit_boundaries against brute force's truth at its limit: a cut iff one fits, and then
// one that fits with the smallest busiest piece and, among those, the least peak. Returns whether
// a cut was found (false also after a failed check, which QTest has recorded).
bool fit_agrees(const Profile& profile, const Schedule& schedule, const TrainingOptions& options, const Truth& truth,
                const std::string& where)
{
    const auto found = memory_fit_boundaries(profile, schedule, options, truth.limit);
    [&] { QVERIFY2(found.has_value() == truth.best_bound.has_value(), where.c_str()); }();
    if (!found || !truth.best_bound)
        return false;
    TrainingOptions limited = options;
    limited.gpu_memory_bytes = truth.limit;
    const StepPlan step = make_step_plan(profile, schedule, *found, limited);
    [&] {
        QVERIFY2(step.fits, where.c_str());
        QVERIFY2(busiest(step) == *truth.best_bound, where.c_str());
        QVERIFY2(step.peak_memory_bytes == truth.best_peak, where.c_str());
    }();
    return true;
}

} // namespace

class TestPipelineSearch : public QObject {
    Q_OBJECT

private slots:
    void inFlightFromTheOpOrderMatchesTheSimulator()
    {
        for (ScheduleKind kind :
             {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1})
            for (int n : {1, 2, 4, 8})
                for (int m : {n, 2 * n, 3 * n + 1}) {
                    const int v = kind == ScheduleKind::interleaved ? 2 : 1;
                    if (kind == ScheduleKind::interleaved && m % n != 0)
                        continue;
                    const ScheduleSpec spec{.kind = kind, .stages = n, .microbatches = m, .virtual_stages = v};
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
        const Schedule schedule = build_schedule({.kind = ScheduleKind::one_f_one_b, .stages = 4, .microbatches = 16});
        const TrainingOptions options{.dp = 1};
        // The compute-balanced cut and its memory; then a limit just below it.
        const StepPlan fastest =
            make_step_plan(profile, schedule, partition(profile, 4, {.method = PartitionMethod::compute}), options);
        const std::int64_t limit = fastest.peak_memory_bytes - 1;
        const auto cut = memory_fit_boundaries(profile, schedule, options, limit);
        QVERIFY(cut.has_value());
        const StepPlan fitted = make_step_plan(profile, schedule, *cut, TrainingOptions{.gpu_memory_bytes = limit});
        QVERIFY(fitted.fits);
        // Stage 0 keeps 4 microbatches in flight, the last 1: the fitting cut moves layers back.
        QVERIFY(fitted.plan.stages[0].layer_count <= fastest.plan.stages[0].layer_count);
        QVERIFY(fitted.plan.timeline.makespan >= fastest.plan.timeline.makespan);
        // No cut with a smaller busiest stage fits: brute force over all 455 cuts of 16 into 4.
        double best_bound = 1e300;
        for (int a = 1; a < 16; ++a)
            for (int b = a + 1; b < 16; ++b)
                for (int c = b + 1; c < 16; ++c) {
                    const StepPlan p =
                        make_step_plan(profile, schedule, {a, b, c}, TrainingOptions{.gpu_memory_bytes = limit});
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

    void memoryFitIsExactWhereGreedyIsNot()
    {
        const Profile profile = counterexample();
        const Schedule schedule = build_schedule({.kind = ScheduleKind::one_f_one_b, .stages = 3, .microbatches = 6});
        const auto cut = memory_fit_boundaries(profile, schedule, {}, 8 * GiB);
        QVERIFY(cut.has_value());
        QCOMPARE(*cut, (std::vector<int>{1, 2}));
        const StepPlan step = make_step_plan(profile, schedule, *cut, {.gpu_memory_bytes = 8 * GiB});
        QVERIFY(step.fits);
        QCOMPARE(step.peak_memory_bytes, 6 * GiB + 2 * 1000 * 16);
        // Nothing fits 5 GiB; the least-memory cut is the same one (its peak is the smallest).
        QVERIFY(!memory_fit_boundaries(profile, schedule, {}, 5 * GiB));
        QCOMPARE(least_memory_boundaries(profile, schedule, {}), std::optional(std::vector<int>{1, 2}));
    }

    // Brute force: random non-uniform profiles, every cut enumerated, each one-chunk schedule. The
    // search finds a fitting cut iff one exists, and it is the one of the objective in
    // fit_partition.h: the smallest busiest-stage compute, then the smallest peak memory.
    void memoryFitMatchesBruteForce()
    {
        std::mt19937 random(16);
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
        int fitted = 0, unfittable = 0;
        for (int trial = 0; trial < 240; ++trial) {
            const int layer_count = pick(3, 8);
            const int stages = pick(2, std::min(4, layer_count));
            const Profile profile = random_profile(layer_count, pick);
            const ScheduleKind kinds[] = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1};
            const ScheduleKind kind = kinds[pick(0, 2)];
            const int m = pick(0, 1) ? stages : 2 * stages + 1;
            const Schedule schedule = build_schedule({.kind = kind, .stages = stages, .microbatches = m});
            const int dp = 1 << pick(0, 2);
            const TrainingOptions options{
                .dp = dp, .zero = pick(0, 3), .recompute = pick(0, 1) ? Recompute::none : Recompute::full};
            const std::vector<Seen> all = every_cut(profile, schedule, options);
            const Truth truth = brute_force(all, pick);
            const auto lean = least_memory_boundaries(profile, schedule, options);
            QVERIFY(lean.has_value());
            QCOMPARE(make_step_plan(profile, schedule, *lean, options).peak_memory_bytes, truth.least);
            ++(fit_agrees(profile, schedule, options, truth, "trial " + std::to_string(trial)) ? fitted : unfittable);
        }
        QVERIFY(fitted > 100 && unfittable > 20); // both outcomes exercised
    }

    // Every kind of schedule, with expert parameters sharded over dp / ep: cut_peak_memory is
    // make_step_plan's peak for every cut, and the fitting cut (enumerated or the DP, behind the
    // lower bound and the one-pass feasibility test that may reject a limit early) exists iff
    // brute force finds one and has the smallest busiest piece.
    void memoryFitWithExpertsOnEveryKind()
    {
        std::mt19937 random(4242);
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
        const ScheduleKind kinds[] = {ScheduleKind::gpipe,     ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                                      ScheduleKind::zb_h1,     ScheduleKind::zb_h2,       ScheduleKind::zb_v,
                                      ScheduleKind::dualpipe_v};
        int fitted = 0, unfittable = 0, cuts = 0;
        for (int trial = 0; trial < 140; ++trial) {
            const ScheduleKind kind = kinds[trial % 7];
            const int v =
                kind == ScheduleKind::interleaved || kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipe_v ? 2
                                                                                                                    : 1;
            const int stages = pick(2, 3);
            Profile profile = random_profile(pick(stages * v, stages * v + 3), pick);
            for (Layer& layer : profile.layers)
                layer.expert_params = layer.params / pick(1, 4);
            const int m = kind == ScheduleKind::dualpipe_v ? 2 * stages : stages * pick(1, 2);
            const Schedule schedule =
                build_schedule({.kind = kind, .stages = stages, .microbatches = m, .virtual_stages = v});
            const int ep = 1 << pick(0, 1);
            const TrainingOptions options{.dp = ep * (1 << pick(0, 1)),
                                          .zero = pick(0, 3),
                                          .recompute = pick(0, 1) ? Recompute::none : Recompute::full,
                                          .ep = ep};
            const std::vector<Seen> all = every_cut(profile, schedule, options);
            for (const Seen& seen : all) {
                QCOMPARE(cut_peak_memory(profile, schedule, options, seen.cut), seen.peak);
                ++cuts;
            }
            const std::string where = "trial " + std::to_string(trial) + " (" + std::string(to_string(kind)) + ")";
            ++(fit_agrees(profile, schedule, options, brute_force(all, pick), where) ? fitted : unfittable);
        }
        qInfo("%d cuts compared; %d trials fitted, %d did not", cuts, fitted, unfittable);
        QVERIFY(fitted > 60 && unfittable > 10);
    }

    // Interleaved (v > 1): a stage's pieces are not adjacent, so the DP does not apply. Small
    // models are enumerated: brute force through make_step_plan (which simulates) must agree with
    // the fast evaluator on which cuts fit, the smallest busiest piece, its peak and the least
    // peak. The same trials then run the local search alone (max_enumerated 0): whatever it
    // returns fits, and it finds a fitting cut in nearly every trial where one exists.
    void interleavedMemoryFitMatchesBruteForce()
    {
        std::mt19937 random(1616);
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
        int fitted = 0, unfittable = 0, local_found = 0, local_least_exact = 0, trials = 0;
        for (int trial = 0; trial < 120; ++trial) {
            const int stages = pick(2, 4); // each stage's held-count patterns differ
            const int v = pick(2, 3);
            const int layer_count = pick(stages * v, stages * v + 3);
            const Profile profile = random_profile(layer_count, pick);
            const int m = stages * pick(1, 3);
            const Schedule schedule = build_schedule(
                {.kind = ScheduleKind::interleaved, .stages = stages, .microbatches = m, .virtual_stages = v});
            const TrainingOptions options{
                .dp = 1 << pick(0, 2), .zero = pick(0, 3), .recompute = pick(0, 1) ? Recompute::none : Recompute::full};
            const std::vector<Seen> all = every_cut(profile, schedule, options);
            const auto [least, limit, best_bound, best_peak] = brute_force(all, pick);
            const std::string where = "trial " + std::to_string(trial);
            TrainingOptions limited = options;
            limited.gpu_memory_bytes = limit;

            const auto found = memory_fit_boundaries(profile, schedule, options, limit);
            QVERIFY2(found.has_value() == best_bound.has_value(), where.c_str());
            const auto lean = least_memory_boundaries(profile, schedule, options);
            QVERIFY(lean.has_value());
            QCOMPARE(make_step_plan(profile, schedule, *lean, options).peak_memory_bytes, least);
            const auto local = memory_fit_boundaries(profile, schedule, options, limit, 0);
            const auto local_lean = least_memory_boundaries(profile, schedule, options, 0);
            QVERIFY(local_lean.has_value());
            const std::int64_t local_least = make_step_plan(profile, schedule, *local_lean, options).peak_memory_bytes;
            local_least_exact += local_least == least;
            ++trials;
            if (local)
                QVERIFY2(make_step_plan(profile, schedule, *local, limited).fits, where.c_str());
            if (!found) {
                QVERIFY2(!local, where.c_str());
                ++unfittable;
                continue;
            }
            ++fitted;
            local_found += local.has_value();
            const StepPlan step = make_step_plan(profile, schedule, *found, limited);
            QVERIFY2(step.fits, where.c_str());
            QVERIFY2(busiest(step) == *best_bound, where.c_str());
            QVERIFY2(step.peak_memory_bytes == best_peak, where.c_str());
        }
        qInfo("interleaved: %d fittable, %d not; local search found a fit in %d of %d, the least peak in %d of %d",
              fitted, unfittable, local_found, fitted, local_least_exact, trials);
        QVERIFY(fitted > 50 && unfittable > 10);
        // The local search: a fit in at least 90 % of the fittable models, the least peak in 80 %.
        QVERIFY(local_found * 10 >= fitted * 9);
        QVERIFY(local_least_exact * 10 >= trials * 8);
    }

    // Models too large to enumerate, with almost no local search left (one sweep): the exact DP's
    // safe seed (each piece within limit / v as if its stage held the most of every chunk at once)
    // still finds a cut that fits 1.2 x the least peak, where the compute cut does not, on
    // interleaved, zb-v and dualpipe-v schedules of 48 random layers (without the seed, 8 of 24).
    void largeModelsFitFromTheSafeSeed()
    {
        std::mt19937 random(777);
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
        const ScheduleKind kinds[] = {ScheduleKind::interleaved, ScheduleKind::zb_v, ScheduleKind::dualpipe_v};
        int tried = 0, found = 0;
        for (int trial = 0; trial < 30; ++trial) {
            const ScheduleKind kind = kinds[trial % 3];
            const int stages = pick(3, 4);
            const Profile profile = random_profile(48, pick);
            const Schedule schedule =
                build_schedule({.kind = kind, .stages = stages, .microbatches = 4 * stages, .virtual_stages = 2});
            const TrainingOptions options{.dp = 2, .zero = 1};
            const auto lean = least_memory_boundaries(profile, schedule, options);
            QVERIFY(lean);
            const std::int64_t limit = make_step_plan(profile, schedule, *lean, options).peak_memory_bytes * 6 / 5;
            const std::vector<int> even = partition(profile, 2 * stages, {.method = PartitionMethod::compute});
            if (make_step_plan(profile, schedule, even, options).peak_memory_bytes <= limit)
                continue; // the even cut fits: nothing to show
            ++tried;
            const auto cut = memory_fit_boundaries(profile, schedule, options, limit, 0, 1);
            if (!cut)
                continue;
            ++found;
            TrainingOptions limited = options;
            limited.gpu_memory_bytes = limit;
            QVERIFY(make_step_plan(profile, schedule, *cut, limited).fits);
        }
        qInfo("%d of %d found", found, tried);
        QVERIFY(tried >= 10);
        QCOMPARE(found, tried);
    }

    // The search reports an interleaved configuration that only a memory-aware cut fits: 4
    // GPUs as pp 4, v 2 (8 pieces over the decoder's 16 layers); the limit sits just under the
    // compute cut's peak.
    void searchFitsInterleavedByMemory()
    {
        const Profile profile = decoder(30); // 32 layers: C(31, 7) cuts, the local search
        const TrainingOptions options{.dp = 1};
        const Schedule schedule =
            build_schedule({.kind = ScheduleKind::interleaved, .stages = 4, .microbatches = 8, .virtual_stages = 2});
        const StepPlan fastest =
            make_step_plan(profile, schedule, partition(profile, 8, {.method = PartitionMethod::compute}), options);
        const std::int64_t limit = fastest.peak_memory_bytes - 1;
        const SearchSpec spec{.gpus = 4,
                              .global_batch = 8,
                              .micro_batch_size = 1,
                              .gpu_memory_bytes = limit,
                              .schedules = {ScheduleKind::interleaved},
                              .recompute = {Recompute::none},
                              .max_virtual_stages = 2};
        const SearchResult result = search_plans(profile, spec);
        const auto it = std::find_if(result.candidates.begin(), result.candidates.end(),
                                     [](const Candidate& c) { return c.pp == 4 && c.virtual_stages == 2 && c.fits; });
        QVERIFY(it != result.candidates.end());
        QVERIFY2(it->partition.rfind("manual:", 0) == 0, it->partition.c_str());
        const StepPlan again = make_step_plan(
            profile, {.kind = ScheduleKind::interleaved, .stages = 4, .microbatches = 8, .virtual_stages = 2},
            parse_partition_spec(it->partition), TrainingOptions{.gpu_memory_bytes = limit});
        QVERIFY(again.fits);
        QCOMPARE(again.step_time, it->step_time);
        QCOMPARE(again.peak_memory_bytes, it->peak_memory_bytes);
        QVERIFY(it->peak_memory_bytes < fastest.peak_memory_bytes);
    }

    // Worked by hand: 3 GPUs, global batch 6, 8 GiB, 1F1B only, the counterexample profile.
    // pp 1 (dp 3, M 2) keeps 2 x 8 GiB. pp 3 (M 6): the compute cut 2,3 (busiest stage 6 ms on
    // each of stages 1 and 2) keeps 2 x 5 GiB on stage 1; only 1,2 fits: stages of 3, 3 and
    // 12 ms a microbatch. Stage 2 receives its first input at 2 ms and then runs 6 x 12 ms
    // without a gap (stage 1 always has the next forward ready), so it ends at 74; the last
    // backward then crosses stage 1 (2 ms) and stage 0 (2 ms): step time 78 ms.
    void searchFindsTheHandWorkedWinner()
    {
        const SearchSpec spec{.gpus = 3,
                              .global_batch = 6,
                              .micro_batch_size = 1,
                              .gpu_memory_bytes = 8 * GiB,
                              .schedules = {ScheduleKind::one_f_one_b},
                              .recompute = {Recompute::none}};
        const SearchResult result = search_plans(counterexample(), spec);
        QCOMPARE(result.fitting, std::size_t(1));
        const Candidate& best = result.candidates.front();
        QCOMPARE(best.pp, 3);
        QCOMPARE(best.dp, 1);
        QCOMPARE(best.microbatches, 6);
        QCOMPARE(best.partition, std::string("manual:1,2"));
        QCOMPARE(best.step_time, 78.0);
        QCOMPARE(best.peak_memory_bytes, 6 * GiB + 2 * 1000 * 16);
        QCOMPARE(best.samples_per_second, 6 / 0.078);
        QCOMPARE(result.skipped, std::size_t(0));
        // Nothing fits 5 GiB: the closest is the least-memory cut (6 GiB and 32 kB), not the
        // compute cut (10 GiB on stage 1).
        SearchSpec small = spec;
        small.gpu_memory_bytes = 5 * GiB;
        const SearchResult none = search_plans(counterexample(), small);
        QCOMPARE(none.fitting, std::size_t(0));
        QCOMPARE(none.candidates.front().peak_memory_bytes, 6 * GiB + 2 * 1000 * 16);
        QCOMPARE(none.candidates.front().partition, std::string("manual:1,2"));
    }

    void tooLargeToSimulateIsCountedAndNamed()
    {
        const SearchSpec spec{.gpus = 1, .global_batch = 1 << 30, .micro_batch_size = 1, .gpu_memory_bytes = 80 * GiB};
        const auto problem = error_of([&] { search_plans(decoder(2), spec); });
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("no configuration of 1 GPU is small enough to simulate (4 skipped") == 0,
                 problem->message.c_str());
        // gpipe, 1f1b, zb-h1 and zb-h2 at pp 1 (interleaved and the V kinds need pp > 1): four
        // schedules skipped.
    }

    // Left empty, the lists mean every kind build_schedule knows (each with the chunks it
    // allows) and every ZeRO stage; each candidate is what make_step_plan gives for its own
    // options, the ZeRO stages after the first included (with_zero reuses one simulation).
    void searchTriesEveryKindAndZeroStage()
    {
        const Profile profile = decoder(14);
        SearchSpec spec{.gpus = 8,
                        .global_batch = 32,
                        .micro_batch_size = 1,
                        .gpu_memory_bytes = std::int64_t(8) << 30,
                        .link_gbps = 100.0,
                        .p2p_latency_ms = 0.01,
                        .recompute = {Recompute::none}};
        const SearchResult result = search_plans(profile, spec);
        std::set<ScheduleKind> kinds;
        std::set<int> stages;
        for (const Candidate& c : result.candidates) {
            kinds.insert(c.schedule);
            stages.insert(c.zero);
            if (c.dp == 1)
                QCOMPARE(c.zero, 0); // the other stages would repeat it
            const bool vshape = c.schedule == ScheduleKind::zb_v || c.schedule == ScheduleKind::dualpipe_v;
            QVERIFY(!vshape || (c.virtual_stages == 2 && c.pp > 1));
            const StepPlan step = make_step_plan(profile,
                                                 {.kind = c.schedule,
                                                  .stages = c.pp,
                                                  .microbatches = c.microbatches,
                                                  .virtual_stages = c.virtual_stages,
                                                  .p2p_latency_ms = 0.01},
                                                 parse_partition_spec(c.partition),
                                                 {.dp = c.dp,
                                                  .zero = c.zero,
                                                  .recompute = c.recompute,
                                                  .link_gbps = 100.0,
                                                  .gpu_memory_bytes = spec.gpu_memory_bytes});
            QCOMPARE(step.step_time, c.step_time);
            QCOMPARE(step.peak_memory_bytes, c.peak_memory_bytes);
        }
        QCOMPARE(kinds.size(), std::size_t(7));
        QCOMPARE(stages, (std::set<int>{0, 1, 2, 3}));
        QCOMPARE(result.skipped, std::size_t(0));
        // --zero pins the stage.
        spec.zero = {2};
        for (const Candidate& c : search_plans(profile, spec).candidates)
            QCOMPARE(c.zero, 2);
        // 380 M parameters take 6.1 GB at 16 bytes each: on 8 GPUs of 5 GiB only a ZeRO stage
        // that shards them fits without a pipeline, and the search finds one.
        spec.zero.clear();
        spec.gpu_memory_bytes = 5 * GiB;
        const SearchResult tight = search_plans(profile, spec);
        const auto pure_dp = std::find_if(tight.candidates.begin(), tight.candidates.end(),
                                          [](const Candidate& c) { return c.pp == 1 && c.fits; });
        QVERIFY(pure_dp != tight.candidates.end());
        QVERIFY(pure_dp->zero > 0);
        for (const Candidate& c : tight.candidates)
            QVERIFY(!(c.pp == 1 && c.zero == 0 && c.fits));
    }

    // with_zero: the same step as make_step_plan under that stage, for a split-backward V kind
    // with several stages and experts.
    void withZeroIsMakeStepPlan()
    {
        Profile profile = decoder(6);
        for (std::size_t l = 1; l + 1 < profile.layers.size(); ++l)
            profile.layers[l].expert_params = 12'000'000;
        const Schedule schedule =
            build_schedule({.kind = ScheduleKind::zb_v, .stages = 2, .microbatches = 6, .virtual_stages = 2});
        const std::vector<int> cut = partition(profile, 4, {.method = PartitionMethod::compute});
        const TrainingOptions options{.dp = 4, .link_gbps = 50.0, .ep = 2, .gpu_memory_bytes = GiB};
        const StepPlan first = make_step_plan(profile, schedule, cut, options);
        for (int zero = 0; zero <= 3; ++zero) {
            TrainingOptions staged = options;
            staged.zero = zero;
            const StepPlan want = make_step_plan(profile, schedule, cut, staged);
            const StepPlan got = with_zero(profile, first, zero);
            QCOMPARE(got.step_time, want.step_time);
            QCOMPARE(got.exposed_allreduce_ms, want.exposed_allreduce_ms);
            QCOMPARE(got.peak_memory_bytes, want.peak_memory_bytes);
            QCOMPARE(got.fits, want.fits);
            QCOMPARE(got.options.zero, zero);
            for (std::size_t s = 0; s < want.memory.size(); ++s)
                QCOMPARE(got.memory[s].total, want.memory[s].total);
        }
    }

    void searchRanksAndCounts()
    {
        const Profile profile = decoder(14);
        SearchSpec spec{.gpus = 8,
                        .global_batch = 32,
                        .micro_batch_size = 1,
                        .gpu_memory_bytes = std::int64_t(8) << 30,
                        .link_gbps = 100.0};
        const SearchResult result = search_plans(profile, spec);
        QVERIFY(result.fitting > 0);
        QVERIFY(result.candidates.size() >= result.fitting);
        for (std::size_t i = 0; i + 1 < result.fitting; ++i)
            QVERIFY(ranked_time(result.candidates[i].step_time) <= ranked_time(result.candidates[i + 1].step_time));
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
        const Candidate best{.pp = 4,
                             .dp = 2,
                             .step_time = 100,
                             .makespan = 90,
                             .compute_ms = 80,
                             .bubble_fraction = 0.1,
                             .exposed_allreduce_ms = 10};
        Candidate slower = best;
        slower.dp = 8;
        slower.step_time = 110;
        slower.exposed_allreduce_ms = 20;
        QCOMPARE(why_slower(slower, best),
                 std::string("+10 ms (+10 %): 10 ms more exposed gradient all-reduce (dp 8 vs dp 2)"));
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

    // The interleaved local search checks the search's cancel flag at every move.
    void localSearchHonoursCancel()
    {
        const Profile profile = decoder(30); // C(31, 7) cuts: the local search
        const Schedule schedule =
            build_schedule({.kind = ScheduleKind::interleaved, .stages = 4, .microbatches = 8, .virtual_stages = 2});
        std::atomic<bool> cancel{true};
        const auto problem = error_of([&] { memory_cuts(profile, schedule, {}, 1, &cancel); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::cancelled);
        cancel = false;
        const MemoryCuts cuts = memory_cuts(profile, schedule, {}, 1, &cancel); // nothing fits 1 byte
        QVERIFY(!cuts.fitting);
        QVERIFY(cuts.least_memory);
    }

    void cancelledSearchStops()
    {
        const SearchSpec spec{
            .gpus = 8, .global_batch = 32, .micro_batch_size = 1, .gpu_memory_bytes = std::int64_t(8) << 30};
        std::atomic<bool> cancel{false};
        QVERIFY(!search_plans(decoder(14), spec, &cancel).candidates.empty()); // unset: no effect
        cancel = true;
        const auto problem = error_of([&] { search_plans(decoder(14), spec, &cancel); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::cancelled);
    }

    void badInputIsOneSentence()
    {
        const Profile profile = decoder(2);
        const SearchSpec ok{
            .gpus = 4, .global_batch = 8, .micro_batch_size = 2, .gpu_memory_bytes = std::int64_t(80) << 30};
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
