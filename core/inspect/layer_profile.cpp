// Layers from a checkpoint's tensor names (layer_profile.h).

#include "core/inspect/layer_profile.h"

#include "core/pipeline/profile_trace.h"
#include "core/util/error.h"
#include "core/util/printable.h"

#include <algorithm>
#include <map>

namespace shardscope {

namespace fs = std::filesystem;
namespace pl = shardscope::pipeline;

namespace {

std::vector<std::string_view> split(std::string_view name)
{
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = name.find('.', start);
        parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (dot == std::string_view::npos)
            return parts;
        start = dot + 1;
    }
}

bool has_component(std::string_view name, std::initializer_list<std::string_view> wanted)
{
    for (std::string_view part : split(name))
        if (std::find(wanted.begin(), wanted.end(), part) != wanted.end())
            return true;
    return false;
}

// Tensors a checkpoint stores that are not the model's parameters: buffers recomputed at load
// and optimizer state saved beside the weights.
bool not_a_parameter(std::string_view name, const std::vector<uint64_t>& shape)
{
    const std::vector<std::string_view> parts = split(name);
    const std::string_view last = parts.back();
    if (last == "inv_freq" || last == "masked_bias" || (last == "bias" && shape.size() == 4))
        return true; // rotary frequencies; GPT-2's causal mask ("h.0.attn.bias", 1 x 1 x n x n)
    for (std::string_view part : parts)
        if (part.starts_with("optim") || part == "exp_avg" || part == "exp_avg_sq" || part == "fp32_flat_groups" ||
            part == "lr_scheduler" || part == "rng_state")
            return true;
    return false;
}

// "<group>: <name>": plan_torch's name for a tensor whose name recurs in other files of another
// layer or pipeline stage (Megatron numbers each stage's layers from 0).
std::pair<std::string, std::string> split_group(const std::string& name)
{
    const auto colon = name.find(": ");
    if (colon == std::string::npos)
        return {{}, name};
    return {name.substr(0, colon + 2), name.substr(colon + 2)};
}

std::int64_t elements(const std::vector<uint64_t>& shape)
{
    std::int64_t n = 1;
    for (uint64_t d : shape)
        n *= static_cast<std::int64_t>(d);
    return n;
}

bool is_expert_tensor(std::string_view rest)
{
    const std::vector<std::string_view> parts = split(rest);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
        if (parts[i] == "experts" && !parts[i + 1].empty() &&
            std::all_of(parts[i + 1].begin(), parts[i + 1].end(), [](char c) { return c >= '0' && c <= '9'; }))
            return true;
    return false;
}

} // namespace

LayerGrouping group_layers(const ContentReport& listing, const std::string& origin)
{
    struct Block {
        std::size_t prefix_rank = 0;
        int index = 0;
        pl::LayerParams params;
    };
    std::map<std::string, std::size_t> prefix_rank;
    std::map<std::pair<std::size_t, int>, Block> blocks;
    std::optional<pl::LayerParams> embedding, head;
    LayerGrouping result;
    std::int64_t token_embedding = 0;
    std::size_t skipped = 0, unknown = 0;
    std::string unknown_example;
    for (const TensorContent& tensor : listing.tensors) {
        if (!tensor.state.empty() && tensor.state != "param")
            continue; // a native checkpoint's master weights and moments
        const auto [group, name] = split_group(tensor.name);
        if (not_a_parameter(name, tensor.shape)) {
            ++skipped;
            continue;
        }
        const std::int64_t numel = elements(tensor.shape);
        if (const auto parsed = pl::parse_layer_name(name)) {
            const std::string prefix = group + parsed->prefix;
            const std::size_t rank = prefix_rank.try_emplace(prefix, prefix_rank.size()).first->second;
            Block& block = blocks[{rank, parsed->index}];
            block.params.name = prefix + "." + std::to_string(parsed->index);
            block.params.role = pl::LayerRole::block;
            block.params.params += numel;
            if (is_expert_tensor(parsed->rest))
                block.params.expert_params += numel;
            continue;
        }
        const bool is_embedding = pl::is_embedding_name(name) && !pl::is_head_name(name);
        std::optional<pl::LayerParams>& target = is_embedding ? embedding : head;
        if (!target)
            target = pl::LayerParams{.name = is_embedding ? "embedding" : "head",
                                     .role = is_embedding ? pl::LayerRole::embedding : pl::LayerRole::head};
        target->params += numel;
        if (!is_embedding && !pl::is_head_name(name) && unknown++ == 0)
            unknown_example = name;
        // The token table's [V, h] gives the shape when there is no config (position tables are
        // smaller; the largest 2-D table is the token one).
        if (is_embedding && tensor.shape.size() == 2 && numel > token_embedding &&
            !has_component(name, {"wpe", "position_embeddings", "embed_positions"})) {
            token_embedding = numel;
            result.shape = {.hidden_size = static_cast<std::int64_t>(tensor.shape[1]),
                            .vocab_size = static_cast<std::int64_t>(tensor.shape[0])};
        }
    }
    if (embedding)
        result.layers.push_back(*embedding);
    int previous = -1;
    std::size_t previous_rank = 0;
    for (const auto& [key, block] : blocks) {
        if (key.first == previous_rank && previous >= 0 && key.second != previous + 1)
            result.notes.push_back("block indices jump from " + std::to_string(previous) + " to " +
                                   std::to_string(key.second) + " in " + printable(block.params.name, 80));
        previous_rank = key.first;
        previous = key.second;
        result.layers.push_back(block.params);
    }
    result.blocks = static_cast<std::int64_t>(blocks.size());
    if (head)
        result.layers.push_back(*head);
    if (skipped)
        result.notes.push_back(std::to_string(skipped) + " tensor(s) of " + origin +
                               " are buffers or optimizer state, not parameters, and were not counted");
    if (unknown)
        result.notes.push_back(std::to_string(unknown) +
                               " tensor(s) without a layer index and not recognised as the "
                               "embedding, final norm or head (e.g. '" +
                               printable(unknown_example, 80) + "') were counted in the head");
    if (!listing.warnings.empty())
        result.notes.push_back(std::to_string(listing.warnings.size()) +
                               " tensor(s) were not listed: " + listing.warnings.front().message);
    return result;
}

std::optional<fs::path> find_model_config(const fs::path& path, const fs::path& listing_dir,
                                          const fs::path& explicit_config)
{
    if (!explicit_config.empty())
        return explicit_config;
    std::error_code ec;
    const fs::path folder = fs::is_directory(path, ec) ? path : path.parent_path();
    for (const fs::path& candidate : {folder / "config.json", listing_dir / "config.json"})
        if (fs::is_regular_file(candidate, ec))
            return candidate;
    return std::nullopt;
}

pl::ModelProfile profile_checkpoint(const fs::path& path, const pl::Workload& work, const fs::path& explicit_config,
                                    bool use_config)
{
    const ContentReport listing = plan_content(path, {.raw_fp8 = true}); // names and shapes only: no scales read
    if (!listing.problems.empty()) {
        Problem first = listing.problems.front();
        first.message = "cannot profile " + path.string() + ": " + first.message;
        throw Error(first);
    }
    LayerGrouping grouping = group_layers(listing, path.string());
    std::optional<pl::ModelConfig> config;
    const auto config_path = use_config ? find_model_config(path, listing.dir, explicit_config) : std::nullopt;
    if (config_path) {
        config = pl::parse_model_config(pl::read_input_file(config_path->string(), pl::kMaxModelConfigBytes, "config"),
                                        config_path->string());
        // A config of another model would price this checkpoint as that model: refused.
        if (grouping.blocks > 0 && config->layers != grouping.blocks)
            throw Error(ProblemKind::invalid_argument,
                        "config " + config->source + " has num_hidden_layers " + std::to_string(config->layers) +
                            " but " + path.string() + " holds " + std::to_string(grouping.blocks) +
                            " layer-indexed blocks, so it does not describe this checkpoint",
                        config->source);
        if (grouping.shape.hidden_size > 0 && grouping.shape.hidden_size != config->hidden_size)
            throw Error(ProblemKind::invalid_argument,
                        "config " + config->source + " has hidden_size " + std::to_string(config->hidden_size) +
                            " but the embedding of " + path.string() + " is " +
                            std::to_string(grouping.shape.hidden_size) +
                            " wide, so it does not describe this checkpoint",
                        config->source);
    }
    pl::ModelProfile profile = pl::model_profile(grouping.layers, config, grouping.shape, work, path.string());
    profile.notes.insert(profile.notes.end(), grouping.notes.begin(), grouping.notes.end());
    return profile;
}

} // namespace shardscope
