#pragma once
// A layer profile from the user's own checkpoint (shardctl profile PATH, docs/shardctl.md section
// 2.14): the tensors every format's listing gives (plan_content: headers and metadata only, no
// values read) grouped into layers by the index in their names, exact parameters per layer, and,
// with the model's config.json, the FLOP and activation counts of core/pipeline/profile_model.h.
//
// Grouping: a tensor named "<prefix>.<container>.<index>.<rest>" (container layers, h, blocks,
// block, layer: model.layers.17., layers.17., h.17., decoder.layers.17.) belongs to block
// "<prefix>.<container>.<index>"; blocks are ordered by prefix (first seen) and index. A tensor
// without an index is the embedding when a name component names one (embed_tokens, wte, wpe,
// word_embeddings, ...), else the head (final norm, lm_head and anything unrecognised, which the
// notes count). Native checkpoints count their param tensors only; buffers (rotary inv_freq,
// GPT-2's attention masks) and optimizer state in torch files are not parameters and are skipped.

#include "core/inspect/content.h"
#include "core/pipeline/profile_model.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct LayerGrouping {
    std::vector<pipeline::LayerParams> layers; // embedding?, blocks, head?
    pipeline::InferredShape shape; // from a 2-D token embedding [V, h]
    std::int64_t blocks = 0;
    std::vector<std::string> notes;
};

// Groups a listing's tensors; `origin` names the checkpoint in the notes.
LayerGrouping group_layers(const ContentReport& listing, const std::string& origin);

// The config.json used for `path`: `explicit_config` when given, else config.json in the folder
// of `path` (the folder itself for a directory) or in the step directory the listing read.
std::optional<std::filesystem::path> find_model_config(const std::filesystem::path& path,
                                                       const std::filesystem::path& listing_dir,
                                                       const std::filesystem::path& explicit_config = {});

// Lists, groups, reads the config (none with `use_config` false: the estimate) and computes the profile. Throws Error naming the file for a
// path that cannot be listed, a listing with problems, a config.json that lacks a field or does
// not describe the checkpoint (its block count or hidden size differ), or no layer-indexed tensors.
pipeline::ModelProfile profile_checkpoint(const std::filesystem::path& path, const pipeline::Workload& work,
                                          const std::filesystem::path& explicit_config = {}, bool use_config = true);

} // namespace shardscope
