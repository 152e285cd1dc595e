#include "core/checkpoint/reshard.h"
#include "core/checkpoint/directory.h"

#include "core/util/parallel.h"
#include "core/checkpoint/internal/shardfile.h"
#include "core/checkpoint/state.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;

ReshardPlan plan_reshard(const Manifest& m, int target_world_size)
{
    if (target_world_size < 1 || target_world_size > kMaxWorldSize)
        throw Error(ProblemKind::invalid_argument,
                    "the target world size must be from 1 to " + std::to_string(kMaxWorldSize) + ", not " +
                        std::to_string(target_world_size));
    const auto problems = check_manifest(m, -1, "manifest.json");
    if (!problems.empty())
        throw Error(problems.front());

    ReshardPlan plan;
    plan.source_world_size = m.world_size;
    plan.target_world_size = target_world_size;
    plan.numel_total = m.param_numel_total;
    plan.dtype = m.param_dtype;

    std::vector<const ShardRecord*> sources;
    for (const auto& s : m.shards)
        if (s.param_shard_numel > 0)
            sources.push_back(&s);
    std::sort(sources.begin(), sources.end(),
              [](auto* a, auto* b) { return a->param_shard_offset < b->param_shard_offset; });

    std::size_t src = 0; // sources are visited once in order across all targets: O(N + M)
    for (int r = 0; r < target_world_size; ++r) {
        TargetPlan t;
        t.rank = r;
        t.offset = even_shard_offset(m.param_numel_total, target_world_size, r);
        t.numel = even_shard_offset(m.param_numel_total, target_world_size, r + 1) - t.offset;
        uint64_t at = t.offset;
        const uint64_t end = t.offset + t.numel;
        while (at < end) {
            while (sources[src]->param_shard_offset + sources[src]->param_shard_numel <= at)
                ++src;
            const ShardRecord& s = *sources[src];
            const uint64_t run_end = std::min(end, s.param_shard_offset + s.param_shard_numel);
            const CopyRun run{s.rank, at - s.param_shard_offset, at - t.offset, run_end - at};
            if (run.source_rank == r)
                t.bytes_staying += run.numel * plan.bytes_per_element;
            t.runs.push_back(run);
            at = run_end;
        }
        t.bytes = t.numel * plan.bytes_per_element;
        plan.bytes_written += t.bytes;
        plan.bytes_staying += t.bytes_staying;
        plan.targets.push_back(std::move(t));
    }
    plan.bytes_read = plan.numel_total * plan.bytes_per_element;
    plan.bytes_moving = plan.bytes_written - plan.bytes_staying;
    return plan;
}

std::vector<RankState> reshard_in_memory(const std::vector<RankState>& ranks, int target_world_size)
{
    if (target_world_size < 1 || target_world_size > kMaxWorldSize || ranks.empty())
        throw Error(ProblemKind::invalid_argument, "cannot reshard to " + std::to_string(target_world_size) + " ranks");
    uint64_t total = 0;
    for (const auto& r : ranks)
        total += r.numel();
    std::vector<RankState> out(static_cast<std::size_t>(target_world_size));
    std::size_t source = 0;
    uint64_t source_at = 0; // element index inside ranks[source]
    for (int t = 0; t < target_world_size; ++t) {
        RankState& r = out[static_cast<std::size_t>(t)];
        r.rank = t;
        r.dtype = ranks.front().dtype;
        r.param_shard_offset = even_shard_offset(total, target_world_size, t);
        uint64_t left = even_shard_offset(total, target_world_size, t + 1) - r.param_shard_offset;
        while (left > 0) {
            while (ranks[source].numel() == source_at) { // exhausted or empty slices own nothing more
                ++source;
                source_at = 0;
            }
            const RankState& s = ranks[source];
            const uint64_t n = std::min(left, s.numel() - source_at);
            const auto from = static_cast<std::ptrdiff_t>(source_at), to = static_cast<std::ptrdiff_t>(source_at + n);
            r.param.insert(r.param.end(), s.param.begin() + from, s.param.begin() + to);
            r.master.insert(r.master.end(), s.master.begin() + from, s.master.begin() + to);
            r.exp_avg.insert(r.exp_avg.end(), s.exp_avg.begin() + from, s.exp_avg.begin() + to);
            r.exp_avg_sq.insert(r.exp_avg_sq.end(), s.exp_avg_sq.begin() + from, s.exp_avg_sq.begin() + to);
            left -= n;
            source_at += n;
        }
    }
    return out;
}

namespace {

bool is_inside(const fs::path& inner, const fs::path& outer)
{
    auto i = inner.begin(), o = outer.begin();
    for (; o != outer.end(); ++o, ++i)
        if (i == inner.end() || *i != *o)
            return false;
    return true;
}

} // namespace

// Refuses destinations that could overwrite or recurse into the source, or clobber anything.
void check_reshard_destination(const fs::path& source, const fs::path& destination)
{
    std::error_code ec;
    const fs::path src = fs::weakly_canonical(source, ec);
    if (ec)
        throw Error(ProblemKind::cannot_open, source.string() + ": cannot resolve the path: " + ec.message(),
                    source.string());
    const fs::path dst = fs::weakly_canonical(destination, ec);
    if (ec)
        throw Error(ProblemKind::cannot_open, destination.string() + ": cannot resolve the path: " + ec.message(),
                    destination.string());
    if (dst == src || is_inside(dst, src))
        throw Error(ProblemKind::invalid_argument,
                    destination.string() + ": the output must not be the source checkpoint or inside it (" +
                        src.string() + ")",
                    destination.string());
    if (fs::exists(destination, ec)) {
        if (!fs::is_directory(destination, ec))
            throw Error(ProblemKind::already_exists, destination.string() + " exists and is not a directory",
                        destination.string());
        if (!fs::is_empty(destination, ec))
            throw Error(ProblemKind::already_exists,
                        destination.string() + " exists and is not empty; refusing to write into it",
                        destination.string());
    }
}

void refuse_dropped_state(const fs::path& dir, const ShardRecord& record, const SafetensorsHeader& header)
{
    // A tensor some other writer added is not one of the four a reshard writes: refused, as a load
    // refuses it, rather than dropped from the new checkpoint unsaid.
    for (const SafetensorsTensor& t : header.tensors)
        if (!state_vector_from_string(t.name))
            throw Error(ProblemKind::unread_state,
                        (dir / record.path).string() + " (rank " + std::to_string(record.rank) + ") holds '" +
                            printable(t.name, 200) +
                            "' besides param, master, exp_avg and exp_avg_sq; a reshard writes only those four, so "
                            "it would drop this state (load it with --allow-partial-state and save it again to go "
                            "on without it)",
                        record.path, record.rank);
}

void refuse_dropped_state(const fs::path& dir, const Manifest& m)
{
    const storage::Folder folder(fsutil::open_listed(dir));
    for (const auto& record : m.shards) {
        ShardOpenResult opened = open_shard(folder, m, record);
        if (!opened.shard)
            throw Error(opened.problem);
        refuse_dropped_state(dir, record, opened.shard->header);
    }
}

CheckpointMeta resharded_meta(const Manifest& m, int target_world_size)
{
    CheckpointMeta meta;
    copy_checkpoint_meta(meta, m);
    meta.world_size = target_world_size;
    return meta;
}

ReshardResult reshard(const fs::path& source, int target_world_size, const fs::path& destination,
                      const ReshardOptions& options)
{
    const fs::path src_dir = resolve_checkpoint_dir(source);
    check_reshard_destination(src_dir, destination);

    // Phase 1: the whole source must verify. SHA-256 cannot be computed out of order and the copy
    // reads each source in target order, so the hashes are checked in one sequential pass first;
    // the copy that follows reads from the page cache.
    VerifyOptions verify;
    verify.threads = options.threads;
    verify.cancel = options.cancel;
    uint64_t source_total = 0;
    verify.callbacks.progress = [&](uint64_t done, uint64_t total) {
        source_total = total;
        if (options.progress)
            options.progress(done, 2 * total);
    };
    const VerifyReport report = verify_native(src_dir, verify);
    if (report.cancelled)
        throw Error(ProblemKind::cancelled, src_dir.string() + ": reshard cancelled");
    if (!report.ok())
        throw Error(report.problems.front());
    const Manifest& m = *report.manifest;

    ReshardResult result;
    result.plan = plan_reshard(m, target_world_size);
    const ReshardPlan& plan = result.plan;

    const storage::Folder source_folder(fsutil::open_listed(src_dir));

    // Each source shard's data offset of each tensor, from its (already validated) header.
    struct SourceFile {
        std::unique_ptr<storage::Reader> file;
        uint64_t tensor_start[4] = {};
    };
    std::vector<SourceFile> files(static_cast<std::size_t>(m.world_size));
    static constexpr const char* kTensors[4] = {"param", "master", "exp_avg", "exp_avg_sq"};
    for (const auto& record : m.shards) {
        ShardOpenResult opened = open_shard(source_folder, m, record);
        if (!opened.shard)
            throw Error(opened.problem);
        refuse_dropped_state(src_dir, record, opened.shard->header);
        SourceFile& f = files[static_cast<std::size_t>(record.rank)];
        for (int t = 0; t < 4; ++t)
            f.tensor_start[t] = opened.shard->header.data_start() + opened.shard->header.find(kTensors[t])->begin;
        f.file = std::move(opened.shard->file);
    }
    fsutil::make_directories(destination, options.durable);
    fsutil::UniqueFd dst_fd = fsutil::open_directory(destination);
    const uint64_t element_size[4] = {2, 4, 4, 4};

    std::atomic<uint64_t> copied{0};
    const uint64_t copy_total = plan.bytes_written;
    std::vector<ShardRecord> records(plan.targets.size());
    try {
        parallel_for(plan.targets.size(), options.threads, [&](std::size_t i) {
            const TargetPlan& target = plan.targets[i];
            WriteOptions write;
            write.durable = options.durable;
            write.cancel = options.cancel;
            ShardFileWriter writer(dst_fd.get(), destination, target.rank, write);
            const std::string header =
                rank_shard_header(target.rank, target_world_size, plan.dtype, target.offset, target.numel);
            writer.write(header.data(), header.size());
            constexpr std::size_t kBuffer = 4u << 20; // per thread: peak memory does not grow with the checkpoint
            std::vector<std::byte> buffer(kBuffer);
            std::vector<std::byte> param(kBuffer / 2); // the parameters of a master piece, for their pairing
            StateHealth health; // counted as the bytes go out, as write_rank_shard does
            const auto read = [&](const SourceFile& f, const CopyRun& run, std::byte* into, std::size_t n,
                                  uint64_t at) {
                if (!f.file->read(into, n, at))
                    throw Error(ProblemKind::unreadable,
                                "rank " + std::to_string(run.source_rank) + ": " +
                                    (src_dir / m.shard_for_rank(run.source_rank)->path).string() +
                                    ": read failed at byte " + std::to_string(at) + ": " +
                                    (errno ? std::strerror(errno) : "the file shrank"),
                                m.shard_for_rank(run.source_rank)->path, run.source_rank);
            };
            for (int t = 0; t < 4; ++t) {
                const auto vector = static_cast<StateVector>(t); // kTensors' order
                for (const CopyRun& run : target.runs) {
                    const SourceFile& f = files[static_cast<std::size_t>(run.source_rank)];
                    uint64_t at = f.tensor_start[t] + run.source_offset * element_size[t];
                    uint64_t left = run.numel * element_size[t];
                    uint64_t element = run.source_offset; // of the piece in `buffer`
                    while (left > 0) {
                        const auto n = static_cast<std::size_t>(std::min<uint64_t>(left, kBuffer));
                        const std::size_t count = n / element_size[t];
                        read(f, run, buffer.data(), n, at);
                        writer.write(buffer.data(), n);
                        if (vector == StateVector::master)
                            read(f, run, param.data(), count * 2, f.tensor_start[0] + element * 2);
                        count_health(vector, plan.dtype, buffer.data(), count, param.data(), health);
                        element += count;
                        at += n;
                        left -= n;
                        const uint64_t done = copied += n;
                        if (options.progress)
                            options.progress(source_total + done, source_total + copy_total);
                    }
                }
            }
            records[i] = writer.finish(target.offset, target.numel);
            records[i].health = health;
        });
        if (options.cancel && options.cancel->load())
            throw Error(ProblemKind::cancelled, destination.string() + ": reshard cancelled");

        result.manifest =
            commit(destination, std::move(records), resharded_meta(m, target_world_size), options.durable);
    } catch (...) {
        // Whatever shards were completed are useless without a manifest; the destination was
        // empty before, so everything named like a shard in it is ours to remove. The manifest
        // goes first: a commit whose final directory fsync failed may have put it in place.
        fsutil::unlink_at(dst_fd.get(), "manifest.json");
        for (const TargetPlan& target : plan.targets)
            fsutil::unlink_at(dst_fd.get(), shard_file_name(target.rank));
        throw;
    }
    return result;
}

} // namespace shardscope
