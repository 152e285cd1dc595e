// Loading: every invariant checked, every shard read once, its bytes hashed as they land in the
// returned vectors, so memory is the state itself plus nothing that grows with the checkpoint.

#include "core/checkpoint.h"
#include "core/hashing.h"
#include "core/parallel.h"
#include "core/shardfile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

void read_into(const OpenedShard& shard, const ShardRecord& record, const fs::path& dir, uint64_t offset,
               char* destination, uint64_t size, Sha256& sha, const std::function<bool(uint64_t)>& step)
{
    uint64_t done = 0;
    while (done < size) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(kReadChunk, size - done));
        if (!fsutil::read_exact(shard.fd.get(), destination + done, n, offset + done))
            throw Error(ProblemKind::unreadable,
                        "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() +
                            ": read failed at byte " + std::to_string(offset + done) + ": " +
                            (errno ? std::strerror(errno) : "the file shrank while being read"),
                        record.path, record.rank);
        sha.update(destination + done, n);
        done += n;
        if (!step(n))
            throw Error(ProblemKind::cancelled, (dir / record.path).string() + ": load cancelled",
                        record.path, record.rank);
    }
}

RankState load_rank(int dirfd, const fs::path& dir, const Manifest& m, const ShardRecord& record,
                    const std::function<bool(uint64_t)>& step)
{
    ShardOpenResult opened = open_shard(dirfd, dir, m, record);
    if (!opened.shard)
        throw Error(opened.problem);
    const OpenedShard& shard = *opened.shard;
    ::posix_fadvise(shard.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);

    RankState state;
    state.rank = record.rank;
    state.dtype = m.param_dtype;
    state.param_shard_offset = record.param_shard_offset;
    const auto n = static_cast<std::size_t>(record.param_shard_numel);
    state.param.resize(n);
    state.master.resize(n);
    state.exp_avg.resize(n);
    state.exp_avg_sq.resize(n);

    Sha256 sha;
    std::string prefix(static_cast<std::size_t>(shard.header.data_start()), '\0');
    read_into(shard, record, dir, 0, prefix.data(), prefix.size(), sha, step);
    // The header's tensors are sorted by offset and tile the data, so reading them in order hashes
    // the whole file in order.
    for (const SafetensorsTensor& t : shard.header.tensors) {
        char* destination = nullptr;
        if (t.name == "param")
            destination = reinterpret_cast<char*>(state.param.data());
        else if (t.name == "master")
            destination = reinterpret_cast<char*>(state.master.data());
        else if (t.name == "exp_avg")
            destination = reinterpret_cast<char*>(state.exp_avg.data());
        else if (t.name == "exp_avg_sq")
            destination = reinterpret_cast<char*>(state.exp_avg_sq.data());
        if (destination) {
            read_into(shard, record, dir, shard.header.data_start() + t.begin, destination, t.bytes(), sha, step);
        } else { // an extra tensor some other writer added: hash it, keep nothing
            std::string scratch(static_cast<std::size_t>(std::min<uint64_t>(t.bytes(), kReadChunk)), '\0');
            for (uint64_t at = 0; at < t.bytes(); at += scratch.size()) {
                const uint64_t n_bytes = std::min<uint64_t>(scratch.size(), t.bytes() - at);
                read_into(shard, record, dir, shard.header.data_start() + t.begin + at, scratch.data(),
                          n_bytes, sha, step);
            }
        }
    }
    const std::string actual = sha.hex_digest();
    if (actual != record.sha256)
        throw Error(ProblemKind::hash_mismatch,
                    "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() +
                        ": sha256 " + actual.substr(0, 16) + "... differs from the manifest's " +
                        record.sha256.substr(0, 16) + "... (the shard is corrupt)",
                    record.path, record.rank);
    return state;
}

} // namespace

LoadedCheckpoint load_sharded(const fs::path& path, int expected_world_size, const LoadOptions& options)
{
    LoadedCheckpoint loaded;
    loaded.dir = resolve_checkpoint_dir(path);
    const fs::path& dir = loaded.dir;
    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    if (!fsutil::exists_at(dirfd.get(), "manifest.json"))
        throw Error(missing_manifest_problem(list_directory(dirfd.get()), dir));
    loaded.manifest = read_manifest(dir);
    const Manifest& m = loaded.manifest;
    const auto problems = check_manifest(m, expected_world_size, (dir / "manifest.json").string());
    if (!problems.empty())
        throw Error(problems.front());

    uint64_t total = 0;
    for (const auto& s : m.shards)
        total += s.bytes;
    std::atomic<uint64_t> done{0};
    auto step = [&](uint64_t n) {
        const uint64_t now = done += n;
        if (options.progress)
            options.progress(now, total);
        return !(options.cancel && options.cancel->load(std::memory_order_relaxed));
    };

    loaded.ranks.resize(m.shards.size());
    std::vector<std::optional<Error>> errors(m.shards.size());
    parallel_for(m.shards.size(), options.threads, [&](std::size_t i) {
        const ShardRecord& record = m.shards[i];
        try {
            loaded.ranks[static_cast<std::size_t>(record.rank)] = load_rank(dirfd.get(), dir, m, record, step);
        } catch (const Error& e) {
            errors[static_cast<std::size_t>(record.rank)] = e;
        }
    });
    for (auto& e : errors) // the lowest failing rank speaks for the checkpoint
        if (e)
            throw *e;
    return loaded;
}

} // namespace shardscope
