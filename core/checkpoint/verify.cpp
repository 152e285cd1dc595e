// Verification: every invariant and every byte, without materialising the state.

#include "core/checkpoint/verify.h"
#include "core/checkpoint/directory.h"
#include "core/storage/sequential_read.h"
#include "core/util/hashing.h"
#include "core/util/parallel.h"
#include "core/checkpoint/internal/shardfile.h"

#include <chrono>
#include <map>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>

namespace shardscope {

namespace fs = std::filesystem;

std::string_view to_string(ShardStatus status)
{
    return enum_name(status, kShardStatusNames, "invalid");
}

bool verify_read_data(const VerifyReport& report)
{
    return report.format != "safetensors" && report.format != "safetensors-index" && report.format != "torch-dcp-hf";
}

ShardCheck check_shard(const storage::Folder& folder, const Manifest& m, const ShardRecord& record, bool fast,
                       std::optional<Problem>& problem, const ReadStep& step, int read_depth)
{
    const fs::path& dir = folder.path;
    ShardCheck check{.rank = record.rank, .path = record.path, .expected_bytes = record.bytes};
    if (fsutil::unsafe_name_reason(record.path)) {
        check.status = ShardStatus::invalid;
        check.detail =
            "rank " + std::to_string(record.rank) + ": '" + record.path + "' leaves the checkpoint directory";
        problem = Problem{.kind = ProblemKind::path_outside_checkpoint,
                          .message = check.detail,
                          .path = record.path,
                          .rank = record.rank};
        return check;
    }
    ShardOpenResult opened = open_shard(folder, m, record);
    check.actual_bytes = opened.file_size; // a truncated or grown shard reports what is on disk
    if (!opened.shard) {
        check.status = opened.status;
        check.detail = opened.problem.message;
        problem = std::move(opened.problem);
        return check;
    }
    const OpenedShard& shard = *opened.shard;
    check.actual_bytes = shard.size;
    fast = fast && !record.xxh3.empty();
    Sha256 sha;
    Xxh3 xxh;
    uint64_t done = 0;
    bool stopped = false;
    // A remote object is streamed, and widened to `read_depth` ranges at a time of a larger size
    // (each is a request, its latency paid once) where the link is slow; a local file is read one
    // chunk after another, the kernel reading ahead.
    const bool local = shard.file->fd() >= 0;
    if (local)
        ::posix_fadvise(shard.file->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    const storage::SequentialRead how{.chunk = local ? kReadChunk : kRemoteReadChunk, .depth = local ? 1 : read_depth};
    const storage::SequentialReadEnd end =
        storage::read_in_order(*shard.file, shard.size, how, [&](const char* bytes, std::size_t n) {
            if (fast)
                xxh.update(bytes, n);
            else
                sha.update(bytes, n);
            stopped = step && !step(done += n, shard.size);
            return !stopped;
        });
    if (end.failed) {
        const Error e = read_failure(dir, record, end.done);
        check.status = ShardStatus::unreadable;
        check.detail = e.what();
        problem = e.problem();
        return check;
    }
    if (stopped)
        return check; // still pending, even when the last chunk was read
    check.actual_digest = fast ? xxh.hex_digest() : sha.hex_digest();
    const std::string& expected = fast ? record.xxh3 : record.sha256;
    if (check.actual_digest != expected) {
        check.status = ShardStatus::hash_mismatch;
        check.detail = digest_mismatch(dir, record, fast ? "xxh3" : "sha256", check.actual_digest, expected);
        problem = Problem{
            .kind = ProblemKind::hash_mismatch, .message = check.detail, .path = record.path, .rank = record.rank};
        return check;
    }
    check.status = ShardStatus::ok;
    return check;
}

namespace {

VerifyReport verify_step(const storage::Folder& step, const VerifyOptions& options)
{
    VerifyReport report;
    auto add = [&](Problem p) { report.problems.push_back(std::move(p)); };
    report.dir = step.path;
    const fs::path& dir = report.dir;
    const std::string manifest_path = (dir / "manifest.json").string();
    report.leftover_tmp_files = leftover_tmp_files(step.names);

    if (!step.has("manifest.json")) {
        add(missing_manifest_problem(step.names, dir));
        return report;
    }
    try {
        report.manifest =
            parse_manifest(step.read_small("manifest.json", kMaxManifestBytes, manifest_path), manifest_path);
    } catch (const Error& e) {
        rethrow_remote(e);
        add(e.problem());
        return report;
    }
    const Manifest& m = *report.manifest;
    // A rank the manifest's own checks name (outside 0..N-1, listed twice, overlapping another)
    // is not "ok" even when its file hashes right: its row says why.
    std::map<int, std::string> named_by_manifest;
    for (auto& p : check_manifest(m, options.expected_world_size, manifest_path)) {
        if (p.rank >= 0)
            named_by_manifest.try_emplace(p.rank, p.message);
        add(std::move(p));
    }

    report.shards.resize(m.shards.size());
    uint64_t total = 0;
    for (std::size_t i = 0; i < m.shards.size(); ++i) {
        const auto& s = m.shards[i];
        report.shards[i] = ShardCheck{.rank = s.rank, .path = s.path, .expected_bytes = s.bytes};
        total += s.bytes;
    }

    if (options.callbacks.files_listed)
        options.callbacks.files_listed(report);
    std::vector<std::optional<Problem>> shard_problems(m.shards.size());
    std::atomic<uint64_t> all_done{0};
    std::atomic<bool> cancelled{false};
    const auto& cb = options.callbacks;
    auto is_cancelled = [&] {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            cancelled = true;
        return cancelled.load();
    };

    // From a server, each shard is streamed and hashed as it arrives, on a thread of its own (a
    // thread mostly waits on its connection): kRemoteReadsAtOnce shards at once. A single shard
    // may widen to all the connections where one is slower than the hashing (read_in_order).
    const int threads = storage::default_threads(step, options.threads);
    const int read_depth = storage::remote_read_depth(resolve_thread_count(threads, m.shards.size()));
    parallel_for(m.shards.size(), threads, [&](std::size_t i) {
        const ShardRecord& record = m.shards[i];
        ShardCheck& check = report.shards[i]; // each worker owns its own element
        if (is_cancelled())
            return;
        if (fsutil::unsafe_name_reason(record.path)) { // check_manifest reported it already
            check.status = ShardStatus::invalid;
            check.detail = "the path leaves the checkpoint directory";
            all_done += record.bytes;
        } else {
            uint64_t reported = 0;
            check = check_shard(
                step, m, record, options.fast, shard_problems[i],
                [&](uint64_t done, uint64_t size) {
                    const uint64_t overall = all_done += done - reported;
                    reported = done;
                    if (cb.shard_progress)
                        cb.shard_progress(i, done, size);
                    if (cb.progress)
                        cb.progress(overall, total);
                    return !is_cancelled();
                },
                read_depth);
            if (check.status == ShardStatus::pending)
                return; // cancelled
            if (reported < record.bytes) // a shard that failed early still counts as done
                all_done += record.bytes - reported;
            if (const auto named = named_by_manifest.find(record.rank);
                check.status == ShardStatus::ok && named != named_by_manifest.end()) {
                check.status = ShardStatus::invalid;
                check.detail = named->second;
            }
        }
        if (cb.shard_done)
            cb.shard_done(i, check);
    });

    for (auto& p : shard_problems)
        if (p)
            add(std::move(*p));
    report.cancelled = cancelled.load();
    return report;
}

} // namespace

VerifyReport verify_native(const storage::Folder& step, const VerifyOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    VerifyReport report = verify_step(step, options);
    report.fast = options.fast;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

VerifyReport verify_native(const fs::path& step_dir, const VerifyOptions& options)
{
    return verify_native(storage::Folder(fsutil::open_listed(step_dir)), options);
}

} // namespace shardscope
