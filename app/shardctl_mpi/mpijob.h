#pragma once
// The MPI side of shardctl-mpi, kept out of the core: who owns which checkpoint ranks, agreeing
// on success or the first failure, gathering shard records to the coordinator, and computing the
// sharding-independent digests by streaming every rank's flat vectors to process 0 in order.

#include "core/checkpoint/load.h"

#include <optional>
#include <string>
#include <vector>

namespace shardctl_mpi {

// An error every process agreed on (so every process exits with it, and MPI finalizes cleanly);
// any other exception reaching main() came from one process alone and aborts the job.
class AgreedError : public shardscope::Error {
public:
    explicit AgreedError(shardscope::Problem problem) : Error(std::move(problem)) {}
};

class MpiJob {
public:
    MpiJob(int* argc, char*** argv); // MPI_Init
    ~MpiJob(); // MPI_Finalize
    MpiJob(const MpiJob&) = delete;
    MpiJob& operator=(const MpiJob&) = delete;

    int rank() const { return m_rank; }
    int size() const { return m_size; }
    bool coordinator() const { return m_rank == 0; }

    // Checkpoint ranks this process handles when the job has `world` of them: r, r+P, r+2P, ...
    std::vector<int> owned_ranks(int world) const;

    // Collective: every process learns the failure of the lowest failing process (kind, rank,
    // path and message), or nullopt when all succeeded. agree_or_throw throws it as an Error on
    // every process, so all of them exit with the same message and status.
    std::optional<shardscope::Problem> agree(const std::optional<shardscope::Problem>& local);
    void agree_or_throw(const std::optional<shardscope::Problem>& local);

    // Collective: every process's strings, concatenated in process order, on process 0 (empty
    // elsewhere).
    std::vector<std::string> gather_strings(const std::vector<std::string>& local);
    // Collective: process 0's string on every process.
    std::string broadcast(std::string text);

    void allreduce_sum(std::vector<int64_t>& values);
    double max_over_processes(double value);
    void barrier();

    // Collective: the digests of the flat vectors of `world` ranks, where this process holds the
    // ranks owned_ranks(world) (in that order) in `mine`. Only process 0's result is meaningful.
    shardscope::StateDigests flat_digests(const std::vector<shardscope::RankState>& mine, int world);

private:
    int m_rank = 0;
    int m_size = 1;
};

// Runs `work`, turning an exception into the Problem to agree on.
template <typename F>
std::optional<shardscope::Problem> attempt(F&& work)
{
    try {
        work();
        return std::nullopt;
    } catch (const shardscope::Error& e) {
        return e.problem();
    } catch (const std::exception& e) {
        return shardscope::Problem{.kind = shardscope::ProblemKind::io_error,
                                   .message = std::string("internal error: ") + e.what()};
    }
}

std::string record_to_json(const shardscope::ShardRecord& record);
shardscope::ShardRecord record_from_json(const std::string& text);

} // namespace shardctl_mpi
