// Layer profiles from a checkpoint: a small Llama-shaped safetensors checkpoint written here, its
// tensors grouped into layers (exact parameters), FLOPs and activation bytes against the closed
// forms computed independently below, and the bad inputs (a config field missing, no layer
// index, a config of another model) refused in one sentence naming the file.
#include "problemcheck.h"
#include "content_fixtures.h"

#include "core/checkpoint/safetensors.h"

#include "core/checkpoint/save.h"
#include "core/inspect/layer_profile.h"
#include "core/run/demo.h"
#include "core/pipeline/profile.h"
#include "core/pipeline/profile_model.h"
#include "core/util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace shardscope;
using problemcheck::error_of;
namespace fs = std::filesystem;
namespace pl = shardscope::pipeline;

namespace {

// The model: h 16, a 4 heads, 2 KV heads (head dim 4), I 40, V 50, 4 blocks, untied head.
constexpr std::int64_t H = 16, A = 4, KV = 2, I = 40, V = 50, L = 4, D = H / A;

std::string bf16_zeros(std::int64_t n)
{
    return std::string(static_cast<std::size_t>(2 * n), '\0');
}

void add(std::vector<std::pair<SafetensorsTensor, std::string>>& tensors, const std::string& name,
         std::vector<uint64_t> shape)
{
    std::int64_t n = 1;
    for (uint64_t d : shape)
        n *= static_cast<std::int64_t>(d);
    tensors.push_back({SafetensorsTensor{.name = name, .dtype = "BF16", .shape = std::move(shape)}, bf16_zeros(n)});
}

// Per block: q [H, H], k and v [KV*D, H], o [H, H], gate/up [I, H], down [H, I], two norms [H].
constexpr std::int64_t kBlockParams = H * H + 2 * KV * D * H + H * H + 3 * I * H + 2 * H;

std::string config_text(bool with_intermediate = true)
{
    nlohmann::json c = {{"hidden_size", H}, {"num_attention_heads", A}, {"num_key_value_heads", KV},
                        {"vocab_size", V},  {"num_hidden_layers", L},   {"model_type", "llama"}};
    if (with_intermediate)
        c["intermediate_size"] = I;
    return c.dump();
}

fs::path write_model(const fs::path& dir, bool with_config = true)
{
    fs::create_directories(dir);
    std::vector<std::pair<SafetensorsTensor, std::string>> tensors;
    add(tensors, "model.embed_tokens.weight", {V, H});
    for (int b = 0; b < L; ++b) {
        const std::string p = "model.layers." + std::to_string(b) + ".";
        add(tensors, p + "self_attn.q_proj.weight", {H, H});
        add(tensors, p + "self_attn.k_proj.weight", {KV * D, H});
        add(tensors, p + "self_attn.v_proj.weight", {KV * D, H});
        add(tensors, p + "self_attn.o_proj.weight", {H, H});
        add(tensors, p + "mlp.gate_proj.weight", {I, H});
        add(tensors, p + "mlp.up_proj.weight", {I, H});
        add(tensors, p + "mlp.down_proj.weight", {H, I});
        add(tensors, p + "input_layernorm.weight", {H});
        add(tensors, p + "post_attention_layernorm.weight", {H});
    }
    add(tensors, "model.layers.0.self_attn.rotary_emb.inv_freq", {D / 2}); // a buffer, not a parameter
    add(tensors, "model.norm.weight", {H});
    add(tensors, "lm_head.weight", {V, H});
    write_safetensors(dir / "model.safetensors", tensors);
    if (with_config)
        fixtures::write_file(dir / "config.json", config_text());
    return dir;
}

// torch.save({name: tensor, ...}) of contiguous float32 tensors, each on its own storage.
std::string torch_state_dict(const std::vector<fixtures::TorchTensor>& tensors)
{
    fixtures::PickleWriter p;
    p.proto(2);
    p.global("collections", "OrderedDict").op(')').op('R');
    p.mark();
    fixtures::ZipWriter zip;
    std::vector<std::pair<std::string, std::string>> storages;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& shape = tensors[i].shape;
        std::vector<int64_t> stride(shape.size(), 1);
        for (std::size_t d = shape.size(); d-- > 1;)
            stride[d - 1] = stride[d] * static_cast<int64_t>(shape[d]);
        const int64_t numel = static_cast<int64_t>(fixtures::volume(shape));
        p.str(tensors[i].name);
        fixtures::pickle_tensor_view(p, std::to_string(i), "FloatStorage", numel, 0, shape, stride);
        storages.emplace_back("archive/data/" + std::to_string(i),
                              std::string(static_cast<std::size_t>(4 * numel), '\0'));
    }
    p.op('u').stop();
    zip.add("archive/data.pkl", p.out, p.out);
    for (const auto& [name, bytes] : storages)
        zip.add(name, bytes, bytes);
    zip.add("archive/version", "3\n", "3\n");
    return zip.finish();
}

bool near(double a, double b)
{
    return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

} // namespace

class TestLayerProfile : public QObject {
    Q_OBJECT

private slots:
    void paramsPerLayerAreExact()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_model(fs::path(tmp.path().toStdString()) / "llama");
        const pl::ModelProfile m = profile_checkpoint(dir, {.seq_len = 32, .micro_batch_size = 2});
        const auto& layers = m.profile.layers;
        QCOMPARE(layers.size(), std::size_t(L + 2));
        QCOMPARE(layers.front().name, std::string("embedding"));
        QCOMPARE(layers.front().params, V * H);
        for (int b = 0; b < L; ++b) {
            QCOMPARE(layers[1 + b].name, "model.layers." + std::to_string(b));
            QCOMPARE(layers[1 + b].params, kBlockParams); // inv_freq not counted
        }
        QCOMPARE(layers.back().name, std::string("head"));
        QCOMPARE(layers.back().params, H + V * H);
        QVERIFY(m.config);
        QCOMPARE(m.config->kv_heads, int(KV));
    }

    void flopsAndActivationsMatchTheClosedForms()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_model(fs::path(tmp.path().toStdString()) / "llama");
        const double s = 32, b = 2, T = 200, F = 0.4;
        const pl::ModelProfile m =
            profile_checkpoint(dir, {.seq_len = 32, .micro_batch_size = 2, .device_tflops = T, .mfu = F});
        const auto& layers = m.profile.layers;
        const double tokens = s * b;
        const double ms_per_flop = 1.0 / (T * 1e12 * F) * 1e3;
        // block: 2 P T + 4 b s^2 h; activation s b h (14 + 4 kv/a + 6 I/h) + 5 a s^2 b (SwiGLU keeps
        // gate, up and their product, 3 x 2 I bytes per token, where GELU keeps 2 x 2 I)
        const double block_flops = 2.0 * kBlockParams * tokens + 4.0 * b * s * s * H;
        const double block_bytes = s * b * H * (14.0 + 4.0 * KV / A + 6.0 * I / H) + 5.0 * A * s * s * b;
        for (int i = 1; i <= L; ++i) {
            QVERIFY2(near(m.fwd_flops[i], block_flops), std::to_string(m.fwd_flops[i]).c_str());
            QVERIFY(near(layers[i].fwd_ms, block_flops * ms_per_flop));
            QVERIFY(near(layers[i].bwd_ms, 2.0 * block_flops * ms_per_flop));
            QCOMPARE(layers[i].activation_bytes, std::llround(block_bytes));
            QCOMPARE(*layers[i].selective_activation_bytes, std::llround(block_bytes - 5.0 * A * s * s * b));
            QCOMPARE(*layers[i].output_bytes, std::llround(2.0 * s * b * H));
        }
        QCOMPARE(m.fwd_flops.front(), 0.0); // a lookup
        QCOMPARE(layers.front().activation_bytes, std::llround(s * b * H));
        QVERIFY(near(m.fwd_flops.back(), 2.0 * (H + V * H) * tokens));
        QCOMPARE(layers.back().activation_bytes, std::llround(4.0 * s * b * H + 4.0 * s * b * V));
        // The written profile is one load_profile reads unchanged.
        const pl::Profile back = pl::parse_profile_json(pl::model_profile_json(m).dump(), "p.json");
        QCOMPARE(back.layers.size(), layers.size());
        QCOMPARE(back.layers[2].activation_bytes, layers[2].activation_bytes);
        QCOMPARE(back.layers[2].fwd_ms, layers[2].fwd_ms);
        QCOMPARE(back.micro_batch_size, std::optional<int>(2));
        QCOMPARE(back.shape->hidden_size, int(H));
    }

    void multiHeadAttentionIsThePapersCount()
    {
        // With a = kv and I = 4h the block's bytes are Korthikanti's s b h (34 + 5 a s / h).
        const pl::ModelConfig c{.hidden_size = 64,
                                .attention_heads = 8,
                                .kv_heads = 8,
                                .intermediate_size = 256,
                                .vocab_size = 1000,
                                .layers = 2};
        const pl::Workload w{.seq_len = 128, .micro_batch_size = 3};
        const double s = 128, b = 3, h = 64, a = 8;
        QCOMPARE(pl::layer_activation_bytes(pl::LayerRole::block, &c, {}, w),
                 std::llround(s * b * h * (34.0 + 5.0 * a * s / h)));
    }

    void tiedHeadIsChargedTheProjection()
    {
        const pl::ModelConfig c{.hidden_size = 16,
                                .attention_heads = 4,
                                .kv_heads = 4,
                                .intermediate_size = 64,
                                .vocab_size = 50,
                                .layers = 1};
        const pl::Workload w{.seq_len = 8, .micro_batch_size = 1};
        const pl::LayerParams norm_only{.name = "head", .role = pl::LayerRole::head, .params = 16};
        QCOMPARE(pl::layer_fwd_flops(norm_only, &c, {}, w), 2.0 * (16 + 50 * 16) * 8);
    }

    void withoutConfigTheEstimateSaysSo()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_model(fs::path(tmp.path().toStdString()) / "noconf", false);
        const pl::ModelProfile m = profile_checkpoint(dir, {.seq_len = 32, .micro_batch_size = 2});
        QVERIFY(!m.config);
        QVERIFY(!m.profile.shape);
        QVERIFY(near(m.fwd_flops[1], 2.0 * kBlockParams * 64)); // no attention term
        QCOMPARE(m.profile.layers[1].activation_bytes, std::llround(34.0 * 64 * H));
        QVERIFY(!m.notes.empty());
        QVERIFY2(m.notes.front().find("no config.json") != std::string::npos, m.notes.front().c_str());
    }

    void missingConfigFieldNamesFieldAndFile()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_model(fs::path(tmp.path().toStdString()) / "llama");
        fixtures::write_file(dir / "config.json", config_text(false));
        const auto problem = error_of([&] { profile_checkpoint(dir, {.seq_len = 32, .micro_batch_size = 2}); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("intermediate_size") != std::string::npos, problem->message.c_str());
        QVERIFY2(problem->message.find((dir / "config.json").string()) != std::string::npos, problem->message.c_str());
    }

    void configOfAnotherModelIsRefused()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_model(fs::path(tmp.path().toStdString()) / "llama");
        nlohmann::json c = nlohmann::json::parse(config_text());
        c["num_hidden_layers"] = 32;
        fixtures::write_file(dir / "config.json", c.dump());
        const auto problem = error_of([&] { profile_checkpoint(dir, {.seq_len = 32, .micro_batch_size = 2}); });
        QVERIFY(problem);
        QVERIFY2(problem->message.find("num_hidden_layers 32") != std::string::npos, problem->message.c_str());
    }

    void noLayerIndexIsAnError()
    {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "flat";
        fs::create_directories(dir);
        std::vector<std::pair<SafetensorsTensor, std::string>> tensors;
        add(tensors, "encoder.weight", {8, 8});
        add(tensors, "decoder.weight", {8, 8});
        write_safetensors(dir / "model.safetensors", tensors);
        const auto problem = error_of([&] { profile_checkpoint(dir, {.seq_len = 8, .micro_batch_size = 1}); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("no layer-indexed tensors") != std::string::npos, problem->message.c_str());
        QVERIFY(problem->message.find(dir.string()) != std::string::npos);
    }

    void torchBinSkipsBuffers()
    {
        // pytorch_model.bin of a GPT-2: the 4-D causal-mask buffers "h.N.attn.bias" are no parameters.
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "gpt2";
        std::vector<fixtures::TorchTensor> tensors = {{"transformer.wte.weight", {V, H}},
                                                      {"transformer.ln_f.weight", {H}}};
        for (int b = 0; b < 2; ++b) {
            const std::string p = "transformer.h." + std::to_string(b) + ".";
            tensors.push_back({p + "attn.bias", {1, 1, 8, 8}});
            tensors.push_back({p + "attn.c_attn.weight", {H, 3 * H}});
            tensors.push_back({p + "mlp.c_fc.weight", {H, 4 * H}});
        }
        fixtures::write_file(dir / "pytorch_model.bin", torch_state_dict(tensors));
        fixtures::write_file(dir / "config.json",
                             R"({"n_embd": 16, "n_head": 4, "n_layer": 2, "n_inner": null, "vocab_size": 50})");
        const pl::ModelProfile m = profile_checkpoint(dir, {.seq_len = 8, .micro_batch_size = 1});
        QCOMPARE(m.profile.layers.size(), std::size_t(4));
        QCOMPARE(m.profile.layers[1].name, std::string("transformer.h.0"));
        QCOMPARE(m.profile.layers[1].params, 3 * H * H + 4 * H * H);
        QCOMPARE(m.profile.layers[3].params, H);
        bool noted = false;
        for (const std::string& note : m.notes)
            noted = noted || note.find("2 tensor(s)") != std::string::npos;
        QVERIFY(noted);
    }

    void nativeCountsParamTensorsOnly()
    {
        // A ShardScope checkpoint stores param, master, exp_avg, exp_avg_sq per tensor: one is the model.
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "native";
        const uint64_t numel = 80'000;
        SaveOptions options;
        options.durable = false;
        options.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(3, numel, 2, ParamDtype::F16), dir.string(), 1, options);
        fixtures::write_file(dir / "config.json",
                             R"({"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256,
                                                      "vocab_size": 100, "num_hidden_layers": 4})");
        const pl::ModelProfile m = profile_checkpoint(dir, {.seq_len = 16, .micro_batch_size = 1});
        std::map<std::string, std::int64_t> expected;
        for (const TensorInfo& t : options.tensors) {
            const auto dot = t.name.find('.', t.name.find("blocks.") == 0 ? 7 : 0);
            expected[t.name.starts_with("blocks.") ? t.name.substr(0, dot) : t.name.substr(0, t.name.find('.'))] +=
                static_cast<std::int64_t>(t.numel);
        }
        QCOMPARE(m.profile.layers.size(), std::size_t(6));
        QCOMPARE(m.profile.layers[0].params, expected["embed"]);
        QCOMPARE(m.profile.layers[2].name, std::string("blocks.1"));
        QCOMPARE(m.profile.layers[2].params, expected["blocks.1"]);
        QCOMPARE(m.profile.layers[5].params, expected["head"]);
        std::int64_t total = 0;
        for (const pl::Layer& l : m.profile.layers)
            total += l.params;
        QCOMPARE(total, std::int64_t(numel));
    }

    void configParserAliasesAndDefaults()
    {
        // GPT-2: n_embd / n_head / n_layer, "n_inner": null is 4h, no KV heads (= heads).
        const pl::ModelConfig c = pl::parse_model_config(
            R"({"n_embd": 768, "n_head": 12, "n_layer": 12, "n_inner": null, "vocab_size": 50257})", "gpt2.json");
        QCOMPARE(c.hidden_size, 768);
        QCOMPARE(c.kv_heads, 12);
        QCOMPARE(c.intermediate_size, 3072);
        const auto bad = error_of([] { pl::parse_model_config(R"({"hidden_size": 0})", "c.json"); });
        QVERIFY(bad && bad->message.find("'hidden_size'") != std::string::npos);
        const auto moe = error_of([] {
            pl::parse_model_config(R"({"hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 8,
                                      "vocab_size": 9, "num_hidden_layers": 1, "num_local_experts": 8})",
                                   "m.json");
        });
        QVERIFY(moe && moe->message.find("num_experts_per_tok") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestLayerProfile)
#include "tst_layer_profile.moc"
