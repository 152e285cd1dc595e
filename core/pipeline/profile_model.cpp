// Layer costs from a model's shape (profile_model.h): the config.json reader and the closed forms.

#include "core/pipeline/profile_model.h"

#include "core/pipeline/model_shape.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace shardscope::pipeline {

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

} // namespace

std::int64_t layer_activation_bytes(LayerRole role, const ModelConfig* config, const InferredShape& shape,
                                    const Workload& work)
{
    const double h = config ? config->hidden_size : static_cast<double>(shape.hidden_size);
    const double sbh = static_cast<double>(work.seq_len) * work.micro_batch_size * h;
    switch (role) {
    case LayerRole::embedding: return whole_bytes(sbh);
    case LayerRole::head: {
        const double v = config ? static_cast<double>(config->vocab_size) : static_cast<double>(shape.vocab_size);
        return whole_bytes(4.0 * sbh + 4.0 * static_cast<double>(work.seq_len) * work.micro_batch_size * v);
    }
    case LayerRole::block: break;
    }
    if (!config)
        return whole_bytes(34.0 * sbh);
    // Korthikanti's count with K and V shrunk by the KV heads and the MLP by its width and gating.
    const BlockActivation parts = block_activation(*config, work, config->experts > 1);
    return block_activation_bytes(parts, sbh, Parallelism{}, false);
}

void check_workload(const Workload& work)
{
    if (work.seq_len < 1 || work.seq_len > (1 << 24) || work.micro_batch_size < 1 || work.micro_batch_size > (1 << 20))
        throw Error(ProblemKind::invalid_argument,
                    "the sequence length must be 1..2^24 and the micro batch size 1..2^20");
    if (!std::isfinite(work.device_tflops) || !(work.device_tflops > 0) || !std::isfinite(work.mfu) ||
        !(work.mfu > 0) || work.mfu > 1)
        throw Error(ProblemKind::invalid_argument, "the device TFLOP/s must be > 0 and the MFU in (0, 1]");
}

ModelProfile model_profile(const std::vector<LayerParams>& layers, const std::optional<ModelConfig>& config,
                           const InferredShape& shape, const Workload& work, const std::string& origin)
{
    check_workload(work);
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
            layer.input_bytes = std::min(layer.activation_bytes, whole_bytes(8.0 * sb));
            layer.output_bytes = whole_bytes(2.0 * sb * h);
            break;
        case LayerRole::head:
            layer.selective_activation_bytes = layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, whole_bytes(2.0 * sb * h));
            break;
        case LayerRole::block:
            layer.selective_activation_bytes =
                c ? layer.activation_bytes - whole_bytes(attention_bytes(*c, work)) : layer.activation_bytes;
            if (c) // the attention core layer_fwd_flops counts, which selective recomputation runs again
                layer.selective_recompute_ms = 4.0 * sb * static_cast<double>(work.seq_len) * h * ms_per_flop;
            layer.input_bytes = std::min(layer.activation_bytes, whole_bytes(2.0 * sb * h));
            layer.output_bytes = whole_bytes(2.0 * sb * h);
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
                               " in the FLOPs; activations count k experts' MLPs per token");
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
        if (l.selective_recompute_ms)
            layer["selective_recompute_ms"] = *l.selective_recompute_ms;
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
    // A GPU's tokens: with context parallelism it holds 1/cp of each sequence.
    out["tokens"] = static_cast<std::int64_t>(model.workload.seq_len) * model.workload.micro_batch_size /
        (model.from_shape ? model.parallel.cp : 1);
    out["fwd_flops"] = model.fwd_flops;
    out["notes"] = model.notes;
    if (model.from_shape) {
        out["tensor_parallel"] = model.parallel.tp;
        out["sequence_parallel"] = model.parallel.sequence_parallel;
        out["context_parallel"] = model.parallel.cp;
        out["expert_parallel"] = model.parallel.ep;
        out["total_params"] = model.total_params;
        out["active_params"] = model.active_params;
    }
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
                         {"num_experts_per_tok", c.experts_per_token},
                         {"head_dim", c.head_dim},
                         {"gated_mlp", c.gated_mlp},
                         {"tie_word_embeddings", c.tied_embeddings},
                         {"max_position_embeddings", c.max_positions},
                         {"moe_intermediate_size", c.moe_intermediate_size},
                         {"n_shared_experts", c.shared_experts},
                         {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
                         {"first_k_dense_replace", c.first_dense_layers}};
    } else {
        out["config"] = nullptr;
    }
    return out;
}

} // namespace shardscope::pipeline
