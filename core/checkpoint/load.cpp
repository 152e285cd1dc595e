// Loading: every invariant checked, every shard read once, its bytes hashed as they land in the
// returned vectors, so memory is the state itself plus nothing that grows with the checkpoint.

#include "core/checkpoint/load.h"
#include "core/checkpoint/directory.h"
#include "core/util/hashing.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"
#include "core/checkpoint/internal/shardfile.h"

#include <fcntl.h>
#include <memory>

namespace shardscope {

namespace fs = std::filesystem;

RankState read_rank_state(const storage::Folder& folder, const Manifest& m, const ShardRecord& record,
                          const ReadStep& step, std::vector<std::string>* unread)
{
    const fs::path& dir = folder.path;
    ShardOpenResult opened = open_shard(folder, m, record);
    if (!opened.shard)
        throw Error(opened.problem);
    const OpenedShard& shard = *opened.shard;
    if (shard.file->fd() >= 0)
        ::posix_fadvise(shard.file->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    ensure_state_fits_in_memory(record.param_shard_numel, dir / record.path);
    RankState state = empty_rank_state(m, record.rank, record.param_shard_offset, record.param_shard_numel);

    Sha256 sha;
    uint64_t done = 0;
    std::unique_ptr<char[]> scratch; // for bytes that are hashed but not kept
    // Reads [offset, offset + size) into `destination` (or the scratch buffer), hashing it.
    auto read = [&](uint64_t offset, char* destination, uint64_t size) {
        for (uint64_t at = 0; at < size;) {
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(kReadChunk, size - at));
            if (!destination && !scratch)
                scratch = std::make_unique<char[]>(kReadChunk);
            char* into = destination ? destination + at : scratch.get();
            if (!shard.file->read(into, n, offset + at))
                throw read_failure(dir, record, offset + at);
            sha.update(into, n);
            at += n;
            done += n;
            if (step && !step(done, shard.size))
                throw Error(ProblemKind::cancelled, (dir / record.path).string() + ": load cancelled", record.path,
                            record.rank);
        }
    };
    // The header's tensors are sorted by offset and tile the data, so reading the header and then
    // the tensors in order hashes the whole file in order. A tensor some other writer added is
    // hashed and not kept, and said so.
    read(0, nullptr, shard.header.data_start());
    std::vector<std::string> dropped;
    for (const SafetensorsTensor& t : shard.header.tensors) {
        if (!state_vector_from_string(t.name))
            dropped.push_back(t.name);
        read(shard.header.data_start() + t.begin, tensor_destination(state, t.name), t.bytes());
    }
    const std::string actual = sha.hex_digest();
    if (actual != record.sha256)
        throw Error(ProblemKind::hash_mismatch, digest_mismatch(dir, record, "sha256", actual, record.sha256),
                    record.path, record.rank);
    if (!dropped.empty() && !unread) {
        std::string names;
        for (const auto& name : dropped)
            names += (names.empty() ? "'" : ", '") + printable(name, 200) + "'";
        throw Error(ProblemKind::unread_state,
                    (dir / record.path).string() + " (rank " + std::to_string(record.rank) + ") holds " + names +
                        " besides param, master, exp_avg and exp_avg_sq; a load keeps only those four, so it would "
                        "drop this state (--allow-partial-state, allow_partial_state=True in Python, goes on "
                        "without it)",
                    record.path, record.rank);
    }
    for (const auto& name : dropped)
        unread->push_back("rank " + std::to_string(record.rank) + ": tensor '" + printable(name, 200) + "'");
    return state;
}

LoadedCheckpoint load_sharded(const fs::path& path, int expected_world_size, const LoadOptions& options)
{
    LoadedCheckpoint loaded;
    loaded.dir = resolve_checkpoint_dir(path);
    const fs::path& dir = loaded.dir;
    const storage::Folder folder(fsutil::open_listed(dir));
    if (!folder.has("manifest.json"))
        throw Error(missing_manifest_problem(folder.names, dir));
    loaded.manifest = read_manifest(dir);
    const Manifest& m = loaded.manifest;
    const auto problems = check_manifest(m, expected_world_size, (dir / "manifest.json").string());
    if (!problems.empty())
        throw Error(problems.front());

    ensure_state_fits_in_memory(m.param_numel_total, dir); // every rank is held at once
    uint64_t total = 0;
    for (const auto& s : m.shards)
        total += s.bytes;
    std::atomic<uint64_t> all_done{0};

    loaded.ranks.resize(m.shards.size());
    std::vector<std::optional<Error>> errors(m.shards.size());
    std::vector<std::vector<std::string>> unread(m.shards.size()); // by rank
    parallel_for(m.shards.size(), options.threads, [&](std::size_t i) {
        const ShardRecord& record = m.shards[i];
        uint64_t reported = 0;
        auto step = [&](uint64_t done, uint64_t) {
            const uint64_t now = all_done += done - reported;
            reported = done;
            if (options.progress)
                options.progress(now, total);
            return !(options.cancel && options.cancel->load(std::memory_order_relaxed));
        };
        try {
            loaded.ranks[static_cast<std::size_t>(record.rank)] =
                read_rank_state(folder, m, record, step, options.allow_unread_state ? &unread[record.rank] : nullptr);
        } catch (const Error& e) {
            errors[static_cast<std::size_t>(record.rank)] = e;
        }
    });
    for (auto& e : errors) // the lowest failing rank speaks for the checkpoint
        if (e)
            throw *e;
    for (auto& names : unread)
        loaded.unread.insert(loaded.unread.end(), names.begin(), names.end());
    return loaded;
}

void FlatStateHasher::add(const RankState& s)
{
    add_bytes(param, s.param.data(), s.param.size() * sizeof(uint16_t));
    add_bytes(master, s.master.data(), s.master.size() * sizeof(float));
    add_bytes(exp_avg, s.exp_avg.data(), s.exp_avg.size() * sizeof(float));
    add_bytes(exp_avg_sq, s.exp_avg_sq.data(), s.exp_avg_sq.size() * sizeof(float));
}

void FlatStateHasher::add_bytes(Vector vector, const void* data, std::size_t size)
{
    m_sha[vector].update(data, size);
}

StateDigests FlatStateHasher::finish()
{
    return {m_sha[param].hex_digest(), m_sha[master].hex_digest(), m_sha[exp_avg].hex_digest(),
            m_sha[exp_avg_sq].hex_digest()};
}

StateDigests flat_state_digests(const std::vector<RankState>& ranks)
{
    FlatStateHasher hasher;
    for (const auto& r : ranks)
        hasher.add(r);
    return hasher.finish();
}

} // namespace shardscope
