// DeepSpeed checkpoints: `latest` -> global_stepN/ with mp_rank_XX_model_states.pt,
// [bf16_]zero_pp_rank_D_mp_rank_XX_optim_states.pt and, for pipeline parallelism,
// layer_NN[-model_YY]-model_states.pt. Sizes come from the file names; every archive is CRC-checked.

#include "core/foreign/deepspeed.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;
using namespace foreign; // the helpers shared by the torch-archive formats (internal/torch_files.h)

namespace {

struct DeepSpeedName {
    enum Kind { model, zero_optim, zero_model, layer } kind = model;
    bool bf16 = false;
    int dp = -1, mp = -1, layer_index = -1;
    bool tagged_layer = false; // the layer file names its model-parallel rank
};

std::optional<DeepSpeedName> parse_deepspeed_name(std::string_view name)
{
    DeepSpeedName out;
    std::size_t p = 0;
    if (eat(name, p, "mp_rank_")) {
        out.mp = digits(name, p);
        if (out.mp >= 0 && eat(name, p, "_model_states.pt") && p == name.size())
            return out;
        return std::nullopt;
    }
    if (eat(name, p, "layer_")) {
        out.kind = DeepSpeedName::layer;
        out.layer_index = digits(name, p);
        if (out.layer_index < 0)
            return std::nullopt;
        // layer_XX-model_states.pt without model parallelism, layer_XX-model_YY-model_states.pt with
        if (eat(name, p, "-model_states.pt") && p == name.size()) {
            out.mp = 0;
            return out;
        }
        if (eat(name, p, "-model_") && (out.mp = digits(name, p)) >= 0 && eat(name, p, "-model_states.pt") &&
            p == name.size()) {
            out.tagged_layer = true;
            return out;
        }
        return std::nullopt;
    }
    out.bf16 = eat(name, p, "bf16_");
    if (!eat(name, p, "zero_pp_rank_") || (out.dp = digits(name, p)) < 0 || !eat(name, p, "_mp_rank_") ||
        (out.mp = digits(name, p)) < 0)
        return std::nullopt;
    if (eat(name, p, "_optim_states.pt") && p == name.size()) {
        out.kind = DeepSpeedName::zero_optim;
        return out;
    }
    if (eat(name, p, "_model_states.pt") && p == name.size()) {
        out.kind = DeepSpeedName::zero_model;
        return out;
    }
    return std::nullopt;
}

} // namespace

VerifyReport verify_deepspeed(const fsutil::ListedDirectory& dir, const VerifyOptions& options, bool check_data)
{
    VerifyReport report = foreign::new_report("deepspeed", dir.path, "deepspeed");
    ForeignSummary& summary = *report.foreign;
    const std::vector<std::string>& names = dir.names;

    std::set<std::pair<int, int>> optim, zero_model;
    std::set<int> model;
    std::set<std::string> present;
    std::map<int, std::set<int>> layers; // pipeline layer index -> model-parallel ranks with a file
    // mp counts the model-parallel ranks of mp_rank_XX / zero_..._mp_rank_XX names (with pipeline
    // parallelism: stage x tensor slice); layer_mp the tensor slices of layer_NN-model_YY names.
    int dp = 0, mp = 0, layer_mp = 0;
    bool bf16 = false, tagged_layers = false;
    for (const auto& n : names) {
        const auto parsed = parse_deepspeed_name(n);
        if (!parsed)
            continue;
        present.insert(n);
        if (parsed->kind == DeepSpeedName::layer)
            layer_mp = std::max(layer_mp, parsed->mp + 1);
        else
            mp = std::max(mp, parsed->mp + 1);
        if (parsed->kind == DeepSpeedName::zero_optim) {
            optim.insert({parsed->dp, parsed->mp});
            dp = std::max(dp, parsed->dp + 1);
            bf16 = bf16 || parsed->bf16;
        } else if (parsed->kind == DeepSpeedName::zero_model) {
            zero_model.insert({parsed->dp, parsed->mp});
            dp = std::max(dp, parsed->dp + 1);
        } else if (parsed->kind == DeepSpeedName::model) {
            model.insert(parsed->mp);
        } else {
            layers[parsed->layer_index].insert(parsed->mp);
            tagged_layers = tagged_layers || parsed->tagged_layer;
        }
    }
    // Every file present is checked; every file the naming sequence implies but is absent is
    // reported missing (a rank whose save never finished).
    std::vector<std::pair<std::string, int>> files; // name, rank for messages
    for (const auto& n : present) {
        const auto parsed = parse_deepspeed_name(n);
        files.push_back({n,
                         parsed->kind == DeepSpeedName::zero_optim || parsed->kind == DeepSpeedName::zero_model
                             ? parsed->dp
                             : parsed->mp});
    }
    // Rank numbers come from file names, which anyone can write: the sequence they imply is
    // enumerated only up to a sane size, else reported as one problem.
    const int layer_ranks = tagged_layers ? layer_mp : 1;
    const uint64_t implied = static_cast<uint64_t>(dp) * static_cast<uint64_t>(mp) * 2 + static_cast<uint64_t>(mp) +
        layers.size() * static_cast<uint64_t>(layer_ranks);
    if (implied > static_cast<uint64_t>(kMaxWorldSize)) {
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = report.dir.string() + ": the file names imply " +
                                       std::to_string(implied) + " files (data-parallel size " + std::to_string(dp) +
                                       ", model-parallel size " + std::to_string(mp) + "), more than the " +
                                       std::to_string(kMaxWorldSize) +
                                       " ranks ShardScope checks: a file name carries an implausible rank number"});
        return report;
    }
    const std::string optim_prefix = bf16 ? "bf16_zero_pp_rank_" : "zero_pp_rank_";
    for (int d = 0; d < dp; ++d)
        for (int m = 0; m < mp; ++m) {
            if (!optim.empty() && !optim.count({d, m}))
                files.push_back(
                    {optim_prefix + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_optim_states.pt", d});
            if (!zero_model.empty() && !zero_model.count({d, m}))
                files.push_back(
                    {"zero_pp_rank_" + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_model_states.pt", d});
        }
    if (!model.empty())
        for (int m = 0; m < mp; ++m)
            if (!model.count(m))
                files.push_back({"mp_rank_" + two_digits(m) + "_model_states.pt", m});
    // Every model-parallel rank saves its slice of each layer: a layer file present for one rank
    // and absent for another is a rank whose save never finished. Layer indices themselves may
    // skip (DeepSpeed saves no file for a layer without a state_dict), so those gaps are shown,
    // not reported.
    std::string absent_layers;
    int absent_count = 0;
    for (auto it = layers.begin(); it != layers.end(); ++it) {
        for (int m = 0; m < layer_ranks; ++m)
            if (!it->second.count(m))
                files.push_back({"layer_" + two_digits(it->first) +
                                     (tagged_layers ? "-model_" + two_digits(m) : std::string()) + "-model_states.pt",
                                 m});
        const auto next = std::next(it);
        if (next != layers.end() && next->first > it->first + 1) {
            absent_count += next->first - it->first - 1;
            if (absent_layers.size() < 200)
                absent_layers += (absent_layers.empty() ? "" : ", ") + std::to_string(it->first + 1) +
                    (next->first > it->first + 2 ? "-" + std::to_string(next->first - 1) : std::string());
        }
    }
    for (const auto& [name, rank] : files)
        report.shards.push_back(ShardCheck{.rank = rank, .path = name});
    std::stable_sort(report.shards.begin(), report.shards.end(),
                     [](const ShardCheck& a, const ShardCheck& b) { return a.path < b.path; });
    add_row(summary, "data-parallel size", dp ? std::to_string(dp) : std::string("- (no ZeRO files)"));
    if (dp)
        summary.world_size = int64_t(dp);
    add_row(summary, "model-parallel size", std::to_string(mp));
    if (!layers.empty()) {
        std::size_t layer_files = 0;
        for (const auto& [index, ranks] : layers)
            layer_files += ranks.size();
        add_row(summary, "pipeline layers",
                std::to_string(layers.size()) + " (" + std::to_string(layers.begin()->first) + " to " +
                    std::to_string(layers.rbegin()->first) + "), " + std::to_string(layer_files) + " layer files" +
                    (tagged_layers ? ", " + std::to_string(layer_mp) + " tensor slices each" : std::string()));
        if (absent_count)
            add_row(summary, "layer indices without a file",
                    absent_layers + " (" + std::to_string(absent_count) +
                        "; DeepSpeed writes none for a layer without parameters)");
    }
    add_row(summary, "files",
            std::to_string(present.size()) + " present, " + std::to_string(files.size() - present.size()) +
                " missing from the rank sequence");
    if (files.empty()) {
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = report.dir.string() + ": no DeepSpeed model or optimizer state files"});
        return report;
    }
    check_archives(dir.fd.get(), report, options, ProblemKind::missing_shard, check_data);
    add_row(summary, "tensors", std::to_string(summary.tensors_total));
    return report;
}

} // namespace shardscope
