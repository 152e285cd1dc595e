#pragma once
// A layer profile from a model's shape alone (shardctl profile/schedule/plan --model): every
// layer's parameters counted from the config's matrices, its forward FLOPs from the matmuls it
// runs, its activation bytes from Korthikanti et al. 2022, for a tensor-parallel degree t with or
// without sequence parallelism. The formulas and their sources are in docs/cost-model.md.
//
// Layers: "embedding" (token table, GPT-2's position table), "layers.0" .. "layers.{l-1}", "head"
// (final norm and, unless tied, the output projection). Per microbatch of b samples of s tokens:
//   fwd FLOPs     2*b*s*W + 4*b*s^2*a*d (W: the matmul weights a token passes through — q, k, v,
//                 o, the MLP's or k routed + shared experts' and the router; d: head_dim); the
//                 head 2*b*s*h*V, tied or not; the embedding 0
//   activations   per GPU, s*b*h*(R + S/t) + 5*a*s^2*b/t with R = 10 and S the sharded parts
//                 (Q, K and V by their heads, the projection's input, the MLP's inner tensors);
//                 R/t with sequence parallelism. MHA with a 4h GELU MLP gives the paper's
//                 34 + 5as/h, 10 + 24/t + 5as/(ht) and 34/t + 5as/(ht).
// Per GPU, a layer's matmul weights and vocabulary tables count 1/t (rounded up), routed experts
// 1/(t x ep), its norms, biases, position table and router whole; FLOPs count 1/(t x cp) and
// every activation 1/cp (context parallelism: s / cp tokens of each sequence per GPU).

#include "core/pipeline/model_config.h"
#include "core/pipeline/profile_model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::pipeline {

// One layer as the config describes it, over all tensor-parallel ranks.
struct ShapeLayer {
    std::string name;
    LayerRole role = LayerRole::block;
    std::int64_t params = 0; // every parameter, all experts
    std::int64_t active_params = 0; // those a token passes through: k of the E experts
    std::int64_t sharded_params = 0; // of `params`: split over the t ranks
    std::int64_t matmul_weights = 0; // active matmul weights: fwd FLOPs = 2 * tokens * this (+ attention)
    std::int64_t expert_params = 0; // of `sharded_params`: the routed experts (split over t x ep)
    bool moe = false; // its MLP is routed experts
};

// The layers of `config`; throws invalid_argument naming the config for a GPT-2 config without a
// position table or a model of more than 2^53 parameters.
std::vector<ShapeLayer> model_layers(const ModelConfig& config);

// Korthikanti et al. 2022's block activation, generalised (see above): per GPU, in bytes.
struct BlockActivation {
    double replicated_per_sbh = 0; // 10: the norms' and sublayers' inputs, the dropout masks
    double sharded_per_sbh = 0; // 24 for MHA and a 4h GELU MLP
    double attention_bytes = 0; // 5*a*s^2*b: the scores, their dropout mask and output
};
BlockActivation block_activation(const ModelConfig& config, const Workload& work, bool moe);
// Bytes a block holds per GPU: all of them, or (selective) without the attention scores.
std::int64_t block_activation_bytes(const BlockActivation& parts, double sbh, const Parallelism& parallel,
                                    bool selective);

// Why t GPUs cannot split `config`'s layers as Megatron's tensor parallelism does (its column-
// and row-parallel linears divide their widths by t and refuse a remainder): the attention heads,
// the key/value heads (t may also be a multiple of those: they are then replicated), the MLP's
// width and each expert's and shared expert's width must divide by t. The vocabulary is padded
// to a multiple of t, so it need not. Empty when t splits them all.
std::string tensor_parallel_misfit(const ModelConfig& config, int t);

// A byte count worked out in double, rounded; Error(invalid_argument) past 2^62 (a sequence or
// micro batch no GPU holds), where the cast would wrap to a negative number.
std::int64_t whole_bytes(double value);

// The profile of `config` at `work` on t GPUs per layer; checks t against the model
// (tensor_parallel_misfit).
ModelProfile shape_profile(const ModelConfig& config, const Workload& work, const Parallelism& parallel);

} // namespace shardscope::pipeline
