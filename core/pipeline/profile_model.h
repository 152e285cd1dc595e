#pragma once
// A layer profile computed from a model's shape instead of measured (shardctl profile PATH,
// docs/shardctl.md section 2.14): the Hugging Face config.json fields, the per-layer parameter
// counts a checkpoint listing gives (core/inspect/layer_profile.h groups them), and the standard
// FLOP and activation counts. Pure arithmetic over values; the only reader is the config parser,
// over bytes, so it can be fuzzed like the other parsers.
//
// Per microbatch of b samples of s tokens (T = b*s), h hidden, a heads, g = kv_heads / a,
// I the MLP width, V the vocabulary (Korthikanti et al. 2022 for the bytes, in 16-bit):
//   block      fwd FLOPs 2*P*T + 4*b*s^2*h   (P: the block's parameters; MoE experts at k/E)
//              activation block_activation (model_shape.h) at t = 1: s*b*h*(14 + 4g + 4I/h) +
//              5*a*s^2*b for a GELU MLP, 6I/h for SwiGLU (= s*b*h*(34 + 5as/h) for g = 1, I = 4h:
//              the paper's count); selective keeps it without 5*a*s^2*b; input = output = 2*s*b*h
//   embedding  fwd FLOPs 0 (a lookup); activation s*b*h (its dropout mask); output 2*s*b*h;
//              input 8*s*b (the int64 token ids)
//   head       fwd FLOPs 2*(P + tied)*T, tied = V*h when it holds no V x h projection of its
//              own (tied embeddings); activation 4*s*b*h + 4*s*b*V (the final norm's and the
//              projection's 16-bit inputs, fp32 logits for the loss); input 2*s*b*h
//   fwd_ms = FLOPs / (device_tflops * 1e9 * mfu), bwd_ms = 2 * fwd_ms (B = W = fwd_ms).
// Without a config only 2*P*T is counted and the block activation is 34*s*b*h (no attention
// term, h read from the embedding): the estimate says so in its notes.

#include "core/pipeline/model_config.h"
#include "core/pipeline/profile.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

enum class LayerRole { embedding, block, head };

// One layer as a checkpoint holds it: exact parameter counts.
struct LayerParams {
    std::string name;
    LayerRole role = LayerRole::block;
    std::int64_t params = 0;
    std::int64_t expert_params = 0; // of `params`: in MoE expert tensors (".experts.N.")
};

// The workload the costs are computed for.
struct Workload {
    int seq_len = 0; // s
    int micro_batch_size = 0; // b
    double device_tflops = 312; // peak dense 16-bit TFLOP/s (A100)
    double mfu = 0.5; // model FLOPs utilisation: the share of the peak achieved
};

// What the shape is taken from when there is no config: the embedding's [V, h].
struct InferredShape {
    std::int64_t hidden_size = 0; // 0: unknown
    std::int64_t vocab_size = 0; // 0: unknown
};

// How one pipeline stage's layers are spread over GPUs (shapes only: model_shape.h).
struct Parallelism {
    int tp = 1; // tensor-parallel degree t: matmuls and the vocabulary split over t GPUs
    bool sequence_parallel = false; // Korthikanti et al.: the norms and dropouts split over t too
    int cp = 1; // context-parallel degree: each GPU holds s / cp of every sequence (ring attention)
    int ep = 1; // expert-parallel degree: each GPU holds E / ep of an MoE layer's experts
};

struct ModelProfile {
    Profile profile;
    std::vector<double> fwd_flops; // per layer, as counted
    std::vector<std::string> notes; // what was estimated, and why
    Workload workload;
    std::optional<ModelConfig> config;
    // From a config alone (shape_profile): layers' params, FLOPs and bytes are per GPU of the
    // tensor-parallel group, and these are the whole model's counts.
    bool from_shape = false;
    Parallelism parallel;
    std::int64_t total_params = 0;
    std::int64_t active_params = 0; // a token's share: k of the E experts
};

// The closed forms above, exposed for tests and the GUI.
double layer_fwd_flops(const LayerParams& layer, const ModelConfig* config, const InferredShape& shape,
                       const Workload& work);
std::int64_t layer_activation_bytes(LayerRole role, const ModelConfig* config, const InferredShape& shape,
                                    const Workload& work);

// Refuses (invalid_argument) a sequence length outside 1..2^24, a micro batch outside 1..2^20, a
// TFLOP/s that is not > 0 or an MFU outside (0, 1].
void check_workload(const Workload& work);

// Builds the profile; `origin` names the checkpoint in errors and in the profile's name. Throws
// invalid_argument for a workload out of range, no block, or no way to know h without a config.
ModelProfile model_profile(const std::vector<LayerParams>& layers, const std::optional<ModelConfig>& config,
                           const InferredShape& shape, const Workload& work, const std::string& origin);

// The one profile writer: section 4's JSON (fwd_ms, bwd_ms, the optional fields that are set,
// the shape and micro_batch_size), readable by load_profile unchanged.
nlohmann::json profile_json(const Profile& profile);
// profile_json plus, as top-level keys load_profile ignores: "ok": true, "device_tflops", "mfu",
// "tokens", "fwd_flops" (per layer), "config" (the fields used, or null) and "notes".
nlohmann::json model_profile_json(const ModelProfile& model);

} // namespace shardscope::pipeline
