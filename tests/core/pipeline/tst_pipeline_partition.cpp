// Partitioning: spec parsing, boundary validation, piece costs and the Megatron piece->stage
// mapping, and optimality of `compute` / `params` against brute force on random profiles.
#include "problemcheck.h"

#include "core/util/error.h"
#include "core/pipeline/partition.h"
#include "core/pipeline/simulator.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

Profile profile_from(const std::vector<double>& compute, const std::vector<std::int64_t>& params)
{
    Profile profile;
    profile.name = "random";
    for (std::size_t i = 0; i < compute.size(); ++i) {
        // compute = fwd + bwd with bwd = 2 fwd
        const double fwd = compute[i] / 3.0;
        profile.layers.push_back(Layer{"l" + std::to_string(i), params[i], fwd, 2 * fwd, fwd, fwd, 1});
    }
    return profile;
}

// Independent oracle: enumerate every placement of P - 1 boundaries among L - 1 gaps and
// return the smallest largest-piece weight, each piece's weight summed layer by layer.
double brute_force_bottleneck(const std::vector<double>& weights, int pieces)
{
    const int n = static_cast<int>(weights.size());
    double best = INFINITY;
    std::vector<int> cut;
    std::function<void(int)> place = [&](int from) {
        if (static_cast<int>(cut.size()) == pieces - 1) {
            double worst = 0;
            int start = 0;
            for (int p = 0; p < pieces; ++p) {
                const int end = p + 1 < pieces ? cut[p] : n;
                double sum = 0;
                for (int l = start; l < end; ++l)
                    sum += weights[l];
                worst = std::max(worst, sum);
                start = end;
            }
            best = std::min(best, worst);
            return;
        }
        for (int b = from; b <= n - (pieces - 1 - static_cast<int>(cut.size())); ++b) {
            cut.push_back(b);
            place(b + 1);
            cut.pop_back();
        }
    };
    place(1);
    return best;
}

double bottleneck_of(const std::vector<double>& weights, const std::vector<int>& boundaries)
{
    double worst = 0;
    int start = 0;
    for (std::size_t p = 0; p <= boundaries.size(); ++p) {
        const int end = p < boundaries.size() ? boundaries[p] : static_cast<int>(weights.size());
        double sum = 0;
        for (int l = start; l < end; ++l)
            sum += weights[l];
        worst = std::max(worst, sum);
        start = end;
    }
    return worst;
}

} // namespace

class TestPipelinePartition : public QObject {
    Q_OBJECT

private slots:
    void specParsing()
    {
        QCOMPARE(parse_partition_spec("uniform").method, PartitionMethod::uniform);
        QCOMPARE(parse_partition_spec("params").method, PartitionMethod::params);
        QCOMPARE(parse_partition_spec("compute").method, PartitionMethod::compute);
        const PartitionSpec manual = parse_partition_spec("manual:3,6,9");
        QCOMPARE(manual.method, PartitionMethod::manual);
        QCOMPARE(manual.manual_boundaries, (std::vector<int>{3, 6, 9}));
        QCOMPARE(to_string(manual), std::string("manual:3,6,9"));
        QVERIFY(parse_partition_spec("manual:").manual_boundaries.empty());
        for (const char* bad : {"balanced", "manual:3,,6", "manual:3,6,", "manual:a", "manual:1.5", "Manual:1", ""}) {
            const auto problem = error_of([&] { parse_partition_spec(bad); });
            QVERIFY2(problem.has_value(), bad);
            QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        }
    }

    void uniformSpreadsTheRemainder()
    {
        const Profile p = uniform_profile(10);
        QCOMPARE(partition(p, 4, {}), (std::vector<int>{3, 6, 8}));
        QCOMPARE(partition(p, 1, {}), std::vector<int>{});
        QCOMPARE(partition(p, 10, {}), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
    }

    void impossibleRequestsAreRejected()
    {
        const Profile p = uniform_profile(6);
        struct Case {
            int pieces;
            std::vector<int> boundaries;
            const char* mentions;
        };
        const Case cases[] = {
            {7, {}, "cannot cut 6 layers into 7 pieces"},         {3, {4, 2}, "boundary 2 (2) must be greater than 4"},
            {3, {2, 2}, "boundary 2 (2) must be greater than 2"}, {3, {0, 2}, "boundary 1 (0) must be greater than 0"},
            {3, {2, 6}, "less than the layer count 6"},           {3, {2}, "3 pieces need 2 boundaries, got 1"},
        };
        for (const Case& c : cases) {
            const auto problem = error_of([&] {
                partition(p, c.pieces, PartitionSpec{PartitionMethod::manual, c.boundaries});
            });
            QVERIFY2(problem.has_value(), c.mentions);
            QCOMPARE(problem->kind, ProblemKind::invalid_schedule);
            QVERIFY2(problem->message.find(c.mentions) != std::string::npos, problem->message.c_str());
        }
        QVERIFY(error_of([&] { partition(p, 7, {PartitionMethod::compute, {}}); }).has_value());
        QVERIFY(error_of([&] { partition(p, 0, {}); }).has_value());
    }

    void pieceCostsFollowTheMegatronMapping()
    {
        Profile p = uniform_profile(8);
        for (int i = 0; i < 8; ++i) {
            p.layers[i].params = 10 + i;
            p.layers[i].activation_bytes = 100 * (i + 1);
        }
        // 2 stages x 2 chunks: pieces [0,1] [2,4] [5] [6,7]; stage 0 runs pieces 0 and 2.
        const auto pieces = piece_costs(p, 2, {2, 5, 6});
        QCOMPARE(pieces.size(), std::size_t(4));
        const int expected_stage[] = {0, 1, 0, 1};
        const int expected_chunk[] = {0, 0, 1, 1};
        const int first[] = {0, 2, 5, 6};
        const int last[] = {1, 4, 5, 7};
        for (int i = 0; i < 4; ++i) {
            QCOMPARE(pieces[i].stage, expected_stage[i]);
            QCOMPARE(pieces[i].chunk, expected_chunk[i]);
            QCOMPARE(pieces[i].first_layer, first[i]);
            QCOMPARE(pieces[i].last_layer, last[i]);
            const int count = last[i] - first[i] + 1;
            QCOMPARE(pieces[i].fwd_ms, 1.0 * count);
            QCOMPARE(pieces[i].bwd_input_ms + pieces[i].bwd_weight_ms, pieces[i].bwd_ms);
        }
        QCOMPARE(pieces[1].params, std::int64_t(12 + 13 + 14));
        QCOMPARE(pieces[3].activation_bytes, std::int64_t(700 + 800));
        const auto stages = stage_costs(pieces, 2);
        QCOMPARE(stages[0].layer_count, 3);
        QCOMPARE(stages[1].layer_count, 5);
        QCOMPARE(stages[0].params, std::int64_t(10 + 11 + 15));
        QVERIFY(error_of([&] { piece_costs(p, 3, {2, 5, 6}); }).has_value()); // 4 pieces, 3 stages
    }

    void computeAndParamsAreOptimal()
    {
        // Many seeds; integer weights make every sum exact, so the DP must match brute force
        // exactly, and real weights check the same up to rounding.
        int checked = 0;
        for (unsigned seed = 1; seed <= 400; ++seed) {
            std::mt19937 rng(seed);
            const int layers = std::uniform_int_distribution<int>(1, 11)(rng);
            const int pieces = std::uniform_int_distribution<int>(1, std::min(layers, 6))(rng);
            const bool integral = seed % 2 == 0;
            std::vector<double> compute(layers);
            std::vector<std::int64_t> params(layers);
            for (int i = 0; i < layers; ++i) {
                compute[i] = integral ? 3.0 * std::uniform_int_distribution<int>(0, 9)(rng)
                                      : std::uniform_real_distribution<double>(0.0, 10.0)(rng);
                // occasionally a huge layer, as an embedding would be
                params[i] = std::uniform_int_distribution<std::int64_t>(0, 1000)(rng) *
                    (seed % 7 == static_cast<unsigned>(i) % 7 ? 50 : 1);
            }
            const Profile profile = profile_from(compute, params);
            std::vector<double> compute_weights, param_weights;
            for (const Layer& layer : profile.layers) {
                compute_weights.push_back(layer.fwd_ms + layer.bwd_ms);
                param_weights.push_back(static_cast<double>(layer.params));
            }
            const auto by_compute = partition(profile, pieces, {PartitionMethod::compute, {}});
            const auto by_params = partition(profile, pieces, {PartitionMethod::params, {}});
            validate_boundaries(layers, pieces, by_compute);
            validate_boundaries(layers, pieces, by_params);
            const double got = bottleneck_of(compute_weights, by_compute);
            const double want = brute_force_bottleneck(compute_weights, pieces);
            QVERIFY2(std::fabs(got - want) <= 1e-9 * std::max(1.0, want),
                     qPrintable(QStringLiteral("seed %1: compute bottleneck %2, brute force %3")
                                    .arg(seed)
                                    .arg(got, 0, 'g', 17)
                                    .arg(want, 0, 'g', 17)));
            QCOMPARE(bottleneck_of(param_weights, by_params), brute_force_bottleneck(param_weights, pieces));
            ++checked;
        }
        QCOMPARE(checked, 400);
    }

    void tiesFavourLaterPieces()
    {
        // Optimum 2 for [1,1,1,1] in 3 pieces: [0][1][2,3] leaves the early stages lighter.
        const Profile p = profile_from({3, 3, 3, 3}, {1, 1, 1, 1});
        QCOMPARE(partition(p, 3, {PartitionMethod::compute, {}}), (std::vector<int>{1, 2}));
    }

    void computeBeatsParamsOnTheDecoder()
    {
        const Profile profile =
            load_profile(std::string(SHARDSCOPE_SOURCE_DIR) + "/resources/profiles/decoder-7b-32.json");
        const auto by_params = partition(profile, 4, {PartitionMethod::params, {}});
        const auto by_compute = partition(profile, 4, {PartitionMethod::compute, {}});
        QVERIFY(by_params != by_compute);
        for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
            for (int m : {4, 8, 32}) {
                const ScheduleSpec spec{kind, 4, m, 1, 0.0};
                const double params_makespan = make_plan(profile, spec, by_params).timeline.makespan;
                const double compute_makespan = make_plan(profile, spec, by_compute).timeline.makespan;
                QVERIFY2(compute_makespan < params_makespan,
                         qPrintable(QStringLiteral("%1 M=%2: compute %3 ms, params %4 ms")
                                        .arg(QString::fromLatin1(to_string(kind).data()))
                                        .arg(m)
                                        .arg(compute_makespan)
                                        .arg(params_makespan)));
            }
        }
        // The reason: params balancing gives the LM head's stage the heaviest compute.
        const auto stages = stage_costs(piece_costs(profile, 4, by_params), 4);
        const auto heaviest = std::max_element(
            stages.begin(), stages.end(), [](auto& a, auto& b) { return a.fwd_ms + a.bwd_ms < b.fwd_ms + b.bwd_ms; });
        QCOMPARE(heaviest->stage, 3);
    }
};

QTEST_GUILESS_MAIN(TestPipelinePartition)
#include "tst_pipeline_partition.moc"
