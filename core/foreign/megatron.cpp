// Megatron-LM checkpoints: latest_checkpointed_iteration.txt -> iter_NNNNNNN/ with
// mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt (and distrib_optim.pt), or a DCP folder (torch_dist:
// megatron_dist.cpp checks what it saves beside the DCP files).

#include "core/foreign/megatron.h"

#include "core/foreign/dcp.h"
#include "core/foreign/internal/common.h"
#include "core/foreign/internal/megatron_dist.h"
#include "core/foreign/internal/torch_files.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;
using namespace foreign; // the helpers shared by the torch-archive formats (internal/torch_files.h)

namespace {

// Megatron's name for a rank's folder: mp_rank_TT, then _PPP and _EEE where the run has them.
std::string rank_folder_name(int tensor, std::optional<int> stage, std::optional<int> expert)
{
    std::string name = "mp_rank_" + two_digits(tensor);
    for (const std::optional<int>& index : {stage, expert})
        if (index) {
            char buffer[16];
            std::snprintf(buffer, sizeof buffer, "_%03d", *index);
            name += buffer;
        }
    return name;
}

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
                    const std::string name = found != folder.end()
                        ? found->second
                        : rank_folder_name(t, indices > 1 ? std::optional(s) : std::nullopt,
                                           indices > 2 ? std::optional(e) : std::nullopt);
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

// The parallel sizes in the saved args against the folders: a rank folder that was never written
// has no name to be missed by, but the args of the others say it should be there. The args of a
// file that verified are taken, the first such. Rows say the sizes Megatron ran with; every
// shard's rank is its place in that grid; folders the args leave no room for, and files whose
// args disagree, are problems. Layouts the sizes do not name alone (a multimodal encoder's own
// stages, experts at another tensor-parallel degree) are left to the names.
void check_saved_sizes(const std::vector<MegatronArgs>& args, VerifyReport& report,
                       std::vector<std::pair<std::string, std::string>>& rows)
{
    std::size_t first = args.size();
    for (std::size_t i = 0; i < args.size() && first == args.size(); ++i)
        if (args[i].sizes() && report.shards[i].status == ShardStatus::ok)
            first = i;
    for (std::size_t i = 0; i < args.size() && first == args.size(); ++i)
        if (args[i].sizes())
            first = i;
    if (first == args.size())
        return; // no usable args: the names are all there is
    const MegatronArgs& saved = args[first];
    const std::string said_by = report.shards[first].path;
    const int64_t tp = saved.tensor_parallel.value_or(1), pp = saved.pipeline_parallel.value_or(1),
                  ep = saved.expert_parallel.value_or(1);
    if (saved.encoder_pipeline.value_or(0) > 0 || (ep > 1 && saved.expert_tensor_parallel.value_or(tp) != tp))
        return;
    const auto sizes_text = [](int64_t t, int64_t p, int64_t e) {
        return "tensor-parallel size " + std::to_string(t) + ", pipeline-parallel size " + std::to_string(p) +
            (e > 1 ? ", expert-parallel size " + std::to_string(e) : std::string());
    };
    const std::string said = sizes_text(tp, pp, ep);
    std::vector<Problem> found;
    std::size_t disagreeing = 0;
    for (std::size_t i = 0; i < args.size(); ++i)
        if (args[i].sizes() &&
            (args[i].tensor_parallel.value_or(1) != tp || args[i].pipeline_parallel.value_or(1) != pp ||
             args[i].expert_parallel.value_or(1) != ep) &&
            disagreeing++ < 20)
            found.push_back({.kind = ProblemKind::world_size_mismatch,
                             .message = (report.dir / report.shards[i].path).string() + ": its args say " +
                                 sizes_text(args[i].tensor_parallel.value_or(1), args[i].pipeline_parallel.value_or(1),
                                            args[i].expert_parallel.value_or(1)) +
                                 ", " + said_by + "'s " + said,
                             .path = report.shards[i].path});
    if (tp * pp * ep > kMaxWorldSize)
        return;
    // The folders Megatron names for these sizes (mp_rank_TT, then _PPP and _EEE where above 1),
    // each with its rank in the grid.
    std::map<std::string, int> expected;
    for (int64_t t = 0; t < tp; ++t)
        for (int64_t s = 0; s < pp; ++s)
            for (int64_t e = 0; e < ep; ++e) {
                expected.emplace(rank_folder_name(int(t), pp > 1 ? std::optional(int(s)) : std::nullopt,
                                                  ep > 1 ? std::optional(int(e)) : std::nullopt),
                                 int((t * pp + s) * ep + e));
            }
    // What the names implied and the args do not: an absent folder outside their grid is not
    // missing, one there is a folder too many.
    std::set<std::string> dropped;
    std::vector<ShardCheck> shards;
    std::size_t beyond = 0;
    for (ShardCheck& c : report.shards) {
        const std::string folder = c.path.substr(0, c.path.find('/'));
        const auto place = expected.find(folder);
        if (place != expected.end()) {
            c.rank = place->second;
            shards.push_back(std::move(c));
        } else if (c.status == ShardStatus::missing) {
            dropped.insert(c.path);
        } else {
            if (beyond++ < 20)
                found.push_back({.kind = ProblemKind::world_size_mismatch,
                                 .message = (report.dir / c.path).string() +
                                     ": no such rank for the sizes the args of " + said_by + " give (" + said + ")",
                                 .path = c.path});
            c.rank = -1;
            shards.push_back(std::move(c));
        }
    }
    std::set<std::string> present;
    for (const ShardCheck& c : shards)
        present.insert(c.path);
    std::size_t missing = 0;
    for (const auto& [folder, rank] : expected) {
        std::vector<std::string> files = {folder + "/model_optim_rng.pt"};
        if (saved.distributed_optimizer) // the distributed optimizer's shards, beside each rank's model
            files.push_back(folder + "/distrib_optim.pt");
        for (const std::string& path : files) {
            if (present.contains(path))
                continue;
            shards.push_back({.rank = rank,
                              .path = path,
                              .status = ShardStatus::missing,
                              .detail = "missing (the args say " + said + ")"});
            if (missing++ < 20)
                found.push_back({.kind = ProblemKind::missing_shard,
                                 .message = "rank " + std::to_string(rank) + ": " + (report.dir / path).string() +
                                     ": missing (the args of " + said_by + " say " + said +
                                     (path.ends_with("distrib_optim.pt") ? ", with the distributed optimizer" : "") +
                                     ")",
                                 .path = path,
                                 .rank = rank});
        }
    }
    if (missing > 20)
        found.push_back({.kind = ProblemKind::missing_shard,
                         .message = report.dir.string() + ": " + std::to_string(missing - 20) +
                             " more rank files the args name are missing"});
    std::stable_sort(shards.begin(), shards.end(),
                     [](const ShardCheck& a, const ShardCheck& b) { return a.rank < b.rank; });
    report.shards = std::move(shards);
    // The problems the names gave stay, but for folders the args do not expect, and carry the
    // ranks of the args' grid.
    std::erase_if(report.problems, [&](const Problem& p) { return dropped.contains(p.path); });
    for (Problem& p : report.problems)
        if (const auto place = expected.find(p.path.substr(0, p.path.find('/'))); place != expected.end())
            p.rank = place->second;
    for (Problem& p : found) // said with the rank they are about, as every rank file's problem is
        if (p.rank < 0)
            if (const auto place = expected.find(p.path.substr(0, p.path.find('/'))); place != expected.end()) {
                p.rank = place->second;
                p.message = "rank " + std::to_string(p.rank) + ": " + p.message;
            }
    report.problems.insert(report.problems.end(), found.begin(), found.end());
    // The sizes Megatron ran with replace those read from the names (a second index alone could
    // be a stage or an expert rank).
    for (auto& [key, value] : rows) {
        if (key == "tensor-parallel size")
            value = std::to_string(tp);
        else if (key == "pipeline-parallel size")
            value = std::to_string(pp);
    }
    std::erase_if(rows, [](const auto& kv) { return kv.first == "expert-parallel size"; });
    if (ep > 1)
        rows.push_back({"expert-parallel size", std::to_string(ep)});
    if (saved.virtual_pipeline)
        rows.push_back({"virtual pipeline size", std::to_string(*saved.virtual_pipeline)});
    rows.push_back({"sizes from", "the saved args (" + said_by + ")"});
    report.foreign->world_size = tp * pp * ep;
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
        else {
            std::vector<MegatronArgs> args;
            check_archives(listed, report, inner, ProblemKind::missing_shard, check_data, &args);
            check_saved_sizes(args, report, rows);
        }
        rows.push_back({"tensors", std::to_string(report.foreign->tensors_total)});
    }
    report.problems.insert(report.problems.begin(), found.begin(), found.end());
    as_megatron(report);
    return report;
}

} // namespace shardscope
