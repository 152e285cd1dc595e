// DeepSpeed checkpoints: `latest` -> global_stepN/ with mp_rank_XX_model_states.pt,
// [bf16_]zero_pp_rank_D_mp_rank_XX_optim_states.pt and, for pipeline parallelism,
// layer_NN[-model_YY]-model_states.pt; or a universal checkpoint (ds_to_universal's zero/ of
// per-parameter folders, beside the mp_rank files it copies). Sizes come from the file names;
// every archive is CRC-checked.

#include "core/foreign/deepspeed.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

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

// What the file names of a tag folder say: which ranks wrote which kind of file.
struct DeepSpeedFiles {
    std::set<std::pair<int, int>> optim, zero_model; // (data-parallel, model-parallel) rank
    std::set<int> model; // model-parallel ranks with mp_rank_XX_model_states.pt
    std::map<int, std::set<int>> layers; // pipeline layer index -> model-parallel ranks with a file
    std::vector<std::pair<std::string, int>> present; // name, rank for messages
    // mp counts the model-parallel ranks of mp_rank_XX / zero_..._mp_rank_XX names (with pipeline
    // parallelism: stage x tensor slice); layer_mp the tensor slices of layer_NN-model_YY names.
    int dp = 0, mp = 0, layer_mp = 0;
    bool bf16 = false, tagged_layers = false;

    int layer_ranks() const { return tagged_layers ? layer_mp : 1; }
};

DeepSpeedFiles collect_files(const std::vector<std::string>& names)
{
    DeepSpeedFiles out;
    for (const auto& n : names) {
        const auto parsed = parse_deepspeed_name(n);
        if (!parsed)
            continue;
        const bool zero = parsed->kind == DeepSpeedName::zero_optim || parsed->kind == DeepSpeedName::zero_model;
        out.present.push_back({n, zero ? parsed->dp : parsed->mp});
        if (parsed->kind == DeepSpeedName::layer)
            out.layer_mp = std::max(out.layer_mp, parsed->mp + 1);
        else
            out.mp = std::max(out.mp, parsed->mp + 1);
        if (zero)
            out.dp = std::max(out.dp, parsed->dp + 1);
        if (parsed->kind == DeepSpeedName::zero_optim) {
            out.optim.insert({parsed->dp, parsed->mp});
            out.bf16 = out.bf16 || parsed->bf16;
        } else if (parsed->kind == DeepSpeedName::zero_model) {
            out.zero_model.insert({parsed->dp, parsed->mp});
        } else if (parsed->kind == DeepSpeedName::model) {
            out.model.insert(parsed->mp);
        } else {
            out.layers[parsed->layer_index].insert(parsed->mp);
            out.tagged_layers = out.tagged_layers || parsed->tagged_layer;
        }
    }
    return out;
}

// The files the naming sequence implies but that are absent: a rank whose save never finished.
// Every model-parallel rank saves its slice of each layer, so a layer file present for one rank
// and absent for another is one; layer indices themselves may skip (DeepSpeed saves no file for a
// layer without a state_dict), and those gaps are shown, not reported.
std::vector<std::pair<std::string, int>> absent_files(const DeepSpeedFiles& f)
{
    std::vector<std::pair<std::string, int>> out;
    const std::string optim_prefix = f.bf16 ? "bf16_zero_pp_rank_" : "zero_pp_rank_";
    for (int d = 0; d < f.dp; ++d)
        for (int m = 0; m < f.mp; ++m) {
            if (!f.optim.empty() && !f.optim.count({d, m}))
                out.push_back({optim_prefix + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_optim_states.pt", d});
            if (!f.zero_model.empty() && !f.zero_model.count({d, m}))
                out.push_back(
                    {"zero_pp_rank_" + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_model_states.pt", d});
        }
    if (!f.model.empty())
        for (int m = 0; m < f.mp; ++m)
            if (!f.model.count(m))
                out.push_back({"mp_rank_" + two_digits(m) + "_model_states.pt", m});
    // ZeRO optimizer files with no module file beside them (neither mp_rank_XX_model_states.pt,
    // nor ZeRO-3's per-rank ones, nor pipeline layer files): DeepSpeed cannot load the step, which
    // would otherwise verify as whole. Named as stages 1 and 2 write it.
    if (!f.optim.empty() && f.model.empty() && f.zero_model.empty() && f.layers.empty())
        for (int m = 0; m < std::max(f.mp, 1); ++m)
            out.push_back({"mp_rank_" + two_digits(m) + "_model_states.pt", m});
    for (const auto& [index, ranks] : f.layers)
        for (int m = 0; m < f.layer_ranks(); ++m)
            if (!ranks.count(m))
                out.push_back({"layer_" + two_digits(index) +
                                   (f.tagged_layers ? "-model_" + two_digits(m) : std::string()) + "-model_states.pt",
                               m});
    return out;
}

void describe_files(const DeepSpeedFiles& f, std::size_t absent, ForeignSummary& summary)
{
    add_row(summary, "data-parallel size", f.dp ? std::to_string(f.dp) : std::string("- (no ZeRO files)"));
    if (f.dp)
        summary.world_size = int64_t(f.dp);
    add_row(summary, "model-parallel size", std::to_string(f.mp));
    if (!f.layers.empty()) {
        std::size_t layer_files = 0;
        for (const auto& [index, ranks] : f.layers)
            layer_files += ranks.size();
        add_row(summary, "pipeline layers",
                std::to_string(f.layers.size()) + " (" + std::to_string(f.layers.begin()->first) + " to " +
                    std::to_string(f.layers.rbegin()->first) + "), " + std::to_string(layer_files) + " layer files" +
                    (f.tagged_layers ? ", " + std::to_string(f.layer_mp) + " tensor slices each" : std::string()));
        std::string gaps;
        int gap_count = 0;
        for (auto it = f.layers.begin(); it != f.layers.end(); ++it)
            if (const auto next = std::next(it); next != f.layers.end() && next->first > it->first + 1) {
                gap_count += next->first - it->first - 1;
                if (gaps.size() < 200)
                    gaps += (gaps.empty() ? "" : ", ") + std::to_string(it->first + 1) +
                        (next->first > it->first + 2 ? "-" + std::to_string(next->first - 1) : std::string());
            }
        if (gap_count)
            add_row(summary, "layer indices without a file",
                    gaps + " (" + std::to_string(gap_count) +
                        "; DeepSpeed writes none for a layer without parameters)");
    }
    add_row(summary, "files",
            std::to_string(f.present.size()) + " present, " + std::to_string(absent) +
                " missing from the rank sequence");
}

// A universal checkpoint's files: every parameter folder's three state files (step.pt where
// there is one) and optimizer_state.pt, as paths beneath `dir`. A parameter folder lacking one of
// the three is one problem; a name that is not plain text is not read (it would reach the
// terminal); past kMaxUniversalParameters folders the rest are not read either.
constexpr std::size_t kMaxUniversalParameters = std::size_t(1) << 16; // DeepSeek-V3: about 45,000

std::vector<std::string> universal_files(const storage::Folder& dir, VerifyReport& report)
{
    const storage::Folder zero = dir.subfolder("zero");
    std::vector<std::string> out;
    std::size_t parameters = 0, steps = 0;
    const std::string shown = (dir.path / "zero").string();
    for (const std::string& name : zero.names) {
        if (!zero.is_folder(name)) {
            if (name == "optimizer_state.pt")
                out.push_back("zero/" + name);
            continue;
        }
        if (printable(name, 4096) != name) {
            report.problems.push_back({.kind = ProblemKind::invalid_archive,
                                       .message = shown + "/" + printable(name) +
                                           ": a parameter folder whose name is not plain text; not read"});
            continue;
        }
        if (++parameters > kMaxUniversalParameters) {
            report.problems.push_back({.kind = ProblemKind::invalid_archive,
                                       .message = shown + ": more than " + std::to_string(kMaxUniversalParameters) +
                                           " parameter folders, more than ShardScope reads; the rest were not"});
            break;
        }
        const storage::Folder parameter = zero.subfolder(name);
        std::string absent;
        for (const char* file : {"fp32.pt", "exp_avg.pt", "exp_avg_sq.pt"})
            if (parameter.has(file))
                out.push_back("zero/" + name + "/" + file);
            else
                absent += std::string(absent.empty() ? "" : ", ") + file;
        if (!absent.empty())
            report.problems.push_back({.kind = ProblemKind::missing_shard,
                                       .message = shown + "/" + name + ": no " + absent +
                                           " (a universal checkpoint keeps all three for each parameter)",
                                       .path = "zero/" + name});
        if (parameter.has("step.pt")) {
            out.push_back("zero/" + name + "/step.pt");
            ++steps;
        }
    }
    add_row(*report.foreign, "universal checkpoint",
            std::to_string(std::min(parameters, kMaxUniversalParameters)) + " parameters in zero/ (fp32, exp_avg, " +
                "exp_avg_sq" + (steps ? ", step" : "") + ")");
    return out;
}

// The ranks past the last file present: the file names cannot tell a step saved on two ranks
// whose rank 1 was lost from one saved on one, but every ZeRO optimizer file records how many
// ranks its state is split over (partition_count). Those the files say and the names lack are
// missing, and that is the step's data-parallel size.
void name_ranks_past_the_last(const DeepSpeedFiles& found, const std::vector<int64_t>& partitions, VerifyReport& report)
{
    // The files that verified and say a split; files that disagree name no count (each says its
    // own; the ZeRO assembly in stats names the disagreement).
    int64_t said = 0;
    std::string said_by;
    for (std::size_t i = 0; i < partitions.size() && i < report.shards.size(); ++i) {
        if (partitions[i] <= 0 ||
            (report.shards[i].status != ShardStatus::ok && report.shards[i].status != ShardStatus::pending))
            continue;
        if (said > 0 && partitions[i] != said)
            return;
        said = partitions[i];
        if (said_by.empty())
            said_by = report.shards[i].path;
    }
    if (found.optim.empty() || said <= found.dp)
        return;
    // The names past the last rank, enumerated only up to a sane count (a rank number or a split
    // from a hostile file could imply millions).
    const uint64_t files =
        uint64_t(said - found.dp) * uint64_t(std::max(found.mp, 1)) * (found.zero_model.empty() ? 1u : 2u);
    if (said > kMaxWorldSize || files + report.shards.size() > uint64_t(kMaxWorldSize)) {
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = (report.dir / said_by).string() +
                                       " says the optimizer state is split over " + std::to_string(said) +
                                       " ranks, but the files here are of " + std::to_string(found.dp) +
                                       "; more than ShardScope checks are missing",
                                   .path = said_by});
        return;
    }
    const std::string optim_prefix = found.bf16 ? "bf16_zero_pp_rank_" : "zero_pp_rank_";
    std::size_t missing = 0;
    const auto add = [&](const std::string& name, int rank) {
        report.shards.push_back(
            {.rank = rank,
             .path = name,
             .status = ShardStatus::missing,
             .detail = "missing (" + said_by + " says the state is split over " + std::to_string(said) + " ranks)"});
        if (missing++ < 20)
            report.problems.push_back({.kind = ProblemKind::missing_shard,
                                       .message = "rank " + std::to_string(rank) + ": " + (report.dir / name).string() +
                                           ": missing (" + said_by + " says the optimizer state is split over " +
                                           std::to_string(said) + " ranks)",
                                       .path = name,
                                       .rank = rank});
    };
    for (int d = found.dp; d < int(said); ++d)
        for (int m = 0; m < std::max(found.mp, 1); ++m) {
            add(optim_prefix + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_optim_states.pt", d);
            if (!found.zero_model.empty())
                add("zero_pp_rank_" + std::to_string(d) + "_mp_rank_" + two_digits(m) + "_model_states.pt", d);
        }
    if (missing > 20)
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = report.dir.string() + ": " + std::to_string(missing - 20) +
                                       " more rank files the optimizer state's split names are missing"});
    report.foreign->world_size = said;
    for (auto& [key, value] : report.foreign->rows)
        if (key == "data-parallel size")
            value = std::to_string(said) + " (as the optimizer state is split; " + std::to_string(found.dp) +
                " ranks' files here)";
}

} // namespace

bool is_deepspeed_universal(const storage::Folder& dir)
{
    if (!dir.has("zero") || !dir.is_folder("zero"))
        return false;
    try {
        return dir.subfolder("zero").has("optimizer_state.pt");
    } catch (const Error& e) { // an unreadable zero/ is not this layout's; an outage is an outage
        rethrow_remote(e);
        return false;
    }
}

VerifyReport verify_deepspeed(const storage::Folder& dir, const VerifyOptions& options, bool check_data)
{
    VerifyReport report = foreign::new_report("deepspeed", dir.path, "deepspeed");
    const DeepSpeedFiles found = collect_files(dir.names);
    // Rank numbers come from file names, which anyone can write: the sequence they imply is
    // enumerated only up to a sane size, else reported as one problem.
    const uint64_t implied = static_cast<uint64_t>(found.dp) * static_cast<uint64_t>(found.mp) * 2 +
        static_cast<uint64_t>(found.mp) + found.layers.size() * static_cast<uint64_t>(found.layer_ranks());
    if (implied > static_cast<uint64_t>(kMaxWorldSize)) {
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = report.dir.string() + ": the file names imply " +
                                       std::to_string(implied) + " files (data-parallel size " +
                                       std::to_string(found.dp) + ", model-parallel size " + std::to_string(found.mp) +
                                       "), more than the " + std::to_string(kMaxWorldSize) +
                                       " ranks ShardScope checks: a file name carries an implausible rank number"});
        return report;
    }
    // Every file present is checked; every file the sequence implies but is absent is missing.
    const auto absent = absent_files(found);
    for (const auto& [name, rank] : found.present)
        report.shards.push_back(ShardCheck{.rank = rank, .path = name});
    for (const auto& [name, rank] : absent)
        report.shards.push_back(ShardCheck{.rank = rank, .path = name});
    std::stable_sort(report.shards.begin(), report.shards.end(),
                     [](const ShardCheck& a, const ShardCheck& b) { return a.path < b.path; });
    describe_files(found, absent.size(), *report.foreign);
    if (is_deepspeed_universal(dir)) { // no ranks: each file is its parameter's
        for (std::string& path : universal_files(dir, report))
            report.shards.push_back(ShardCheck{.rank = -1, .path = std::move(path)});
    }
    if (report.shards.empty()) {
        report.problems.push_back({.kind = ProblemKind::missing_shard,
                                   .message = report.dir.string() + ": no DeepSpeed model or optimizer state files"});
        return report;
    }
    std::vector<int64_t> partitions;
    check_archives(dir, report, options, ProblemKind::missing_shard, check_data, nullptr, &partitions);
    name_ranks_past_the_last(found, partitions, report);
    add_row(*report.foreign, "tensors", std::to_string(report.foreign->tensors_total));
    return report;
}

} // namespace shardscope
