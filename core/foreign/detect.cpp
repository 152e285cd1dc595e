#include "core/foreign/detect.h"

#include "core/util/error.h"
#include "core/util/fsutil.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>

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

} // namespace

DetectedFormat detect_format(const fs::path& path)
{
    DetectedFormat result;
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw Error(ProblemKind::cannot_open, path.string() + ": no such file or directory", path.string());
    if (!fs::is_directory(path, ec)) {
        result.path = path;
        if (path.extension() == ".safetensors") {
            result.format = CheckpointFormat::safetensors;
            result.files = {path.filename().string()};
            result.reason = "a .safetensors file";
        } else {
            result.reason = "not a directory and not a .safetensors file";
        }
        return result;
    }

    fsutil::UniqueFd root = fsutil::open_directory(path);
    std::vector<std::string> names = fsutil::list_directory(root.get());
    std::sort(names.begin(), names.end());
    auto has = [&](std::string_view name) { return std::binary_search(names.begin(), names.end(), std::string(name)); };
    auto matching = [&](auto predicate) {
        std::vector<std::string> out;
        for (const auto& n : names)
            if (predicate(n))
                out.push_back(n);
        return out;
    };
    result.path = path;

    if (has("manifest.json") || has("latest")) {
        // A DeepSpeed folder also has `latest`, naming a global_step directory.
        const auto deepspeed_steps = matching([](const std::string& n) { return has_prefix(n, "global_step"); });
        if (!has("manifest.json") && !deepspeed_steps.empty()) {
            result.format = CheckpointFormat::deepspeed;
            result.files = deepspeed_steps;
            result.reason = "a `latest` file and global_step* directories";
            return result;
        }
        result.format = CheckpointFormat::shardscope;
        result.path = resolve_checkpoint_dir(path);
        result.reason = has("manifest.json") ? "manifest.json" : "a checkpoint root with a `latest` file";
        result.files = {"manifest.json"};
        return result;
    }
    if (has("model.safetensors.index.json")) {
        result.format = CheckpointFormat::safetensors_index;
        result.files =
            matching([](const std::string& n) { return n.ends_with(".safetensors") || n.ends_with(".index.json"); });
        result.reason = "model.safetensors.index.json";
        return result;
    }
    if (has(".metadata")) {
        result.format = CheckpointFormat::torch_dcp;
        result.files = matching([](const std::string& n) { return n == ".metadata" || n.ends_with(".distcp"); });
        result.reason = ".metadata with __<rank>_<n>.distcp files";
        return result;
    }
    if (has("latest_checkpointed_iteration.txt") ||
        !matching([](const std::string& n) { return has_prefix(n, "iter_"); }).empty()) {
        result.format = CheckpointFormat::megatron;
        result.files = matching(
            [](const std::string& n) { return has_prefix(n, "iter_") || n == "latest_checkpointed_iteration.txt"; });
        result.reason = "latest_checkpointed_iteration.txt / iter_* directories";
        return result;
    }
    // Real directories (not symlinks) whose names start with `prefix`.
    auto directories = [&](std::string_view prefix) {
        return matching([&](const std::string& n) {
            std::error_code inner;
            return has_prefix(n, prefix) && fs::is_directory(fs::symlink_status(path / n, inner));
        });
    };
    auto found = [&](CheckpointFormat format, std::vector<std::string> files, const char* reason) {
        result.format = format;
        result.files = std::move(files);
        result.reason = reason;
        return result;
    };
    // A DeepSpeed root whose `latest` was never written (the first save died before it, or the
    // user deleted it): the global_step* directories say what it is.
    if (auto steps = directories("global_step"); !steps.empty())
        return found(CheckpointFormat::deepspeed, std::move(steps), "global_step* directories without a `latest` file");
    // A Megatron iteration folder holds mp_rank_XX[_PPP]/ directories (DeepSpeed's are files).
    if (auto ranks = directories("mp_rank_"); !ranks.empty())
        return found(CheckpointFormat::megatron, std::move(ranks),
                     "mp_rank_* directories (a Megatron iteration folder)");
    const auto zero_files = matching([](const std::string& n) {
        return has_prefix(n, "zero_pp_rank_") || has_prefix(n, "mp_rank_") || has_prefix(n, "bf16_zero_pp_rank_") ||
            (has_prefix(n, "layer_") && n.ends_with("-model_states.pt"));
    });
    if (!zero_files.empty()) {
        result.format = CheckpointFormat::deepspeed;
        result.files = zero_files;
        result.reason = "mp_rank_* / zero_pp_rank_* / layer_* files";
        return result;
    }
    const auto single = matching([](const std::string& n) { return n.ends_with(".safetensors"); });
    if (!single.empty()) {
        result.format = CheckpointFormat::safetensors;
        result.files = single;
        result.reason = ".safetensors files without a manifest or an index";
        return result;
    }
    result.reason = "no manifest.json, index, .metadata or known checkpoint files";
    return result;
}

} // namespace shardscope
