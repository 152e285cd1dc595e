#pragma once
// Verifying a ShardScope checkpoint: every invariant of docs/format.md and every shard's hash,
// without materialising the state. VerifyReport is what every format's verifier reports
// (core/open's verify_checkpoint chooses the verifier).

#include "core/checkpoint/manifest.h"
#include "core/checkpoint/state.h"
#include "core/checkpoint/foreign_summary.h"
#include "core/util/enum_names.h"
#include "core/storage/folder.h"
#include "core/util/fsutil.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

enum class ShardStatus { pending, hashing, ok, missing, size_mismatch, hash_mismatch, unreadable, invalid };
inline constexpr std::string_view kShardStatusNames[] = {"pending",       "hashing",       "ok",         "missing",
                                                         "size_mismatch", "hash_mismatch", "unreadable", "invalid"};
static_assert(std::size(kShardStatusNames) == std::size_t(ShardStatus::invalid) + 1);
std::string_view to_string(ShardStatus status);

struct ShardCheck {
    int rank = -1;
    std::string path;
    uint64_t expected_bytes = 0;
    uint64_t actual_bytes = 0;
    ShardStatus status = ShardStatus::pending;
    std::string actual_digest; // sha256 (or xxh3 with --fast) of what is on disk, when read
    std::string detail; // why the status is not ok
};

struct VerifyReport;

struct VerifyCallbacks {
    // Once, before any shard_progress / shard_done: the report so far, with every file about to
    // be checked in report.shards (pending, or already decided, e.g. a missing rank) and, for a
    // foreign format, the summary known from its metadata. A viewer shows these rows at once and
    // updates them live, instead of waiting for the whole report.
    std::function<void(const VerifyReport& listed)> files_listed;
    // Before files_listed, where a format's metadata takes long to read (a DCP .metadata of 10^5
    // chunks): the first tensors it lists, in a summary of those alone (their chunks without
    // files yet; kDcpFirstTensors), so that a viewer shows rows while the rest is read. At most once.
    std::function<void(const ForeignSummary& first)> first_tensors;
    ProgressFn progress; // all shards together
    std::function<void(std::size_t shard_index, uint64_t done, uint64_t total)> shard_progress;
    std::function<void(std::size_t shard_index, const ShardCheck&)> shard_done;
};

struct VerifyOptions {
    int threads = 0; // 0: hardware threads
    bool fast = false; // compare the XXH3 checksum instead of SHA-256
    int expected_world_size = -1; // < 0: do not compare
    const std::atomic<bool>* cancel = nullptr;
    VerifyCallbacks callbacks;
};

struct VerifyReport {
    std::filesystem::path dir; // the step directory actually verified (after following `latest`)
    std::string format = "shardscope";
    std::optional<Manifest> manifest; // absent when manifest.json is missing or unparsable
    std::vector<ShardCheck> shards; // one per manifest entry, in manifest order
    std::vector<Problem> problems;
    std::vector<std::string> leftover_tmp_files;
    bool cancelled = false;
    std::optional<ForeignSummary> foreign; // set for the formats ShardScope did not write
    bool fast = false; // hashes compared: XXH3 when true, SHA-256 otherwise
    double seconds = 0; // how long verification took

    bool ok() const { return problems.empty() && !cancelled; }
};

// True when verify read the tensor bytes themselves and checked them against something recorded
// (SHA-256 or XXH3 digests, CRC-32s); false for a format that records no checksum of its data,
// whose verify checks headers and byte ranges only (safetensors files, a Hugging Face index,
// torch's Hugging Face storage layout). A report must not say "verified" of bytes it never read.
bool verify_read_data(const VerifyReport& report);

// Checks the ShardScope step directory `step` (opened and listed by the caller) without
// materialising the state: the manifest's invariants, then every shard (existence, size,
// safetensors header, hash) in parallel with chunked reads. Never throws for a bad checkpoint:
// findings go into the report.
VerifyReport verify_native(const storage::Folder& step, const VerifyOptions& options = {});
// The same for a step directory the caller names (a reshard's source, a mirror's copy). Throws
// Error(cannot_open) if `step_dir` is unusable.
VerifyReport verify_native(const std::filesystem::path& step_dir, const VerifyOptions& options = {});

} // namespace shardscope
