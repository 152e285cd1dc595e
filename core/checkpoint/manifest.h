#pragma once
// manifest.json, schema_version 1 (the contract in docs/format.md): parsing that rejects anything
// malformed with a sentence naming the file, and the invariant checks every loader runs.

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/health.h"
#include "core/util/error.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

inline constexpr int kSchemaVersion = 1;
// Limits on untrusted manifests. They bound what parsing may cost (a parsed JSON value takes up
// to ~100 bytes, so 4 Mi values stay under ~0.5 GB even for a hostile file) while leaving room
// for far more ranks than any training run uses (131072 ranks make a ~40 MB manifest).
inline constexpr uint64_t kMaxManifestBytes = 64ull << 20; // 64 MiB of JSON
inline constexpr uint64_t kMaxManifestValues = 4ull << 20; // JSON values (numbers, strings, ...)
inline constexpr int kMaxManifestDepth = 64; // JSON nesting
inline constexpr int kMaxWorldSize = 1 << 17; // 131072 ranks (and shards)
inline constexpr uint64_t kMaxNumel = 1ull << 53; // exactly representable in any JSON reader

// What one rank's shard file is: written by write_rank_shard, recorded by commit.
struct ShardRecord {
    int rank = 0;
    std::string path; // relative to the checkpoint directory
    std::string sha256;
    std::string xxh3; // fast checksum (XXH3-64, hex); empty in manifests written without one
    uint64_t bytes = 0;
    uint64_t param_shard_offset = 0;
    uint64_t param_shard_numel = 0;
    // What the writer counted in the values it wrote; absent in manifests written before health
    // was recorded (and by writers that do not count it).
    std::optional<StateHealth> health;
};

// Where one model tensor lives inside the flat parameter vector.
struct TensorInfo {
    std::string name;
    std::vector<uint64_t> shape;
    uint64_t offset = 0;
    uint64_t numel = 0;
};

struct Manifest {
    int schema_version = kSchemaVersion;
    int world_size = 0;
    uint64_t step = 0;
    double wall_clock_seconds = 0;
    ParamDtype param_dtype = ParamDtype::F16;
    uint64_t param_numel_total = 0;
    std::vector<ShardRecord> shards; // in manifest order (not necessarily by rank)
    std::vector<TensorInfo> tensors;
    nlohmann::json training_state; // null when absent; kept verbatim
    nlohmann::json extra; // unknown top-level fields, preserved on rewrite

    uint64_t total_bytes() const;
    // The step's health: its shards' summed, or nullopt when a shard has none recorded.
    std::optional<StateHealth> health() const;
    // "rank 2: 3 non-finite exp_avg_sq values; rank 5: ...": the ranks whose recorded health is
    // not clean, for the sentences that say why a step is skipped or kept.
    std::string describe_health() const;
    const ShardRecord* shard_for_rank(int rank) const;
};

// Parses manifest JSON. Throws Error(invalid_manifest / unsupported_schema) naming `display_path`
// and, for a field of one shard, that shard's rank.
Manifest parse_manifest(std::string_view text, const std::string& display_path);
std::string serialize_manifest(const Manifest& manifest);
// One `shards[]` entry exactly as serialize_manifest writes it (`xxh3` only when recorded): also
// what a writer hands its coordinator (the Python module's write_rank_shard record).
nlohmann::ordered_json shard_record_json(const ShardRecord& record);

// The structural invariants of docs/format.md, without touching any shard file: world size, shard
// count, duplicate ranks, tiling of the flat parameter space, path confinement.
// `expected_world_size` < 0 skips the world-size comparison.
std::vector<Problem> check_manifest(const Manifest& manifest, int expected_world_size, const std::string& display_path);

// [offset, offset + numel) of each rank when `total` elements are split as evenly as possible
// over `world_size` ranks: rank r gets floor(total * r / N) .. floor(total * (r+1) / N).
uint64_t even_shard_offset(uint64_t total, int world_size, int rank);

} // namespace shardscope
