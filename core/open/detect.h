#pragma once
// Recognising what kind of checkpoint a path holds, by its files alone (nothing is executed), and
// choosing the step directory a command reads: the one place that lists the folder and follows a
// root's `latest` (ShardScope, DeepSpeed) or tracker file (Megatron).

#include "core/checkpoint/manifest.h"
#include "core/util/enum_names.h"
#include "core/util/error.h"
#include "core/storage/folder.h"
#include "core/util/fsutil.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

enum class CheckpointFormat {
    shardscope,
    safetensors,
    safetensors_index,
    torch_dcp,
    torch_dcp_hf,
    deepspeed,
    megatron,
    torch, // one torch.save file (.pt, .pth, .bin), or a folder with pytorch_model.bin
    torch_index, // a folder with pytorch_model.bin.index.json
    unknown
};
inline constexpr std::string_view kCheckpointFormatNames[] = {
    "shardscope", "safetensors", "safetensors-index", "torch-dcp", "torch-dcp-hf", "deepspeed",
    "megatron",   "torch",       "torch-index",       "unknown"};
static_assert(std::size(kCheckpointFormatNames) == std::size_t(CheckpointFormat::unknown) + 1);
std::string_view to_string(CheckpointFormat format);

struct DetectedFormat {
    CheckpointFormat format = CheckpointFormat::unknown;
    std::filesystem::path path; // what was inspected (a ShardScope root: the step directory `latest` names)
    std::vector<std::string> files; // the format's files found there (relative names)
    std::string reason; // what gave it away
    // The directory the format's reader reads, opened and listed once: the step a root's `latest`,
    // tracker or highest step folder names, the folder itself, or a single file's folder (whose
    // names are then that file alone). No descriptor when the step could not be chosen.
    storage::Folder dir;
    // How the step was chosen, for the summary ("tag" = "global_step5 (from `latest`)"), and the
    // training step its folder's name gives.
    std::vector<std::pair<std::string, std::string>> origin;
    std::optional<int64_t> step;
    // Why no step could be chosen (a `latest` naming a missing folder, say): verify reports it as
    // the checkpoint's problem rather than throwing.
    std::optional<Problem> problem;
};

// Detects what `path` holds: a local path, an s3:// prefix or an http(s):// URL, listed once
// (storage::Folder::open). Throws Error(cannot_open) when `path` does not exist or cannot be
// listed, Error(remote_error) when its server fails.
DetectedFormat detect_format(const storage::Location& path);

// Whether a file's name says torch.save (.pt, .pth, .bin): read as a checkpoint of its own when it
// belongs to no other format's folder.
bool is_torch_file(const std::filesystem::path& file);

// How many folders up from `file` the checkpoint it belongs to is, where a path or URL names the
// file instead of that folder (a user completing a path in a shell often ends with one), for
// detect_format to read that checkpoint: 1 for the file a format is known by (manifest.json,
// latest, an index, .metadata, Megatron's tracker file) and for a DeepSpeed rank file
// (..._model_states.pt, ..._optim_states.pt), 2 for a Megatron rank file
// (mp_rank_00[_000]/model_optim_rng.pt or distrib_optim.pt); 0 for any other file.
int levels_to_its_checkpoint(const std::filesystem::path& file);

// The manifest of the ShardScope step `where` names (a root: the one its `latest` names), on a
// disk, in a bucket or on a web server: the folder listed once (or its entry files asked for),
// `latest` and manifest.json read, nothing else. Throws Error as read_manifest does, and the
// root's problem (a `latest` naming no step) where there is one. What plan-reshard reads.
Manifest read_manifest_at(const storage::Location& where);

// False for ShardScope's own format, for an unrecognised folder (the native verifier says what is
// missing), and for a folder of rank<N>.safetensors without a manifest: a ShardScope save that did
// not finish, reported as a partial write rather than listed as safetensors files.
bool is_foreign(const DetectedFormat& detected);

// What detect_format decides from a folder's names (format.md, 7), without choosing a step: for a
// caller that lists the folder itself (list_root_steps).
CheckpointFormat classify_listing(const storage::Folder& listed);

// The step folder a root's tag file names: `latest` (ShardScope, DeepSpeed) or Megatron's
// latest_checkpointed_iteration.txt, whose iteration number names iter_<7 digits> ("release" is
// kept as is). Nullopt for other formats, for a root without its tag file and for a ShardScope
// directory with a manifest (a step, not a root). Throws Error naming the file when it is
// unreadable, empty or, for Megatron, neither a number nor `release` (invalid_manifest); what it
// names is not checked here (confined_subdir does that).
struct RootTag {
    std::string name; // the folder: global_step5, iter_0000120, step-00000300
    std::string text; // what the file says: "120" for Megatron, else the name
    std::string display; // the file's path, for errors
    std::optional<uint64_t> step; // the step the name gives, when it has one
};
std::optional<RootTag> read_root_tag(CheckpointFormat format, const storage::Folder& root);

} // namespace shardscope
