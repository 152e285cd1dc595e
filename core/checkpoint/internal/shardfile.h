#pragma once
// Opening one rank's shard file against its manifest record: the checks verify and load share
// (confinement, existence, regular file, size, safetensors header, the four expected tensors).

#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"
#include "core/storage/folder.h"
#include "core/util/fsutil.h"
#include "core/checkpoint/safetensors.h"

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

namespace shardscope {

struct OpenedShard {
    std::unique_ptr<storage::Reader> file;
    uint64_t size = 0;
    SafetensorsHeader header;
};

struct ShardOpenResult {
    std::optional<OpenedShard> shard; // set when every check passed
    ShardStatus status = ShardStatus::pending;
    Problem problem; // what failed, when `shard` is empty
    uint64_t file_size = 0; // the file's real size, whenever it could be opened
};

ShardOpenResult open_shard(const storage::Folder& folder, const Manifest& manifest, const ShardRecord& record);

// ---- reading one committed shard: the single implementation behind load_sharded and
// verify_checkpoint (every rank in one process) and rankio.h (one rank per MPI process) ----------

// Called after every chunk read: `done` of the file's `size` bytes so far. false stops the read.
using ReadStep = std::function<bool(uint64_t done, uint64_t size)>;

// Reads the shard into a RankState, hashing every byte as it lands. Throws Error (unreadable,
// hash_mismatch, cancelled when `step` stops it, or the open_shard problem) naming rank and file.
// A tensor other than the four a RankState holds is hashed and not kept: named in `unread` when
// given, otherwise Error(unread_state) once the shard has verified.
RankState read_rank_state(const storage::Folder& folder, const Manifest& manifest, const ShardRecord& record,
                          const ReadStep& step = {}, std::vector<std::string>* unread = nullptr);

// Hashes the shard (SHA-256, or XXH3 with `fast` when the manifest records one) against the
// manifest. Never throws for a bad shard: the status says what is wrong and `problem` is set.
// Stopped by `step`, the status stays pending and no problem is set. A remote shard is streamed,
// widened to `read_depth` ranges at a time on a slow link (storage::read_in_order).
ShardCheck check_shard(const storage::Folder& folder, const Manifest& manifest, const ShardRecord& record, bool fast,
                       std::optional<Problem>& problem, const ReadStep& step = {}, int read_depth = 1);

// Error(io_error) naming `what` unless `numel` elements of training state (14 bytes each: a 2-byte
// parameter and three fp32 optimizer values) fit in this machine's physical memory. A manifest
// claiming more (hostile, or a model too big for this machine) gets one sentence instead of the
// out-of-memory killer.
void ensure_state_fits_in_memory(uint64_t numel, const std::filesystem::path& what);
// A RankState of `numel` zeroed elements per tensor, at `offset` of the flat parameters.
RankState empty_rank_state(const Manifest& manifest, int rank, uint64_t offset, uint64_t numel);
// Where a shard's tensor `name` lands in `state`; nullptr for one ShardScope does not keep.
char* tensor_destination(RankState& state, std::string_view name);
// Error(unreadable) for a read of `record`'s file that failed at byte `at` (errno, or a shrink).
Error read_failure(const std::filesystem::path& dir, const ShardRecord& record, uint64_t at);
// The sentence for a shard whose digest differs from the manifest's.
std::string digest_mismatch(const std::filesystem::path& dir, const ShardRecord& record, std::string_view algorithm,
                            const std::string& actual, const std::string& expected);

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
std::string rank_shard_header(int rank, int world_size, ParamDtype dtype, uint64_t param_shard_offset, uint64_t numel);

// Shards are read in chunks of this size: large enough for sequential throughput, small enough
// that progress and cancellation stay responsive and memory stays bounded.
inline constexpr std::size_t kReadChunk = 4u << 20;
// A remote object's read: each is a ranged GET, whose latency a larger range pays less often.
inline constexpr std::size_t kRemoteReadChunk = 8u << 20;

} // namespace shardscope
