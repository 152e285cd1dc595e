// The config.json reader (model_config.h): one pass over the keys, each refused in one sentence
// that names the file and the key.

#include "core/pipeline/model_config.h"

#include "core/util/error.h"
#include "core/util/internal/json_limits.h"

#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>

namespace shardscope::pipeline {

namespace {

// Widths and counts beyond these describe no trainable model, and keeping them small keeps every
// product of two or three of them far inside an int64 and exact in a double.
constexpr std::int64_t kMaxDim = 1 << 24;
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 32;
constexpr std::int64_t kMaxExperts = 1 << 16;

[[noreturn]] void config_fail(const std::string& origin, const std::string& what)
{
    throw Error(ProblemKind::invalid_argument, "config " + origin + " " + what, origin);
}

// A whole number from `min_value` to `max_value` under one of `keys` (the first present wins; HF
// names first, then the GPT-2 / OPT aliases). nullopt when none is present (or null); throws
// when one is present but malformed.
std::optional<std::int64_t> config_number(const nlohmann::json& document, std::initializer_list<const char*> keys,
                                          const std::string& origin, std::int64_t max_value, std::int64_t min_value = 1)
{
    for (const char* key : keys) {
        const auto it = document.find(key);
        if (it == document.end() || it->is_null())
            continue;
        const bool whole = it->is_number_integer() ||
            (it->is_number_float() && std::isfinite(it->get<double>()) &&
             it->get<double>() == std::floor(it->get<double>()));
        if (!whole || it->get<double>() < static_cast<double>(min_value) ||
            it->get<double>() > static_cast<double>(max_value))
            config_fail(origin,
                        "has '" + std::string(key) + "' = " + it->dump().substr(0, 64) +
                            "; it must be a whole number from " + std::to_string(min_value) + " to " +
                            std::to_string(max_value));
        return it->get<std::int64_t>();
    }
    return std::nullopt;
}

std::int64_t required(const std::optional<std::int64_t>& value, std::string_view key, std::string_view why,
                      const std::string& origin)
{
    if (!value)
        config_fail(origin, "has no '" + std::string(key) + "' (" + std::string(why) + "), which the profile needs");
    return *value;
}

bool config_bool(const nlohmann::json& document, const char* key, bool fallback, const std::string& origin)
{
    const auto it = document.find(key);
    if (it == document.end() || it->is_null())
        return fallback;
    if (!it->is_boolean())
        config_fail(origin,
                    "has '" + std::string(key) + "' = " + it->dump().substr(0, 64) + "; it must be true or false");
    return it->get<bool>();
}

std::string model_type(const nlohmann::json& document)
{
    const auto it = document.find("model_type");
    return it != document.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void read_experts(const nlohmann::json& document, const std::string& origin, ModelConfig& config)
{
    const auto experts =
        config_number(document, {"num_local_experts", "n_routed_experts", "num_experts"}, origin, kMaxExperts);
    const auto per_token = config_number(document, {"num_experts_per_tok"}, origin, kMaxExperts);
    if (!experts || *experts <= 1)
        return;
    config.experts = static_cast<int>(*experts);
    config.experts_per_token =
        static_cast<int>(required(per_token, "num_experts_per_tok", "the experts each token is routed to", origin));
    if (config.experts_per_token > config.experts)
        config_fail(origin,
                    "routes each token to more experts (" + std::to_string(config.experts_per_token) +
                        ") than it has (" + std::to_string(config.experts) + ")");
    config.moe_intermediate_size =
        static_cast<int>(config_number(document, {"moe_intermediate_size"}, origin, kMaxDim).value_or(0));
    config.shared_experts =
        static_cast<int>(config_number(document, {"n_shared_experts"}, origin, kMaxExperts, 0).value_or(0));
    config.shared_expert_intermediate_size =
        static_cast<int>(config_number(document, {"shared_expert_intermediate_size"}, origin, kMaxDim, 0).value_or(0));
    config.first_dense_layers =
        static_cast<int>(config_number(document, {"first_k_dense_replace"}, origin, kMaxDim, 0).value_or(0));
    if (config.first_dense_layers > config.layers)
        config_fail(origin,
                    "has 'first_k_dense_replace' = " + std::to_string(config.first_dense_layers) + ", more than its " +
                        std::to_string(config.layers) + " blocks");
}

} // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& origin)
{
    JsonLimits limits;
    limits.max_depth = 64;
    if (const JsonScan scan = scan_json_limits(text, limits); !scan.violation.empty())
        config_fail(origin, scan.violation);
    nlohmann::json document;
    try {
        document = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception&) {
        config_fail(origin, "is not valid JSON");
    }
    if (!document.is_object())
        config_fail(origin, "is not a JSON object");
    ModelConfig config{.source = origin};
    const std::string type = model_type(document);
    config.gpt2_style = type == "gpt2" || document.contains("n_embd");
    config.gated_mlp = !config.gpt2_style;
    config.hidden_size =
        static_cast<int>(required(config_number(document, {"hidden_size", "n_embd", "d_model"}, origin, kMaxDim),
                                  "hidden_size", "the hidden size", origin));
    config.attention_heads = static_cast<int>(
        required(config_number(document, {"num_attention_heads", "n_head", "num_heads"}, origin, kMaxDim),
                 "num_attention_heads", "the attention heads", origin));
    config.kv_heads = static_cast<int>(
        config_number(document, {"num_key_value_heads"}, origin, kMaxDim).value_or(config.attention_heads));
    if (config.kv_heads > config.attention_heads)
        config_fail(origin,
                    "has more key/value heads (" + std::to_string(config.kv_heads) + ") than attention heads (" +
                        std::to_string(config.attention_heads) + ")");
    config.head_dim = static_cast<int>(config_number(document, {"head_dim"}, origin, kMaxDim).value_or(0));
    if (config.head_dim == 0 && config.hidden_size % config.attention_heads != 0)
        config_fail(origin,
                    "has a hidden size (" + std::to_string(config.hidden_size) + ") that its " +
                        std::to_string(config.attention_heads) + " attention heads do not divide, and no 'head_dim'");
    // GPT-2 writes "n_inner": null (or leaves it out) for the default MLP width of 4h.
    const auto inner = config_number(document, {"intermediate_size", "n_inner", "ffn_dim"}, origin, kMaxDim);
    if (!inner && (config.gpt2_style || (document.contains("n_inner") && document["n_inner"].is_null())))
        config.intermediate_size = 4 * config.hidden_size;
    else
        config.intermediate_size = static_cast<int>(required(inner, "intermediate_size", "the MLP width", origin));
    config.vocab_size = required(config_number(document, {"vocab_size"}, origin, kMaxVocab), "vocab_size",
                                 "the vocabulary size", origin);
    config.layers = static_cast<int>(
        required(config_number(document, {"num_hidden_layers", "n_layer", "num_layers"}, origin, kMaxDim),
                 "num_hidden_layers", "the number of blocks", origin));
    config.max_positions =
        config_number(document, {"max_position_embeddings", "n_positions"}, origin, kMaxDim).value_or(0);
    config.tied_embeddings = config_bool(document, "tie_word_embeddings", true, origin);
    const bool attention_bias = config_bool(document, "attention_bias", false, origin);
    config.qkv_bias = config.gpt2_style || attention_bias || type.rfind("qwen2", 0) == 0;
    config.output_bias = config.gpt2_style || attention_bias;
    read_experts(document, origin, config);
    return config;
}

} // namespace shardscope::pipeline
