#pragma once
// A folder that holds no checkpoint: saying so (rather than "invalid manifest", which reads as a
// save that never committed), what ShardScope opens instead, and the checkpoint next to it that
// the user most likely meant — one folder up (opened a step's sub-folder) or one down (opened the
// run's folder rather than its checkpoint).

#include "core/checkpoint/verify.h"
#include "core/open/detect.h"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string_view>

namespace shardscope {

// One line naming every kind of path ShardScope opens, for a folder that is none of them.
inline constexpr std::string_view kWhatShardScopeOpens =
    "ShardScope opens: a ShardScope step (manifest.json) or run root (latest file); a .safetensors file or "
    "a folder of them; a Hugging Face folder (model.safetensors.index.json); a torch DCP folder (.metadata); "
    "a DeepSpeed folder (global_step* folders, latest file); a Megatron folder (iter_* folders, "
    "latest_checkpointed_iteration.txt).";

// True when verify_checkpoint found nothing ShardScope opens at its path: the format is unknown
// and no shard or .tmp file shows a ShardScope save that was interrupted (that stays a
// partial_write of format "shardscope").
bool no_checkpoint_found(const VerifyReport& report);

struct NearbyCheckpoint {
    storage::Location location;
    CheckpointFormat format = CheckpointFormat::unknown;
    bool parent = false; // the folder above; else a folder inside
};

// Sub-folders looked at, at most: a home directory of 10^4 folders is not worth a pause, nor a
// bucket's prefixes a request each.
inline constexpr std::size_t kMaxNearbyFolders = 256;
inline constexpr std::size_t kMaxNearbyRemoteFolders = 16;

// The checkpoint next to `folder`: its parent when that detects as one (and does not just lead
// back to `folder` through its `latest`), else the first of its direct sub-folders, by name, that
// does. Follows no symlinked sub-folder; folders that cannot be read are skipped. Nullopt when
// none is a checkpoint. In a bucket the same, one prefix up or down; a web server, which cannot
// list, is asked for its parent only. Lists up to kMaxNearbyFolders + 1 folders (remote:
// kMaxNearbyRemoteFolders + 1): run it off the GUI thread.
std::optional<NearbyCheckpoint> nearby_checkpoint(const storage::Location& folder);

// "its parent folder /runs/a (a ShardScope checkpoint)" or "the folder /runs/a/ckpt inside it
// (a torch-dcp checkpoint)", for a sentence that suggests opening it.
std::string describe_nearby(const NearbyCheckpoint& nearby);

} // namespace shardscope
