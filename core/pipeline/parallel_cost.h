#pragma once
// What tensor, context and expert parallelism cost besides the matmuls: the collectives inside
// every layer, timed on the link their group spans (docs/cost-model.md, "Parallelism").
//
// Ranks are laid out in Megatron-LM's order: t fastest, then cp, then dp, then pp, so a group of
// n ranks whose neighbours are k ranks apart spans k * n consecutive ranks and stays inside one
// node when k * n <= GPUs per node (NVLink), else it crosses nodes (the inter-node link).
// tp: k = 1, n = t; cp: k = t, n = cp; dp (the gradients' reduction, over the d x cp ranks that
// hold the same weights): k = t, n = cp * d; ep: the first ep of the dp ranks
// (k = t * cp, n = ep, Megatron's expert groups); pp: its sends cross nodes unless the whole
// pipeline (t * cp * d * p ranks) fits in one.
//
// Per block and microbatch, A = 2 * b * (s / cp) * h bytes (the block's 16-bit activations of
// the tokens the GPU's tensor-parallel group holds):
//   tp  forward 2 all-reduces of A, backward 2 (Megatron's f and g operators); with sequence
//       parallelism 2 all-gathers and 2 reduce-scatters each way instead, the same bytes and
//       steps. The embedding's forward and the head's backward all-reduce A once more.
//   cp  ring attention: forward cp - 1 steps each passing on one K and V chunk,
//       2 * 2 * b * (s / cp) * kv_d bytes (kv_d: this rank's key/value width, the KV heads split
//       over t as far as they go); backward twice that (K and V again, and their gradients).
//   ep  an MoE block's all-to-all dispatch and combine, each of the T * k * h * 2 bytes of the
//       T = b * (s / cp) / t tokens a GPU routes, forward and again backward.
// Ring collectives over n ranks on a link of G Gbit/s and latency L: all-reduce
// 2 (n - 1) / n * bytes / G + 2 (n - 1) L; all-gather, reduce-scatter and all-to-all half of it.
// None of it overlaps compute: it is added to the layer's forward and to its B (input gradient).

#include "core/pipeline/cluster.h"
#include "core/pipeline/profile_model.h"
#include "core/pipeline/training.h"

#include <optional>
#include <vector>

namespace shardscope::pipeline {

struct Link {
    double gbps = 0.0; // Gbit/s per direction; 0: infinitely fast
    double latency_ms = 0.0;
};

// The parallel degrees of one configuration (the GPU count is tp * cp * dp * pp; ep divides dp).
struct Mesh {
    int tp = 1;
    int cp = 1;
    int ep = 1;
    int dp = 1;
    int pp = 1;
};

struct GroupLinks {
    Link tp, cp, ep, dp, pp;
};

// NVLink per direction: the datasheets' figure counts both directions, so half of it.
Link intra_node_link(const Cluster& cluster);
Link inter_node_link(const Cluster& cluster);
// Each group's link by the rank order above.
GroupLinks group_links(const Cluster& cluster, const Mesh& mesh);
// One link for every group (a --link-gbps given by hand, or no cluster).
GroupLinks uniform_links(const Link& link);

// What the links are taken from: a cluster's per-group links, each bandwidth replaced by `gbps`
// and each latency by `latency_ms` where those are given (--link-gbps, --p2p-latency); without
// a cluster one link of `gbps` (0: infinitely fast) and `latency_ms` (0) for every group.
struct LinkChoice {
    std::optional<Cluster> cluster;
    std::optional<double> gbps;
    std::optional<double> latency_ms;
};
GroupLinks mesh_links(const LinkChoice& choice, const Mesh& mesh);

// Ring collectives, in ms; 0 for one rank.
double allreduce_ms(double bytes, int ranks, const Link& link);
double allgather_ms(double bytes, int ranks, const Link& link); // also reduce-scatter, all-to-all

// One layer's (or piece's, or stage's) collectives by group, in ms: what its forward and its
// input gradient (B) spend in them. They are part of the layer's fwd_ms and bwd_ms, not extra.
struct LayerComm {
    double tp_fwd = 0.0, tp_bwd = 0.0; // tensor parallel: all-reduces, or all-gathers + reduce-scatters
    double cp_fwd = 0.0, cp_bwd = 0.0; // context parallel: the K/V ring
    double ep_fwd = 0.0, ep_bwd = 0.0; // expert parallel: the all-to-all dispatch and combine
    double fwd() const { return tp_fwd + cp_fwd + ep_fwd; }
    double bwd() const { return tp_bwd + cp_bwd + ep_bwd; }
};

// The collectives above for every layer of a profile from shape_profile; empty without a config.
std::vector<LayerComm> layer_comm(const ModelProfile& model, const GroupLinks& links);
// Per piece and microbatch: the sum over its layers; under full recomputation the backward
// reruns the forward (with_recompute adds it to B), collectives included.
std::vector<LayerComm> piece_comm(const std::vector<LayerComm>& layers, const std::vector<PieceCost>& pieces,
                                  Recompute mode);
// Per stage, over every op of the timeline: each F adds its piece's forward collectives, each B
// (unsplit or input gradient) its backward ones; W runs none.
std::vector<LayerComm> stage_comm(const std::vector<LayerComm>& pieces, const Plan& plan);

// Adds layer_comm to a profile from shape_profile (its config, workload and parallelism), and a
// note saying what was timed.
void add_parallel_comm(ModelProfile& model, const GroupLinks& links);

// shape_profile + add_parallel_comm: what `schedule --model` and `plan --model` both run.
ModelProfile parallel_profile(const ModelConfig& config, const Workload& work, const Parallelism& parallel,
                              const GroupLinks& links);

} // namespace shardscope::pipeline
