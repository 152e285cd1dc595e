// A model from its shape: parameter counts against published totals, the FLOPs against Narayanan
// et al. 2021, the activation bytes against Korthikanti et al. 2022 (Table 2 at Table 3's
// configurations), the cluster presets, and hostile configs refused in one sentence.
#include "testutil.h"

#include "core/pipeline/cluster.h"
#include "core/pipeline/model_shape.h"
#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/profile.h"
#include "core/pipeline/simulator.h"
#include "core/pipeline/training.h"

#include <QTest>
#include <cmath>
#include <numeric>

namespace pl = shardscope::pipeline;
using shardscope::Error;
using shardscope::ProblemKind;

namespace {

pl::ModelConfig fixture(const char* name)
{
    const std::string path = std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
    return pl::parse_model_config(pl::read_input_file(path, pl::kMaxModelConfigBytes, "config"), path);
}

std::int64_t total_params(const pl::ModelConfig& c, bool active = false)
{
    std::int64_t total = 0;
    for (const pl::ShapeLayer& l : pl::model_layers(c))
        total += active ? l.active_params : l.params;
    return total;
}

// A GPT-3-style model as the papers describe it: multi-head attention, a 4h GELU MLP, V = 51200.
pl::ModelConfig gpt(int h, int a, int layers)
{
    return pl::ModelConfig{.source = "gpt.json",
                           .hidden_size = h,
                           .attention_heads = a,
                           .kv_heads = a,
                           .intermediate_size = 4 * h,
                           .vocab_size = 51200,
                           .layers = layers,
                           .gpt2_style = true,
                           .qkv_bias = true,
                           .output_bias = true,
                           .tied_embeddings = true,
                           .max_positions = 2048};
}

std::optional<std::string> error_of(const std::function<void()>& f)
{
    try {
        f();
    } catch (const Error& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

} // namespace

class TestModelShape : public QObject {
    Q_OBJECT

private slots:
    void llama2SevenBHasItsPublishedCount() { QCOMPARE(total_params(fixture("llama2-7b.json")), 6738415616ll); }

    void gpt2SmallHasItsPublishedCount()
    {
        const pl::ModelConfig c = fixture("gpt2-small.json");
        QVERIFY(c.gpt2_style && c.tied_embeddings && !c.gated_mlp);
        QCOMPARE(c.intermediate_size, 3072);
        QCOMPARE(total_params(c), 124439808ll);
    }

    void mixtralCountsAllExpertsAndTheActiveTwo()
    {
        const pl::ModelConfig c = fixture("mixtral-8x7b.json");
        // Mistral AI: 46.7B parameters in all, 12.9B used per token.
        QCOMPARE(total_params(c), 46702792704ll);
        QCOMPARE(total_params(c, true), 12879925248ll);
    }

    void deepseekStyleDenseFirstLayersAndSharedExperts()
    {
        const pl::ModelConfig c = pl::parse_model_config(
            R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "moe_intermediate_size": 32,
                "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
                "num_hidden_layers": 3, "vocab_size": 100, "tie_word_embeddings": false})",
            "ds.json");
        const std::vector<pl::ShapeLayer> layers = pl::model_layers(c);
        const std::int64_t attention = 4 * 64 * 64, norms = 2 * 64;
        QCOMPARE(layers[1].params, attention + norms + 3 * 64 * 256); // dense
        QVERIFY(!layers[1].moe && layers[2].moe);
        const std::int64_t expert = 3 * 64 * 32;
        QCOMPARE(layers[2].params, attention + norms + 8 * expert + 64 * 8 + expert);
        QCOMPARE(layers[2].active_params, attention + norms + 2 * expert + 64 * 8 + expert);
        QCOMPARE(layers[2].matmul_weights, attention + 2 * expert + 64 * 8 + expert);
    }

    void narayanansFlopsAreThePerLayerSum()
    {
        // Narayanan et al. 2021: 96 B s l h^2 (1 + s/6h + V/16lh) per iteration with full
        // recomputation, i.e. four forward passes of every block and three of the logit layer.
        for (const int t : {1, 8}) {
            const pl::ModelConfig c = gpt(12288, 96, 96);
            const pl::Workload w{.seq_len = 2048, .micro_batch_size = 3};
            const pl::ModelProfile m = pl::shape_profile(c, w, {.tp = t});
            double sum = 0.0;
            for (std::size_t i = 0; i < m.fwd_flops.size(); ++i)
                sum += (i + 1 == m.fwd_flops.size() ? 3.0 : 4.0) * m.fwd_flops[i] * t;
            const double B = 3, s = 2048, l = 96, h = 12288, V = 51200;
            const double paper = 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
            QVERIFY2(std::abs(sum - paper) <= 1e-12 * paper, std::to_string(sum - paper).c_str());
            QCOMPARE(m.fwd_flops.front(), 0.0); // the embedding is a lookup
        }
    }

    // Selective recomputation runs a block's attention core again: its 4·b·s²·a·d FLOPs over t·cp
    // GPUs at the device's rate, plus the context-parallel K/V ring; not the block's matmuls nor
    // the tensor-parallel all-reduces, whatever the MLP's width or the KV heads (SwiGLU, GQA).
    void selectiveRecomputationCostsTheAttentionCore()
    {
        const pl::ModelConfig c = fixture("llama2-7b.json"); // SwiGLU, a = 32, d = 128
        const pl::Workload w{.seq_len = 4096, .micro_batch_size = 2, .device_tflops = 400, .mfu = 1.0};
        const double core = 4.0 * 2 * 4096.0 * 4096.0 * 32 * 128; // FLOPs, one block
        for (const int t : {1, 4}) {
            const pl::ModelProfile m = pl::shape_profile(c, w, {.tp = t});
            const pl::Layer& block = m.profile.layers[1];
            const double want = core / t / (400 * 1e9);
            QVERIFY2(std::abs(pl::layer_selective_recompute_ms(m.profile, block) - want) <= 1e-12 * want,
                     std::to_string(pl::layer_selective_recompute_ms(m.profile, block)).c_str());
            // Below the GPT share s/(6h + s) of this block's forward: its SwiGLU MLP is wider.
            QVERIFY(want < block.fwd_ms * 4096.0 / (6.0 * 4096 + 4096));
        }
        // With cp 2 on a 100 Gbit/s link: half the queries, and the K/V ring again (cp_fwd).
        const pl::Parallelism par{.cp = 2};
        const pl::GroupLinks links = pl::uniform_links(pl::Link{.gbps = 100, .latency_ms = 0.01});
        const pl::ModelProfile ring = pl::parallel_profile(c, w, par, links);
        const std::vector<pl::LayerComm> comm = pl::layer_comm(pl::shape_profile(c, w, par), links);
        QVERIFY(comm[1].cp_fwd > 0);
        const double want = core / 2 / (400 * 1e9) + comm[1].cp_fwd;
        QVERIFY(std::abs(*ring.profile.layers[1].selective_recompute_ms - want) <= 1e-12 * want);
    }

    // A workload whose bytes pass 2^62 is refused in one sentence, not wrapped to a negative count.
    void bytesBeyondAnyGpuAreRefused()
    {
        const pl::ModelConfig c = fixture("llama2-7b.json");
        try {
            (void)pl::shape_profile(c, {.seq_len = 1 << 24, .micro_batch_size = 1024}, {});
            QFAIL("16M tokens x 1024 samples of activations were accepted");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
            QVERIFY2(std::string(e.what()).find("more than 2^62") != std::string::npos, e.what());
        }
        // Within each layer, but M microbatches of a stage's past 2^63 when the schedule holds them.
        pl::Profile big = pl::uniform_profile(2);
        for (pl::Layer& l : big.layers)
            l.activation_bytes = std::int64_t(1) << 56;
        try {
            (void)pl::make_plan(big, {.kind = pl::ScheduleKind::gpipe, .stages = 1, .microbatches = 256}, {});
            QFAIL("256 microbatches of 2^57 bytes were counted");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_profile);
            QVERIFY2(std::string(e.what()).find("more than 2^63 bytes") != std::string::npos, e.what());
        }
        // Activations that count, beside model state that counts, past 2^63 together.
        pl::Profile heavy = pl::uniform_profile(1);
        heavy.layers[0].params = std::int64_t(1) << 56;
        heavy.layers[0].activation_bytes = std::int64_t(1) << 57;
        try {
            (void)pl::make_step_plan(heavy, {.kind = pl::ScheduleKind::gpipe, .stages = 1, .microbatches = 63},
                                     pl::parse_partition_spec("uniform"), pl::TrainingOptions{});
            QFAIL("2^60 bytes of state and 63 x 2^57 of activations were counted");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_profile);
            QVERIFY2(std::string(e.what()).find("more than 2^63 bytes of model state and activations") !=
                         std::string::npos,
                     e.what());
        }
    }

    void korthikantisTableTwoAtTableThreesModels_data()
    {
        QTest::addColumn<int>("a");
        QTest::addColumn<int>("h");
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("b");
        // Table 3: attention heads, hidden size, layers, micro batch; s = 2048, t = 8 for all.
        QTest::newRow("22B") << 64 << 6144 << 48 << 4;
        QTest::newRow("175B") << 96 << 12288 << 96 << 1;
        QTest::newRow("530B") << 128 << 20480 << 105 << 1;
        QTest::newRow("1T") << 160 << 25600 << 128 << 1;
    }

    void korthikantisTableTwoAtTableThreesModels()
    {
        QFETCH(int, a);
        QFETCH(int, h);
        QFETCH(int, layers);
        QFETCH(int, b);
        const double s = 2048, t = 8, sbh = s * b * h, A = a, H = h;
        const pl::ModelConfig c = gpt(h, a, layers);
        const pl::Workload w{.seq_len = 2048, .micro_batch_size = b};
        const auto block = [&](const pl::Parallelism& p) { return pl::shape_profile(c, w, p).profile.layers[1]; };
        const pl::Layer none = block({});
        const pl::Layer tensor = block({.tp = 8});
        const pl::Layer sequence = block({.tp = 8, .sequence_parallel = true});
        QCOMPARE(none.activation_bytes, std::llround(sbh * (34.0 + 5.0 * A * s / H)));
        QCOMPARE(tensor.activation_bytes, std::llround(sbh * (10.0 + 24.0 / t + 5.0 * A * s / (H * t))));
        QCOMPARE(sequence.activation_bytes, std::llround(sbh * (34.0 / t + 5.0 * A * s / (H * t))));
        QCOMPARE(*tensor.selective_activation_bytes, std::llround(sbh * (10.0 + 24.0 / t)));
        QCOMPARE(*sequence.selective_activation_bytes, std::llround(sbh * 34.0 / t));
        QCOMPARE(*none.input_bytes, std::llround(2.0 * sbh)); // full recomputation keeps the input
        QCOMPARE(*tensor.input_bytes, std::llround(2.0 * sbh));
        QCOMPARE(*sequence.input_bytes, std::llround(2.0 * sbh / t)); // ... split along s with SP
    }

    void tensorParallelSplitsTheMatricesAndNotTheNorms()
    {
        const pl::ModelConfig c = fixture("llama2-7b.json");
        const pl::ModelProfile one = pl::shape_profile(c, {.seq_len = 4096, .micro_batch_size = 1}, {});
        const pl::ModelProfile four = pl::shape_profile(c, {.seq_len = 4096, .micro_batch_size = 1}, {.tp = 4});
        QCOMPARE(four.profile.layers[1].params, (202383360ll - 8192) / 4 + 8192);
        QCOMPARE(four.profile.layers[0].params, 32000ll * 4096 / 4);
        QCOMPARE(four.profile.layers[1].fwd_ms * 4, one.profile.layers[1].fwd_ms);
        QCOMPARE(four.total_params, one.total_params);
        const auto odd = error_of([&] { pl::shape_profile(c, {.seq_len = 16, .micro_batch_size = 1}, {.tp = 3}); });
        QVERIFY(odd && odd->find("tensor-parallel degree of 3") != std::string::npos);
    }

    void hostileConfigsAreRefusedInOneSentence_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QString>("named");
        QTest::newRow("negative") << QByteArray(R"({"hidden_size": 64, "num_attention_heads": -4})")
                                  << QStringLiteral("'num_attention_heads' = -4");
        QTest::newRow("huge") << QByteArray(R"({"hidden_size": 1e300, "num_attention_heads": 4})")
                              << QStringLiteral("'hidden_size'");
        QTest::newRow("missing")
            << QByteArray(R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9})")
            << QStringLiteral("has no 'num_hidden_layers'");
        QTest::newRow("string") << QByteArray(R"({"hidden_size": "64"})") << QStringLiteral("'hidden_size'");
        QTest::newRow("tie") << QByteArray(R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 8,
                                 "vocab_size": 9, "num_hidden_layers": 1, "tie_word_embeddings": 1})")
                             << QStringLiteral("'tie_word_embeddings' = 1; it must be true or false");
        QTest::newRow("dense beyond layers")
            << QByteArray(R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
                 "num_hidden_layers": 1, "num_local_experts": 4, "num_experts_per_tok": 1, "first_k_dense_replace": 5})")
            << QStringLiteral("'first_k_dense_replace' = 5");
        QTest::newRow("not json") << QByteArray("{\"hidden_size\": ") << QStringLiteral("is not valid JSON");
    }

    void hostileConfigsAreRefusedInOneSentence()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, named);
        const auto message = error_of([&] { pl::parse_model_config(text.toStdString(), "bad.json"); });
        QVERIFY(message);
        QVERIFY2(message->find(named.toStdString()) != std::string::npos, message->c_str());
        QVERIFY2(message->find("bad.json") != std::string::npos, message->c_str());
        QVERIFY(message->find('\n') == std::string::npos);
    }

    void moreThanTwoToTheFiftyThreeParametersIsRefused()
    {
        pl::ModelConfig c = gpt(1 << 24, 1 << 10, 1 << 20);
        const auto message = error_of([&] { pl::model_layers(c); });
        QVERIFY(message && message->find("2^53") != std::string::npos);
    }

    void clusterPresetsAreTheirDatasheets()
    {
        const pl::Cluster a100 = *pl::cluster_preset("a100-80gb");
        QCOMPARE(a100.peak_tflops, 312.0);
        QCOMPARE(a100.intra_node_gbytes_per_s, 600.0);
        QCOMPARE(a100.inter_node_gbits_per_s, 200.0);
        QCOMPARE(a100.gpus_per_node, 8);
        const pl::Cluster h100 = *pl::cluster_preset("h100-sxm-80gb");
        QCOMPARE(h100.peak_tflops, 989.0);
        QCOMPARE(h100.intra_node_gbytes_per_s, 900.0);
        QCOMPARE(h100.inter_node_gbits_per_s, 400.0);
        QCOMPARE(h100.achieved_tflops(), 494.5);
        QCOMPARE(pl::cluster_preset("h200-sxm-141gb")->hbm_gib * 1024, 143771.0); // MiB, as nvidia-smi says
        for (const std::string& name : pl::cluster_preset_names())
            QVERIFY2(!pl::cluster_preset(name)->sources.empty(), name.c_str());
        QVERIFY(!pl::cluster_preset("a100"));
    }

    void clusterFilesAreCheckedKeyByKey()
    {
        const std::string good = R"({"gpus_per_node": 4, "measured_tflops": 200, "hbm_gib": 24,
                                      "intra_node_gbytes_per_s": 64, "inter_node_gbits_per_s": 100})";
        const pl::Cluster c = pl::parse_cluster(good, "lab.json");
        QCOMPARE(c.name, std::string("lab"));
        QCOMPARE(c.achieved_tflops(), 200.0);
        QCOMPARE(c.peak_tflops, 0.0); // a measured rate says nothing of the peak: no MFU
        const auto typo = error_of([] { pl::parse_cluster(R"({"gpus_per_node": 4, "hbm_gb": 24})", "lab.json"); });
        QVERIFY(typo && typo->find("unknown key 'hbm_gb'") != std::string::npos);
        const auto negative = error_of([] {
            pl::parse_cluster(R"({"gpus_per_node": 4, "peak_tflops": -1, "hbm_gib": 24,
                                  "intra_node_gbytes_per_s": 64, "inter_node_gbits_per_s": 100})",
                              "lab.json");
        });
        QVERIFY(negative && negative->find("'peak_tflops' = -1") != std::string::npos);
        const auto missing = error_of([] { pl::parse_cluster(R"({"gpus_per_node": 4, "peak_tflops": 9})", "l.json"); });
        QVERIFY(missing && missing->find("has no 'hbm_gib'") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestModelShape)
#include "tst_pipeline_model_shape.moc"
