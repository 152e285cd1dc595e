#pragma once
// Opening one rank's shard file against its manifest record: the checks verify and load share
// (confinement, existence, regular file, size, safetensors header, the four expected tensors).

#include "core/checkpoint.h"
#include "core/fsutil.h"
#include "core/safetensors.h"

#include <memory>

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

// The one way a shard file is written (by save and by reshard): bytes go to `<name>.tmp`, are
// hashed (SHA-256 and XXH3) in the same pass, writeback starts chunk by chunk, and finish() fsyncs
// and renames. Destroyed before finish(), it removes the .tmp file: nothing half-written remains.
class ShardFileWriter {
public:
    // Writes `name` (rank<r>.safetensors unless given) in `dirfd`; `rank` is for messages.
    ShardFileWriter(int dirfd, const std::filesystem::path& dir, int rank, const WriteOptions& options,
                    std::string name = {});
    ~ShardFileWriter();
    ShardFileWriter(const ShardFileWriter&) = delete;
    ShardFileWriter& operator=(const ShardFileWriter&) = delete;

    void write(const void* data, std::size_t size);
    ShardRecord finish(uint64_t param_shard_offset, uint64_t param_shard_numel);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// The safetensors header of a rank shard: param (`dtype`), master, exp_avg, exp_avg_sq, each 1-D
// with `numel` elements, back to back, and metadata naming the rank and its slice.
std::string rank_shard_header(int rank, int world_size, ParamDtype dtype, uint64_t param_shard_offset,
                              uint64_t numel);

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
