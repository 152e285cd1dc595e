#pragma once
// Finding a checkpoint on disk: a root's `latest` file, the manifest of a step directory.

#include "core/checkpoint/manifest.h"
#include "core/storage/folder.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// A checkpoint root holds step directories and a `latest` file: return the directory `latest`
// names (confined to the root). A path with a manifest.json (or no `latest`) is returned as is.
std::filesystem::path resolve_checkpoint_dir(const std::filesystem::path& path);

// A tag file (`latest`, DeepSpeed's `latest`, Megatron's latest_checkpointed_iteration.txt): a
// small text file naming a directory. Returns its text without surrounding white space; Error
// naming `display_path` when it is unreadable, larger than 4 KiB or empty (invalid_manifest).
std::string read_tag_file(const storage::Folder& folder, const std::string& name, const std::string& display_path);

// The folder `root/name`, listed, for a directory name read from a tag file. The one confinement rule for every
// format: a plain single component (path_outside_checkpoint otherwise), not a symlink
// (path_outside_checkpoint), existing (partial_write: the tag was written for a directory that is
// not there) and a directory (invalid_manifest). Errors name `display_path`.
storage::Folder confined_subdir(const storage::Folder& root, const std::string& name, const std::string& display_path);

// The number a step folder's name gives: `prefix` followed by 1 to 19 decimal digits and nothing
// else (ShardScope's step-00000120, DeepSpeed's global_step120, Megatron's iter_0000120), the rule
// of format.md 6.1; nullopt for any other name. No sign, no space: "global_step-1" is no step.
std::optional<uint64_t> number_after(std::string_view name, std::string_view prefix);

// The highest-numbered `prefix<N>` name (DeepSpeed's global_stepN, Megatron's iter_N), or "": the
// step a root without a tag file resumes from.
std::string highest_numbered(const std::vector<std::string>& names, std::string_view prefix);

// What an interrupted write leaves behind: `<name>.tmp` (ShardFileWriter and write_file_atomic
// write there first and rename). The one rule used by verify, shardctl-mpi and the root manager.
bool is_leftover_tmp(std::string_view name);
std::vector<std::string> leftover_tmp_files(const std::vector<std::string>& names_in_dir);

// The problem to report for a directory without manifest.json: a partial write when shard or
// .tmp files show that a save started, otherwise "not a ShardScope checkpoint".
Problem missing_manifest_problem(const std::vector<std::string>& names_in_dir, const std::filesystem::path& dir);

// Reads and parses <dir>/manifest.json (Error on failure, without checking invariants).
Manifest read_manifest(const storage::Folder& folder);
Manifest read_manifest(const std::filesystem::path& dir);

} // namespace shardscope
