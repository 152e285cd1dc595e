// The search over every parallel degree, ZeRO stage, recomputation and micro batch size: the
// pruned search against a brute force, ZeRO's model-state bytes against the paper, the
// collectives' links by rank order, and the memory effects of cp and ep.
#include "testutil.h"

#include "core/pipeline/fit_partition.h"
#include "core/pipeline/model_search.h"
#include "core/pipeline/model_shape.h"
#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/profile.h"

#include <QStringList>
#include <QTest>
#include <cmath>
#include <numeric>
#include <set>

namespace pl = shardscope::pipeline;

namespace {

// A small Llama-style model: GQA, SwiGLU; with `experts`, every block is MoE (top 2).
pl::ModelConfig small_model(int experts)
{
    return pl::ModelConfig{.source = "small.json",
                           .hidden_size = 256,
                           .attention_heads = 8,
                           .kv_heads = 4,
                           .intermediate_size = 688,
                           .vocab_size = 1000,
                           .layers = 6,
                           .experts = experts,
                           .experts_per_token = experts > 0 ? 2 : 0,
                           .gated_mlp = true};
}

// Nodes of 4 GPUs, so that both links appear on 16.
pl::Cluster small_cluster()
{
    return pl::Cluster{.name = "small",
                       .gpus_per_node = 4,
                       .peak_tflops = 100,
                       .matmul_fraction = 0.5,
                       .hbm_gib = 1,
                       .intra_node_gbytes_per_s = 100,
                       .intra_node_latency_us = 2,
                       .inter_node_gbits_per_s = 100,
                       .inter_node_latency_us = 5};
}

// The small MoE model's search on 16 GPUs of 64 MiB over small_cluster(): every degree, the best 3.
pl::ModelSearchSpec small_moe_search()
{
    return pl::ModelSearchSpec{.gpus = 16,
                               .global_batch = 32,
                               .seq_len = 256,
                               .device_tflops = 50,
                               .peak_tflops = 100,
                               .gpu_memory_bytes = 64 << 20,
                               .links = {.cluster = small_cluster()},
                               .micro_batch_sizes = {1, 2},
                               .max_virtual_stages = 3,
                               .top = 3};
}

bool exact(double a, double b)
{
    return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
}

} // namespace

class TestPipelineModelSearch : public QObject {
    Q_OBJECT

private slots:
    // Rajbhandari et al. 2019, Figure 1: Psi = 7.5B, K = 12, N_d = 64: 120 GB, 31.4 GB, 16.6 GB,
    // 1.9 GB of model state per device (GB = 10^9 bytes, one decimal).
    void zeroModelStateMatchesThePaper()
    {
        const double psi = 7.5e9;
        const double expected[] = {120.0, 31.4, 16.6, 1.9};
        for (int z = 0; z < 4; ++z) {
            const double gb = pl::bytes_per_param(z, 64).total() * psi / 1e9;
            QVERIFY2(std::fabs(gb - expected[z]) <= 0.05, qPrintable(QString::number(gb)));
            // Whole buffers: the same to the byte, ceil(P / D) elements a shard.
            QVERIFY(std::fabs(static_cast<double>(pl::param_state_bytes(7'500'000'000, z, 64)) / 1e9 - gb) < 1e-6);
        }
    }

    // Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
    // (arXiv 1910.02054, SC '20), Table 1: model-state GB (10^9 bytes) per device of P_os, P_os+g
    // and P_os+g+p (our ZeRO 1, 2, 3) for 7.5B, 128B and 1T parameters at DP 1 to 1024, as printed.
    // The paper rounds some cells (21.5625 is 21.6) and truncates others (4187.5 is 4187, 2218.75
    // is 2218), so a cell matches when it is less than one unit of its last printed digit away.
    void zeroTableOne_data()
    {
        QTest::addColumn<double>("psi");
        QTest::addColumn<int>("dp");
        QTest::addColumn<QStringList>("printed"); // P_os, P_os+g, P_os+g+p
        const struct {
            const char* model;
            double psi;
            const char* cells[6][3];
        } table[] = {
            {"7.5B",
             7.5e9,
             {{"120", "120", "120"},
              {"52.5", "41.3", "30"},
              {"35.6", "21.6", "7.5"},
              {"31.4", "16.6", "1.88"},
              {"30.4", "15.4", "0.47"},
              {"30.1", "15.1", "0.12"}}},
            {"128B",
             128e9,
             {{"2048", "2048", "2048"},
              {"896", "704", "512"},
              {"608", "368", "128"},
              {"536", "284", "32"},
              {"518", "263", "8"},
              {"513", "257", "2"}}},
            {"1T",
             1e12,
             {{"16000", "16000", "16000"},
              {"7000", "5500", "4000"},
              {"4750", "2875", "1000"},
              {"4187", "2218", "250"},
              {"4046", "2054", "62.5"},
              {"4011", "2013", "15.6"}}},
        };
        const int degrees[6] = {1, 4, 16, 64, 256, 1024};
        for (const auto& model : table)
            for (int row = 0; row < 6; ++row) {
                QStringList printed;
                for (const char* cell : model.cells[row])
                    printed << QString::fromLatin1(cell);
                QTest::addRow("%s DP %d", model.model, degrees[row]) << model.psi << degrees[row] << printed;
            }
    }

    void zeroTableOne()
    {
        QFETCH(double, psi);
        QFETCH(int, dp);
        QFETCH(QStringList, printed);
        for (int z = 1; z <= 3; ++z) {
            const QString& cell = printed[z - 1];
            const qsizetype point = cell.indexOf(QLatin1Char('.'));
            const double unit = std::pow(10.0, point < 0 ? 0.0 : -double(cell.size() - point - 1));
            const double gb = pl::bytes_per_param(z, dp).total() * psi / 1e9;
            QVERIFY2(std::fabs(gb - cell.toDouble()) < unit,
                     qPrintable(QStringLiteral("ZeRO %1: %2 GB against the paper's %3").arg(z).arg(gb).arg(cell)));
            // The buffers as allocated (ceil(P / D) elements a shard) give the same figure.
            const auto bytes = pl::param_state_bytes(std::llround(psi), z, dp);
            QVERIFY(std::fabs(double(bytes) / 1e9 - gb) < 1e-6);
        }
    }

    void linksFollowMegatronsRankOrder()
    {
        pl::Cluster c = small_cluster();
        c.gpus_per_node = 8;
        c.intra_node_gbytes_per_s = 900; // 450 GB/s a direction: 3600 Gbit/s
        c.inter_node_gbits_per_s = 400;
        const pl::GroupLinks a = pl::group_links(c, {.tp = 8, .cp = 1, .ep = 1, .dp = 4, .pp = 2});
        QCOMPARE(a.tp.gbps, 3600.0); // t = 8 fills a node
        QCOMPARE(a.dp.gbps, 400.0); // the replicas are 8 ranks apart: other nodes
        QCOMPARE(a.pp.gbps, 400.0);
        const pl::GroupLinks b = pl::group_links(c, {.tp = 2, .cp = 2, .ep = 2, .dp = 2, .pp = 4});
        QCOMPARE(b.tp.gbps, 3600.0);
        QCOMPARE(b.cp.gbps, 3600.0); // ranks 0, 2
        QCOMPARE(b.dp.gbps, 3600.0); // ranks 0, 4: t * cp * dp = 8 <= 8
        QCOMPARE(b.ep.gbps, 3600.0);
        QCOMPARE(b.pp.gbps, 400.0); // 32 ranks: four nodes
        QCOMPARE(b.pp.latency_ms, 0.005);
        QCOMPARE(pl::group_links(c, {.tp = 16}).tp.gbps, 400.0); // t > GPUs per node
        // A ring all-reduce of 1 GB over 8 ranks: 2 x 7/8 x 8 Gbit / 3600 Gbit/s + 14 x 2 us.
        QVERIFY(exact(pl::allreduce_ms(1e9, 8, a.tp), 2.0 * 7.0 / 8.0 * 8e9 / 3600e9 * 1e3 + 14 * 0.002));
    }

    // t = 4 on one node: every block's forward and backward grow by two all-reduces of 2bsh,
    // with or without sequence parallelism; cp = 2 halves the activations, ep = 4 the experts.
    void collectivesAndMemoryEffects()
    {
        const pl::ModelConfig dense = small_model(0);
        const pl::Workload work{.seq_len = 256, .micro_batch_size = 2, .device_tflops = 50, .mfu = 1};
        const pl::GroupLinks links = pl::group_links(small_cluster(), {.tp = 4});
        for (bool sp : {false, true}) {
            const pl::Parallelism parallel{.tp = 4, .sequence_parallel = sp};
            const pl::ModelProfile bare = pl::shape_profile(dense, work, parallel);
            const pl::ModelProfile timed = pl::parallel_profile(dense, work, parallel, links);
            const double ar = pl::allreduce_ms(2.0 * 2 * 256 * 256, 4, links.tp);
            QVERIFY(ar > 0.0);
            const pl::Layer& block = timed.profile.layers[3];
            QVERIFY(exact(block.fwd_ms, bare.profile.layers[3].fwd_ms + 2 * ar));
            QVERIFY(exact(block.bwd_ms, bare.profile.layers[3].bwd_ms + 2 * ar));
            QVERIFY(exact(block.bwd_input_ms + block.bwd_weight_ms, block.bwd_ms));
            QVERIFY(exact(timed.profile.layers.front().fwd_ms, bare.profile.layers.front().fwd_ms + ar));
            QVERIFY(exact(timed.profile.layers.back().bwd_ms, bare.profile.layers.back().bwd_ms + ar));
        }
        const pl::ModelProfile one = pl::shape_profile(dense, work, {});
        const pl::ModelProfile halves = pl::shape_profile(dense, work, {.cp = 2});
        QCOMPARE(halves.profile.layers[2].activation_bytes * 2, one.profile.layers[2].activation_bytes);
        QVERIFY(exact(halves.fwd_flops[2] * 2, one.fwd_flops[2]));
        QCOMPARE(halves.profile.layers[2].params, one.profile.layers[2].params);

        const pl::ModelConfig moe = small_model(8);
        const pl::ModelProfile all = pl::shape_profile(moe, work, {});
        const pl::ModelProfile quarter = pl::shape_profile(moe, work, {.ep = 4});
        const std::int64_t experts = 8 * 3 * 256 * 688;
        QCOMPARE(all.profile.layers[1].expert_params, experts);
        QCOMPARE(quarter.profile.layers[1].expert_params, experts / 4);
        QCOMPARE(all.profile.layers[1].params - quarter.profile.layers[1].params, experts - experts / 4);
        // ep's all-to-alls: dispatch and combine of the k = 2 copies of every token, each way.
        const pl::GroupLinks ep_links = pl::group_links(small_cluster(), {.ep = 4, .dp = 4});
        const pl::ModelProfile routed = pl::parallel_profile(moe, work, {.ep = 4}, ep_links);
        const double a2a = pl::allgather_ms(2.0 * 256 * 2 * 256 * 2, 4, ep_links.ep);
        QVERIFY(exact(routed.profile.layers[1].fwd_ms, quarter.profile.layers[1].fwd_ms + 2 * a2a));
        // The ZeRO shards of the experts are over dp / ep ranks: ZeRO-1 over dp 4, ep 4.
        QVERIFY_THROWS_EXCEPTION(shardscope::Error, pl::shape_profile(moe, work, {.ep = 3}));
    }

    // Ring attention's K/V exchange (cost-model.md, "Parallelism"): cp - 1 steps, each passing one
    // K and one V chunk of b (s / cp) tokens x the KV heads this rank holds (kv / t, at least 1)
    // x the head width, 2 bytes an element, over the link the cp group spans; the backward twice
    // that. Worked from the small model: h 256, 8 heads of 32, 4 KV heads, b 2, s 256.
    void contextParallelRingMatchesItsClosedForm_data()
    {
        QTest::addColumn<int>("tp");
        QTest::addColumn<int>("cp");
        QTest::addColumn<int>("kv_heads_here");
        QTest::addColumn<double>("gbps");
        QTest::addColumn<double>("latency_ms");
        // Nodes of 4: t * cp <= 4 stays on NVLink (100 GB/s both ways: 400 Gbit/s a direction, 2 us).
        QTest::newRow("cp 4 in a node") << 1 << 4 << 4 << 400.0 << 0.002;
        QTest::newRow("t 2, cp 4 across nodes") << 2 << 4 << 2 << 100.0 << 0.005;
        QTest::newRow("t 8: one KV head a rank") << 8 << 2 << 1 << 100.0 << 0.005;
    }
    void contextParallelRingMatchesItsClosedForm()
    {
        QFETCH(int, tp);
        QFETCH(int, cp);
        QFETCH(int, kv_heads_here);
        QFETCH(double, gbps);
        QFETCH(double, latency_ms);
        const pl::ModelConfig dense = small_model(0);
        const pl::Workload work{.seq_len = 256, .micro_batch_size = 2, .device_tflops = 50, .mfu = 1};
        const pl::Parallelism parallel{.tp = tp, .sequence_parallel = tp > 1, .cp = cp};
        const pl::GroupLinks links = pl::group_links(small_cluster(), {.tp = tp, .cp = cp});
        const std::vector<pl::LayerComm> comm = pl::layer_comm(pl::shape_profile(dense, work, parallel), links);
        const double chunk_bytes = 2.0 /* K, V */ * 2.0 /* bf16 */ * 2 /* b */ * (256.0 / cp) * kv_heads_here * 32;
        const double step_ms = chunk_bytes * 8.0 / (gbps * 1e9) * 1e3 + latency_ms;
        const double forward = (cp - 1) * step_ms;
        QCOMPARE(comm.size(), std::size_t(8)); // embedding, 6 blocks, head
        for (std::size_t l = 1; l + 1 < comm.size(); ++l) {
            QVERIFY2(exact(comm[l].cp_fwd, forward),
                     qPrintable(QStringLiteral("%1 vs %2").arg(comm[l].cp_fwd).arg(forward)));
            QVERIFY(exact(comm[l].cp_bwd, 2.0 * forward));
        }
        // The embedding and the head attend to nothing.
        QCOMPARE(comm.front().cp_fwd + comm.front().cp_bwd + comm.back().cp_fwd + comm.back().cp_bwd, 0.0);
    }

    // Expert weights are replicated over dp / ep ranks only (cost-model.md, "Memory"): their ZeRO
    // shards are ceil(P / (dp / ep)) elements, and their gradient reduction is a ring over dp / ep,
    // beside the dense part's over dp. Worked for dp 8, ep 4 on one stage (M = 2), 100 Gbit/s.
    void expertShardsAndGradientsAreOverDpOverEp()
    {
        const std::int64_t dense = 2'000'000'001, experts = 3'000'000'000;
        pl::Profile profile;
        profile.name = "moe";
        profile.layers.push_back(pl::Layer{.name = "attention",
                                           .params = 1'000'000'001,
                                           .fwd_ms = 0.001,
                                           .bwd_ms = 0.002,
                                           .bwd_input_ms = 0.001,
                                           .bwd_weight_ms = 0.001,
                                           .activation_bytes = 1000});
        profile.layers.push_back(pl::Layer{.name = "moe",
                                           .params = 1'000'000'000 + experts,
                                           .fwd_ms = 0.001,
                                           .bwd_ms = 0.002,
                                           .bwd_input_ms = 0.001,
                                           .bwd_weight_ms = 0.001,
                                           .activation_bytes = 1000,
                                           .expert_params = experts});
        const double gbps = 100.0;
        // One unit U of training.h per group: (n - 1) / n x 2 bytes x params / bandwidth, in ms.
        const auto unit = [&](std::int64_t params, int ranks) {
            return (ranks - 1.0) / ranks * 2.0 * static_cast<double>(params) * 8.0 / (gbps * 1e9) * 1e3;
        };
        const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
        const pl::ScheduleSpec one_stage{.kind = pl::ScheduleKind::one_f_one_b, .stages = 1, .microbatches = 2};
        for (int ep : {1, 4}) {
            const int expert_dp = 8 / ep;
            const double u = unit(dense, 8) + unit(experts, expert_dp);
            for (int zero = 0; zero <= 3; ++zero) {
                const pl::StepPlan step = pl::make_step_plan(
                    profile, one_stage, {}, pl::TrainingOptions{.dp = 8, .zero = zero, .link_gbps = gbps, .ep = ep});
                const pl::StageMemory& m = step.memory.front();
                const auto held = [&](int bytes, bool sharded) {
                    return sharded ? bytes * (ceil_div(dense, 8) + ceil_div(experts, expert_dp))
                                   : bytes * (dense + experts);
                };
                QCOMPARE(m.weights, held(2, zero >= 3));
                QCOMPARE(m.gradients, held(2, zero >= 2));
                QCOMPARE(m.optimizer, held(12, zero >= 1));
                // The step: 0.012 ms of compute; ZeRO 0/1 then 2 U, ZeRO 2 M + 1 = 3 U, ZeRO 3
                // 3 M = 6 U, each far longer than the compute it could hide behind.
                const double busy = 2 * 0.006;
                const double units = zero <= 1 ? 2.0 : zero == 2 ? 3.0 : 6.0;
                const double hidden = zero <= 1 ? 0.0 : busy;
                QVERIFY2(exact(step.step_time, busy + units * u - hidden),
                         qPrintable(QStringLiteral("ep %1 ZeRO %2: %3 vs %4")
                                        .arg(ep)
                                        .arg(zero)
                                        .arg(step.step_time)
                                        .arg(busy + units * u - hidden)));
            }
        }
    }

    // Nothing fits: the closest named needs no more memory than the least any configuration
    // needs when every one is simulated (its bound sees activations, not only the model state).
    void theClosestIsTheLeastMemory()
    {
        pl::ModelSearchSpec spec{.gpus = 16,
                                 .global_batch = 32,
                                 .seq_len = 256,
                                 .device_tflops = 50,
                                 .peak_tflops = 100,
                                 .gpu_memory_bytes = 1024,
                                 .micro_batch_sizes = {1, 2},
                                 .max_virtual_stages = 3,
                                 .top = 3};
        spec.links.cluster = small_cluster();
        const pl::ModelSearchResult pruned = pl::search_model_plans(small_model(0), spec);
        QCOMPARE(pruned.search.fitting, std::size_t(0));
        spec.exhaustive = true;
        const pl::ModelSearchResult brute = pl::search_model_plans(small_model(0), spec);
        std::int64_t least = std::numeric_limits<std::int64_t>::max();
        for (const pl::Candidate& c : brute.search.candidates)
            least = std::min(least, c.peak_memory_bytes);
        QVERIFY2(pruned.search.candidates.front().peak_memory_bytes <= least,
                 (std::to_string(pruned.search.candidates.front().peak_memory_bytes) + " > " + std::to_string(least))
                     .c_str());
    }

    // Every configuration simulated (exhaustive) and the pruned search agree on the best
    // `top`, exactly, for a dense and an MoE model, for every schedule kind (each alone too, so
    // that a bound too high for one kind cannot hide behind another kind's winners); and the
    // bounds did prune.
    void prunedSearchMatchesBruteForce_data()
    {
        QTest::addColumn<int>("experts");
        QTest::addColumn<double>("memory_mib");
        QTest::addColumn<bool>("overlap");
        QTest::addColumn<QString>("schedules"); // empty: the default, every kind
        QTest::newRow("dense") << 0 << 48.0 << false << QString();
        QTest::newRow("dense, overlapped all-reduce") << 0 << 48.0 << true << QString();
        QTest::newRow("moe") << 8 << 64.0 << false << QString();
        QTest::newRow("moe, overlapped all-reduce") << 8 << 64.0 << true << QString();
        for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"}) {
            QTest::addRow("dense, %s", kind) << 0 << 48.0 << false << QString::fromLatin1(kind);
            QTest::addRow("moe, overlapped, %s", kind) << 8 << 64.0 << true << QString::fromLatin1(kind);
        }
    }
    void prunedSearchMatchesBruteForce()
    {
        QFETCH(int, experts);
        QFETCH(double, memory_mib);
        QFETCH(bool, overlap);
        QFETCH(QString, schedules);
        const pl::ModelConfig model = small_model(experts);
        std::vector<pl::ScheduleKind> kinds; // empty: the default, every kind
        if (!schedules.isEmpty())
            kinds.push_back(*pl::parse_schedule_kind(schedules.toStdString()));
        pl::ModelSearchSpec spec{.gpus = 16,
                                 .global_batch = 32,
                                 .seq_len = 256,
                                 .device_tflops = 50,
                                 .peak_tflops = 100,
                                 .gpu_memory_bytes = static_cast<std::int64_t>(memory_mib * 1048576),
                                 .overlap_allreduce = overlap,
                                 .micro_batch_sizes = {1, 2},
                                 .schedules = kinds,
                                 .max_virtual_stages = 3,
                                 .top = 3};
        spec.links.cluster = small_cluster(); // (in the initialiser, GCC 12 warns of a false uninitialised read)
        const pl::ModelSearchResult pruned = pl::search_model_plans(model, spec);
        spec.exhaustive = true;
        const pl::ModelSearchResult brute = pl::search_model_plans(model, spec);
        qInfo("%zu configurations: %zu simulated by brute force (%zu fit); pruned: %zu by memory, %zu by time, %zu "
              "simulated",
              brute.space, brute.search.candidates.size(), brute.search.fitting, pruned.pruned_memory,
              pruned.pruned_time, pruned.search.candidates.size());
        QCOMPARE(brute.search.candidates.size() + brute.search.skipped, brute.space);
        // Both bounds are bounds: no configuration of any kind ran faster than either said.
        QCOMPARE(brute.bound_violations, std::size_t(0));
        QCOMPARE(pruned.bound_violations, std::size_t(0));
        QVERIFY(pruned.pruned_time > 0);
        QVERIFY(pruned.pruned_memory > 0 || !schedules.isEmpty()); // pp > 1 kinds alone may not need it
        QVERIFY(pruned.search.candidates.size() < brute.search.candidates.size());
        QVERIFY(brute.search.fitting > 3);
        QVERIFY(brute.search.fitting < brute.search.candidates.size()); // the limit matters
        for (std::size_t i = 0; i < 3; ++i) {
            const pl::Candidate& a = pruned.search.candidates[i];
            const pl::Candidate& b = brute.search.candidates[i];
            QVERIFY(a.fits && b.fits);
            QCOMPARE(a.step_time, b.step_time);
            QCOMPARE(a.peak_memory_bytes, b.peak_memory_bytes);
            QCOMPARE(std::tuple(a.tp, a.cp, a.ep, a.pp, a.dp, a.virtual_stages, a.zero, a.micro_batch_size),
                     std::tuple(b.tp, b.cp, b.ep, b.pp, b.dp, b.virtual_stages, b.zero, b.micro_batch_size));
            QCOMPARE(a.schedule, b.schedule);
            QCOMPARE(a.recompute, b.recompute);
            QCOMPARE(a.tp * a.cp * a.pp * a.dp, 16);
            QVERIFY(a.tflops_per_gpu > 0.0 && a.mfu > 0.0 && a.mfu < 0.5);
        }
        // Every GPU count's factorisations appear among those simulated, and every kind.
        bool tensor = false, context = false;
        std::set<pl::ScheduleKind> simulated;
        for (const pl::Candidate& c : brute.search.candidates) {
            tensor |= c.tp > 1;
            context |= c.cp > 1;
            simulated.insert(c.schedule);
            // The V kinds run exactly two chunks, interleaved at least two, the rest one.
            const bool vshape = c.schedule == pl::ScheduleKind::zb_v || c.schedule == pl::ScheduleKind::dualpipe_v;
            QVERIFY(vshape ? c.virtual_stages == 2
                           : (c.schedule == pl::ScheduleKind::interleaved) == (c.virtual_stages > 1));
            QVERIFY(c.schedule != pl::ScheduleKind::dualpipe_v || c.microbatches >= 2 * c.pp);
        }
        QVERIFY(tensor && context);
        QCOMPARE(simulated.size(), schedules.isEmpty() ? std::size_t(7) : std::size_t(1));
        QCOMPARE(brute.search.skipped, std::size_t(0)); // none tried with chunks its kind refuses
    }

    // A configuration whose even (compute) cut does not fit runs on the fastest cut that does:
    // 1F1B's first stage holds pp microbatches' activations and its last one, so giving the first
    // stages fewer layers fits in memory the compute cut overflows. The limit is set between the
    // least-memory cut's peak and the compute cut's, for pp 4 of a 12-block model; the pruned
    // search still agrees with the brute force, and the candidate's cut is memory_fit_boundaries'.
    void aCutThatFitsIsFoundWhereTheComputeCutDoesNot()
    {
        pl::ModelConfig model = small_model(0);
        model.layers = 12;
        pl::ModelSearchSpec spec{.gpus = 4,
                                 .global_batch = 16,
                                 .seq_len = 256,
                                 .device_tflops = 50,
                                 .peak_tflops = 100,
                                 .micro_batch_sizes = {1},
                                 .zero = {0},
                                 .schedules = {pl::ScheduleKind::one_f_one_b},
                                 .recompute = {pl::Recompute::none},
                                 .tp = {1},
                                 .cp = {1},
                                 .top = 3};
        spec.links.cluster = small_cluster(); // as above
        // pp 4, dp 1: M = 16.
        const pl::Candidate even{.tp = 1,
                                 .cp = 1,
                                 .ep = 1,
                                 .pp = 4,
                                 .dp = 1,
                                 .zero = 0,
                                 .micro_batch_size = 1,
                                 .virtual_stages = 1,
                                 .microbatches = 16,
                                 .schedule = pl::ScheduleKind::one_f_one_b,
                                 .recompute = pl::Recompute::none,
                                 .partition = "compute"};
        spec.gpu_memory_bytes = std::int64_t(1) << 40;
        const pl::CandidateRun run = pl::candidate_run(model, spec, even);
        const pl::Schedule schedule = pl::build_schedule(run.schedule);
        const std::int64_t compute_peak =
            pl::make_step_plan(run.model.profile, schedule, run.boundaries, run.options).peak_memory_bytes;
        const auto lean = pl::least_memory_boundaries(run.model.profile, schedule, run.options);
        QVERIFY(lean);
        const std::int64_t lean_peak =
            pl::make_step_plan(run.model.profile, schedule, *lean, run.options).peak_memory_bytes;
        QVERIFY2(lean_peak < compute_peak, "the test needs a cut that holds less than the even one");
        QCOMPARE(pl::cut_peak_memory(run.model.profile, schedule, run.options, run.boundaries), compute_peak);
        QCOMPARE(pl::cut_peak_memory(run.model.profile, schedule, run.options, *lean), lean_peak);

        spec.gpu_memory_bytes = (lean_peak + compute_peak) / 2;
        const pl::ModelSearchResult pruned = pl::search_model_plans(model, spec);
        spec.exhaustive = true;
        const pl::ModelSearchResult brute = pl::search_model_plans(model, spec);
        QCOMPARE(pruned.bound_violations, std::size_t(0));
        QCOMPARE(brute.bound_violations, std::size_t(0));
        const pl::Candidate* fitted = nullptr;
        for (const pl::Candidate& c : brute.search.candidates)
            if (c.pp == 4)
                fitted = &c;
        QVERIFY(fitted);
        QVERIFY2(fitted->partition.rfind("manual:", 0) == 0, fitted->partition.c_str());
        QVERIFY(fitted->fits);
        QVERIFY(fitted->peak_memory_bytes <= spec.gpu_memory_bytes);
        pl::TrainingOptions options = run.options;
        options.gpu_memory_bytes = spec.gpu_memory_bytes;
        const auto expected = pl::memory_fit_boundaries(run.model.profile, schedule, options, spec.gpu_memory_bytes);
        QVERIFY(expected);
        QCOMPARE(pl::parse_partition_spec(fitted->partition).manual_boundaries, *expected);
        // What `schedule --partition manual:...` runs is that very step.
        const pl::CandidateRun again = pl::candidate_run(model, spec, *fitted);
        const pl::StepPlan step = pl::make_step_plan(again.model.profile, pl::build_schedule(again.schedule),
                                                     again.boundaries, again.options);
        QCOMPARE(step.step_time, fitted->step_time);
        QCOMPARE(step.peak_memory_bytes, fitted->peak_memory_bytes);
        QVERIFY(step.fits);
        // The pruned search's best are the brute force's, this cut included where it ranks.
        QVERIFY(pruned.search.fitting >= 1);
        for (std::size_t i = 0; i < std::min<std::size_t>(3, brute.search.fitting); ++i) {
            QCOMPARE(pruned.search.candidates[i].step_time, brute.search.candidates[i].step_time);
            QCOMPARE(pruned.search.candidates[i].partition, brute.search.candidates[i].partition);
        }
    }

    // Degrees are every divisor, not only powers of two: 12 GPUs, 12 heads in 6 key/value
    // groups, an MLP 768 wide and 6 experts give t in {1, 2, 3, 6, 12} and ep in {1, 2, 3, 6}
    // (where dp allows). An MLP width t does not divide rules t out, as Megatron refuses it.
    void degreesAreEveryDivisor()
    {
        pl::ModelConfig model = small_model(6);
        model.hidden_size = 384;
        model.attention_heads = 12;
        model.kv_heads = 6;
        model.intermediate_size = 768;
        pl::ModelSearchSpec spec = small_moe_search();
        spec.gpus = 12;
        spec.global_batch = 24;
        spec.seq_len = 192; // cp may be 3 too
        spec.gpu_memory_bytes = std::int64_t(1) << 40;
        spec.micro_batch_sizes = {1};
        spec.schedules = {pl::ScheduleKind::one_f_one_b};
        spec.zero = {1};
        spec.recompute = {pl::Recompute::none};
        spec.exhaustive = true;
        const pl::ModelSearchResult found = pl::search_model_plans(model, spec);
        std::set<int> tp, cp, ep;
        for (const pl::Candidate& c : found.search.candidates) {
            tp.insert(c.tp);
            cp.insert(c.cp);
            ep.insert(c.ep);
            QCOMPARE(c.tp * c.cp * c.pp * c.dp, 12);
            QCOMPARE(c.dp % c.ep, 0);
        }
        QCOMPARE(tp, (std::set<int>{1, 2, 3, 6, 12}));
        QCOMPARE(cp, (std::set<int>{1, 2, 3, 4, 6, 12}));
        QCOMPARE(ep, (std::set<int>{1, 2, 3, 6}));
        QVERIFY(pl::tensor_parallel_misfit(model, 4).find("key/value heads") != std::string::npos);
        pl::ModelConfig narrow = model;
        narrow.intermediate_size = 688; // 16 x 43
        const std::string misfit = pl::tensor_parallel_misfit(narrow, 3);
        QVERIFY2(misfit ==
                     "has an MLP width (intermediate_size) of 688, which a tensor-parallel degree of 3 cannot "
                     "split evenly",
                 misfit.c_str());
        std::set<int> narrow_tp;
        for (const pl::Candidate& c : pl::search_model_plans(narrow, spec).search.candidates)
            narrow_tp.insert(c.tp);
        QCOMPARE(narrow_tp, (std::set<int>{1, 2}));
        // A candidate of degree 3 is what `schedule --tp 3` (or `--ep 3`) runs.
        for (const pl::Candidate& c : found.search.candidates)
            if (c.tp == 3 || c.ep == 3) {
                const pl::CandidateRun run = pl::candidate_run(model, spec, c);
                const pl::StepPlan step = pl::make_step_plan(run.model.profile, pl::build_schedule(run.schedule),
                                                             run.boundaries, run.options);
                QCOMPARE(step.step_time, c.step_time);
                return;
            }
        QFAIL("no candidate with t = 3 or ep = 3");
    }

    // What the GUI shows for a candidate: candidate_run's profile, schedule, cut and options give
    // make_step_plan's very step, and the collectives it keeps apart are those inside the ops.
    void candidateRunReproducesEveryCandidate()
    {
        const pl::ModelConfig model = small_model(8);
        const pl::ModelSearchSpec spec = small_moe_search();
        const pl::ModelSearchResult found = pl::search_model_plans(model, spec);
        const double flops = pl::model_flops_per_sample(model, spec.seq_len);
        bool tensor = false, expert = false;
        for (const pl::Candidate& c : found.search.candidates) {
            const pl::CandidateRun run = pl::candidate_run(model, spec, c);
            const pl::StepPlan step =
                pl::make_step_plan(run.model.profile, pl::build_schedule(run.schedule), run.boundaries, run.options);
            QCOMPARE(step.step_time, c.step_time);
            QCOMPARE(step.peak_memory_bytes, c.peak_memory_bytes);
            const pl::Throughput rate =
                pl::throughput(flops, spec.global_batch, spec.gpus, spec.peak_tflops, step.step_time);
            QCOMPARE(rate.mfu, c.mfu);
            QCOMPARE(rate.tflops_per_gpu, c.tflops_per_gpu);
            // The layers' collectives are what parallel_profile added: the shape profile's
            // times plus layer_comm give the timed profile's.
            const pl::ModelProfile bare = pl::shape_profile(
                model, run.model.workload, {.tp = c.tp, .sequence_parallel = c.sp, .cp = c.cp, .ep = c.ep});
            QCOMPARE(run.comm.size(), bare.profile.layers.size());
            for (std::size_t l = 0; l < run.comm.size(); ++l) {
                QVERIFY(exact(bare.profile.layers[l].fwd_ms + run.comm[l].fwd(), run.model.profile.layers[l].fwd_ms));
                QVERIFY(exact(bare.profile.layers[l].bwd_ms + run.comm[l].bwd(), run.model.profile.layers[l].bwd_ms));
            }
            // Per stage: every F and B of the step carries its piece's share, within the stage's
            // busy time.
            const std::vector<pl::LayerComm> pieces = pl::piece_comm(run.comm, step.plan.pieces, c.recompute);
            const std::vector<pl::LayerComm> stages = pl::stage_comm(pieces, step.plan);
            QCOMPARE(int(stages.size()), c.pp);
            for (int s = 0; s < c.pp; ++s) {
                double want_fwd = 0.0;
                for (const pl::PieceCost& piece : step.plan.pieces)
                    if (piece.stage == s)
                        want_fwd += c.microbatches * pieces[std::size_t(piece.piece)].fwd();
                const pl::LayerComm& got = stages[std::size_t(s)];
                QVERIFY(exact(got.fwd(), want_fwd));
                // (A stage of the embedding alone computes nothing: 0 of 0.)
                QVERIFY(got.fwd() + got.bwd() <= step.plan.timeline.stage_stats[std::size_t(s)].busy);
                tensor |= got.tp_fwd > 0;
                expert |= got.ep_fwd > 0;
            }
        }
        QVERIFY(tensor && expert);
    }

    // Why a runner-up is slower names the choices that made its stages compute more: a single
    // stage has no partition to blame, and a cp, tp, ep or micro batch size other than #1's is said.
    void runnersUpNameWhatTheyChose()
    {
        const pl::ModelConfig model = small_model(8);
        pl::ModelSearchSpec spec = small_moe_search();
        spec.top = 1000;
        spec.exhaustive = true;
        const pl::ModelSearchResult found = pl::search_model_plans(model, spec);
        const pl::Candidate& best = found.search.candidates.front();
        std::size_t named = 0;
        for (std::size_t i = 1; i < found.search.fitting; ++i) {
            const pl::Candidate& c = found.search.candidates[i];
            const std::string why = pl::why_slower(c, best);
            if (why.find("busiest stage computes") == std::string::npos)
                continue;
            if (c.pp == 1)
                QVERIFY2(why.find("partition") == std::string::npos, why.c_str());
            const std::pair<const char*, bool> choices[] = {
                {"tp ", c.tp != best.tp},
                {"cp ", c.cp != best.cp},
                {"ep ", c.ep != best.ep},
                {"micro batch size ", c.micro_batch_size != best.micro_batch_size}};
            bool any = false;
            for (const auto& [what, differs] : choices) {
                QCOMPARE(why.find(std::string("(") + what) != std::string::npos ||
                             why.find(std::string(", ") + what) != std::string::npos,
                         differs);
                any |= differs;
            }
            named += any;
        }
        QVERIFY(named > 0);
    }

    // Narayanan et al. 2021 eq. 3 without the recomputation's forward: 72 B s l h^2 (1 + s/(6h) +
    // V/(12 l h)) for a GPT block (4h GELU MLP, multi-head attention).
    void modelFlopsAreNarayanans()
    {
        const pl::ModelConfig gpt{.source = "gpt.json",
                                  .hidden_size = 12288,
                                  .attention_heads = 96,
                                  .kv_heads = 96,
                                  .intermediate_size = 4 * 12288,
                                  .vocab_size = 51200,
                                  .layers = 96,
                                  .gpt2_style = true,
                                  .max_positions = 2048};
        const double s = 2048, l = 96, h = 12288, v = 51200;
        const double expected = 72.0 * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
        QVERIFY(exact(pl::model_flops_per_sample(gpt, 2048), expected));
    }
};

QTEST_GUILESS_MAIN(TestPipelineModelSearch)
#include "tst_pipeline_model_search.moc"
