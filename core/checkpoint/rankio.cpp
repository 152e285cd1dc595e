#include "core/checkpoint/rankio.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/internal/shardfile.h"

#include <map>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

OpenedShard open_or_throw(const storage::Folder& folder, const Manifest& m, const ShardRecord& record)
{
    ShardOpenResult opened = open_shard(folder, m, record);
    if (!opened.shard)
        throw Error(opened.problem);
    return std::move(*opened.shard);
}

} // namespace

RankState load_rank_shard(const fs::path& dir, const Manifest& m, const ShardRecord& record)
{
    return read_rank_state(storage::Folder(fsutil::open_listed(dir)), m, record);
}

ShardCheck check_rank_shard(const fs::path& dir, const Manifest& m, const ShardRecord& record, bool fast,
                            std::optional<Problem>& problem)
{
    return check_shard(storage::Folder(fsutil::open_listed(dir)), m, record, fast, problem);
}

VerifyReport gathered_verify_report(const fs::path& dir, const Manifest& m, std::vector<ShardCheck> checks,
                                    const std::optional<Problem>& problem, bool fast, double seconds)
{
    std::map<int, ShardCheck> by_rank;
    for (ShardCheck& check : checks)
        by_rank.emplace(check.rank, std::move(check));
    VerifyReport report{.dir = dir, .manifest = m, .fast = fast, .seconds = seconds};
    for (const ShardRecord& s : m.shards) {
        const auto found = by_rank.find(s.rank);
        report.shards.push_back(found != by_rank.end()
                                    ? found->second
                                    : ShardCheck{.rank = s.rank, .path = s.path, .expected_bytes = s.bytes});
    }
    report.leftover_tmp_files = leftover_tmp_files(fsutil::list_directory(fsutil::open_directory(dir).get()));
    if (problem)
        report.problems.push_back(*problem);
    return report;
}

RankState read_reshard_target(const fs::path& source_dir, const Manifest& source, const TargetPlan& target)
{
    RankState state = empty_rank_state(source, target.rank, target.offset, target.numel);
    const storage::Folder folder(fsutil::open_listed(source_dir));
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
            throw Error(ProblemKind::invalid_argument,
                        "reshard plan names source rank " + std::to_string(run.source_rank) +
                            ", which the manifest lacks");
        if (open_rank != run.source_rank) {
            shard = open_or_throw(folder, source, *record);
            open_rank = run.source_rank;
            refuse_dropped_state(source_dir, *record, shard->header);
        }
        for (const SafetensorsTensor& t : shard->header.tensors) {
            char* into = tensor_destination(state, t.name);
            if (!into)
                continue;
            const uint64_t esize = t.name == "param" ? 2 : 4;
            const uint64_t at = shard->header.data_start() + t.begin + run.source_offset * esize;
            if (!shard->file->read(into + run.target_offset * esize, static_cast<std::size_t>(run.numel * esize), at))
                throw read_failure(source_dir, *record, at);
        }
    }
    return state;
}

} // namespace shardscope
