#include "core/report/report.h"
#include "core/report/document.h"

#include "core/checkpoint/verify_json.h"
#include "core/open/nearby.h"

#include "core/util/printable.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace shardscope {

namespace {
std::string rank_list(const std::vector<int>& ranks)
{
    std::string text;
    for (std::size_t i = 0; i < ranks.size() && i < 8; ++i)
        text += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 8)
        text += " and " + std::to_string(ranks.size() - 8) + " more";
    return text;
}

} // namespace

std::string_view to_string(FailureMode mode)
{
    return enum_name(mode, kFailureModeNames, "unknown");
}

FailureSummary classify_failure(const VerifyReport& report)
{
    FailureSummary summary;
    auto ranks_of = [&](std::initializer_list<ProblemKind> kinds) {
        std::set<int> ranks;
        bool any = false;
        for (const Problem& p : report.problems)
            if (std::find(kinds.begin(), kinds.end(), p.kind) != kinds.end()) {
                any = true;
                if (p.rank >= 0)
                    ranks.insert(p.rank);
            }
        summary.ranks.assign(ranks.begin(), ranks.end());
        return any;
    };
    auto first_message = [&](std::initializer_list<ProblemKind> kinds) -> std::string {
        for (const Problem& p : report.problems)
            if (std::find(kinds.begin(), kinds.end(), p.kind) != kinds.end())
                return p.message;
        return {};
    };
    // The verb agreeing with who(): ranks_of, in the conditions below, fills summary.ranks first.
    auto agree = [&](const char* one, const char* many) { return summary.ranks.size() > 1 ? many : one; };
    auto who = [&](const std::string& noun) {
        if (summary.ranks.empty())
            return noun;
        return (summary.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(summary.ranks) + "'s " + noun +
            (summary.ranks.size() == 1 ? "" : "s");
    };

    if (no_checkpoint_found(report)) {
        // Nothing here was ever a checkpoint: no save was interrupted, there is no step to resume
        // from instead, only a folder to pick again.
        const std::filesystem::path dir = report.dir.has_filename() ? report.dir : report.dir.parent_path();
        summary.mode = FailureMode::invalid_manifest;
        summary.title = "No checkpoint found in " + printable(dir.string());
        summary.meaning = std::string(kWhatShardScopeOpens);
    } else if (ranks_of({ProblemKind::world_size_mismatch})) {
        summary.mode = FailureMode::world_size_change;
        summary.title = (report.foreign ? "Parallel sizes disagree: " : "World size change: ") +
            first_message({ProblemKind::world_size_mismatch});
        // Only ShardScope's own checkpoints can be resharded here; a foreign step whose rank files
        // disagree about the sizes they were saved at mixes files of two layouts.
        summary.meaning = report.foreign
            ? "The rank files were not all saved with the parallel sizes the others give: some come from "
              "another run or layout. Do not resume from this step as it is; find the files the run wrote, "
              "or resume from the previous complete step."
            : "The shards are laid out for the world size they were saved with. Reshard the "
              "checkpoint to the world size the job runs at (shardctl reshard PATH --to M, or Reshard… "
              "in the app) before resuming; loading it as is would give ranks the wrong slices.";
    } else if (ranks_of({ProblemKind::shard_count_mismatch, ProblemKind::duplicate_rank})) {
        summary.mode = FailureMode::shard_count_mismatch;
        summary.title =
            "Shard count mismatch: " + first_message({ProblemKind::shard_count_mismatch, ProblemKind::duplicate_rank});
        summary.meaning = "The manifest does not list exactly one shard per rank, so some rank's "
                          "state is missing or ambiguous. Do not resume from this step; resume from "
                          "the previous complete step.";
    } else if (ranks_of({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema, ProblemKind::layout_gap,
                         ProblemKind::layout_overlap, ProblemKind::path_outside_checkpoint}) &&
               !report.manifest) {
        summary.mode = FailureMode::invalid_manifest;
        summary.title =
            "Invalid manifest: " + first_message({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema});
        summary.meaning = "Without a valid manifest the shards cannot be checked or loaded. If the "
                          "save was interrupted this step never committed: resume from the "
                          "previous step.";
    } else if (!report.manifest && std::any_of(report.problems.begin(), report.problems.end(), [](const Problem& p) {
                   return p.kind == ProblemKind::partial_write && p.path == "manifest.json";
               })) {
        // A step without its manifest has no shard that could be missing: the save stopped
        // before its commit, and what it left out is the manifest.
        const std::filesystem::path dir =
            report.dir.has_filename() ? report.dir : report.dir.parent_path(); // "step-9/" too
        summary.mode = FailureMode::partial_write;
        summary.title =
            "Missing manifest: " + printable(dir.filename().string()) + " was never committed (no manifest.json)";
        summary.meaning = "The save stopped before its commit: shard data may be on disk, but without the "
                          "manifest that makes it a checkpoint this step cannot be loaded. Resume from the "
                          "previous complete step.";
    } else if (ranks_of({ProblemKind::partial_write, ProblemKind::missing_shard, ProblemKind::size_mismatch})) {
        summary.mode = FailureMode::partial_write;
        summary.title = "Partial write: " + who("shard") + agree(" is", " are") + " missing or not the recorded size";
        summary.meaning = "The save was interrupted or the files were copied incompletely. Do not "
                          "resume from this step: copy the shard again from its source, or resume "
                          "from the previous complete step.";
    } else if (ranks_of({ProblemKind::hash_mismatch, ProblemKind::invalid_shard})) {
        summary.mode = FailureMode::corruption;
        summary.title = "Corruption: " + who("shard") + agree(" does not", " do not") + " match the recorded hash";
        summary.meaning = "The file has the recorded size but different bytes (disk, memory or "
                          "transfer error). Resuming would silently train from damaged weights: "
                          "restore the shard from a replica or resume from the previous step.";
    } else if (ranks_of({ProblemKind::unreadable})) {
        summary.mode = FailureMode::unreadable;
        summary.title = "Unreadable: " + who("shard") + " could not be read";
        summary.meaning = "The storage returned an error. Check permissions and the file system, "
                          "then verify again before resuming.";
    } else if (ranks_of({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema, ProblemKind::layout_gap,
                         ProblemKind::layout_overlap, ProblemKind::path_outside_checkpoint})) {
        summary.mode = FailureMode::invalid_manifest;
        summary.title = "Inconsistent manifest: " + report.problems.front().message;
        summary.meaning = "The manifest's layout breaks an invariant, so a loader must refuse it. "
                          "Resume from the previous complete step.";
    } else if (!report.problems.empty()) {
        summary.mode = FailureMode::invalid_manifest;
        summary.title = report.problems.front().message;
        summary.meaning = "The checkpoint fails a check; a loader will refuse it.";
    } else if (report.cancelled) {
        summary.mode = FailureMode::cancelled;
        summary.title = "Verification cancelled";
        summary.meaning = "Not every shard was checked; verify again before resuming.";
    }
    return summary;
}

nlohmann::json reshard_plan_json(const ReshardPlan& plan)
{
    nlohmann::json targets = nlohmann::json::array();
    for (const auto& t : plan.targets) {
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& r : t.runs)
            runs.push_back({{"source_rank", r.source_rank},
                            {"source_offset", r.source_offset},
                            {"target_offset", r.target_offset},
                            {"numel", r.numel}});
        targets.push_back({{"rank", t.rank},
                           {"param_shard_offset", t.offset},
                           {"param_shard_numel", t.numel},
                           {"bytes", t.bytes},
                           {"bytes_staying", t.bytes_staying},
                           {"runs", runs}});
    }
    return {{"source_world_size", plan.source_world_size}, {"target_world_size", plan.target_world_size},
            {"param_numel_total", plan.numel_total},       {"param_dtype", std::string(to_string(plan.dtype))},
            {"bytes_per_element", plan.bytes_per_element}, {"bytes_read", plan.bytes_read},
            {"bytes_written", plan.bytes_written},         {"bytes_staying", plan.bytes_staying},
            {"bytes_moving", plan.bytes_moving},           {"targets", targets}};
}

nlohmann::json reshard_result_json(const ReshardResult& result, const std::filesystem::path& destination,
                                   double seconds)
{
    return {{"ok", true},
            {"path", destination.string()},
            {"world_size", result.manifest.world_size},
            {"step", result.manifest.step},
            {"bytes", result.manifest.total_bytes()},
            {"seconds", seconds},
            {"plan", reshard_plan_json(result.plan)}};
}

nlohmann::json report_json(const ReportInput& input)
{
    nlohmann::json out;
    out["title"] = input.title;
    out["generator"] = input.generator;
    if (input.verify) {
        const FailureSummary failure = classify_failure(*input.verify);
        nlohmann::json checkpoint;
        checkpoint["path"] = input.checkpoint_path;
        checkpoint["verify"] = verify_report_json(*input.verify);
        out["verdict"] = verdict_json(report_verdict(input));
        checkpoint["failure_mode"] = {{"mode", std::string(to_string(failure.mode))},
                                      {"title", failure.title},
                                      {"meaning", failure.meaning},
                                      {"ranks", failure.ranks}};
        if (const auto& m = input.verify->manifest) {
            checkpoint["summary"] = {{"world_size", m->world_size},
                                     {"step", m->step},
                                     {"wall_clock_seconds", m->wall_clock_seconds},
                                     {"total_bytes", m->total_bytes()},
                                     {"param_dtype", std::string(to_string(m->param_dtype))},
                                     {"param_numel_total", m->param_numel_total},
                                     {"tensor_count", m->tensors.size()},
                                     {"training_state", m->training_state}};
        }
        out["checkpoint"] = std::move(checkpoint);
    }
    if (input.pipeline) {
        out["pipeline"] = pipeline::plan_json(input.pipeline->plan, input.pipeline->profile_name,
                                              input.pipeline->partition, /*with_ops=*/false);
    }
    if (input.reshard)
        out["reshard"] = reshard_plan_json(*input.reshard);
    if (input.content) {
        out["content"] = content_report_json(*input.content);
        // With a verification: which tensors' values came from files that failed it (as the app
        // and the Markdown mark them); stats --json, which verifies nothing, has no such key.
        if (input.verify) {
            nlohmann::json& tensors = out["content"]["tensors"];
            for (nlohmann::json& t : tensors)
                t["from_failed_file"] = false;
            for (const TensorFromFiles& mark : tensors_read_from(*input.content, failed_files(*input.verify)))
                tensors[mark.tensor]["from_failed_file"] = true;
        }
    }
    if (input.diff)
        out["diff"] = diff_report_json(*input.diff);
    out["ok"] = report_exit_code(input) == 0;
    return out;
}

ResumeVerdict report_verdict(const ReportInput& input)
{
    return resume_verdict(*input.verify, input.content.get(), input.expected_world_size);
}

int report_exit_code(const ReportInput& input)
{
    if (input.verify) {
        const ResumeVerdict verdict = report_verdict(input);
        if (verdict.safe())
            return 0;
        if (verdict.state != ResumeState::unchecked)
            return 1;
        if (input.verify->cancelled || (input.content && input.content->cancelled))
            return 2;
        return input.content ? 1 : 0; // values asked for and not read: not shown to be safe
    }
    if (input.content && !input.content->ok())
        return input.content->cancelled && input.content->problems.empty() ? 2 : 1;
    return 0;
}

} // namespace shardscope
