// Saving: the two phases (write_rank_shard, commit) and the in-process composition of them.

#include "core/checkpoint/save.h"

#include "core/util/fsutil.h"
#include "core/util/hashing.h"
#include "core/util/parallel.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <span>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;
using fsutil::UniqueFd;

namespace {

void check_cancel(const std::atomic<bool>* cancel, const std::string& what)
{
    if (cancel && cancel->load(std::memory_order_relaxed))
        throw Error(ProblemKind::cancelled, what + ": cancelled");
}

// The four tensors of a rank shard, in file order.
struct TensorBytes {
    StateVector vector;
    std::span<const std::byte> bytes;
};

std::vector<TensorBytes> tensor_bytes(const RankStateView& s)
{
    return {
        {StateVector::param, std::as_bytes(s.param)},
        {StateVector::master, std::as_bytes(s.master)},
        {StateVector::exp_avg, std::as_bytes(s.exp_avg)},
        {StateVector::exp_avg_sq, std::as_bytes(s.exp_avg_sq)},
    };
}

// Elements written (and counted) at a time: 256 KiB of fp32 is still in L2 when it is counted,
// after the writer hashed it and copied it out, so counting costs compute, not another pass over
// memory: under 5 % of a save (bench_lifecycle, docs/benchmarks.md), where 1 MiB pieces cost 8 %.
constexpr std::size_t kPieceElements = 64 * 1024;

} // namespace

std::string shard_file_name(int rank)
{
    return "rank" + std::to_string(rank) + ".safetensors";
}

namespace {

// What write_rank_shard refuses, checked by save_sharded for every rank before it writes any.
void check_rank_state(const fs::path& dir, const RankStateView& state, int world_size)
{
    const std::string display = (dir / shard_file_name(state.rank)).string();
    const uint64_t n = state.param.size();
    if (state.master.size() != n || state.exp_avg.size() != n || state.exp_avg_sq.size() != n)
        throw Error(ProblemKind::invalid_argument,
                    display + " (rank " + std::to_string(state.rank) +
                        "): param, master, exp_avg and exp_avg_sq must have the same length",
                    display, state.rank);
    if (state.rank < 0 || state.rank >= world_size)
        throw Error(ProblemKind::invalid_argument,
                    display + ": rank " + std::to_string(state.rank) + " is outside 0.." +
                        std::to_string(world_size - 1),
                    display, state.rank);
}

} // namespace

ShardRecord write_rank_shard(const fs::path& dir, const RankStateView& state, int world_size,
                             const WriteOptions& options)
{
    check_rank_state(dir, state, world_size);
    const std::string display = (dir / shard_file_name(state.rank)).string();
    const uint64_t n = state.param.size();
    fsutil::make_directories(dir, options.durable);
    UniqueFd dirfd = fsutil::open_directory(dir);
    if (fsutil::exists_at(dirfd.get(), "manifest.json"))
        throw Error(ProblemKind::already_exists,
                    (dir / "manifest.json").string() + " exists: refusing to overwrite a complete checkpoint", display,
                    state.rank);

    ShardFileWriter writer(dirfd.get(), dir, state.rank, options);
    const std::string header = rank_shard_header(state.rank, world_size, state.dtype, state.param_shard_offset, n);
    writer.write(header.data(), header.size());
    StateHealth health;
    for (const auto& t : tensor_bytes(state)) {
        const std::size_t width = t.vector == StateVector::param ? 2 : 4;
        for (std::size_t at = 0; at < n; at += kPieceElements) {
            const std::size_t count = std::min<std::size_t>(kPieceElements, n - at);
            writer.write(t.bytes.data() + at * width, count * width);
            if (options.count_health)
                count_health(t.vector, state, at, count, health);
        }
    }
    ShardRecord record = writer.finish(state.param_shard_offset, n);
    if (options.count_health)
        record.health = health;
    return record;
}

Manifest commit(const fs::path& dir, std::vector<ShardRecord> records, const CheckpointMeta& meta, bool durable)
{
    Manifest m;
    copy_checkpoint_meta(m, meta);
    std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    m.shards = std::move(records);

    const std::string display = (dir / "manifest.json").string();
    if (meta.world_size <= 0 || meta.world_size > kMaxWorldSize)
        throw Error(ProblemKind::invalid_argument,
                    display + ": world_size " + std::to_string(meta.world_size) + " is out of range", display);
    // The coordinator refuses to publish anything a loader would reject.
    const auto problems = check_manifest(m, meta.world_size, display);
    if (!problems.empty())
        throw Error(problems.front());

    UniqueFd dirfd = fsutil::open_directory(dir);
    if (fsutil::exists_at(dirfd.get(), "manifest.json"))
        throw Error(ProblemKind::already_exists, display + " exists: refusing to overwrite a complete checkpoint",
                    display);
    for (const auto& s : m.shards) {
        auto file = fsutil::open_beneath_for_read(dirfd.get(), s.path);
        if (file.status != fsutil::OpenStatus::ok || file.size != s.bytes)
            throw Error(ProblemKind::partial_write,
                        (dir / s.path).string() + " (rank " + std::to_string(s.rank) +
                            "): the shard is not in place with its recorded size; not committing",
                        s.path, s.rank);
    }
    // The shards' renames must be durable before a manifest can point at them.
    if (durable)
        fsutil::fsync_or_throw(dirfd.get(), dir.string());
    fsutil::write_file_atomic(dirfd.get(), "manifest.json", serialize_manifest(m), dir.string(), durable);
    // And the directory's own name, however it was made (an earlier run, another process): once
    // commit returns, the checkpoint survives a power cut.
    if (durable) {
        fs::path self = fs::absolute(dir);
        if (!self.has_filename()) // "a/b/"
            self = self.parent_path();
        const fs::path parent = self.parent_path();
        fsutil::fsync_or_throw(fsutil::open_directory(parent).get(), parent.string());
    }
    return m;
}

void check_save(const std::vector<RankStateView>& states, const fs::path& dir)
{
    if (states.empty())
        throw Error(ProblemKind::invalid_argument, dir.string() + ": nothing to save (no ranks)");
    const int world = static_cast<int>(states.size());
    Manifest planned;
    planned.world_size = world;
    planned.param_dtype = states.front().dtype;
    for (const auto& s : states) {
        if (s.dtype != planned.param_dtype)
            throw Error(ProblemKind::invalid_argument,
                        dir.string() + ": rank " + std::to_string(s.rank) +
                            " has a different parameter dtype from rank " + std::to_string(states.front().rank));
        check_rank_state(dir, s, world);
        planned.param_numel_total += s.numel();
        planned.shards.push_back({.rank = s.rank,
                                  .path = shard_file_name(s.rank),
                                  .param_shard_offset = s.param_shard_offset,
                                  .param_shard_numel = s.numel()});
    }
    // The layout commit will check, checked before any shard is written: slices that do not tile
    // the flat vector leave nothing behind.
    const auto problems = check_manifest(planned, world, (dir / "manifest.json").string());
    if (!problems.empty())
        throw Error(problems.front());
}

Manifest save_sharded(const std::vector<RankStateView>& states, const fs::path& dir, uint64_t step,
                      const SaveOptions& options)
{
    check_save(states, dir);
    const int world = static_cast<int>(states.size());
    CheckpointMeta meta;
    meta.world_size = world;
    meta.step = step;
    meta.wall_clock_seconds = options.wall_clock_seconds;
    meta.param_dtype = states.front().dtype;
    meta.tensors = options.tensors;
    meta.training_state = options.training_state;
    uint64_t total_bytes = 0;
    for (const auto& s : states) {
        meta.param_numel_total += s.numel();
        total_bytes += s.numel() * 14; // 2 + 3 * 4 bytes per element, headers aside
    }
    fsutil::make_directories(dir, options.durable);
    {
        UniqueFd dirfd = fsutil::open_directory(dir);
        if (fsutil::exists_at(dirfd.get(), "manifest.json"))
            throw Error(ProblemKind::already_exists,
                        (dir / "manifest.json").string() + " exists: refusing to overwrite a complete checkpoint",
                        (dir / "manifest.json").string());
    }

    std::vector<ShardRecord> records(states.size());
    std::vector<std::atomic<uint64_t>> done(states.size());
    std::atomic<uint64_t> all_done{0};
    parallel_for(states.size(), options.threads, [&](std::size_t i) {
        WriteOptions write;
        write.durable = options.durable;
        write.cancel = options.cancel;
        write.count_health = options.count_health;
        if (options.progress)
            write.progress = [&, i](uint64_t bytes) {
                const uint64_t delta = bytes - done[i].exchange(bytes);
                options.progress(all_done += delta, total_bytes);
            };
        records[i] = write_rank_shard(dir, states[i], world, write);
    });
    check_cancel(options.cancel, dir.string());
    return commit(dir, std::move(records), meta, options.durable);
}

} // namespace shardscope
