// Layer costs from a config alone (model_shape.h): parameter counts from the matrices, FLOPs from
// the matmuls, bytes from Korthikanti et al. 2022, per GPU of a tensor-parallel group.

#include "core/pipeline/model_shape.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace shardscope::pipeline {

namespace {

[[noreturn]] void shape_fail(const ModelConfig& c, const std::string& what)
{
    throw Error(ProblemKind::invalid_argument, "config " + c.source + " " + what, c.source);
}

double head_dim(const ModelConfig& c)
{
    return c.head_dim > 0 ? c.head_dim : static_cast<double>(c.hidden_size) / c.attention_heads;
}

double expert_width(const ModelConfig& c)
{
    return c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
}

// A layer's counts in doubles: every product of the parser's bounded widths is exact there, and
// the total is checked against 2^53 before anything becomes an integer.
struct Counts {
    double params = 0, active = 0, sharded = 0, matmul = 0;
    double experts = 0; // of `sharded`: the routed experts, split over ep as well
};

Counts block_counts(const ModelConfig& c, bool moe)
{
    const double h = c.hidden_size, d = head_dim(c), qd = c.attention_heads * d, kvd = c.kv_heads * d;
    const double mlp_matrices = c.gated_mlp ? 3.0 : 2.0;
    Counts n;
    const double norms = c.gpt2_style ? 4.0 * h : 2.0 * h; // LayerNorm has a bias, RMSNorm not
    const double attention = h * qd + 2.0 * h * kvd + qd * h;
    const double biases = (c.qkv_bias ? qd + 2.0 * kvd : 0.0) + (c.output_bias ? h : 0.0);
    n.params = norms + attention + biases;
    n.sharded = attention;
    n.matmul = attention;
    if (!moe) {
        const double mlp = mlp_matrices * h * c.intermediate_size;
        n.params += mlp + (c.gpt2_style ? c.intermediate_size + h : 0.0);
        n.sharded += mlp;
        n.matmul += mlp;
        n.active = n.params;
        return n;
    }
    const double expert = mlp_matrices * h * expert_width(c);
    const double router = h * c.experts; // replicated: every rank routes its own tokens
    double shared = c.shared_experts * expert;
    double shared_gate = 0.0;
    if (c.shared_expert_intermediate_size > 0) { // Qwen-MoE's shared expert and its sigmoid gate
        shared += mlp_matrices * h * c.shared_expert_intermediate_size;
        shared_gate = h;
    }
    n.experts = c.experts * expert;
    n.params += c.experts * expert + router + shared + shared_gate;
    n.sharded += c.experts * expert + shared;
    n.matmul += c.experts_per_token * expert + router + shared + shared_gate;
    n.active = n.params - (c.experts - c.experts_per_token) * expert;
    return n;
}

} // namespace

std::int64_t whole_bytes(double value)
{
    if (!(value < 0x1p62)) {
        char text[32];
        std::snprintf(text, sizeof text, "%.3g", value);
        throw Error(ProblemKind::invalid_argument,
                    std::string("a layer of this shape and workload comes to ") + text +
                        " bytes or parameters, more than 2^62: a model, sequence length or micro batch size "
                        "beyond any GPU");
    }
    return static_cast<std::int64_t>(std::llround(value));
}

std::vector<ShapeLayer> model_layers(const ModelConfig& c)
{
    if (c.gpt2_style && c.max_positions <= 0)
        shape_fail(c, "has no 'n_positions' (the size of GPT-2's learned position table), which the profile needs");
    const double h = c.hidden_size, v = static_cast<double>(c.vocab_size);
    std::vector<ShapeLayer> layers;
    double total = 0.0;
    auto add = [&](std::string name, LayerRole role, const Counts& n, bool moe) {
        total += n.params;
        if (total > 9007199254740992.0) // 2^53
            shape_fail(c, "describes more than 2^53 parameters, which is no model that can be trained");
        layers.push_back(ShapeLayer{.name = std::move(name),
                                    .role = role,
                                    .params = whole_bytes(n.params),
                                    .active_params = whole_bytes(n.active),
                                    .sharded_params = whole_bytes(n.sharded),
                                    .matmul_weights = whole_bytes(n.matmul),
                                    .expert_params = whole_bytes(n.experts),
                                    .moe = moe});
    };
    const double positions = c.gpt2_style ? static_cast<double>(c.max_positions) * h : 0.0;
    add("embedding", LayerRole::embedding,
        Counts{.params = v * h + positions, .active = v * h + positions, .sharded = v * h, .matmul = 0}, false);
    for (int i = 0; i < c.layers; ++i) {
        const bool moe = c.experts > 1 && i >= c.first_dense_layers;
        add("layers." + std::to_string(i), LayerRole::block, block_counts(c, moe), moe);
    }
    const double norm = c.gpt2_style ? 2.0 * h : h;
    const double projection = c.tied_embeddings ? 0.0 : v * h; // tied: the embedding's table, stored once
    add("head", LayerRole::head,
        Counts{.params = norm + projection, .active = norm + projection, .sharded = projection, .matmul = v * h},
        false);
    return layers;
}

BlockActivation block_activation(const ModelConfig& c, const Workload& work, bool moe)
{
    const double h = c.hidden_size;
    const double q = c.attention_heads * head_dim(c) / h; // the attention's width over h (1 unless head_dim says)
    const double g = static_cast<double>(c.kv_heads) / c.attention_heads;
    // Korthikanti's 11 sbh of attention: Q and K for the scores (4), V (2), the output
    // projection's input (2) are split by heads; its input (2) and dropout mask (1) are not.
    const double attention = 2.0 * q + 4.0 * g * q + 2.0 * q;
    // The MLP's 16 sbh are GELU's input and output, 4h wide each; a SwiGLU MLP keeps gate and up
    // (its activation's input, 2 x I) and their product (the down projection's input).
    const double per_width = c.gated_mlp ? 6.0 : 4.0;
    double mlp = per_width * c.intermediate_size / h;
    if (moe) // every token passes through k routed experts and the shared ones
        mlp = per_width * (c.experts_per_token + c.shared_experts) * expert_width(c) / h +
            per_width * c.shared_expert_intermediate_size / h;
    const double s = work.seq_len, b = work.micro_batch_size;
    return BlockActivation{.replicated_per_sbh = 10.0,
                           .sharded_per_sbh = attention + mlp,
                           .attention_bytes = 5.0 * c.attention_heads * s * s * b};
}

std::int64_t block_activation_bytes(const BlockActivation& parts, double sbh, const Parallelism& parallel,
                                    bool selective)
{
    const double t = parallel.tp;
    const double replicated = parallel.sequence_parallel ? parts.replicated_per_sbh / t : parts.replicated_per_sbh;
    const double bytes = sbh * (replicated + parts.sharded_per_sbh / t) + (selective ? 0.0 : parts.attention_bytes / t);
    return whole_bytes(bytes);
}

std::string tensor_parallel_misfit(const ModelConfig& c, int t)
{
    const std::string degree = "a tensor-parallel degree of " + std::to_string(t);
    if (t < 1)
        return "cannot be split by " + degree;
    if (c.attention_heads % t != 0 || (c.kv_heads % t != 0 && t % c.kv_heads != 0))
        return "has " + std::to_string(c.attention_heads) + " attention and " + std::to_string(c.kv_heads) +
            " key/value heads, which " + degree + " cannot split evenly";
    const std::pair<const char*, int> widths[] = {
        {"an MLP width (intermediate_size)", c.intermediate_size},
        {"an expert width (moe_intermediate_size)", c.experts > 1 ? static_cast<int>(expert_width(c)) : 0},
        {"a shared expert width (shared_expert_intermediate_size)", c.shared_expert_intermediate_size}};
    for (const auto& [what, width] : widths)
        if (width > 0 && width % t != 0)
            return "has " + std::string(what) + " of " + std::to_string(width) + ", which " + degree +
                " cannot split evenly";
    return {};
}

ModelProfile shape_profile(const ModelConfig& c, const Workload& work, const Parallelism& parallel)
{
    check_workload(work);
    const int t = parallel.tp;
    if (t < 1 || t > 4096 || parallel.cp < 1 || parallel.cp > 4096 || parallel.ep < 1 || parallel.ep > 4096)
        throw Error(ProblemKind::invalid_argument, "the tensor-, context- and expert-parallel degrees must be 1..4096");
    if (parallel.ep > 1 && (c.experts < 2 || c.experts % parallel.ep != 0))
        shape_fail(c,
                   "has " + std::to_string(c.experts) + " experts, which an expert-parallel degree of " +
                       std::to_string(parallel.ep) + " cannot split evenly");
    if (work.seq_len % parallel.cp != 0)
        shape_fail(c,
                   "is profiled at a sequence of " + std::to_string(work.seq_len) +
                       " tokens, which a context-parallel degree of " + std::to_string(parallel.cp) +
                       " cannot split evenly");
    if (const std::string misfit = tensor_parallel_misfit(c, t); !misfit.empty())
        shape_fail(c, misfit);
    const std::vector<ShapeLayer> layers = model_layers(c);
    ModelProfile result{.workload = work, .config = c, .from_shape = true, .parallel = parallel};
    Profile& profile = result.profile;
    const std::string stem = std::filesystem::path(c.source).stem().string();
    profile.name = stem.empty() ? std::string("model") : stem;
    profile.micro_batch_size = work.micro_batch_size;
    profile.shape =
        ModelShape{.seq_len = work.seq_len, .hidden_size = c.hidden_size, .attention_heads = c.attention_heads};
    const double s = work.seq_len, b = work.micro_batch_size, h = c.hidden_size, tokens = s * b, sbh = s * b * h;
    // Context parallelism gives each GPU s / cp of every sequence: its FLOPs (its queries
    // against all keys) and every activation shrink by cp; so does SP's split along s.
    const double cp = parallel.cp;
    const double split = (parallel.sequence_parallel ? 1.0 / t : 1.0) / cp;
    const double ms_per_flop = 1.0 / (work.device_tflops * 1e9 * work.mfu);
    for (const ShapeLayer& l : layers) {
        double flops = 0.0;
        const std::int64_t dense_sharded = l.sharded_params - l.expert_params, ept = std::int64_t(t) * parallel.ep;
        const std::int64_t experts = (l.expert_params + ept - 1) / ept;
        Layer layer{.name = l.name,
                    .params = (dense_sharded + t - 1) / t + experts + (l.params - l.sharded_params),
                    .expert_params = experts};
        switch (l.role) {
        case LayerRole::embedding:
            layer.activation_bytes = whole_bytes(sbh * split); // its dropout mask
            layer.selective_activation_bytes = layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, whole_bytes(8.0 * tokens / cp)); // int64 token ids
            layer.output_bytes = whole_bytes(2.0 * sbh * split);
            break;
        case LayerRole::block: {
            // QK^T and scores x V: what selective recomputation runs again (Korthikanti et al.
            // 2022, section 5); its own share whatever the MLP's width, the KV heads or experts.
            const double attention_core = 4.0 * b * s * s * c.attention_heads * head_dim(c);
            flops = 2.0 * tokens * static_cast<double>(l.matmul_weights) + attention_core;
            layer.selective_recompute_ms = attention_core / (t * cp) * ms_per_flop;
            const BlockActivation parts = block_activation(c, work, l.moe);
            layer.activation_bytes = whole_bytes(block_activation_bytes(parts, sbh, parallel, false) / cp);
            layer.selective_activation_bytes = whole_bytes(block_activation_bytes(parts, sbh, parallel, true) / cp);
            layer.input_bytes = whole_bytes(2.0 * sbh * split); // all full recomputation keeps
            layer.output_bytes = layer.input_bytes;
            break;
        }
        case LayerRole::head:
            flops = 2.0 * tokens * static_cast<double>(l.matmul_weights);
            // The norm's and the projection's 16-bit inputs, and the fp32 logits, split by vocabulary.
            layer.activation_bytes =
                whole_bytes(4.0 * sbh * split + 4.0 * tokens * static_cast<double>(c.vocab_size) / t / cp);
            layer.selective_activation_bytes = layer.activation_bytes;
            layer.input_bytes = std::min(layer.activation_bytes, whole_bytes(2.0 * sbh * split));
            break;
        }
        flops /= t * cp;
        layer.fwd_ms = flops * ms_per_flop;
        layer.bwd_ms = 2.0 * layer.fwd_ms;
        layer.bwd_input_ms = layer.fwd_ms;
        layer.bwd_weight_ms = layer.fwd_ms;
        result.fwd_flops.push_back(flops);
        result.total_params += l.params;
        result.active_params += l.active_params;
        profile.layers.push_back(std::move(layer));
    }
    if (t > 1)
        result.notes.push_back("tensor parallel t = " + std::to_string(t) +
                               ": params, FLOPs and bytes are one GPU's share; the all-reduces (or, with "
                               "sequence parallelism, all-gathers and reduce-scatters) between them are not timed");
    if (c.experts > 1)
        result.notes.push_back("MoE: " + std::to_string(c.experts_per_token) + " of " + std::to_string(c.experts) +
                               " experts per token in the FLOPs and activations; every expert in the parameters");
    validate_profile(profile);
    return result;
}

} // namespace shardscope::pipeline
