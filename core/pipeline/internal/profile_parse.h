#pragma once
// What the JSON reader (profile.cpp) and the CSV reader (profile_csv.cpp) share: a layer as
// read, the one place its defaults are applied, and the error sentence. Private to the core.

#include "core/pipeline/profile.h"

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace shardscope::pipeline::detail {

// A layer as read, before defaults: which fields were present matters for the defaults and for
// the "missing field" errors, so everything is optional here.
struct RawLayer {
    std::optional<std::string> name;
    std::optional<double> params;
    std::optional<double> fwd_ms;
    std::optional<double> fwd_flops;
    std::optional<double> bwd_ms;
    std::optional<double> bwd_input_ms;
    std::optional<double> bwd_weight_ms;
    std::optional<double> activation_bytes;
    std::optional<double> selective_activation_bytes;
    std::optional<double> input_bytes;
    std::optional<double> output_bytes;
    std::optional<double> selective_recompute_ms;
};

inline constexpr std::array<std::string_view, 12> kKnownFields = {
    "name",          "params",           "fwd_ms",
    "fwd_flops",     "bwd_ms",           "bwd_input_ms",
    "bwd_weight_ms", "activation_bytes", "selective_activation_bytes",
    "input_bytes",   "output_bytes",     "selective_recompute_ms"};

// The numeric layer fields in kKnownFields order (all but "name"), for table-driven readers.
std::optional<double>* raw_field(RawLayer& raw, std::string_view key);

// The top-level values both formats may give (JSON keys, CSV "# key=value" directives).
struct RawTop {
    std::optional<double> device_tflops;
    std::optional<double> seq_len;
    std::optional<double> hidden_size;
    std::optional<double> attention_heads;
    std::optional<double> micro_batch_size;
};
inline constexpr std::array<std::string_view, 5> kTopFields = {"device_tflops", "seq_len", "hidden_size",
                                                               "attention_heads", "micro_batch_size"};
std::optional<double>* top_field(RawTop& top, std::string_view key);

std::string known_fields_text();

[[noreturn]] void fail(const std::string& origin, const std::string& what);

// Applies the defaults of docs/shardctl.md section 4 and checks ranges; throws invalid_profile.
Layer finish_layer(const RawLayer& raw, std::size_t index, const std::string& origin, const std::string& where_prefix,
                   std::optional<double> device_tflops);
// Checks the top-level values and stores the shape and micro_batch_size in `profile`.
void finish_top(const RawTop& top, const std::string& origin, Profile& profile);

std::string file_stem(const std::string& origin);

} // namespace shardscope::pipeline::detail
