#include "core/report.h"

#include "core/printable.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace shardscope {

namespace {

std::string fixed(double value, int decimals)
{
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
}

std::string percent(double fraction)
{
    return fixed(fraction * 100.0, 1) + " %";
}

std::string words(std::string_view id)
{
    std::string text(id);
    std::replace(text.begin(), text.end(), '_', ' ');
    return text;
}

std::string rank_list(const std::vector<int>& ranks)
{
    std::string text;
    for (std::size_t i = 0; i < ranks.size() && i < 8; ++i)
        text += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 8)
        text += " and " + std::to_string(ranks.size() - 8) + " more";
    return text;
}

std::string html_escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

// Markdown table cells: a pipe or a newline would break the row.
std::string md_cell(std::string_view text)
{
    std::string out;
    for (char c : text) {
        if (c == '|')
            out += "\\|";
        else if (c == '\n')
            out += ' ';
        else
            out += c;
    }
    return out;
}

struct Row {
    std::vector<std::string> cells;
};

struct Table {
    std::vector<std::string> header;
    std::vector<Row> rows;
    std::vector<bool> right; // right-aligned columns
};

Table checkpoint_table(const VerifyReport& report)
{
    Table table{{"Property", "Value"}, {}, {false, false}};
    auto add = [&](std::string key, std::string value) {
        table.rows.push_back({{std::move(key), std::move(value)}});
    };
    add("Directory", report.dir.string());
    add("Format", report.format);
    if (const auto& m = report.manifest) {
        add("World size", std::to_string(m->world_size));
        add("Step", std::to_string(m->step));
        add("Wall clock", fixed(m->wall_clock_seconds, 0) + " s");
        add("Total bytes", human_bytes(m->total_bytes()) + " (" + std::to_string(m->total_bytes()) + " bytes)");
        add("Parameter dtype", std::string(to_string(m->param_dtype)));
        add("Parameters", std::to_string(m->param_numel_total));
        add("Model tensors", m->tensors.empty() ? "not listed" : std::to_string(m->tensors.size()));
        if (!m->training_state.is_null())
            add("Training state", m->training_state.dump());
    } else if (report.foreign) { // what the format's own metadata says
        for (const auto& [key, value] : report.foreign->rows)
            if (key != "format")
                add(key, value);
    } else {
        add("Manifest", "missing or unreadable");
    }
    if (!report.leftover_tmp_files.empty()) {
        std::string files;
        for (const auto& name : report.leftover_tmp_files)
            files += (files.empty() ? "" : ", ") + name;
        add("Leftover .tmp files", files);
    }
    return table;
}

Table shard_table(const VerifyReport& report)
{
    if (report.foreign) { // files without parameter ranges or recorded digests
        Table table{{"Rank", "File", "Bytes", "Status", "Detail"}, {}, {true, false, true, false, false}};
        for (const ShardCheck& check : report.shards)
            table.rows.push_back({{check.rank >= 0 ? std::to_string(check.rank) : "-", check.path,
                                   std::to_string(check.actual_bytes),
                                   (check.status == ShardStatus::ok ? "✓ " : "✗ ") + words(to_string(check.status)),
                                   check.detail}});
        return table;
    }
    Table table{{"Rank", "File", "Bytes", "Param offset", "Elements", "SHA-256", "Status"},
                {},
                {true, false, true, true, true, false, false}};
    for (std::size_t i = 0; i < report.shards.size(); ++i) {
        const ShardCheck& check = report.shards[i];
        const ShardRecord* record =
            report.manifest && i < report.manifest->shards.size() ? &report.manifest->shards[i] : nullptr;
        const std::string mark = check.status == ShardStatus::ok ? "✓ "
                                 : check.status == ShardStatus::pending ? "… "
                                                                        : "✗ ";
        table.rows.push_back({{std::to_string(check.rank), check.path, std::to_string(check.expected_bytes),
                               record ? std::to_string(record->param_shard_offset) : "",
                               record ? std::to_string(record->param_shard_numel) : "",
                               record ? record->sha256.substr(0, 16) : "",
                               mark + words(to_string(check.status))}});
    }
    return table;
}

Table stage_table(const pipeline::Plan& plan)
{
    Table table{{"Stage", "Layers", "Busy (ms)", "Idle (ms)", "Bubble", "Peak activations",
                 "Peak activation memory"},
                {},
                {true, false, true, true, true, true, true}};
    for (const auto& s : plan.timeline.stage_stats)
        table.rows.push_back({{std::to_string(s.stage),
                               std::to_string(s.first_layer) + "–" + std::to_string(s.last_layer),
                               fixed(s.busy, 3), fixed(s.idle, 3), percent(s.bubble_fraction),
                               std::to_string(s.peak_activations),
                               human_bytes(uint64_t(std::max<std::int64_t>(0, s.peak_activation_bytes)))}});
    return table;
}

Table pipeline_settings(const PipelineSection& section)
{
    const auto& spec = section.plan.timeline.spec;
    std::string boundaries;
    for (int b : section.plan.boundaries)
        boundaries += (boundaries.empty() ? "" : ",") + std::to_string(b);
    Table table{{"Setting", "Value"}, {}, {false, false}};
    auto add = [&](std::string k, std::string v) { table.rows.push_back({{std::move(k), std::move(v)}}); };
    add("Profile", section.profile_name);
    add("Schedule", std::string(pipeline::to_string(spec.kind)));
    add("Stages", std::to_string(spec.stages));
    add("Microbatches", std::to_string(spec.microbatches));
    if (spec.virtual_stages > 1)
        add("Chunks per stage (v)", std::to_string(spec.virtual_stages));
    add("Partition", section.partition + (boundaries.empty() ? "" : " (boundaries " + boundaries + ")"));
    add("Makespan", fixed(section.plan.timeline.makespan, 3) + " ms");
    add("Bubble (measured)", percent(section.plan.timeline.bubble_fraction));
    add("Bubble (closed form, uniform stages)", percent(section.plan.timeline.closed_form_bubble));
    return table;
}

Table reshard_totals(const ReshardPlan& plan)
{
    Table table{{"Reshard", "Value"}, {}, {false, false}};
    auto add = [&](std::string k, std::string v) { table.rows.push_back({{std::move(k), std::move(v)}}); };
    auto share = [&](uint64_t bytes) {
        return plan.bytes_written ? " (" + percent(double(bytes) / double(plan.bytes_written)) + ")" : std::string();
    };
    add("World size", std::to_string(plan.source_world_size) + " → " + std::to_string(plan.target_world_size));
    add("Parameters", std::to_string(plan.numel_total) + " (" + std::string(to_string(plan.dtype)) + ", " +
                          std::to_string(plan.bytes_per_element) + " bytes per element with optimizer state)");
    add("Bytes read", human_bytes(plan.bytes_read));
    add("Bytes written", human_bytes(plan.bytes_written));
    add("Staying on the same rank index", human_bytes(plan.bytes_staying) + share(plan.bytes_staying));
    add("Moving to another rank", human_bytes(plan.bytes_moving) + share(plan.bytes_moving));
    return table;
}

// Long plans (thousands of ranks) would bury the report: the text forms show the first rows and
// say where the rest is; the JSON always carries every target.
constexpr std::size_t kReshardRowsShown = 64;

Table reshard_targets(const ReshardPlan& plan)
{
    Table table{{"New rank", "Elements", "Bytes", "Sources", "Staying"}, {}, {true, false, true, false, true}};
    for (std::size_t i = 0; i < plan.targets.size() && i < kReshardRowsShown; ++i) {
        const TargetPlan& t = plan.targets[i];
        std::string sources;
        for (std::size_t r = 0; r < t.runs.size() && r < 6; ++r)
            sources += (r ? ", " : "") + std::string("rank ") + std::to_string(t.runs[r].source_rank) + ": " +
                       human_bytes(t.runs[r].numel * plan.bytes_per_element);
        if (t.runs.size() > 6)
            sources += " and " + std::to_string(t.runs.size() - 6) + " more";
        table.rows.push_back({{std::to_string(t.rank),
                               "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.numel) + ")",
                               human_bytes(t.bytes), sources.empty() ? "nothing (empty shard)" : sources,
                               human_bytes(t.bytes_staying)}});
    }
    return table;
}

std::string reshard_more(const ReshardPlan& plan)
{
    if (plan.targets.size() <= kReshardRowsShown)
        return {};
    return "The first " + std::to_string(kReshardRowsShown) + " of " + std::to_string(plan.targets.size()) +
           " new ranks are shown; the JSON report lists all of them.";
}

void markdown_table(std::ostringstream& out, const Table& table)
{
    out << '|';
    for (const auto& h : table.header)
        out << ' ' << md_cell(h) << " |";
    out << "\n|";
    for (std::size_t c = 0; c < table.header.size(); ++c)
        out << (table.right[c] ? "---:|" : "---|");
    out << '\n';
    for (const auto& row : table.rows) {
        out << '|';
        for (const auto& cell : row.cells)
            out << ' ' << md_cell(cell) << " |";
        out << '\n';
    }
    out << '\n';
}

void html_table(std::ostringstream& out, const Table& table)
{
    out << "<table border=\"1\" cellspacing=\"0\" cellpadding=\"4\">\n<tr>";
    for (const auto& h : table.header)
        out << "<th>" << html_escape(h) << "</th>";
    out << "</tr>\n";
    for (const auto& row : table.rows) {
        out << "<tr>";
        for (std::size_t c = 0; c < row.cells.size(); ++c) {
            const std::string& cell = row.cells[c];
            std::string style;
            if (cell.rfind("✗", 0) == 0)
                style = " style=\"color:#c01c28;font-weight:bold\"";
            else if (cell.rfind("✓", 0) == 0)
                style = " style=\"color:#1a7f37\"";
            out << "<td" << (table.right[c] ? " align=\"right\"" : "") << style << '>'
                << html_escape(cell) << "</td>";
        }
        out << "</tr>\n";
    }
    out << "</table>\n";
}

std::string verdict_line(const ReportInput& input)
{
    if (!input.verify)
        return "";
    const FailureSummary summary = classify_failure(*input.verify);
    if (summary.mode == FailureMode::none)
        return "All " + std::to_string(input.verify->shards.size()) +
               " shards verified: the checkpoint is complete and consistent.";
    return summary.title;
}

} // namespace

std::string_view to_string(FailureMode mode)
{
    switch (mode) {
    case FailureMode::none: return "none";
    case FailureMode::cancelled: return "cancelled";
    case FailureMode::world_size_change: return "world_size_change";
    case FailureMode::shard_count_mismatch: return "shard_count_mismatch";
    case FailureMode::invalid_manifest: return "invalid_manifest";
    case FailureMode::partial_write: return "partial_write";
    case FailureMode::corruption: return "corruption";
    case FailureMode::unreadable: return "unreadable";
    }
    return "unknown";
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
    auto who = [&](const std::string& noun) {
        if (summary.ranks.empty())
            return noun;
        return (summary.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(summary.ranks) + "'s " +
               noun + (summary.ranks.size() == 1 ? "" : "s");
    };

    if (ranks_of({ProblemKind::world_size_mismatch})) {
        summary.mode = FailureMode::world_size_change;
        summary.title = "World size change: " + first_message({ProblemKind::world_size_mismatch});
        summary.meaning = "The shards are laid out for the world size they were saved with. Reshard "
                          "the checkpoint to the new world size (shardctl reshard PATH --to M) "
                          "before resuming; loading it as is would give ranks the wrong slices.";
    } else if (ranks_of({ProblemKind::shard_count_mismatch, ProblemKind::duplicate_rank})) {
        summary.mode = FailureMode::shard_count_mismatch;
        summary.title = "Shard count mismatch: " +
                        first_message({ProblemKind::shard_count_mismatch, ProblemKind::duplicate_rank});
        summary.meaning = "The manifest does not list exactly one shard per rank, so some rank's "
                          "state is missing or ambiguous. Do not resume from this step; resume from "
                          "the previous complete step.";
    } else if (ranks_of({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema,
                         ProblemKind::layout_gap, ProblemKind::layout_overlap,
                         ProblemKind::path_outside_checkpoint}) &&
               !report.manifest) {
        summary.mode = FailureMode::invalid_manifest;
        summary.title = "Invalid manifest: " +
                        first_message({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema});
        summary.meaning = "Without a valid manifest the shards cannot be checked or loaded. If the "
                          "save was interrupted this step never committed: resume from the "
                          "previous step.";
    } else if (ranks_of({ProblemKind::partial_write, ProblemKind::missing_shard,
                         ProblemKind::size_mismatch})) {
        summary.mode = FailureMode::partial_write;
        summary.title = "Partial write: " + who("shard") + " is missing or not the recorded size";
        summary.meaning = "The save was interrupted or the files were copied incompletely. Do not "
                          "resume from this step: copy the shard again from its source, or resume "
                          "from the previous complete step.";
    } else if (ranks_of({ProblemKind::hash_mismatch, ProblemKind::invalid_shard})) {
        summary.mode = FailureMode::corruption;
        summary.title = "Corruption: " + who("shard") + " does not match the recorded hash";
        summary.meaning = "The file has the recorded size but different bytes (disk, memory or "
                          "transfer error). Resuming would silently train from damaged weights: "
                          "restore the shard from a replica or resume from the previous step.";
    } else if (ranks_of({ProblemKind::unreadable})) {
        summary.mode = FailureMode::unreadable;
        summary.title = "Unreadable: " + who("shard") + " could not be read";
        summary.meaning = "The storage returned an error. Check permissions and the file system, "
                          "then verify again before resuming.";
    } else if (ranks_of({ProblemKind::invalid_manifest, ProblemKind::unsupported_schema,
                         ProblemKind::layout_gap, ProblemKind::layout_overlap,
                         ProblemKind::path_outside_checkpoint})) {
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

nlohmann::json verify_report_json(const VerifyReport& report)
{
    nlohmann::json out;
    out["ok"] = report.ok();
    out["format"] = report.format;
    out["directory"] = report.dir.string();
    if (report.manifest) {
        out["world_size"] = report.manifest->world_size;
        out["step"] = report.manifest->step;
    } else {
        out["world_size"] = nullptr;
        out["step"] = nullptr;
    }
    out["shards"] = nlohmann::json::array();
    for (const ShardCheck& check : report.shards) {
        nlohmann::json shard = {{"rank", check.rank},
                                {"path", check.path},
                                {"bytes", check.expected_bytes},
                                {"status", std::string(to_string(check.status))}};
        if (!check.detail.empty())
            shard["detail"] = check.detail;
        out["shards"].push_back(std::move(shard));
    }
    out["problems"] = nlohmann::json::array();
    for (const Problem& p : report.problems) {
        nlohmann::json problem = {{"kind", std::string(to_string(p.kind))}, {"message", p.message}};
        if (p.rank >= 0)
            problem["rank"] = p.rank;
        if (!p.path.empty())
            problem["path"] = p.path;
        out["problems"].push_back(std::move(problem));
    }
    out["leftover_tmp_files"] = report.leftover_tmp_files;
    out["cancelled"] = report.cancelled;
    return out;
}

nlohmann::json reshard_plan_json(const ReshardPlan& plan)
{
    nlohmann::json targets = nlohmann::json::array();
    for (const auto& t : plan.targets) {
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& r : t.runs)
            runs.push_back({{"source_rank", r.source_rank}, {"source_offset", r.source_offset},
                            {"target_offset", r.target_offset}, {"numel", r.numel}});
        targets.push_back({{"rank", t.rank}, {"param_shard_offset", t.offset}, {"param_shard_numel", t.numel},
                           {"bytes", t.bytes}, {"bytes_staying", t.bytes_staying}, {"runs", runs}});
    }
    return {{"source_world_size", plan.source_world_size}, {"target_world_size", plan.target_world_size},
            {"param_numel_total", plan.numel_total}, {"param_dtype", std::string(to_string(plan.dtype))},
            {"bytes_per_element", plan.bytes_per_element}, {"bytes_read", plan.bytes_read},
            {"bytes_written", plan.bytes_written}, {"bytes_staying", plan.bytes_staying},
            {"bytes_moving", plan.bytes_moving}, {"targets", targets}};
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
        nlohmann::json pipeline = pipeline::to_json(input.pipeline->plan.timeline, input.pipeline->plan.pieces);
        pipeline["op_count"] = input.pipeline->plan.timeline.ops.size();
        pipeline.erase("ops");
        pipeline["profile"] = input.pipeline->profile_name;
        pipeline["partition"] = input.pipeline->partition;
        pipeline["boundaries"] = input.pipeline->plan.boundaries;
        out["pipeline"] = std::move(pipeline);
    }
    if (input.reshard)
        out["reshard"] = reshard_plan_json(*input.reshard);
    out["ok"] = report_exit_code(input) == 0;
    return out;
}

std::string report_markdown(const ReportInput& input)
{
    std::ostringstream out;
    out << "# " << input.title << "\n\n";
    if (!input.generator.empty())
        out << "_Generated by " << input.generator << "_\n\n";
    if (input.verify) {
        const VerifyReport& report = *input.verify;
        const FailureSummary failure = classify_failure(report);
        out << "## Checkpoint `" << input.checkpoint_path << "`\n\n";
        if (failure.mode == FailureMode::none)
            out << "**✓ " << verdict_line(input) << "**\n\n";
        else
            out << "**✗ " << failure.title << "**\n\n" << failure.meaning << "\n\n";
        markdown_table(out, checkpoint_table(report));
        out << "### Shards\n\n";
        markdown_table(out, shard_table(report));
        if (!report.problems.empty()) {
            out << "### Problems\n\n";
            for (const Problem& p : report.problems)
                out << "- `" << to_string(p.kind) << "` " << md_cell(p.message) << '\n';
            out << '\n';
        }
        if (!input.ownership_image.empty())
            out << "### Ownership of the flat parameter space\n\n![ownership map](" << input.ownership_image
                << ")\n\n";
    }
    if (input.pipeline) {
        out << "## Pipeline plan\n\n";
        markdown_table(out, pipeline_settings(*input.pipeline));
        markdown_table(out, stage_table(input.pipeline->plan));
        if (!input.gantt_image.empty())
            out << "![pipeline timeline](" << input.gantt_image << ")\n\n";
    }
    if (input.reshard) {
        out << "## Reshard preview: " << input.reshard->source_world_size << " → "
            << input.reshard->target_world_size << " ranks\n\n";
        markdown_table(out, reshard_totals(*input.reshard));
        if (!input.reshard_image.empty())
            out << "![reshard preview](" << input.reshard_image << ")\n\n";
        markdown_table(out, reshard_targets(*input.reshard));
        if (const std::string more = reshard_more(*input.reshard); !more.empty())
            out << "_" << more << "_\n\n";
    }
    return out.str();
}

std::string report_html(const ReportInput& input)
{
    std::ostringstream out;
    out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << html_escape(input.title)
        << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#1f2328}"
           "table{border-collapse:collapse;margin:8px 0 16px 0}th{background:#eef1f4;text-align:left}"
           "th,td{border:1px solid #c8ccd0;padding:3px 8px;font-size:10pt}"
           ".bad{background:#fde7e9;border-left:4px solid #c01c28;padding:8px 12px}"
           ".good{background:#e6f4ea;border-left:4px solid #1a7f37;padding:8px 12px}"
           "img{max-width:100%}</style></head><body>\n";
    out << "<h1>" << html_escape(input.title) << "</h1>\n";
    if (!input.generator.empty())
        out << "<p><i>Generated by " << html_escape(input.generator) << "</i></p>\n";
    if (input.verify) {
        const VerifyReport& report = *input.verify;
        const FailureSummary failure = classify_failure(report);
        out << "<h2>Checkpoint " << html_escape(input.checkpoint_path) << "</h2>\n";
        if (failure.mode == FailureMode::none)
            out << "<table class=\"good\" width=\"100%\" cellpadding=\"8\" bgcolor=\"#e6f4ea\"><tr><td><b>✓ "
                << html_escape(verdict_line(input)) << "</b></td></tr></table>\n";
        else
            out << "<table class=\"bad\" width=\"100%\" cellpadding=\"8\" bgcolor=\"#fde7e9\"><tr><td><b>✗ "
                << html_escape(failure.title) << "</b><br>" << html_escape(failure.meaning)
                << "</td></tr></table>\n";
        html_table(out, checkpoint_table(report));
        if (!input.ownership_image.empty())
            out << "<h3>Ownership of the flat parameter space</h3>\n<p><img src=\""
                << html_escape(input.ownership_image) << "\" width=\"900\"></p>\n";
        out << "<h3>Shards</h3>\n";
        html_table(out, shard_table(report));
        if (!report.problems.empty()) {
            out << "<h3>Problems</h3>\n<ul>\n";
            for (const Problem& p : report.problems)
                out << "<li><code>" << html_escape(to_string(p.kind)) << "</code> "
                    << html_escape(p.message) << "</li>\n";
            out << "</ul>\n";
        }
    }
    if (input.pipeline) {
        out << "<h2>Pipeline plan</h2>\n";
        html_table(out, pipeline_settings(*input.pipeline));
        if (!input.gantt_image.empty())
            out << "<p><img src=\"" << html_escape(input.gantt_image) << "\" width=\"900\"></p>\n";
        html_table(out, stage_table(input.pipeline->plan));
    }
    if (input.reshard) {
        out << "<h2>Reshard preview: " << input.reshard->source_world_size << " → "
            << input.reshard->target_world_size << " ranks</h2>\n";
        html_table(out, reshard_totals(*input.reshard));
        if (!input.reshard_image.empty())
            out << "<p><img src=\"" << html_escape(input.reshard_image) << "\" width=\"900\"></p>\n";
        html_table(out, reshard_targets(*input.reshard));
        if (const std::string more = reshard_more(*input.reshard); !more.empty())
            out << "<p><i>" << html_escape(more) << "</i></p>\n";
    }
    out << "</body></html>\n";
    return out.str();
}

int report_exit_code(const ReportInput& input)
{
    if (input.verify && !input.verify->ok())
        return input.verify->cancelled && input.verify->problems.empty() ? 2 : 1;
    return 0;
}

} // namespace shardscope
