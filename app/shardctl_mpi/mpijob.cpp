#include "app/shardctl_mpi/mpijob.h"

#include "core/checkpoint/manifest.h"
#include "core/checkpoint/verify_json.h"
#include "core/util/hashing.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

namespace shardctl_mpi {

using namespace shardscope;

namespace {

constexpr int kDigestTag = 17;
constexpr std::size_t kChunk = 64u << 20; // bytes per message: far below MPI's int count limit

void send_bytes(const void* data, std::size_t size, int to)
{
    const auto* p = static_cast<const char*>(data);
    for (std::size_t done = 0; done < size; done += kChunk)
        MPI_Send(p + done, static_cast<int>(std::min(kChunk, size - done)), MPI_BYTE, to, kDigestTag, MPI_COMM_WORLD);
}

void receive_into(FlatStateHasher& hasher, FlatStateHasher::Vector vector, std::size_t size, int from,
                  std::vector<char>& buffer)
{
    for (std::size_t done = 0; done < size; done += kChunk) {
        const auto n = std::min(kChunk, size - done);
        buffer.resize(n);
        MPI_Recv(buffer.data(), static_cast<int>(n), MPI_BYTE, from, kDigestTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        hasher.add_bytes(vector, buffer.data(), n);
    }
}

} // namespace

MpiJob::MpiJob(int* argc, char*** argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
}

MpiJob::~MpiJob()
{
    MPI_Finalize();
}

std::vector<int> MpiJob::owned_ranks(int world) const
{
    std::vector<int> ranks;
    for (int r = m_rank; r < world; r += m_size)
        ranks.push_back(r);
    return ranks;
}

std::optional<Problem> MpiJob::agree(const std::optional<Problem>& local)
{
    int mine = local ? m_rank : m_size;
    int first = m_size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == m_size)
        return std::nullopt;
    nlohmann::json text;
    if (m_rank == first)
        text = problem_wire_json(*local);
    std::string wire = text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); // names need not be UTF-8
    int length = static_cast<int>(wire.size());
    MPI_Bcast(&length, 1, MPI_INT, first, MPI_COMM_WORLD);
    wire.resize(static_cast<std::size_t>(length));
    MPI_Bcast(wire.data(), length, MPI_CHAR, first, MPI_COMM_WORLD);
    return problem_from_wire_json(nlohmann::json::parse(wire));
}

void MpiJob::agree_or_throw(const std::optional<Problem>& local)
{
    if (auto problem = agree(local))
        throw AgreedError(std::move(*problem));
}

std::vector<std::string> MpiJob::gather_strings(const std::vector<std::string>& local)
{
    const std::string packed = nlohmann::json(local).dump();
    int length = static_cast<int>(packed.size());
    std::vector<int> lengths(static_cast<std::size_t>(m_size));
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> displacements(lengths.size(), 0);
    std::string all;
    if (m_rank == 0) {
        int total = 0;
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            displacements[i] = total;
            total += lengths[i];
        }
        all.resize(static_cast<std::size_t>(total));
    }
    MPI_Gatherv(packed.data(), length, MPI_CHAR, all.data(), lengths.data(), displacements.data(), MPI_CHAR, 0,
                MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (m_rank == 0)
        for (std::size_t i = 0; i < lengths.size(); ++i)
            for (auto& s : nlohmann::json::parse(
                     all.substr(static_cast<std::size_t>(displacements[i]), static_cast<std::size_t>(lengths[i]))))
                out.push_back(s.get<std::string>());
    return out;
}

std::string MpiJob::broadcast(std::string text)
{
    int length = static_cast<int>(text.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    text.resize(static_cast<std::size_t>(length));
    MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    return text;
}

void MpiJob::allreduce_sum(std::vector<int64_t>& values)
{
    MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
}

double MpiJob::max_over_processes(double value)
{
    double out = value;
    MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

void MpiJob::barrier()
{
    MPI_Barrier(MPI_COMM_WORLD);
}

StateDigests MpiJob::flat_digests(const std::vector<RankState>& mine, int world)
{
    // SHA-256 is sequential, so process 0 hashes every rank's vectors in rank order as they
    // arrive; the others send theirs in the same order (tags keep per-pair order, so a simple
    // blocking send suffices).
    FlatStateHasher hasher;
    std::vector<char> buffer;
    for (int r = 0; r < world; ++r) {
        const int owner = r % m_size;
        const std::size_t local_index = static_cast<std::size_t>(r / m_size);
        if (owner == 0 && m_rank == 0) {
            hasher.add(mine[local_index]);
        } else if (m_rank == owner) {
            const RankState& s = mine[local_index];
            uint64_t n = s.param.size();
            MPI_Send(&n, 1, MPI_UINT64_T, 0, kDigestTag, MPI_COMM_WORLD);
            send_bytes(s.param.data(), n * 2, 0);
            send_bytes(s.master.data(), n * 4, 0);
            send_bytes(s.exp_avg.data(), n * 4, 0);
            send_bytes(s.exp_avg_sq.data(), n * 4, 0);
        } else if (m_rank == 0) {
            uint64_t n = 0;
            MPI_Recv(&n, 1, MPI_UINT64_T, owner, kDigestTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            receive_into(hasher, FlatStateHasher::param, n * 2, owner, buffer);
            receive_into(hasher, FlatStateHasher::master, n * 4, owner, buffer);
            receive_into(hasher, FlatStateHasher::exp_avg, n * 4, owner, buffer);
            receive_into(hasher, FlatStateHasher::exp_avg_sq, n * 4, owner, buffer);
        }
    }
    return hasher.finish();
}

std::string record_to_json(const ShardRecord& r)
{
    return shard_record_json(r).dump(); // the manifest's own entry: no second spelling of its keys
}

ShardRecord record_from_json(const std::string& text)
{
    const auto j = nlohmann::json::parse(text);
    ShardRecord r;
    r.rank = j.at("rank").get<int>();
    r.path = j.at("path").get<std::string>();
    r.sha256 = j.at("sha256").get<std::string>();
    r.xxh3 = j.value("xxh3", std::string()); // shard_record_json leaves out an empty one
    r.bytes = j.at("bytes").get<uint64_t>();
    r.param_shard_offset = j.at("param_shard_offset").get<uint64_t>();
    r.param_shard_numel = j.at("param_shard_numel").get<uint64_t>();
    if (j.contains("health"))
        r.health = parse_health(j["health"], "rank record", r.rank);
    return r;
}

} // namespace shardctl_mpi
