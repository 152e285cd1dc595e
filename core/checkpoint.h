#pragma once
// The sharded checkpoint: one safetensors file per rank plus manifest.json, committed atomically.
// Saving is two phases so that it works the same in one process (threads) and across processes:
//   write_rank_shard(dir, state) -> ShardRecord   in whichever process owns the rank
//   commit(dir, records, meta)                     on one coordinator, manifest last
// Loading and verification check every invariant of DESIGN.md and every byte's hash.

#include "core/manifest.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <vector>

namespace shardscope {

// One rank's slice of the training state: fp16/bf16 parameters (raw bits) and the ZeRO optimizer
// state of the same slice. All four vectors have param_shard_numel elements.
struct RankState {
    int rank = 0;
    ParamDtype dtype = ParamDtype::F16;
    uint64_t param_shard_offset = 0;
    std::vector<uint16_t> param;
    std::vector<float> master;
    std::vector<float> exp_avg;
    std::vector<float> exp_avg_sq;

    uint64_t numel() const { return param.size(); }
    bool operator==(const RankState&) const = default;
};

// Called from worker threads: implementations must be thread-safe and quick.
using ProgressFn = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

struct WriteOptions {
    bool durable = true;                        // fsync files and the directory
    const std::atomic<bool>* cancel = nullptr;  // checked between chunks
    std::function<void(uint64_t bytes_written)> progress; // bytes of this shard so far
};

// Name of rank r's shard file: "rank<r>.safetensors".
std::string shard_file_name(int rank);

// Writes rank `state.rank`'s shard as `<name>.tmp`, hashing (SHA-256 and XXH3) in the same pass,
// fsyncs it and renames it into place. `world_size` goes into the file's metadata.
ShardRecord write_rank_shard(const std::filesystem::path& dir, const RankState& state,
                             int world_size, const WriteOptions& options = {});

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

// Checks the records form a complete, consistent checkpoint (Error otherwise) and writes
// manifest.json atomically, then fsyncs the directory. Refuses if a manifest already exists.
Manifest commit(const std::filesystem::path& dir, std::vector<ShardRecord> records,
                const CheckpointMeta& meta, bool durable = true);

struct SaveOptions {
    int threads = 0; // 0: one per rank up to the number of hardware threads
    bool durable = true;
    double wall_clock_seconds = 0;
    std::vector<TensorInfo> tensors;
    nlohmann::json training_state;
    ProgressFn progress;
    const std::atomic<bool>* cancel = nullptr;
};

// Writes every rank's shard in parallel and commits. Refuses to overwrite a complete checkpoint
// (Error already_exists); creates `dir` if needed. On failure or cancel no manifest is written.
Manifest save_sharded(const std::vector<RankState>& states, const std::filesystem::path& dir,
                      uint64_t step, const SaveOptions& options = {});

// ---- verification --------------------------------------------------------------------------

enum class ShardStatus { pending, hashing, ok, missing, size_mismatch, hash_mismatch, unreadable, invalid };
std::string_view to_string(ShardStatus status);

struct ShardCheck {
    int rank = -1;
    std::string path;
    uint64_t expected_bytes = 0;
    uint64_t actual_bytes = 0;
    ShardStatus status = ShardStatus::pending;
    std::string actual_digest; // sha256 (or xxh3 with --fast) of what is on disk, when read
    std::string detail;        // why the status is not ok
};

struct VerifyReport;

struct VerifyCallbacks {
    // Once, before any shard_progress / shard_done: the report so far, with every file about to
    // be checked in report.shards (pending, or already decided, e.g. a missing rank) and, for a
    // foreign format, the summary known from its metadata. A viewer shows these rows at once and
    // updates them live, instead of waiting for the whole report.
    std::function<void(const VerifyReport& listed)> files_listed;
    ProgressFn progress; // all shards together
    std::function<void(std::size_t shard_index, uint64_t done, uint64_t total)> shard_progress;
    std::function<void(std::size_t shard_index, const ShardCheck&)> shard_done;
};

struct VerifyOptions {
    int threads = 0;              // 0: hardware threads
    bool fast = false;            // compare the XXH3 checksum instead of SHA-256
    int expected_world_size = -1; // < 0: do not compare
    const std::atomic<bool>* cancel = nullptr;
    VerifyCallbacks callbacks;
};

// What a checkpoint ShardScope did not write holds (safetensors, index, DCP, DeepSpeed, Megatron):
// summary rows for the manifest panel and the tensors with where their bytes are.

// One piece of a tensor stored on its own (DCP's chunks): where in the tensor, where on disk.
struct ForeignChunk {
    std::vector<uint64_t> offsets; // element offsets into the tensor, per dimension
    std::vector<uint64_t> sizes;
    std::string file;              // empty when the metadata records no storage for it
    uint64_t offset = 0;           // byte range in that file
    uint64_t length = 0;
};
struct ForeignTensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    std::string file;         // the file holding it (or its first chunk)
    uint64_t offset = 0;      // byte offset in that file
    uint64_t bytes = 0;
    std::string detail;       // e.g. "3 chunks", the chunk grid, a storage key
    std::vector<ForeignChunk> chunks; // DCP: every chunk and its storage
};
struct ForeignRange {
    uint64_t offset = 0;
    uint64_t numel = 0;
    int id = -1; // a rank, or an index into ForeignLayout::tensor_names
};
// Who holds which elements, where the format records it (DCP's chunks): every tensor's chunks
// laid end to end, tensors in metadata order and chunks by their offsets, so that each chunk is one
// contiguous range of this space. Row-split tensors keep their real flat order.
struct ForeignLayout {
    uint64_t total = 0;                    // elements
    std::vector<ForeignRange> holders;     // id = rank; adjacent chunks of one rank merged
    std::vector<ForeignRange> tensors;     // id = index into tensor_names
    std::vector<std::string> tensor_names;
    std::vector<std::vector<uint64_t>> tensor_shapes;
};
struct ForeignSummary {
    std::vector<std::pair<std::string, std::string>> rows; // property, value
    std::vector<ForeignTensor> tensors;
    uint64_t tensors_total = 0; // tensors may be capped for display; this is the real count
    std::optional<ForeignLayout> layout;
};

struct VerifyReport {
    std::filesystem::path dir; // the step directory actually verified (after following `latest`)
    std::string format = "shardscope";
    std::optional<Manifest> manifest; // absent when manifest.json is missing or unparsable
    std::vector<ShardCheck> shards;   // one per manifest entry, in manifest order
    std::vector<Problem> problems;
    std::vector<std::string> leftover_tmp_files;
    bool cancelled = false;
    std::optional<ForeignSummary> foreign; // set for the formats ShardScope did not write

    bool ok() const { return problems.empty() && !cancelled; }
};

// A checkpoint root holds step directories and a `latest` file: return the directory `latest`
// names (confined to the root). A path with a manifest.json (or no `latest`) is returned as is.
std::filesystem::path resolve_checkpoint_dir(const std::filesystem::path& path);

// Reads and parses <dir>/manifest.json (Error on failure, without checking invariants).
Manifest read_manifest(const std::filesystem::path& dir);

// Checks everything without materialising the state: the manifest's invariants, then every shard
// (existence, size, safetensors header, hash) in parallel with chunked reads. Never throws for a
// bad checkpoint: findings go into the report. Throws Error(cannot_open) if `path` is unusable.
VerifyReport verify_checkpoint(const std::filesystem::path& path, const VerifyOptions& options = {});

// ---- loading -------------------------------------------------------------------------------

struct LoadOptions {
    int threads = 0;
    ProgressFn progress;
    const std::atomic<bool>* cancel = nullptr;
};

struct LoadedCheckpoint {
    std::filesystem::path dir;
    Manifest manifest;
    std::vector<RankState> ranks; // index = rank
};

// Loads every rank's state after checking every invariant and hash (each shard file is read once:
// its bytes are hashed as they land in the returned vectors). Throws Error with the first
// problem's kind: world_size_mismatch, shard_count_mismatch, partial_write, hash_mismatch, ...
LoadedCheckpoint load_sharded(const std::filesystem::path& path, int expected_world_size,
                              const LoadOptions& options = {});

// Sharding-independent digests: SHA-256 of each flat little-endian vector reassembled in
// parameter order, so the same global state saved at any world size gives the same four values.
struct StateDigests {
    std::string param, master, exp_avg, exp_avg_sq;
    bool operator==(const StateDigests&) const = default;
};
StateDigests flat_state_digests(const std::vector<RankState>& ranks_in_offset_order);

} // namespace shardscope
