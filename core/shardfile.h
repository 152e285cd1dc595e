#pragma once
// Opening one rank's shard file against its manifest record: the checks verify and load share
// (confinement, existence, regular file, size, safetensors header, the four expected tensors).

#include "core/checkpoint.h"
#include "core/fsutil.h"
#include "core/safetensors.h"

namespace shardscope {

struct OpenedShard {
    fsutil::UniqueFd fd;
    uint64_t size = 0;
    SafetensorsHeader header;
};

struct ShardOpenResult {
    std::optional<OpenedShard> shard; // set when every check passed
    ShardStatus status = ShardStatus::pending;
    Problem problem; // what failed, when `shard` is empty
};

ShardOpenResult open_shard(int dirfd, const std::filesystem::path& dir, const Manifest& manifest,
                           const ShardRecord& record);

// The problem to report for a directory without manifest.json: a partial write when shard or
// .tmp files show that a save started, otherwise "not a ShardScope checkpoint".
Problem missing_manifest_problem(const std::vector<std::string>& names_in_dir,
                                 const std::filesystem::path& dir);

// Names in the directory (without "." and ".."), at most a million.
std::vector<std::string> list_directory(int dirfd);

// Shards are read in chunks of this size: large enough for sequential throughput, small enough
// that progress and cancellation stay responsive and memory stays bounded.
inline constexpr std::size_t kReadChunk = 4u << 20;

} // namespace shardscope
