#include "core/open/detect.h"

#include "core/checkpoint/directory.h"
#include "core/foreign/dcp_hf.h"
#include "core/foreign/deepspeed.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>

namespace shardscope {

namespace fs = std::filesystem;

std::string_view to_string(CheckpointFormat format)
{
    return enum_name(format, kCheckpointFormatNames, "unknown");
}

namespace {

bool has_prefix(const std::string& s, std::string_view prefix)
{
    return s.rfind(prefix, 0) == 0;
}

// A training step as DetectedFormat keeps it (signed: a step of 2^63 or more is none).
std::optional<int64_t> step_of(std::optional<uint64_t> number)
{
    if (!number || *number > uint64_t(INT64_MAX))
        return std::nullopt;
    return static_cast<int64_t>(*number);
}

constexpr std::string_view kDcpHfShardedDir = "sharded";

// True when the folder `name` (a real directory, checked by the caller) holds a Hugging Face
// shard file.
bool holds_hf_shards(const storage::Folder& parent, std::string_view name)
{
    try {
        const storage::Folder folder = parent.subfolder(name);
        return std::any_of(folder.names.begin(), folder.names.end(),
                           [](const std::string& n) { return is_dcp_hf_shard_name(n); });
    } catch (const Error& e) {
        rethrow_remote(e);
        return false;
    }
}

// Decides the format from the names in the folder (and, for a few, whether a name is a directory).
void classify(DetectedFormat& result, const storage::Folder& listed)
{
    auto has = [&](std::string_view name) { return listed.has(name); };
    auto matching = [&](auto predicate) {
        std::vector<std::string> out;
        for (const auto& n : listed.names)
            if (predicate(n))
                out.push_back(n);
        return out;
    };
    auto found = [&](CheckpointFormat format, std::vector<std::string> files, const char* reason) {
        result.format = format;
        result.files = std::move(files);
        result.reason = reason;
    };

    if (has("manifest.json") || has("latest")) {
        // A DeepSpeed folder also has `latest`, naming a global_step directory.
        auto deepspeed_steps = matching([](const std::string& n) { return has_prefix(n, "global_step"); });
        if (!has("manifest.json") && !deepspeed_steps.empty())
            return found(CheckpointFormat::deepspeed, std::move(deepspeed_steps),
                         "a `latest` file and global_step* directories");
        // A web server shows no folders: there `latest` itself says whether it names one.
        if (!has("manifest.json") && !listed.is_local())
            if (const auto tag = read_root_tag(CheckpointFormat::deepspeed, listed);
                tag && has_prefix(tag->name, "global_step"))
                return found(CheckpointFormat::deepspeed, {tag->name}, "a `latest` file naming a global_step folder");
        return found(CheckpointFormat::shardscope, {"manifest.json"},
                     has("manifest.json") ? "manifest.json" : "a checkpoint root with a `latest` file");
    }
    if (has("model.safetensors.index.json"))
        return found(CheckpointFormat::safetensors_index, matching([](const std::string& n) {
                         return n.ends_with(".safetensors") || n.ends_with(".index.json");
                     }),
                     "model.safetensors.index.json");
    // Megatron-LM's torch_dist iteration: DCP plus the CheckpointingConfig and the state that is not
    // sharded, which the DCP reader alone would leave unchecked.
    if (has(".metadata") && has("metadata.json") && has("common.pt"))
        return found(CheckpointFormat::megatron, matching([](const std::string& n) {
                         return n == ".metadata" || n.ends_with(".distcp") || n == "metadata.json" || n == "common.pt";
                     }),
                     ".metadata, metadata.json and common.pt (a Megatron torch_dist iteration folder)");
    if (has(".metadata"))
        return found(CheckpointFormat::torch_dcp,
                     matching([](const std::string& n) { return n == ".metadata" || n.ends_with(".distcp"); }),
                     ".metadata with __<rank>_<n>.distcp files");
    if (has("latest_checkpointed_iteration.txt") ||
        !matching([](const std::string& n) { return has_prefix(n, "iter_"); }).empty())
        return found(CheckpointFormat::megatron, matching([](const std::string& n) {
                         return has_prefix(n, "iter_") || n == "latest_checkpointed_iteration.txt";
                     }),
                     "latest_checkpointed_iteration.txt / iter_* directories");
    // Real directories (not symlinks) whose names start with `prefix`.
    auto directories = [&](std::string_view prefix) {
        return matching([&](const std::string& n) { return has_prefix(n, prefix) && listed.is_folder(n); });
    };
    // A DeepSpeed root whose `latest` was never written (the first save died before it, or the
    // user deleted it): the global_step* directories say what it is.
    if (auto steps = directories("global_step"); !steps.empty())
        return found(CheckpointFormat::deepspeed, std::move(steps), "global_step* directories without a `latest` file");
    // DeepSpeed's universal checkpoint: a zero/ folder of per-parameter folders, and the
    // mp_rank files ds_to_universal copies beside it (which alone would read as a plain step).
    if (is_deepspeed_universal(listed))
        return found(CheckpointFormat::deepspeed, {"zero"},
                     "zero/ with optimizer_state.pt and per-parameter folders (a DeepSpeed universal checkpoint)");
    // A Megatron iteration folder holds mp_rank_TT[_PPP][_EEE]/ directories (DeepSpeed's are files).
    if (auto ranks = directories("mp_rank_"); !ranks.empty())
        return found(CheckpointFormat::megatron, std::move(ranks),
                     "mp_rank_* directories (a Megatron iteration folder)");
    if (auto zero_files = matching([](const std::string& n) {
            return has_prefix(n, "zero_pp_rank_") || has_prefix(n, "mp_rank_") || has_prefix(n, "bf16_zero_pp_rank_") ||
                (has_prefix(n, "layer_") && n.ends_with("-model_states.pt"));
        });
        !zero_files.empty())
        return found(CheckpointFormat::deepspeed, std::move(zero_files), "mp_rank_* / zero_pp_rank_* / layer_* files");
    // torch's Hugging Face storage, saved per rank: one checkpoint, not loose safetensors files.
    if (auto shards = matching([](const std::string& n) { return is_dcp_hf_shard_name(n); }); !shards.empty())
        return found(CheckpointFormat::torch_dcp_hf, std::move(shards),
                     "shard-<S>-model-<I>-of-<N>.safetensors files (torch Hugging Face storage, per rank)");
    if (auto single = matching([](const std::string& n) { return n.ends_with(".safetensors"); }); !single.empty())
        return found(CheckpointFormat::safetensors, std::move(single),
                     ".safetensors files without a manifest or an index");
    // A step folder holding only its per-rank Hugging Face shards in sharded/ (torchtitan's layout).
    if (!directories(kDcpHfShardedDir).empty() && holds_hf_shards(listed, kDcpHfShardedDir))
        return found(CheckpointFormat::torch_dcp_hf, {std::string(kDcpHfShardedDir)},
                     "a sharded/ folder of shard-<S>-model-<I>-of-<N>.safetensors files");
    // A Hugging Face folder saved with torch.save (save_pretrained before safetensors), read only
    // where no format above claims the folder (safetensors beside the .bin are read as those).
    if (has("pytorch_model.bin.index.json"))
        return found(CheckpointFormat::torch_index, {"pytorch_model.bin.index.json"}, "pytorch_model.bin.index.json");
    if (has("pytorch_model.bin"))
        return found(CheckpointFormat::torch, {"pytorch_model.bin"}, "pytorch_model.bin");
    result.reason = "no manifest.json, index, .metadata or known checkpoint files";
}

// The step folder a root names, with the rows saying how it was chosen, or nullopt when `root`
// is the step itself. Throws Error when a tag or tracker file is bad.
struct ChosenStep {
    std::string name;
    std::string display; // what named it, for errors
};
std::optional<ChosenStep> choose_step(DetectedFormat& result, const storage::Folder& root)
{
    const std::optional<RootTag> tag = read_root_tag(result.format, root);
    switch (result.format) {
    case CheckpointFormat::shardscope:
        if (!tag)
            return std::nullopt;
        return ChosenStep{.name = tag->name, .display = tag->display};
    case CheckpointFormat::deepspeed: {
        ChosenStep chosen;
        if (tag) {
            chosen = {.name = tag->name, .display = tag->display};
            result.origin.push_back(
                {"tag", chosen.name + " (from `" + std::filesystem::path(tag->display).filename().string() + "`)"});
            result.step = step_of(tag->step);
        } else if (chosen.name = highest_numbered(root.names, "global_step"); !chosen.name.empty()) {
            chosen.display = root.path.string();
            result.origin.push_back({"tag", chosen.name + " (no `latest`: the highest global_step folder)"});
            result.step = step_of(number_after(chosen.name, "global_step"));
        } else {
            return std::nullopt;
        }
        return chosen;
    }
    case CheckpointFormat::megatron: {
        ChosenStep chosen;
        if (tag) {
            chosen = {.name = tag->name, .display = tag->display};
            result.origin.push_back({"iteration", tag->text + " (from latest_checkpointed_iteration.txt)"});
            result.step = step_of(tag->step);
        } else if (chosen.name = highest_numbered(root.names, "iter_"); !chosen.name.empty()) {
            chosen.display = root.path.string();
            result.origin.push_back({"iteration", chosen.name + " (no tracker file: the highest iter_ folder)"});
            result.step = step_of(number_after(chosen.name, "iter_"));
        } else {
            return std::nullopt;
        }
        return chosen;
    }
    case CheckpointFormat::torch_dcp_hf:
        // The step folder itself when it holds the shards; else its sharded/ folder.
        if (std::any_of(root.names.begin(), root.names.end(),
                        [](const std::string& n) { return is_dcp_hf_shard_name(n); }))
            return std::nullopt;
        result.origin.push_back({"folder", std::string(kDcpHfShardedDir) + "/ (the per-rank shards)"});
        result.step = step_of(number_after(root.path.filename().string(), "step-"));
        return ChosenStep{.name = std::string(kDcpHfShardedDir), .display = root.path.string()};
    default: return std::nullopt;
    }
}

// rank<N>.safetensors or its .tmp: what a ShardScope save writes before its manifest.
bool looks_native(std::string_view name)
{
    if (!name.starts_with("rank"))
        return false;
    std::size_t p = 4;
    while (p < name.size() && name[p] >= '0' && name[p] <= '9')
        ++p;
    const std::string_view rest = name.substr(p);
    return p > 4 && (rest == ".safetensors" || rest == ".safetensors.tmp");
}

} // namespace

bool is_foreign(const DetectedFormat& detected)
{
    switch (detected.format) {
    case CheckpointFormat::shardscope:
    case CheckpointFormat::unknown: return false;
    case CheckpointFormat::safetensors:
        return detected.dir.path != detected.path || // one file
            std::none_of(detected.dir.names.begin(), detected.dir.names.end(),
                         [](const std::string& n) { return looks_native(n); });
    default: return true;
    }
}

CheckpointFormat classify_listing(const storage::Folder& listed)
{
    DetectedFormat result;
    classify(result, listed);
    return result.format;
}

std::optional<RootTag> read_root_tag(CheckpointFormat format, const storage::Folder& root)
{
    const bool megatron = format == CheckpointFormat::megatron;
    if (!megatron && format != CheckpointFormat::deepspeed && format != CheckpointFormat::shardscope)
        return std::nullopt;
    // A ShardScope directory with both manifest.json and `latest` is a step (format.md, 6.2).
    if (format == CheckpointFormat::shardscope && root.has("manifest.json"))
        return std::nullopt;
    std::string file = megatron ? "latest_checkpointed_iteration.txt" : "latest";
    // A DeepSpeed root whose only tag names its universal checkpoint (ds_to_universal writes
    // latest_universal beside the training's `latest`, which is read when both are there).
    if (format == CheckpointFormat::deepspeed && !root.has(file) && root.has("latest_universal"))
        file = "latest_universal";
    if (!root.has(file))
        return std::nullopt;
    RootTag tag{.display = (root.path / file).string()};
    tag.text = read_tag_file(root, file, tag.display);
    tag.name = tag.text;
    if (!megatron) {
        std::string_view name = tag.name;
        if (format == CheckpointFormat::deepspeed && name.ends_with("_universal"))
            name.remove_suffix(std::string_view("_universal").size());
        tag.step = number_after(name, format == CheckpointFormat::deepspeed ? "global_step" : "step-");
        return tag;
    }
    if (tag.text == "release")
        return tag;
    int64_t iteration = 0;
    const auto [at, error] = std::from_chars(tag.text.data(), tag.text.data() + tag.text.size(), iteration);
    if (error != std::errc() || at != tag.text.data() + tag.text.size() || iteration < 0 || iteration > INT32_MAX)
        throw Error(ProblemKind::invalid_manifest,
                    tag.display + ": '" + tag.text.substr(0, 100) + "' is neither an iteration number nor 'release'",
                    tag.display);
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "iter_%07d", int(iteration));
    tag.name = buffer;
    tag.step = static_cast<uint64_t>(iteration);
    return tag;
}

Manifest read_manifest_at(const storage::Location& where)
{
    if (where.is_local())
        return read_manifest(resolve_checkpoint_dir(where.path));
    const DetectedFormat detected = detect_format(where);
    if (detected.problem) // a root whose `latest` is bad: that, not a missing manifest, is what is wrong
        throw Error(*detected.problem);
    return read_manifest(detected.dir);
}

namespace {

// 1 for a DeepSpeed rank file, 2 for a Megatron one (its folder is the rank's), else 0: files
// whose checkpoint is the folder of every rank, not the file alone.
int rank_file_levels(const fs::path& file)
{
    const std::string name = file.filename().string();
    // mp_rank_00_model_states.pt, zero_pp_rank_1_mp_rank_00_optim_states.pt, and the pipeline
    // engine's layer_01-model_00-model_states.pt
    if (name.ends_with("_model_states.pt") || name.ends_with("-model_states.pt") || name.ends_with("_optim_states.pt"))
        return 1;
    if ((name == "model_optim_rng.pt" || name == "distrib_optim.pt") &&
        file.parent_path().filename().string().starts_with("mp_rank_"))
        return 2;
    return 0;
}

} // namespace

bool is_torch_file(const std::filesystem::path& file)
{
    const auto ext = file.extension();
    return ext == ".pt" || ext == ".pth" || ext == ".bin";
}

int levels_to_its_checkpoint(const std::filesystem::path& file)
{
    static constexpr std::string_view kNames[] = {"manifest.json",
                                                  "latest",
                                                  "model.safetensors.index.json",
                                                  ".metadata",
                                                  "latest_checkpointed_iteration.txt",
                                                  "pytorch_model.bin.index.json"};
    const std::string name = file.filename().string();
    if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames))
        return 1;
    return rank_file_levels(file);
}

DetectedFormat detect_format(const storage::Location& path)
{
    DetectedFormat result;
    result.path = path.is_local() ? path.path : fs::path(storage::to_string(path));
    if (path.is_local()) {
        std::error_code ec;
        const fs::file_status status = fs::status(path.path, ec);
        if (!fs::exists(status))
            throw Error(ProblemKind::cannot_open, path.path.string() + ": no such file or directory",
                        path.path.string());
        if (!fs::is_directory(status)) {
            // Absolute, so that a rank file named from inside its rank folder has a parent to go to.
            if (int levels = levels_to_its_checkpoint(fs::absolute(path.path, ec))) {
                fs::path folder = levels > 1 ? fs::absolute(path.path, ec) : path.path;
                for (; levels > 0; --levels)
                    folder = folder.has_parent_path() ? folder.parent_path() : fs::path(".");
                return detect_format(storage::Location(folder));
            }
            const bool torch = is_torch_file(path.path);
            if (path.path.extension() != ".safetensors" && !torch) {
                result.reason = "not a directory, a .safetensors file or a torch.save file (.pt, .pth, .bin)";
                return result;
            }
            result.format = torch ? CheckpointFormat::torch : CheckpointFormat::safetensors;
            result.files = {path.path.filename().string()};
            result.reason = torch ? "a torch.save file" : "a .safetensors file";
            const fs::path folder = path.path.has_parent_path() ? path.path.parent_path() : fs::path(".");
            result.dir = storage::Folder(
                fsutil::ListedDirectory{.path = folder, .fd = fsutil::open_directory(folder), .names = result.files});
            return result;
        }
    }

    storage::Folder root = storage::Folder::open(path);
    if (!path.is_local() && root.path != result.path) {
        // A URL naming one object: a single .safetensors file, or the file a format is known by
        // (an index, .metadata), read as its folder. A DeepSpeed or Megatron rank file names
        // the step of every rank, as on a disk; its folder (a rank's, for Megatron) is not it,
        // and a web server's was found by that one name only.
        if (const int levels = rank_file_levels(fs::path(path.prefix))) {
            root = storage::Folder::open(path.above(levels));
        } else if (const std::string name = path.prefix.substr(path.prefix.rfind('/') + 1);
                   name.ends_with(".safetensors") || (is_torch_file(name) && root.is_file(name))) {
            const bool torch = !name.ends_with(".safetensors");
            result.format = torch ? CheckpointFormat::torch : CheckpointFormat::safetensors;
            result.files = {name};
            result.reason = torch ? "a torch.save file" : "a .safetensors file";
            result.dir = std::move(root);
            result.dir.names = result.files; // that file, not its folder's others
            return result;
        }
        result.path = root.path;
    }
    classify(result, root);
    try {
        if (const auto chosen = choose_step(result, root)) {
            result.dir = confined_subdir(root, chosen->name, chosen->display);
            if (result.format == CheckpointFormat::shardscope)
                result.path = result.dir.path;
            return result;
        }
    } catch (const Error& e) {
        rethrow_remote(e);
        if (e.kind() == ProblemKind::cannot_open)
            throw;
        result.problem = e.problem();
        result.origin.clear();
        result.step.reset();
    }
    result.dir = std::move(root);
    return result;
}

} // namespace shardscope
