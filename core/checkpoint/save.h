#pragma once
// Saving a sharded checkpoint: one safetensors file per rank plus manifest.json, committed
// atomically (docs/format.md, "Commit protocol"). Two phases, so that it works the same in one
// process (threads) and across processes:
//   write_rank_shard(dir, state) -> ShardRecord   in whichever process owns the rank
//   commit(dir, records, meta)                     on one coordinator, manifest last

#include "core/checkpoint/state.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace shardscope {

struct WriteOptions {
    bool durable = true; // fsync files and the directory
    const std::atomic<bool>* cancel = nullptr; // checked between chunks
    std::function<void(uint64_t bytes_written)> progress; // bytes of this shard so far
    // Count the values' health as they go out (health.h) into the record. Off only to measure
    // what counting costs (bench_lifecycle): a step without a record is judged by its values.
    bool count_health = true;
};

// Name of rank r's shard file: "rank<r>.safetensors".
std::string shard_file_name(int rank);

// Writes rank `state.rank`'s shard as `<name>.tmp`, hashing (SHA-256 and XXH3) in the same pass,
// fsyncs it and renames it into place. `world_size` goes into the file's metadata. The record
// carries the values' health (scan_health), which commit publishes with the step.
ShardRecord write_rank_shard(const std::filesystem::path& dir, const RankStateView& state, int world_size,
                             const WriteOptions& options = {});
inline ShardRecord write_rank_shard(const std::filesystem::path& dir, const RankState& state, int world_size,
                                    const WriteOptions& options = {})
{
    return write_rank_shard(dir, view_of(state), world_size, options);
}

// Everything in a manifest but the shards.
struct CheckpointMeta {
    int world_size = 0;
    uint64_t step = 0;
    double wall_clock_seconds = 0;
    ParamDtype param_dtype = ParamDtype::F16;
    uint64_t param_numel_total = 0;
    std::vector<TensorInfo> tensors;
    nlohmann::json training_state;
};

// The fields a manifest shares with CheckpointMeta, copied in one place (either direction).
template <class To, class From>
void copy_checkpoint_meta(To& to, const From& from)
{
    to.world_size = from.world_size;
    to.step = from.step;
    to.wall_clock_seconds = from.wall_clock_seconds;
    to.param_dtype = from.param_dtype;
    to.param_numel_total = from.param_numel_total;
    to.tensors = from.tensors;
    to.training_state = from.training_state;
}

// Checks the records form a complete, consistent checkpoint (Error otherwise) and writes
// manifest.json atomically, then fsyncs the directory. Refuses if a manifest already exists.
Manifest commit(const std::filesystem::path& dir, std::vector<ShardRecord> records, const CheckpointMeta& meta,
                bool durable = true);

struct SaveOptions {
    int threads = 0; // 0: one per rank up to the number of hardware threads
    bool durable = true;
    double wall_clock_seconds = 0;
    std::vector<TensorInfo> tensors;
    nlohmann::json training_state;
    ProgressFn progress;
    const std::atomic<bool>* cancel = nullptr;
    bool count_health = true; // WriteOptions::count_health
};

// What save_sharded refuses before it writes anything (Error): no ranks, mixed dtypes, a rank
// write_rank_shard would refuse (unequal lengths, outside 0..N-1), a layout commit would refuse
// (check_manifest: slices that do not tile the flat vector, a duplicate rank, ...). It touches
// no file. CheckpointManager::save and save_async call it before they change anything in the
// root, so a refused save leaves the root as it was.
void check_save(const std::vector<RankStateView>& states, const std::filesystem::path& dir);

// Writes every rank's shard in parallel and commits. Refuses, before writing anything, what
// check_save refuses (before `dir` is created: a refused save leaves no directory behind) and
// then a complete checkpoint in `dir` (Error already_exists); creates `dir` if needed. So bad
// states aimed at an existing complete checkpoint raise check_save's kind (layout_gap,
// duplicate_rank, invalid_argument, ...), not already_exists; the checkpoint is untouched either
// way. On failure or cancel no manifest is written.
Manifest save_sharded(const std::vector<RankStateView>& states, const std::filesystem::path& dir, uint64_t step,
                      const SaveOptions& options = {});
inline Manifest save_sharded(const std::vector<RankState>& states, const std::filesystem::path& dir, uint64_t step,
                             const SaveOptions& options = {})
{
    return save_sharded(views_of(states), dir, step, options);
}

} // namespace shardscope
