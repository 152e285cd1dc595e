#include "core/checkpoint/internal/shardfile.h"

#include "core/util/hashing.h"
#include "core/util/printable.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;

ShardOpenResult open_shard(const storage::Folder& folder, const Manifest& m, const ShardRecord& record)
{
    const fs::path& dir = folder.path;
    ShardOpenResult result;
    const std::string display = (dir / record.path).string();
    const std::string who = "rank " + std::to_string(record.rank) + ": " + display;
    auto failed = [&](ShardStatus status, ProblemKind kind, const std::string& message) {
        result.status = status;
        result.problem = {.kind = kind, .message = who + ": " + message, .path = record.path, .rank = record.rank};
        return std::move(result);
    };

    storage::OpenedObject file = folder.open(record.path);
    switch (file.status) {
    case fsutil::OpenStatus::ok: break;
    case fsutil::OpenStatus::missing:
        return failed(ShardStatus::missing, ProblemKind::missing_shard,
                      "the shard file does not exist (missing shard; the save did not finish or the file was deleted)");
    case fsutil::OpenStatus::outside:
        return failed(ShardStatus::invalid, ProblemKind::path_outside_checkpoint,
                      "the path leaves the checkpoint directory: " + file.reason);
    case fsutil::OpenStatus::not_regular:
    case fsutil::OpenStatus::unreadable: return failed(ShardStatus::unreadable, ProblemKind::unreadable, file.reason);
    }
    result.file_size = file.size;
    if (file.size < record.bytes)
        return failed(ShardStatus::size_mismatch, ProblemKind::partial_write,
                      "the file is " + std::to_string(file.size) + " bytes but the manifest records " +
                          std::to_string(record.bytes) + " (partial write: the file was truncated)");
    if (file.size > record.bytes)
        return failed(ShardStatus::size_mismatch, ProblemKind::size_mismatch,
                      "the file is " + std::to_string(file.size) + " bytes but the manifest records " +
                          std::to_string(record.bytes));
    OpenedShard shard;
    try {
        shard.header = read_safetensors_header(*file.reader, file.size, display, record.rank);
    } catch (const Error& e) {
        rethrow_remote(e);
        const bool unreadable = e.kind() == ProblemKind::unreadable;
        result.status = unreadable ? ShardStatus::unreadable : ShardStatus::invalid;
        result.problem = e.problem(); // its message already names the file and the rank
        result.problem.path = record.path;
        return result;
    }
    const std::string param_dtype(to_string(m.param_dtype));
    for (const auto& [name, dtype] : {std::pair<const char*, std::string>{"param", param_dtype},
                                      {"master", "F32"},
                                      {"exp_avg", "F32"},
                                      {"exp_avg_sq", "F32"}}) {
        const SafetensorsTensor* t = shard.header.find(name);
        if (!t)
            return failed(ShardStatus::invalid, ProblemKind::invalid_shard,
                          std::string("the file has no '") + name + "' tensor");
        if (t->dtype != dtype || t->shape != std::vector<uint64_t>{record.param_shard_numel})
            return failed(ShardStatus::invalid, ProblemKind::invalid_shard,
                          std::string("tensor '") + name + "' is " + t->dtype + " with " +
                              std::to_string(t->shape.size()) + " dimension(s), expected 1-D " + dtype + " of " +
                              std::to_string(record.param_shard_numel) + " elements");
    }
    shard.size = file.size;
    shard.file = std::move(file.reader);
    result.status = ShardStatus::pending;
    result.shard = std::move(shard);
    return result;
}

void ensure_state_fits_in_memory(uint64_t numel, const fs::path& what)
{
    constexpr uint64_t kBytesPerElement = 2 + 3 * 4;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0)
        return; // unknown: let the allocation decide
    const uint64_t memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
    uint64_t needed = 0;
    const bool overflow = __builtin_mul_overflow(numel, kBytesPerElement, &needed);
    if (overflow || needed > memory)
        throw Error(ProblemKind::io_error,
                    what.string() + ": loading " + std::to_string(numel) + " parameters needs " +
                        (overflow ? std::string("more than 16 EiB") : human_bytes(needed)) +
                        " of memory for parameters and optimizer state, more than this machine's " +
                        human_bytes(memory),
                    what.string());
}

RankState empty_rank_state(const Manifest& m, int rank, uint64_t offset, uint64_t numel)
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

char* tensor_destination(RankState& state, std::string_view name)
{
    if (name == "param")
        return reinterpret_cast<char*>(state.param.data());
    if (name == "master")
        return reinterpret_cast<char*>(state.master.data());
    if (name == "exp_avg")
        return reinterpret_cast<char*>(state.exp_avg.data());
    if (name == "exp_avg_sq")
        return reinterpret_cast<char*>(state.exp_avg_sq.data());
    return nullptr;
}

Error read_failure(const fs::path& dir, const ShardRecord& record, uint64_t at)
{
    return Error(ProblemKind::unreadable,
                 "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() +
                     ": read failed at byte " + std::to_string(at) + ": " +
                     (errno ? std::strerror(errno) : "the file shrank while being read"),
                 record.path, record.rank);
}

std::string digest_mismatch(const fs::path& dir, const ShardRecord& record, std::string_view algorithm,
                            const std::string& actual, const std::string& expected)
{
    return "rank " + std::to_string(record.rank) + ": " + (dir / record.path).string() + ": " + std::string(algorithm) +
        " " + actual.substr(0, 16) + "... differs from the manifest's " + expected.substr(0, 16) +
        "... (the shard is corrupt)";
}

std::string rank_shard_header(int rank, int world_size, ParamDtype dtype, uint64_t offset, uint64_t n)
{
    // Element sizes are 2 and 4 and n <= 2^53 (manifest limit), so none of these products overflow.
    std::vector<SafetensorsTensor> layout;
    uint64_t cursor = 0;
    for (const auto& [name, type, size] :
         {std::tuple<const char*, std::string, uint64_t>{"param", std::string(to_string(dtype)), 2},
          {"master", "F32", 4},
          {"exp_avg", "F32", 4},
          {"exp_avg_sq", "F32", 4}}) {
        layout.push_back({name, type, {n}, cursor, cursor + n * size});
        cursor += n * size;
    }
    return make_safetensors_header(layout,
                                   {{"format", "shardscope"},
                                    {"rank", std::to_string(rank)},
                                    {"world_size", std::to_string(world_size)},
                                    {"param_shard_offset", std::to_string(offset)},
                                    {"param_shard_numel", std::to_string(n)}});
}

struct ShardFileWriter::Impl {
    int dirfd = -1;
    std::string name, tmp, display, where;
    int rank = 0;
    WriteOptions options;
    fsutil::UniqueFd fd;
    Sha256 sha;
    Xxh3 xxh;
    uint64_t written = 0;
    bool finished = false;

    [[noreturn]] void io_failure(const std::string& what) const
    {
        throw Error(ProblemKind::io_error, where + ": " + what + ": " + std::strerror(errno), display, rank);
    }
};

ShardFileWriter::ShardFileWriter(int dirfd, const fs::path& dir, int rank, const WriteOptions& options,
                                 std::string name)
    : m_impl(std::make_unique<Impl>())
{
    Impl& d = *m_impl;
    d.dirfd = dirfd;
    d.rank = rank;
    d.options = options;
    d.name = name.empty() ? "rank" + std::to_string(rank) + ".safetensors" : std::move(name);
    d.tmp = d.name + ".tmp";
    d.display = (dir / d.name).string();
    d.where = d.display + " (rank " + std::to_string(rank) + ")";
    // A stale tmp from a crashed save is removed, then O_EXCL | O_NOFOLLOW: never write through a
    // symlink someone planted in its place.
    fsutil::unlink_at(dirfd, d.tmp);
    d.fd = fsutil::create_exclusive(dirfd, d.tmp);
    if (!d.fd)
        d.io_failure("cannot create " + d.tmp);
}

ShardFileWriter::~ShardFileWriter()
{
    if (!m_impl->finished) {
        m_impl->fd = fsutil::UniqueFd();
        fsutil::unlink_at(m_impl->dirfd, m_impl->tmp);
    }
}

void ShardFileWriter::write(const void* data, std::size_t size)
{
    constexpr std::size_t kWriteChunk = 8u << 20;
    Impl& d = *m_impl;
    const auto* bytes = static_cast<const char*>(data);
    for (std::size_t at = 0; at < size; at += kWriteChunk) {
        if (d.options.cancel && d.options.cancel->load(std::memory_order_relaxed))
            throw Error(ProblemKind::cancelled, d.where + ": cancelled", d.display, d.rank);
        const std::size_t n = std::min(kWriteChunk, size - at);
        // Hash the bytes as they go out: what was just written is never read back.
        d.sha.update(bytes + at, n);
        d.xxh.update(bytes + at, n);
        if (!fsutil::write_all(d.fd.get(), bytes + at, n))
            d.io_failure("write failed");
        if (d.options.durable) // the disk works while the next chunk is hashed
            fsutil::start_writeback(d.fd.get(), d.written, n);
        d.written += n;
        if (d.options.progress)
            d.options.progress(d.written);
    }
}

ShardRecord ShardFileWriter::finish(uint64_t param_shard_offset, uint64_t param_shard_numel)
{
    Impl& d = *m_impl;
    if (d.options.durable)
        fsutil::fsync_or_throw(d.fd.get(), d.display + ".tmp");
    d.fd = fsutil::UniqueFd();
    if (!fsutil::rename_at(d.dirfd, d.tmp, d.name))
        d.io_failure("cannot rename " + d.tmp + " into place");
    d.finished = true;
    ShardRecord record;
    record.rank = d.rank;
    record.path = d.name;
    record.sha256 = d.sha.hex_digest();
    record.xxh3 = d.xxh.hex_digest();
    record.bytes = d.written;
    record.param_shard_offset = param_shard_offset;
    record.param_shard_numel = param_shard_numel;
    return record;
}

} // namespace shardscope
