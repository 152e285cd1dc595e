// Layer costs from a model's shape (profile_model.h): the config.json reader and the closed forms.

#include "core/pipeline/profile_model.h"

#include "core/util/error.h"
#include "core/util/internal/json_limits.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>

namespace shardscope::pipeline {

namespace {

[[noreturn]] void config_fail(const std::string& origin, const std::string& what)
{
    throw Error(ProblemKind::invalid_argument, "config " + origin + " " + what, origin);
}

// A positive whole number under one of `keys` (the first present wins; HF names first, then the
// GPT-2 / OPT aliases). nullopt when none is present; throws when one is present but malformed.
std::optional<std::int64_t> config_number(const nlohmann::json& document, std::initializer_list<const char*> keys,
                                          const std::string& origin, std::int64_t max_value)
{
    for (const char* key : keys) {
        const auto it = document.find(key);
        if (it == document.end() || it->is_null())
            continue;
        const bool whole = it->is_number_integer() ||
            (it->is_number_float() && std::isfinite(it->get<double>()) &&
             it->get<double>() == std::floor(it->get<double>()));
        if (!whole || it->get<double>() < 1 || it->get<double>() > static_cast<double>(max_value))
            config_fail(origin,
                        "has '" + std::string(key) + "' = " + it->dump().substr(0, 64) +
                            "; it must be a whole number from 1 to " + std::to_string(max_value));
        return it->get<std::int64_t>();
    }
    return std::nullopt;
}

std::int64_t required(const std::optional<std::int64_t>& value, std::string_view key, std::string_view why,
                      const std::string& origin)
{
    if (!value)
        config_fail(origin, "has no '" + std::string(key) + "' (" + std::string(why) + "), which the profile needs");
    return *value;
}

} // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& origin)
{
    JsonLimits limits;
    limits.max_depth = 64;
    if (const JsonScan scan = scan_json_limits(text, limits); !scan.violation.empty())
        config_fail(origin, scan.violation);
    nlohmann::json document;
    try {
        document = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception&) {
        config_fail(origin, "is not valid JSON");
    }
    if (!document.is_object())
        config_fail(origin, "is not a JSON object");
    constexpr std::int64_t kMaxDim = 1 << 30;
    ModelConfig config{.source = origin};
    config.hidden_size =
        static_cast<int>(required(config_number(document, {"hidden_size", "n_embd", "d_model"}, origin, kMaxDim),
                                  "hidden_size", "the hidden size", origin));
    config.attention_heads = static_cast<int>(
        required(config_number(document, {"num_attention_heads", "n_head", "num_heads"}, origin, kMaxDim),
                 "num_attention_heads", "the attention heads", origin));
    config.kv_heads = static_cast<int>(
        config_number(document, {"num_key_value_heads"}, origin, kMaxDim).value_or(config.attention_heads));
    if (config.kv_heads > config.attention_heads)
        config_fail(origin,
                    "has more key/value heads (" + std::to_string(config.kv_heads) + ") than attention heads (" +
                        std::to_string(config.attention_heads) + ")");
    // GPT-2 writes "n_inner": null for the default MLP width of 4h.
    const auto inner = config_number(document, {"intermediate_size", "n_inner", "ffn_dim"}, origin, kMaxDim);
    if (!inner && document.contains("n_inner") && document["n_inner"].is_null())
        config.intermediate_size = 4 * config.hidden_size;
    else
        config.intermediate_size = static_cast<int>(required(inner, "intermediate_size", "the MLP width", origin));
    config.vocab_size = required(config_number(document, {"vocab_size"}, origin, std::int64_t{1} << 40), "vocab_size",
                                 "the vocabulary size", origin);
    config.layers = static_cast<int>(
        required(config_number(document, {"num_hidden_layers", "n_layer", "num_layers"}, origin, kMaxDim),
                 "num_hidden_layers", "the number of blocks", origin));
    const auto experts =
        config_number(document, {"num_local_experts", "n_routed_experts", "num_experts"}, origin, kMaxDim);
    const auto per_token = config_number(document, {"num_experts_per_tok"}, origin, kMaxDim);
    if (experts && *experts > 1) {
        config.experts = static_cast<int>(*experts);
        config.experts_per_token =
            static_cast<int>(required(per_token, "num_experts_per_tok", "the experts each token is routed to", origin));
        if (config.experts_per_token > config.experts)
            config_fail(origin,
                        "routes each token to more experts (" + std::to_string(config.experts_per_token) +
                            ") than it has (" + std::to_string(config.experts) + ")");
    }
    return config;
}

double layer_fwd_flops(const LayerParams& layer, const ModelConfig* config, const InferredShape& shape,
                       const Workload& work)
{
    const double b = work.micro_batch_size, s = work.seq_len, tokens = b * s;
    switch (layer.role) {
    case LayerRole::embedding: return 0.0; // a table lookup: no multiply-adds
    case LayerRole::head: {
        const double h = config ? config->hidden_size : static_cast<double>(shape.hidden_size);
        const double v = config ? static_cast<double>(config->vocab_size) : static_cast<double>(shape.vocab_size);
        // Tied embeddings: the projection's weights are the embedding's, stored once, used twice.
        const double tied = static_cast<double>(layer.params) < v * h ? v * h : 0.0;
        return 2.0 * (static_cast<double>(layer.params) + tied) * tokens;
    }
    case LayerRole::block: break;
    }
    double params = static_cast<double>(layer.params);
    if (config && config->experts > 1) // a token passes through k of the E experts
        params -= static_cast<double>(layer.expert_params) *
            (1.0 - static_cast<double>(config->experts_per_token) / config->experts);
    double flops = 2.0 * params * tokens;
    if (config) // Q K^T and the scores times V: 2 * 2 * b * s^2 * h
        flops += 4.0 * b * s * s * config->hidden_size;
    return flops;
}

namespace {

// The 5*a*s^2*b of softmax output, its dropout mask and dropout output: what selective
// recomputation drops.
double attention_bytes(const ModelConfig& c, const Workload& w)
{
    return 5.0 * c.attention_heads * static_cast<double>(w.seq_len) * w.seq_len * w.micro_batch_size;
}

std::int64_t to_bytes(double value)
{
    return static_cast<std::int64_t>(std::llround(value));
}

} // namespace

std::int64_t layer_activation_bytes(LayerRole role, const ModelConfig* config, const InferredShape& shape,
                                    const Workload& work)
{
    const double h = config ? config->hidden_size : static_cast<double>(shape.hidden_size);
    const double sbh = static_cast<double>(work.seq_len) * work.micro_batch_size * h;
    switch (role) {
    case LayerRole::embedding: return to_bytes(sbh);
    case LayerRole::head: {
        const double v = config ? static_cast<double>(config->vocab_size) : static_cast<double>(shape.vocab_size);
        return to_bytes(4.0 * sbh + 4.0 * static_cast<double>(work.seq_len) * work.micro_batch_size * v);
    }
    case LayerRole::block: break;
    }
    if (!config)
        return to_bytes(34.0 * sbh);
    // Korthikanti's 34 is 4 (two norms) + 11 (attention: 7 + Q's 2 + K's and V's 2 + 2) + 19
    // (MLP: 3 + 16 = 4 * 4h/h); K and V shrink with the KV heads, the MLP with its width.
    const double g = static_cast<double>(config->kv_heads) / config->attention_heads;
    const double per_sbh = 14.0 + 4.0 * g + 4.0 * config->intermediate_size / h;
    return to_bytes(per_sbh * sbh + attention_bytes(*config, work));
}

ModelProfile model_profile(const std::vector<LayerParams>& layers, const std::optional<ModelConfig>& config,
                           const InferredShape& shape, const Workload& work, const std::string& origin)
{
    if (work.seq_len < 1 || work.seq_len > (1 << 24) || work.micro_batch_size < 1 || work.micro_batch_size > (1 << 20))
        throw Error(ProblemKind::invalid_argument,
                    "the sequence length must be 1..2^24 and the micro batch size 1..2^20");
    if (!std::isfinite(work.device_tflops) || !(work.device_tflops > 0) || !std::isfinite(work.mfu) ||
        !(work.mfu > 0) || work.mfu > 1)
        throw Error(ProblemKind::invalid_argument, "the device TFLOP/s must be > 0 and the MFU in (0, 1]");
    const bool blocks =
        std::any_of(layers.begin(), layers.end(), [](const LayerParams& l) { return l.role == LayerRole::block; });
    if (!blocks)
        throw Error(ProblemKind::invalid_argument,
                    origin +
                        " has no layer-indexed tensors (names like "
                        "'model.layers.17.', 'layers.17.', 'h.17.'), so there are no blocks to profile",
                    origin);
    if (!config && shape.hidden_size <= 0)
        throw Error(ProblemKind::invalid_argument,
                    origin +
                        " has no config.json beside it and no 2-D embedding to read the hidden size from; "
                        "give --config with the model's config.json",
                    origin);
    ModelProfile result{.workload = work, .config = config};
    const ModelConfig* c = config ? &*config : nullptr;
    Profile& profile = result.profile;
    std::filesystem::path named = std::filesystem::path(origin).lexically_normal();
    if (named.filename().empty()) // "ckpt/"
        named = named.parent_path();
    const std::string stem = named.filename().string();
    profile.name = stem.empty() ? std::string("model") : stem;
    profile.micro_batch_size = work.micro_batch_size;
    if (c)
        profile.shape =
            ModelShape{.seq_len = work.seq_len, .hidden_size = c->hidden_size, .attention_heads = c->attention_heads};
    const double h = c ? c->hidden_size : static_cast<double>(shape.hidden_size);
    const double sb = static_cast<double>(work.seq_len) * work.micro_batch_size;
    const double ms_per_flop = 1.0 / (work.device_tflops * 1e9 * work.mfu);
    for (const LayerParams& l : layers) {
        const double flops = layer_fwd_flops(l, c, shape, work);
        const double fwd = flops * ms_per_flop;
        Layer layer{.name = l.name,
                    .params = l.params,
                    .fwd_ms = fwd,
                    .bwd_ms = 2.0 * fwd,
                    .bwd_input_ms = fwd,
                    .bwd_weight_ms = fwd,
                    .activation_bytes = layer_activation_bytes(l.role, c, shape, work)};
        // The defaults of section 4 read activation_bytes as a block's 34 + 5as/h; every layer
        // here says its parts itself, since GQA, the MLP width and the ends differ from that.
        switch (l.role) {
        case LayerRole::embedding:
            layer.selective_activation_bytes = layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, to_bytes(8.0 * sb));
            layer.output_bytes = to_bytes(2.0 * sb * h);
            break;
        case LayerRole::head:
            layer.selective_activation_bytes = layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, to_bytes(2.0 * sb * h));
            break;
        case LayerRole::block:
            layer.selective_activation_bytes =
                c ? layer.activation_bytes - to_bytes(attention_bytes(*c, work)) : layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, to_bytes(2.0 * sb * h));
            layer.output_bytes = to_bytes(2.0 * sb * h);
            break;
        }
        result.fwd_flops.push_back(flops);
        profile.layers.push_back(std::move(layer));
    }
    if (!c) {
        result.notes.push_back("no config.json: FLOPs are 2 x params x tokens without the 4bs^2h attention term, and "
                               "block activations 34sbh without the 5as^2b attention term (h = " +
                               std::to_string(shape.hidden_size) +
                               " from the embedding); give --config for the full count");
    } else if (c->experts > 1) {
        result.notes.push_back("MoE: expert parameters count k/E = " + std::to_string(c->experts_per_token) + "/" +
                               std::to_string(c->experts) +
                               " in the FLOPs; activations count one expert's MLP per token");
    }
    validate_profile(profile);
    return result;
}

nlohmann::json profile_json(const Profile& profile)
{
    nlohmann::json layers = nlohmann::json::array();
    for (const Layer& l : profile.layers) {
        nlohmann::json layer = {{"name", l.name},
                                {"params", l.params},
                                {"fwd_ms", l.fwd_ms},
                                {"bwd_ms", l.bwd_ms},
                                {"bwd_input_ms", l.bwd_input_ms},
                                {"bwd_weight_ms", l.bwd_weight_ms},
                                {"activation_bytes", l.activation_bytes}};
        if (l.selective_activation_bytes)
            layer["selective_activation_bytes"] = *l.selective_activation_bytes;
        if (l.input_bytes)
            layer["input_bytes"] = *l.input_bytes;
        if (l.output_bytes)
            layer["output_bytes"] = *l.output_bytes;
        layers.push_back(std::move(layer));
    }
    nlohmann::json out = {{"name", profile.name}, {"layers", std::move(layers)}};
    if (profile.shape) {
        out["seq_len"] = profile.shape->seq_len;
        out["hidden_size"] = profile.shape->hidden_size;
        out["attention_heads"] = profile.shape->attention_heads;
    }
    if (profile.micro_batch_size)
        out["micro_batch_size"] = *profile.micro_batch_size;
    return out;
}

nlohmann::json model_profile_json(const ModelProfile& model)
{
    nlohmann::json out = profile_json(model.profile);
    out["ok"] = true;
    out["device_tflops"] = model.workload.device_tflops;
    out["mfu"] = model.workload.mfu;
    out["tokens"] = static_cast<std::int64_t>(model.workload.seq_len) * model.workload.micro_batch_size;
    out["fwd_flops"] = model.fwd_flops;
    out["notes"] = model.notes;
    if (model.config) {
        const ModelConfig& c = *model.config;
        out["config"] = {{"source", c.source},
                         {"hidden_size", c.hidden_size},
                         {"num_attention_heads", c.attention_heads},
                         {"num_key_value_heads", c.kv_heads},
                         {"intermediate_size", c.intermediate_size},
                         {"vocab_size", c.vocab_size},
                         {"num_hidden_layers", c.layers},
                         {"num_experts", c.experts},
                         {"num_experts_per_tok", c.experts_per_token}};
    } else {
        out["config"] = nullptr;
    }
    return out;
}

} // namespace shardscope::pipeline
