#pragma once
// N -> M resharding: a pure plan (who copies which element range where) and its streaming
// execution with a fixed-size buffer, committed like a save.
//
// Ranges are in elements of the flat parameter vector; the same runs apply to param and to each
// optimizer tensor, since all four are sliced identically. Target rank r owns
// [floor(P*r/M), floor(P*(r+1)/M)), as save and demo-save do. When P < M some target ranks own
// nothing: an empty shard is legal (a valid safetensors file with 0-element tensors), because a
// job with more ranks than parameters still needs every rank to find its file.

#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/save.h"

namespace shardscope {

struct CopyRun {
    int source_rank = 0;
    uint64_t source_offset = 0; // element index inside the source rank's slice
    uint64_t target_offset = 0; // element index inside the target rank's slice
    uint64_t numel = 0;
};

struct TargetPlan {
    int rank = 0;
    uint64_t offset = 0; // param_shard_offset of the new shard
    uint64_t numel = 0;
    std::vector<CopyRun> runs; // in target order, covering [0, numel) exactly
    uint64_t bytes = 0; // tensor bytes of the new shard (header excluded)
    uint64_t bytes_staying = 0; // of those, bytes whose source rank has the same index
};

struct ReshardPlan {
    int source_world_size = 0;
    int target_world_size = 0;
    uint64_t numel_total = 0;
    ParamDtype dtype = ParamDtype::F16;
    uint64_t bytes_per_element = 14; // 2 (param) + 3 x 4 (master, exp_avg, exp_avg_sq)
    std::vector<TargetPlan> targets;
    uint64_t bytes_read = 0; // tensor bytes read from the source (each exactly once)
    uint64_t bytes_written = 0; // tensor bytes written to the target
    uint64_t bytes_staying = 0; // bytes that keep their rank index
    uint64_t bytes_moving = 0; // bytes that change rank index
};

// Pure function of the manifest's layout. Throws Error(invalid_argument) for a target world size
// outside 1..kMaxWorldSize and Error(<first problem>) if the manifest's layout is inconsistent.
ReshardPlan plan_reshard(const Manifest& manifest, int target_world_size);

struct ReshardOptions {
    int threads = 0;
    bool durable = true;
    ProgressFn progress; // bytes: source verification first, then the copy
    const std::atomic<bool>* cancel = nullptr;
};

// Error(unread_state) naming the file, the rank and the tensor when the shard holds a tensor
// besides the four states a reshard writes (it would be dropped).
void refuse_dropped_state(const std::filesystem::path& dir, const ShardRecord& record, const SafetensorsHeader& header);
// The same for every shard of the checkpoint in `dir` (their headers read): what a caller that
// writes the target elsewhere (shardctl-mpi) checks before it creates anything.
void refuse_dropped_state(const std::filesystem::path& dir, const Manifest& m);

struct ReshardResult {
    ReshardPlan plan;
    Manifest manifest; // of the new checkpoint
};

// Verifies every source shard's hash, then writes the target shards with the same writer as save
// (tmp -> fsync -> rename, hashed while written) reading the plan's runs through one fixed buffer
// per thread, and commits the manifest last. The source is only read. Refuses a destination equal
// to or inside the source and an existing non-empty destination. On failure or cancel the
// destination holds no manifest (and no .tmp files).
ReshardResult reshard(const std::filesystem::path& source, int target_world_size,
                      const std::filesystem::path& destination, const ReshardOptions& options = {});

// The checks and the metadata reshard uses, for a reshard run by other means (shardctl-mpi):
// Error unless `destination` is absent or an empty directory, neither the source nor inside it;
// and the source's metadata (step, dtype, tensors, training state) at the new world size.
void check_reshard_destination(const std::filesystem::path& source_dir, const std::filesystem::path& destination);
CheckpointMeta resharded_meta(const Manifest& source, int target_world_size);

// The same re-slicing for a state already in memory (a job resuming on a different number of
// ranks): the flat vectors are cut at the even split for `target_world_size`.
std::vector<RankState> reshard_in_memory(const std::vector<RankState>& ranks_in_offset_order, int target_world_size);

} // namespace shardscope
