#pragma once
// The inspection report as data and as text, shared by `shardctl report` and the GUI's export:
// what the verification found, which failure mode that is and what it means for resuming, and
// (optionally) the pipeline plan with its bubble figures. Images are referenced, not drawn: the
// GUI passes the pictures it rendered, the CLI passes none.

#include "core/checkpoint/verify.h"
#include "core/pipeline/export.h"
#include "core/util/enum_names.h"
#include "core/pipeline/simulator.h"
#include "core/checkpoint/reshard.h"
#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/report/verdict.h"

#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// The failure mode a verification report shows, most serious first: what a person deciding
// whether to resume needs to know, in two sentences.
enum class FailureMode {
    none,
    cancelled, // verification did not finish: nothing is known yet
    world_size_change, // saved by N ranks, the job expects M
    shard_count_mismatch,
    invalid_manifest, // manifest missing, unparsable, or its layout is inconsistent
    partial_write, // a shard is missing or shorter/longer than recorded
    corruption, // a shard has the recorded size but other bytes
    unreadable,
};
inline constexpr std::string_view kFailureModeNames[] = {
    "none",          "cancelled",  "world_size_change", "shard_count_mismatch", "invalid_manifest",
    "partial_write", "corruption", "unreadable"};
static_assert(std::size(kFailureModeNames) == std::size_t(FailureMode::unreadable) + 1);
std::string_view to_string(FailureMode mode); // "world_size_change", ...

struct FailureSummary {
    FailureMode mode = FailureMode::none;
    std::string title; // "Corruption: rank 2's shard does not match its hash"
    std::string meaning; // what it means for resuming from this checkpoint
    std::vector<int> ranks; // the ranks concerned (sorted, unique), empty for the whole checkpoint
};

FailureSummary classify_failure(const VerifyReport& report);

struct PipelineSection {
    std::string profile_name;
    std::string partition; // "compute", "manual:3,6,9", ...
    pipeline::Plan plan;
};

struct ReportInput {
    std::string title = "ShardScope inspection report";
    std::string generator; // "shardscope 0.1.0"
    std::string checkpoint_path; // as the user gave it
    std::optional<VerifyReport> verify; // absent: no checkpoint in the report
    int expected_world_size = -1; // what verify compared against (the verdict's reshard target)
    std::optional<PipelineSection> pipeline;
    // The reshard preview the user looked at (the plan to the target world size they chose).
    std::optional<ReshardPlan> reshard;
    // What the tensors hold (shardctl stats): the content-health section. Shared, not copied:
    // a large checkpoint's report has one entry per tensor.
    std::shared_ptr<const ContentReport> content;
    // The comparison with a second checkpoint (shardctl diff), when one was made.
    std::shared_ptr<const DiffReport> diff;
    // Image sources for the HTML/Markdown (file names or data: URIs); empty: no picture.
    std::string ownership_image;
    std::string gantt_image;
    std::string reshard_image;
};

// The plan as `shardctl plan-reshard --json` prints it: totals and, per target rank, its slice
// and copy runs.
nlohmann::json reshard_plan_json(const ReshardPlan& plan);
// `shardctl reshard --json`: ok, path (the destination), world_size, step, bytes, seconds, plan.
nlohmann::json reshard_result_json(const ReshardResult& result, const std::filesystem::path& destination,
                                   double seconds);

// JSON: generator, checkpoint {path, verify object, failure_mode, summary}, pipeline {settings,
// bubble figures, stage_stats} (ops are left out: the timeline export carries them), reshard
// {the plan-reshard object}.
nlohmann::json report_json(const ReportInput& input);
std::string report_markdown(const ReportInput& input);
// A self-contained HTML page. (The GUI's PDF paints report_document()'s blocks itself, fitted
// to the page: see core/report/layout.h.)
std::string report_html(const ReportInput& input);

// The resume verdict of the report's checkpoint (verdict.h): its verification and, when they were
// read, its values. Every form of the report shows this one verdict first.
ResumeVerdict report_verdict(const ReportInput& input);

// shardctl's exit codes from the verdict: 0 when safe, or when the bytes are intact and the values
// were not asked for; 2 when verification or reading was cancelled; 1 otherwise (values asked for
// and not read included).
int report_exit_code(const ReportInput& input);

} // namespace shardscope
