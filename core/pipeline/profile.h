#pragma once
// Layer-cost profiles: the per-layer numbers every partition and schedule is computed from.
//
// A profile is JSON or CSV (format contract in docs/shardctl.md, section 4 "Layer profiles"):
//   {"name": "...", "device_tflops": 312,            <- optional, needed only for fwd_flops
//    "layers": [{"name": "embed", "params": 131072000, "fwd_ms": 0.12, "bwd_ms": 0.24,
//                "bwd_input_ms": 0.12, "bwd_weight_ms": 0.12, "activation_bytes": 16777216}]}
//   name,params,fwd_ms,bwd_ms,activation_bytes      <- CSV header (columns in any order; the
//   embed,131072000,0.12,0.24,16777216                 optional ones may be added, empty = absent)
//
// Required per layer: name, params, activation_bytes, and exactly one of fwd_ms / fwd_flops.
// Optional memory/communication fields: per layer selective_activation_bytes,
// input_bytes, output_bytes; at the top seq_len, hidden_size, attention_heads (all three or
// none) and micro_batch_size. Their defaults read activation_bytes as Korthikanti et al.'s
// s*b*h*(34 + 5*a*s/h) and take its parts (see the layer_* functions below).
// Defaults: bwd_ms = 2 * fwd_ms; bwd_input_ms / bwd_weight_ms (the B and W of zero-bubble
// schedules) = half of bwd_ms each; when only one half is given the other is bwd_ms minus it.
// fwd_flops is converted with the profile's device_tflops (JSON field, or a CSV comment line
// "# device_tflops=312"); giving fwd_flops without it is an error rather than a silent guess.
// Unknown layer keys and CSV columns are rejected so a typo ("bwd_weigth_ms") cannot silently
// fall back to a default; other top-level JSON keys (e.g. "description") are ignored. Every failure throws shardscope::Error(ProblemKind::invalid_profile) naming the file,
// the layer (index and name) or CSV line, and what is wrong.

#include "core/util/error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

inline constexpr std::uint64_t kMaxProfileBytes = 64ull << 20; // a profile file read at most
inline constexpr int kMaxProfileDepth = 64; // JSON nesting

// One layer's cost for ONE microbatch. Times are milliseconds; after loading every field is
// filled in (defaults applied), finite and >= 0, and bwd_input_ms + bwd_weight_ms == bwd_ms.
struct Layer {
    std::string name;
    std::int64_t params = 0;
    double fwd_ms = 0.0;
    double bwd_ms = 0.0; // the whole backward pass (B + W)
    double bwd_input_ms = 0.0; // B of a split backward: gradient w.r.t. the layer's input
    double bwd_weight_ms = 0.0; // W of a split backward: gradient w.r.t. the layer's weights
    std::int64_t activation_bytes = 0; // held from the forward until the last backward op
    // Optional (nullopt = derived from activation_bytes, see layer_selective_bytes & co.):
    std::optional<std::int64_t> selective_activation_bytes; // held under selective recompute
    std::optional<std::int64_t> input_bytes; // held under full recompute: the layer's input
    std::optional<std::int64_t> output_bytes; // sent to the next stage when a piece ends here
    // What selective recomputation adds to the backward: the attention core's forward (QK^T, the
    // softmax and scores x V) and the collectives it needs again (context parallelism's K/V ring);
    // nullopt = fwd_ms * s / (6h + s) from the shape, see layer_selective_recompute_ms.
    std::optional<double> selective_recompute_ms;
    // Of `params`: routed-expert weights, replicated over dp / ep ranks instead of dp (expert
    // parallelism, model_shape.h); 0 in files, which have no field for it.
    std::int64_t expert_params = 0;
};

// The transformer shape a profile may state, for the recomputation defaults.
struct ModelShape {
    int seq_len = 0; // s
    int hidden_size = 0; // h
    int attention_heads = 0; // a
};

struct Profile {
    std::string name; // the file's "name", else the file stem, else "uniform"
    std::string source; // the path it was loaded from ("" when built in code)
    std::vector<Layer> layers;
    std::optional<ModelShape> shape; // top-level seq_len / hidden_size / attention_heads
    std::optional<int> micro_batch_size; // the microbatch the costs were measured at
};

// Korthikanti et al. 2022: a transformer layer keeps s*b*h*(34 + 5*a*s/h) bytes of 16-bit
// activations; 2*s*b*h of them is its output (= the next layer's input) and 5*a*s^2*b the
// attention scores that selective recomputation drops. Without a shape the attention term is
// taken as 0 (nothing known to drop), so these defaults are exact for transformer blocks and
// an estimate for other layers, which may give the fields explicitly.
double attention_term(const Profile& profile); // 5*a*s/h, or 0 without a shape
// selective_activation_bytes, default activation_bytes * 34 / (34 + 5as/h)
std::int64_t layer_selective_bytes(const Profile& profile, const Layer& layer);
// output_bytes, default activation_bytes * 2 / (34 + 5as/h) (= 2sbh for a transformer block)
std::int64_t layer_output_bytes(const Profile& profile, const Layer& layer);
// input_bytes, default the layer's output_bytes (a block's input and output have one shape)
std::int64_t layer_input_bytes(const Profile& profile, const Layer& layer);
// What selective recomputation adds to the backward: the layer's selective_recompute_ms when
// given (a model's shape gives the attention core's own time), else as a GPT block's share: the
// attention core is 4*b*s^2*h of its 24*b*s*h^2 + 4*b*s^2*h forward FLOPs, so fwd_ms * s / (6h + s);
// 0 without a shape.
double layer_selective_recompute_ms(const Profile& profile, const Layer& layer);

// Loads a profile from a file; ".csv" (case-insensitive) is read as CSV, anything else as JSON.
// An unreadable file throws ProblemKind::cannot_open; a malformed one invalid_profile.
Profile load_profile(const std::string& path);

// Reads a regular file the user named (a profile, a trace, a config.json), at most `max_bytes`:
// cannot_open when it cannot be read, `too_large` when it is larger. A FIFO fails at once.
std::string read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view what,
                            ProblemKind too_large = ProblemKind::invalid_argument);

// Parse from memory; `origin` is the name used in error messages (usually the path).
Profile parse_profile_json(std::string_view text, const std::string& origin);
Profile parse_profile_csv(std::string_view text, const std::string& origin);

// `layer_count` identical layers: fwd_ms each, bwd_ms = 2 * fwd_ms split half/half, 1 param and
// 1 activation byte each. uniform_profile(N * v) is shardctl's default without --profile, so the
// textbook cases (F = 1, B = 2; or B = W = 1 for zb-h1) come out exactly.
Profile uniform_profile(int layer_count, double fwd_ms = 1.0);

// Re-checks a profile built in code (the loaders already call it): non-empty, finite,
// non-negative, bwd_input_ms + bwd_weight_ms == bwd_ms (to a relative 1e-9), the optional
// byte fields >= 0 (selective and input bytes not above activation_bytes), a shape's and micro_batch_size's values > 0.
void validate_profile(const Profile& profile);

} // namespace shardscope::pipeline
