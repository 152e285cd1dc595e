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
// Defaults: bwd_ms = 2 * fwd_ms; bwd_input_ms / bwd_weight_ms (the B and W of zero-bubble
// schedules) = half of bwd_ms each; when only one half is given the other is bwd_ms minus it.
// fwd_flops is converted with the profile's device_tflops (JSON field, or a CSV comment line
// "# device_tflops=312"); giving fwd_flops without it is an error rather than a silent guess.
// Unknown layer keys and CSV columns are rejected so a typo ("bwd_weigth_ms") cannot silently
// fall back to a default; other top-level JSON keys (e.g. "description") are ignored. Every failure throws shardscope::Error(ProblemKind::invalid_profile) naming the file,
// the layer (index and name) or CSV line, and what is wrong.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

inline constexpr std::uint64_t kMaxProfileBytes = 64ull << 20; // a profile file read at most
inline constexpr int kMaxProfileDepth = 64;                     // JSON nesting

// One layer's cost for ONE microbatch. Times are milliseconds; after loading every field is
// filled in (defaults applied), finite and >= 0, and bwd_input_ms + bwd_weight_ms == bwd_ms.
struct Layer {
    std::string name;
    std::int64_t params = 0;
    double fwd_ms = 0.0;
    double bwd_ms = 0.0;        // the whole backward pass (B + W)
    double bwd_input_ms = 0.0;  // B of a split backward: gradient w.r.t. the layer's input
    double bwd_weight_ms = 0.0; // W of a split backward: gradient w.r.t. the layer's weights
    std::int64_t activation_bytes = 0; // held from the forward until the last backward op
};

struct Profile {
    std::string name;   // the file's "name", else the file stem, else "uniform"
    std::string source; // the path it was loaded from ("" when built in code)
    std::vector<Layer> layers;
};

// Loads a profile from a file; ".csv" (case-insensitive) is read as CSV, anything else as JSON.
// An unreadable file throws ProblemKind::cannot_open; a malformed one invalid_profile.
Profile load_profile(const std::string& path);

// Parse from memory; `origin` is the name used in error messages (usually the path).
Profile parse_profile_json(std::string_view text, const std::string& origin);
Profile parse_profile_csv(std::string_view text, const std::string& origin);

// `layer_count` identical layers: fwd_ms each, bwd_ms = 2 * fwd_ms split half/half, 1 param and
// 1 activation byte each. uniform_profile(N * v) is shardctl's default without --profile, so the
// textbook cases (F = 1, B = 2; or B = W = 1 for zb-h1) come out exactly.
Profile uniform_profile(int layer_count, double fwd_ms = 1.0);

// Re-checks a profile built in code (the loaders already call it): non-empty, finite,
// non-negative, bwd_input_ms + bwd_weight_ms == bwd_ms (to a relative 1e-9).
void validate_profile(const Profile& profile);

} // namespace shardscope::pipeline
