#pragma once
// A layer profile measured by the PyTorch profiler (shardctl profile --from-trace, docs/shardctl.md
// section 2.14): the Chrome trace torch writes, either {"traceEvents": [...]} (torch.profiler,
// Kineto) or the bare array of events (torch 1.x autograd profiler). Complete events (ph "X")
// whose names are layer names, i.e. the user's record_function("model.layers.3") ranges, give
// fwd_ms; "<layer>.backward" ranges give bwd_ms. Read by a SAX pass that keeps only those
// events: a trace of a real step holds millions of kernel and op events a DOM would have to hold.
//
// Rules: a layer name ends in "<container>.<index>" (container layers, h, blocks, block, layer:
// "model.layers.17", "h.3") or its last component names an embedding (embed_tokens, wte, ...) or
// the head (norm, ln_f, lm_head, ...). A range nested in a range of the same name on the same
// thread is part of it, not another call. When any layer range is a GPU annotation
// (cat "gpu_user_annotation", the time the device spent) only those are used, else the CPU ranges
// (cat "user_annotation" or none). fwd_ms (bwd_ms) is the mean of a layer's ranges, i.e. averaged
// over the steps; model order is embeddings, blocks by index, head, each group by first start.

#include "core/pipeline/profile.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::pipeline {

inline constexpr std::uint64_t kMaxTraceBytes = 2ull << 30; // a trace read at most
inline constexpr std::uint64_t kMaxTraceRanges = 4ull << 20; // layer ranges kept at most

// A layer's place in a model, read from a name: "model.layers.17.mlp.up.weight" is
// {prefix "model.layers", index 17, rest "mlp.up.weight"}.
struct LayerName {
    std::string prefix;
    int index = -1;
    std::string rest; // empty for a range named after the layer itself
};
std::optional<LayerName> parse_layer_name(std::string_view name);
bool is_embedding_name(std::string_view name); // a component names an embedding table
bool is_head_name(std::string_view name); // a component names the final norm or the head

struct TraceProfile {
    Profile profile; // params and activation_bytes 0: a trace has times only
    int steps = 0; // distinct ProfilerStep#N ranges (0: none marked)
    std::string annotations; // "gpu_user_annotation" or "user_annotation"
    std::vector<int> ranges; // per layer: how many forward ranges were averaged
    std::vector<std::string> notes;
};

// Throws Error(invalid_argument) naming `origin` for text that is not a trace, or a trace
// without layer ranges.
TraceProfile parse_profiler_trace(std::string_view text, const std::string& origin);
TraceProfile load_profiler_trace(const std::string& path);

// profile_json (profile_model.h) plus keys load_profile ignores: "ok": true, "steps",
// "annotations", "ranges" (per layer) and "notes".
nlohmann::json trace_profile_json(const TraceProfile& trace);

} // namespace shardscope::pipeline
