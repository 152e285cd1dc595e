#include "core/rankio.h"

#include "core/hashing.h"
#include "core/shardfile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

Error read_error(const fs::path& dir, const ShardRecord& record, uint64_t at)
{
    return Error(ProblemKind::unreadable,
                 "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() + ": read failed at byte " +
                     std::to_string(at) + ": " + (errno ? std::strerror(errno) : "the file shrank while being read"),
                 record.path, record.rank);
}

OpenedShard open_or_throw(int dirfd, const fs::path& dir, const Manifest& m, const ShardRecord& record)
{
    ShardOpenResult opened = open_shard(dirfd, dir, m, record);
    if (!opened.shard)
        throw Error(opened.problem);
    return std::move(*opened.shard);
}

void* tensor_destination(RankState& state, const std::string& name)
{
    if (name == "param")
        return state.param.data();
    if (name == "master")
        return state.master.data();
    if (name == "exp_avg")
        return state.exp_avg.data();
    if (name == "exp_avg_sq")
        return state.exp_avg_sq.data();
    return nullptr;
}

RankState empty_state(const Manifest& m, int rank, uint64_t offset, uint64_t numel)
{
    RankState state;
    state.rank = rank;
    state.dtype = m.param_dtype;
    state.param_shard_offset = offset;
    const auto n = static_cast<std::size_t>(numel);
    state.param.resize(n);
    state.master.resize(n);
    state.exp_avg.resize(n);
    state.exp_avg_sq.resize(n);
    return state;
}

} // namespace

RankState load_rank_shard(const fs::path& dir, const Manifest& m, const ShardRecord& record)
{
    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    const OpenedShard shard = open_or_throw(dirfd.get(), dir, m, record);
    ::posix_fadvise(shard.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    RankState state = empty_state(m, record.rank, record.param_shard_offset, record.param_shard_numel);
    // The whole file is read in order (the tensors tile the data), so one pass hashes and fills.
    Sha256 sha;
    auto scratch = std::make_unique<char[]>(kReadChunk);
    auto read = [&](uint64_t at, char* into, uint64_t size) {
        for (uint64_t done = 0; done < size;) {
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(kReadChunk, size - done));
            char* target = into ? into + done : scratch.get();
            if (!fsutil::read_exact(shard.fd.get(), target, n, at + done))
                throw read_error(dir, record, at + done);
            sha.update(target, n);
            done += n;
        }
    };
    read(0, nullptr, shard.header.data_start());
    for (const SafetensorsTensor& t : shard.header.tensors)
        read(shard.header.data_start() + t.begin, static_cast<char*>(tensor_destination(state, t.name)), t.bytes());
    const std::string actual = sha.hex_digest();
    if (actual != record.sha256)
        throw Error(ProblemKind::hash_mismatch,
                    "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() + ": sha256 " +
                        actual.substr(0, 16) + "... differs from the manifest's " + record.sha256.substr(0, 16) +
                        "... (the shard is corrupt)",
                    record.path, record.rank);
    return state;
}

ShardCheck check_rank_shard(const fs::path& dir, const Manifest& m, const ShardRecord& record, bool fast,
                            std::optional<Problem>& problem)
{
    ShardCheck check{record.rank, record.path, record.bytes, 0, ShardStatus::pending, {}, {}};
    if (fsutil::unsafe_name_reason(record.path)) {
        check.status = ShardStatus::invalid;
        check.detail = "the path leaves the checkpoint directory";
        problem = Problem{ProblemKind::invalid_argument, record.rank, record.path, check.detail};
        return check;
    }
    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    ShardOpenResult opened = open_shard(dirfd.get(), dir, m, record);
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
    auto buffer = std::make_unique<char[]>(kReadChunk);
    ::posix_fadvise(shard.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    for (uint64_t done = 0; done < shard.size;) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(kReadChunk, shard.size - done));
        if (!fsutil::read_exact(shard.fd.get(), buffer.get(), n, done)) {
            const Error e = read_error(dir, record, done);
            check.status = ShardStatus::unreadable;
            check.detail = e.what();
            problem = e.problem();
            return check;
        }
        if (fast)
            xxh.update(buffer.get(), n);
        else
            sha.update(buffer.get(), n);
        done += n;
    }
    check.actual_digest = fast ? xxh.hex_digest() : sha.hex_digest();
    const std::string& expected = fast ? record.xxh3 : record.sha256;
    if (check.actual_digest != expected) {
        check.status = ShardStatus::hash_mismatch;
        check.detail = "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() + ": " +
                       (fast ? "xxh3 " : "sha256 ") + check.actual_digest.substr(0, 16) +
                       "... differs from the manifest's " + expected.substr(0, 16) + "... (the shard is corrupt)";
        problem = Problem{ProblemKind::hash_mismatch, record.rank, record.path, check.detail};
        return check;
    }
    check.status = ShardStatus::ok;
    return check;
}

RankState read_reshard_target(const fs::path& source_dir, const Manifest& source, const TargetPlan& target)
{
    RankState state = empty_state(source, target.rank, target.offset, target.numel);
    fsutil::UniqueFd dirfd = fsutil::open_directory(source_dir);
    std::optional<OpenedShard> shard;
    int open_rank = -1;
    for (const CopyRun& run : target.runs) {
        if (run.numel == 0)
            continue;
        const ShardRecord* record = nullptr;
        for (const auto& s : source.shards)
            if (s.rank == run.source_rank)
                record = &s;
        if (!record)
            throw Error(ProblemKind::invalid_argument, "reshard plan names source rank " + std::to_string(run.source_rank) +
                                                           ", which the manifest lacks");
        if (open_rank != run.source_rank) {
            shard = open_or_throw(dirfd.get(), source_dir, source, *record);
            open_rank = run.source_rank;
        }
        for (const SafetensorsTensor& t : shard->header.tensors) {
            auto* into = static_cast<char*>(tensor_destination(state, t.name));
            if (!into)
                continue;
            const uint64_t esize = t.name == "param" ? 2 : 4;
            const uint64_t at = shard->header.data_start() + t.begin + run.source_offset * esize;
            if (!fsutil::read_exact(shard->fd.get(), into + run.target_offset * esize,
                                    static_cast<std::size_t>(run.numel * esize), at))
                throw read_error(source_dir, *record, at);
        }
    }
    return state;
}

} // namespace shardscope
