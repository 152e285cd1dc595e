// Megatron-LM checkpoints: latest_checkpointed_iteration.txt -> iter_NNNNNNN/ with
// mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt (and distrib_optim.pt), or a DCP folder (torch_dist:
// megatron_dist.cpp checks what it saves beside the DCP files).

#include "core/foreign/megatron.h"

#include "core/foreign/dcp.h"
#include "core/foreign/internal/common.h"
#include "core/foreign/internal/megatron_dist.h"
#include "core/foreign/internal/torch_files.h"
#include "core/util/fsutil.h"

#include <array>
#include <cstdio>
#include <map>
#include <optional>

namespace shardscope {

namespace fs = std::filesystem;
using namespace foreign; // the helpers shared by the torch-archive formats (internal/torch_files.h)

namespace {

// The per-rank layout: mp_rank_TT folders, and with pipeline stages or expert-parallel ranks
// mp_rank_TT_PPP, mp_rank_TT_EEE or mp_rank_TT_PPP_EEE (Megatron adds each index when its size is
// above 1: a second index alone is a stage or an expert rank, which the name does not tell), each
// with model_optim_rng.pt and, with Megatron's distributed optimizer, distrib_optim.pt.
struct RankFolders {
    std::map<std::array<int, 3>, std::string> folder; // (tp, second, third) -> its name
    std::array<int, 3> size{0, 0, 0};
    int indices = 1; // how many indices the names carry

    // Every file the ranks of the full grid should have, with its rank: a folder that is absent
    // is named as Megatron would have named it, so that it is reported missing.
    std::vector<std::pair<int, std::string>> files(const storage::Folder& listed) const
    {
        std::vector<std::pair<int, std::string>> out;
        for (int t = 0; t < size[0]; ++t)
            for (int s = 0; s < size[1]; ++s)
                for (int e = 0; e < size[2]; ++e) {
                    const auto found = folder.find({t, s, e});
                    std::string name = found != folder.end() ? found->second : "mp_rank_" + two_digits(t);
                    for (int i = 1; found == folder.end() && i < indices; ++i) {
                        char buffer[16];
                        std::snprintf(buffer, sizeof buffer, "_%03d", i == 1 ? s : e);
                        name += buffer;
                    }
                    const int rank = (t * size[1] + s) * size[2] + e;
                    out.push_back({rank, name + "/model_optim_rng.pt"});
                    if (found != folder.end() && listed.exists(name + "/distrib_optim.pt"))
                        out.push_back({rank, name + "/distrib_optim.pt"});
                }
        return out;
    }
};

RankFolders collect_rank_folders(const std::vector<std::string>& names)
{
    RankFolders out;
    for (const auto& n : names) {
        std::size_t p = 0;
        if (!eat(n, p, "mp_rank_"))
            continue;
        std::array<int, 3> at{0, 0, 0};
        int count = 0;
        bool named = true;
        do {
            if (count > 0 && !eat(n, p, "_"))
                named = false;
            else if ((at[count] = digits(n, p)) < 0)
                named = false;
            else
                ++count;
        } while (named && count < 3 && p < n.size());
        if (!named || p != n.size())
            continue;
        out.folder[at] = n;
        out.indices = std::max(out.indices, count);
        for (int i = 0; i < 3; ++i)
            out.size[i] = std::max(out.size[i], at[i] + 1);
    }
    return out;
}

// --ckpt-format torch_dist writes metadata.json naming its backend; torch_dcp (plain DCP) none.
std::string dcp_layout_row(const std::optional<MegatronCheckpointConfig>& config, bool has_metadata_json)
{
    if (config && config->sharded_backend == "torch_dist")
        return "torch_dist (DCP .metadata + __<rank>_<n>.distcp, common.pt)";
    if (config)
        return "distributed checkpoint (sharded_backend " + config->sharded_backend + ")";
    return has_metadata_json ? "distributed checkpoint (metadata.json unusable)"
                             : "distributed checkpoint (DCP, no metadata.json)";
}

} // namespace

VerifyReport verify_megatron(const storage::Folder& listed, const VerifyOptions& options, bool check_data)
{
    const fs::path& dir = listed.path;
    const std::vector<std::string>& names = listed.names;
    std::vector<std::pair<std::string, std::string>> rows = {{"format", "megatron"}};
    std::vector<Problem> found; // before the layout's checks: metadata.json
    std::optional<MegatronCheckpointConfig> config;
    if (listed.has("metadata.json")) {
        const std::string display = (dir / "metadata.json").string();
        try {
            config = parse_megatron_metadata_json(listed.read_small("metadata.json", kMaxMegatronJsonBytes, display),
                                                  display);
            for (const auto& [key, value] : config->fields)
                rows.push_back({"metadata.json " + key, value});
        } catch (const Error& e) {
            rethrow_remote(e);
            if (e.kind() == ProblemKind::remote_error)
                throw;
            Problem p = e.problem();
            p.path = "metadata.json";
            found.push_back(std::move(p));
            rows.push_back({"metadata.json", "unusable"});
        }
    }
    // The summary a viewer gets before the files are checked already says Megatron, with the rows
    // known by then.
    auto as_megatron = [&rows](VerifyReport& report) {
        report.format = "megatron";
        if (!report.foreign)
            report.foreign.emplace();
        auto& existing = report.foreign->rows;
        if (!existing.empty() && existing.front().first == "format")
            existing.erase(existing.begin());
        existing.insert(existing.begin(), rows.begin(), rows.end());
    };
    VerifyOptions inner = options;
    if (options.callbacks.files_listed)
        inner.callbacks.files_listed = [&](const VerifyReport& so_far) {
            VerifyReport shown = so_far;
            as_megatron(shown);
            options.callbacks.files_listed(shown);
        };
    VerifyReport report;
    if (listed.has(".metadata")) {
        rows.push_back({"layout", dcp_layout_row(config, listed.has("metadata.json"))});
        report = verify_dcp(listed, inner, check_data);
        // Even when .metadata cannot be decoded: integrity.json may then say which file changed.
        check_common_pt(listed, report, options, check_data, config && config->common_backend == "torch");
        check_integrity_json(listed, report, options, check_data);
    } else {
        rows.push_back({"layout", "per-rank mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt"});
        report.dir = dir;
        report.foreign.emplace();
        const RankFolders ranks = collect_rank_folders(names);
        // Rank numbers come from folder names, which anyone can write: the grid they imply is
        // enumerated only up to a sane size, else reported as one problem.
        uint64_t grid = uint64_t(ranks.size[0]);
        const bool implausible = __builtin_mul_overflow(grid, uint64_t(ranks.size[1]), &grid) ||
            __builtin_mul_overflow(grid, uint64_t(ranks.size[2]), &grid) || grid > uint64_t(kMaxWorldSize);
        if (!implausible)
            for (const auto& [rank, file] : ranks.files(listed))
                report.shards.push_back(ShardCheck{.rank = rank, .path = file});
        rows.push_back({"tensor-parallel size", std::to_string(ranks.size[0])});
        // Two indices are a stage or an expert rank; stages are by far the commoner (docs say so).
        rows.push_back({"pipeline-parallel size", std::to_string(ranks.size[1])});
        if (ranks.indices == 3)
            rows.push_back({"expert-parallel size", std::to_string(ranks.size[2])});
        if (!implausible)
            report.foreign->world_size = int64_t(grid);
        if (implausible)
            report.problems.push_back({.kind = ProblemKind::missing_shard,
                                       .message = dir.string() + ": the mp_rank folder names imply " +
                                           std::to_string(ranks.size[0]) + " x " + std::to_string(ranks.size[1]) +
                                           " x " + std::to_string(ranks.size[2]) + " ranks, more than the " +
                                           std::to_string(kMaxWorldSize) +
                                           " ShardScope checks: a folder name carries an implausible rank number"});
        else if (report.shards.empty())
            report.problems.push_back({.kind = ProblemKind::missing_shard,
                                       .message = dir.string() + ": no .metadata and no mp_rank_XX folders"});
        else
            check_archives(listed, report, inner, ProblemKind::missing_shard, check_data);
        rows.push_back({"tensors", std::to_string(report.foreign->tensors_total)});
    }
    report.problems.insert(report.problems.begin(), found.begin(), found.end());
    as_megatron(report);
    return report;
}

} // namespace shardscope
