// Finding a checkpoint on disk (directory.h).

#include "core/checkpoint/directory.h"

#include "core/util/error.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

#include <fcntl.h>
#include <sys/stat.h>

namespace shardscope {

namespace fs = std::filesystem;
using fsutil::UniqueFd;

std::string read_tag_file(const storage::Folder& folder, const std::string& name, const std::string& display_path)
{
    std::string text = folder.read_small(name, 4096, display_path);
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        throw Error(ProblemKind::invalid_manifest, display_path + " is empty", display_path);
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

storage::Folder confined_subdir(const storage::Folder& root, const std::string& name, const std::string& display_path)
{
    if (auto why = fsutil::unsafe_name_reason(name); why || name.find('/') != std::string::npos)
        throw Error(ProblemKind::path_outside_checkpoint,
                    display_path + ": names '" + printable(name) + "', which is not a directory inside " +
                        root.path.string() + (why ? ": " + *why : std::string()),
                    display_path);
    if (root.is_local()) {
        struct stat st {};
        if (::fstatat(root.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
            throw Error(ProblemKind::partial_write, display_path + ": names '" + name + "', which does not exist",
                        display_path);
        if (S_ISLNK(st.st_mode))
            throw Error(ProblemKind::path_outside_checkpoint,
                        display_path + ": names '" + name + "', which is a symlink; it must be a real directory",
                        display_path);
        if (!S_ISDIR(st.st_mode))
            throw Error(ProblemKind::invalid_manifest,
                        display_path + ": names '" + name + "', which is not a directory", display_path);
    } else if (!root.is_folder(name)) {
        // An object store has no empty folders: a prefix exists when something is beneath it.
        if (root.exists(name))
            throw Error(ProblemKind::invalid_manifest,
                        display_path + ": names '" + name + "', which is an object, not a folder", display_path);
        throw Error(ProblemKind::partial_write, display_path + ": names '" + name + "', which does not exist",
                    display_path);
    }
    return root.subfolder(name);
}

bool is_leftover_tmp(std::string_view name)
{
    return name.size() > 4 && name.ends_with(".tmp");
}

std::vector<std::string> leftover_tmp_files(const std::vector<std::string>& names_in_dir)
{
    std::vector<std::string> out;
    for (const auto& name : names_in_dir)
        if (is_leftover_tmp(name))
            out.push_back(name);
    return out;
}

fs::path resolve_checkpoint_dir(const fs::path& path)
{
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        throw Error(ProblemKind::cannot_open, path.string() + ": no such file or directory", path.string());
    if (!fs::is_directory(status))
        return path;
    const storage::Folder root(fsutil::open_listed(path));
    if (root.has("manifest.json") || !root.has("latest"))
        return path;
    const std::string display = (path / "latest").string();
    return confined_subdir(root, read_tag_file(root, "latest", display), display).path;
}

Problem missing_manifest_problem(const std::vector<std::string>& names, const fs::path& dir)
{
    const std::string manifest = (dir / "manifest.json").string();
    bool save_started = false;
    for (const auto& name : names)
        save_started = save_started || name.ends_with(".safetensors") || is_leftover_tmp(name);
    if (save_started)
        return {.kind = ProblemKind::partial_write,
                .message = manifest +
                    " does not exist but shard files do: the save was interrupted before its "
                    "commit (partial write), so this checkpoint is incomplete",
                .path = "manifest.json"};
    return {.kind = ProblemKind::invalid_manifest,
            .message = manifest + " does not exist: this is not a ShardScope checkpoint",
            .path = "manifest.json"};
}

Manifest read_manifest(const storage::Folder& folder)
{
    const std::string display = (folder.path / "manifest.json").string();
    return parse_manifest(folder.read_small("manifest.json", kMaxManifestBytes, display), display);
}

Manifest read_manifest(const fs::path& dir)
{
    return read_manifest(storage::Folder(fsutil::open_listed(dir)));
}

std::optional<uint64_t> number_after(std::string_view name, std::string_view prefix)
{
    if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 19)
        return std::nullopt;
    uint64_t value = 0; // 19 digits fit: 10^19 - 1 < 2^64
    for (const char c : name.substr(prefix.size())) {
        if (c < '0' || c > '9')
            return std::nullopt;
        value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    return value;
}

std::string highest_numbered(const std::vector<std::string>& names, std::string_view prefix)
{
    std::string best;
    std::optional<uint64_t> best_value;
    for (const auto& n : names)
        if (const auto value = number_after(n, prefix); value && (!best_value || *value > *best_value)) {
            best_value = value;
            best = n;
        }
    return best;
}

} // namespace shardscope
