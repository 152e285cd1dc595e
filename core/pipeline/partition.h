#pragma once
// Cutting a model's layers into contiguous pieces, one piece per (stage, chunk).
//
// Boundaries: a partition into P pieces is P - 1 strictly increasing layer indices; each is the
// index of the FIRST layer of the next piece ("manual:3,6,9" on 12 layers = pieces [0..2],
// [3..5], [6..8], [9..11]). Every piece holds at least one layer.
//
// Pieces and stages: with N stages and v chunks per stage (v = 1 except for the interleaved
// schedule) the model is cut into P = N * v pieces and stage s runs pieces s, s + N, s + 2N, ...
// (Megatron's interleaving), i.e. piece p lives on stage p % N as chunk p / N. So an interleaved
// partition has N * v - 1 boundaries; with v = 1 pieces and stages are the same thing.
// The V-shaped schedules (zb-v, dualpipe-v) place v = 2 pieces per stage as a V instead: stage s
// holds piece s (chunk 0) and piece 2N - 1 - s (chunk 1), so the last stage hands piece N - 1's
// output to piece N without a send and stage 0 computes both the first and the last piece.

#include "core/pipeline/profile.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

enum class Placement : std::uint8_t {
    looped, // piece p on stage p % N as chunk p / N
    vshape, // v = 2: piece p < N on stage p as chunk 0, piece p >= N on stage 2N - 1 - p as chunk 1
};
// The piece that runs as `chunk` on `stage`, and the inverse.
int piece_of(int stage, int chunk, int stages, Placement placement);
int stage_of_piece(int piece, int stages, Placement placement);
int chunk_of_piece(int piece, int stages, Placement placement);

enum class PartitionMethod {
    uniform, // equal layer counts (the first `layers % P` pieces get one more)
    params, // minimise the largest piece's parameter count (DeepSpeed's "parameters" method)
    compute, // minimise the largest piece's fwd_ms + bwd_ms, i.e. the slowest stage; exact
    manual, // boundaries given by the user
};

struct PartitionSpec {
    PartitionMethod method = PartitionMethod::uniform;
    std::vector<int> manual_boundaries; // only for manual
};

// "uniform" | "params" | "compute" | "manual:B1,B2,..."; throws invalid_argument otherwise.
PartitionSpec parse_partition_spec(std::string_view text);
std::string to_string(const PartitionSpec& spec); // inverse of parse_partition_spec

// The P - 1 boundaries for `pieces` pieces (pieces = stages * virtual_stages). params and
// compute return an exact optimum of their objective (O(P * L log L)); among optimal placements
// they pick the one whose LATER pieces are as large as the optimum allows, because early stages
// hold the most in-flight activations under 1F1B-style schedules. Throws invalid_schedule
// when pieces < 1 or pieces > layers; for manual, the boundaries are validated as below.
std::vector<int> partition(const Profile& profile, int pieces, const PartitionSpec& spec);

// Throws invalid_schedule unless `boundaries` is a valid cut of `layer_count` layers into
// `pieces` pieces (right count, strictly increasing, inside 1 .. layer_count - 1).
void validate_boundaries(int layer_count, int pieces, const std::vector<int>& boundaries);

// One piece's summed costs. stage/chunk follow the placement above.
struct PieceCost {
    int piece = 0;
    int stage = 0;
    int chunk = 0;
    int first_layer = 0; // inclusive
    int last_layer = 0; // inclusive
    std::int64_t params = 0;
    double fwd_ms = 0.0;
    double bwd_ms = 0.0;
    double bwd_input_ms = 0.0;
    double bwd_weight_ms = 0.0;
    std::int64_t activation_bytes = 0; // per microbatch
    std::int64_t output_bytes = 0; // layer_output_bytes of the last layer: what a send carries
    double send_ms = 0.0; // its time on the link, without latency (0 unless a bandwidth is set)
};

// A stage's totals over its chunks (what the stage bar shows per rank).
struct StageCost {
    int stage = 0;
    int layer_count = 0;
    std::int64_t params = 0;
    double fwd_ms = 0.0;
    double bwd_ms = 0.0;
    double bwd_input_ms = 0.0;
    double bwd_weight_ms = 0.0;
    std::int64_t activation_bytes = 0; // per microbatch, all chunks
};

// Costs of each of the boundaries.size() + 1 pieces, indexed by piece. Validates boundaries.
std::vector<PieceCost> piece_costs(const Profile& profile, int stages, const std::vector<int>& boundaries,
                                   Placement placement = Placement::looped);
std::vector<StageCost> stage_costs(const std::vector<PieceCost>& pieces, int stages);

} // namespace shardscope::pipeline
