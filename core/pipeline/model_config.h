#pragma once
// A model's shape as a Hugging Face config.json states it (shardctl profile/schedule/plan
// --model, and the config.json beside a checkpoint). Parsed over bytes, apart from every use, so
// it can be fuzzed like the other readers; docs/shardctl.md section 2.14 lists the keys.

#include <cstdint>
#include <string>
#include <string_view>

namespace shardscope::pipeline {

inline constexpr std::uint64_t kMaxModelConfigBytes = 16ull << 20; // a config.json read at most

// What the profile needs from a Hugging Face config.json. The defaults are a multi-head, GELU,
// bias-free block, which is what a config built in code without the newer fields means.
struct ModelConfig {
    std::string source; // the file it was read from
    int hidden_size = 0; // h: hidden_size (GPT-2: n_embd)
    int attention_heads = 0; // a: num_attention_heads (n_head)
    int kv_heads = 0; // num_key_value_heads, default a (GQA / MQA when smaller)
    int head_dim = 0; // head_dim, 0 = h / a
    int intermediate_size = 0; // I: intermediate_size (n_inner, null = 4h; ffn_dim)
    std::int64_t vocab_size = 0;
    int layers = 0; // num_hidden_layers (n_layer)
    int experts = 0; // MoE: num_local_experts / n_routed_experts / num_experts, 0 = dense
    int experts_per_token = 0; // MoE: num_experts_per_tok (k)
    // The block's family: GPT-2 (model_type "gpt2" or n_embd) has learned positions, LayerNorm
    // with a bias, biased projections and a GELU MLP; every other config is read as Llama-style
    // (RMSNorm, rotary positions, SwiGLU MLP, no biases unless attention_bias says so).
    bool gpt2_style = false;
    bool gated_mlp = false; // SwiGLU: gate, up and down projections
    bool qkv_bias = false; // attention_bias (Llama), or Qwen2's always-on q/k/v bias
    bool output_bias = false; // attention_bias: the output projection's bias too
    bool tied_embeddings = false; // tie_word_embeddings (Hugging Face's default: true)
    std::int64_t max_positions = 0; // max_position_embeddings (n_positions)
    int moe_intermediate_size = 0; // an expert's MLP width, 0 = intermediate_size (Mixtral)
    int shared_experts = 0; // n_shared_experts (DeepSeek), each moe_intermediate_size wide
    int shared_expert_intermediate_size = 0; // Qwen-MoE: one always-on expert of this width
    int first_dense_layers = 0; // first_k_dense_replace (DeepSeek): these blocks have a dense MLP
};

// Parses config.json text. A missing or malformed field throws
// Error(ProblemKind::invalid_argument) naming `origin` and the field, in one sentence.
ModelConfig parse_model_config(std::string_view text, const std::string& origin);

} // namespace shardscope::pipeline
