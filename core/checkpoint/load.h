#pragma once
// Loading a checkpoint into memory: every invariant and hash is checked while the bytes land.

#include "core/checkpoint/state.h"
#include "core/util/hashing.h"

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope {

struct LoadOptions {
    int threads = 0;
    ProgressFn progress;
    const std::atomic<bool>* cancel = nullptr;
    // A shard tensor besides the four of a RankState (another writer's) is dropped and named in
    // LoadedCheckpoint::unread instead of refusing the load (Error unread_state).
    bool allow_unread_state = false;
};

struct LoadedCheckpoint {
    std::filesystem::path dir;
    Manifest manifest;
    std::vector<RankState> ranks; // index = rank
    std::vector<std::string> unread; // with allow_unread_state: "rank 3: tensor 'ema'", by rank
};

// Loads every rank's state after checking every invariant and hash (each shard file is read once:
// its bytes are hashed as they land in the returned vectors). Throws Error with the first
// problem's kind: world_size_mismatch, shard_count_mismatch, partial_write, hash_mismatch, ...,
// unread_state for a shard tensor it would drop (see allow_unread_state).
LoadedCheckpoint load_sharded(const std::filesystem::path& path, int expected_world_size,
                              const LoadOptions& options = {});

// Sharding-independent digests: SHA-256 of each flat little-endian vector reassembled in
// parameter order, so the same global state saved at any world size gives the same four values.
struct StateDigests {
    std::string param, master, exp_avg, exp_avg_sq;
    bool operator==(const StateDigests&) const = default;
};
StateDigests flat_state_digests(const std::vector<RankState>& ranks_in_offset_order);

// The same digests fed piece by piece, for a process that receives other ranks' vectors over the
// network (shardctl-mpi): add ranks (or raw little-endian bytes of one vector) in offset order.
class FlatStateHasher {
public:
    enum Vector { param, master, exp_avg, exp_avg_sq };
    void add(const RankState& state);
    void add_bytes(Vector vector, const void* data, std::size_t size);
    StateDigests finish();

private:
    Sha256 m_sha[4];
};

} // namespace shardscope
