// The report's sections, defined once (document.h): what is said and in which order. The
// renderers (render.cpp) only format these blocks.

#include "core/report/document.h"

#include "core/util/printable.h"

#include <algorithm>
#include <cstdio>

namespace shardscope
{

namespace
{

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

ReportTable checkpoint_table(const VerifyReport& report)
{
    ReportTable table{.header = {"Property", "Value"}, .right = {false, false}};
    auto add = [&](std::string key, std::string value) {
        table.rows.push_back({{std::move(key), std::move(value)}});
    };
    add("Directory", report.dir.string());
    add("Format", report.format);
    if (const auto& m = report.manifest) {
        add("World size", std::to_string(m->world_size));
        add("Step", std::to_string(m->step));
        add("Wall clock", fixed(m->wall_clock_seconds, 0) + " s");
        add("Total bytes",
            human_bytes(m->total_bytes()) + " (" + std::to_string(m->total_bytes()) + " bytes)");
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

ReportTable shard_table(const VerifyReport& report)
{
    if (report.foreign) { // files without parameter ranges or recorded digests
        ReportTable table{.header = {"Rank", "File", "Bytes", "Status", "Detail"},
                          .right = {true, false, true, false, false}};
        for (const ShardCheck& check : report.shards)
            table.rows.push_back(
                {{check.rank >= 0 ? std::to_string(check.rank) : "-", check.path,
                  std::to_string(check.actual_bytes),
                  (check.status == ShardStatus::ok ? "✓ " : "✗ ") + words(to_string(check.status)),
                  check.detail}});
        return table;
    }
    ReportTable table{
        .header = {"Rank", "File", "Bytes", "Param offset", "Elements", "SHA-256", "Status"},
        .right = {true, false, true, true, true, false, false}};
    for (std::size_t i = 0; i < report.shards.size(); ++i) {
        const ShardCheck& check = report.shards[i];
        const ShardRecord* record = report.manifest && i < report.manifest->shards.size()
                                        ? &report.manifest->shards[i]
                                        : nullptr;
        const std::string mark = check.status == ShardStatus::ok        ? "✓ "
                                 : check.status == ShardStatus::pending ? "… "
                                                                        : "✗ ";
        table.rows.push_back(
            {{std::to_string(check.rank), check.path, std::to_string(check.expected_bytes),
              record ? std::to_string(record->param_shard_offset) : "",
              record ? std::to_string(record->param_shard_numel) : "",
              record ? record->sha256.substr(0, 16) : "", mark + words(to_string(check.status))}});
    }
    return table;
}

ReportTable stage_table(const pipeline::Plan& plan)
{
    ReportTable table{.header = {"Stage", "Layers", "Busy (ms)", "Idle (ms)", "Bubble",
                                 "Peak activations", "Peak activation memory"},
                      .right = {true, false, true, true, true, true, true}};
    for (const auto& s : plan.timeline.stage_stats)
        table.rows.push_back(
            {{std::to_string(s.stage),
              pipeline::stage_layers(plan, s.stage), fixed(s.busy, 3),
              fixed(s.idle, 3), percent(s.bubble_fraction), std::to_string(s.peak_activations),
              human_bytes(uint64_t(std::max<std::int64_t>(0, s.peak_activation_bytes)))}});
    return table;
}

ReportTable pipeline_settings(const PipelineSection& section)
{
    const auto& spec = section.plan.timeline.spec;
    std::string boundaries;
    for (int b : section.plan.boundaries)
        boundaries += (boundaries.empty() ? "" : ",") + std::to_string(b);
    ReportTable table{.header = {"Setting", "Value"}, .right = {false, false}};
    auto add = [&](std::string k, std::string v) {
        table.rows.push_back({{std::move(k), std::move(v)}});
    };
    add("Profile", section.profile_name);
    add("Schedule", std::string(pipeline::to_string(spec.kind)));
    add("Stages", std::to_string(spec.stages));
    add("Microbatches", std::to_string(spec.microbatches));
    if (spec.virtual_stages > 1)
        add("Chunks per stage (v)", std::to_string(spec.virtual_stages));
    add("Partition",
        section.partition + (boundaries.empty() ? "" : " (boundaries " + boundaries + ")"));
    add("Makespan", fixed(section.plan.timeline.makespan, 3) + " ms");
    add("Bubble (measured)", percent(section.plan.timeline.bubble_fraction));
    add("Bubble (closed form, uniform stages)", percent(section.plan.timeline.closed_form_bubble));
    return table;
}

ReportTable reshard_totals(const ReshardPlan& plan)
{
    ReportTable table{.header = {"Reshard", "Value"}, .right = {false, false}};
    auto add = [&](std::string k, std::string v) {
        table.rows.push_back({{std::move(k), std::move(v)}});
    };
    auto share = [&](uint64_t bytes) {
        return plan.bytes_written ? " (" + percent(double(bytes) / double(plan.bytes_written)) + ")"
                                  : std::string();
    };
    add("World size",
        std::to_string(plan.source_world_size) + " → " + std::to_string(plan.target_world_size));
    add("Parameters", std::to_string(plan.numel_total) + " (" + std::string(to_string(plan.dtype)) +
                          ", " + std::to_string(plan.bytes_per_element) +
                          " bytes per element with optimizer state)");
    add("Bytes read", human_bytes(plan.bytes_read));
    add("Bytes written", human_bytes(plan.bytes_written));
    add("Staying on the same rank index",
        human_bytes(plan.bytes_staying) + share(plan.bytes_staying));
    add("Moving to another rank", human_bytes(plan.bytes_moving) + share(plan.bytes_moving));
    return table;
}

// Long plans (thousands of ranks) would bury the report: the text forms show the first rows and
// say where the rest is; the JSON always carries every target.
constexpr std::size_t kReshardRowsShown = 64;

ReportTable reshard_targets(const ReshardPlan& plan)
{
    ReportTable table{.header = {"New rank", "Elements", "Bytes", "Sources", "Staying"},
                      .right = {true, false, true, false, true}};
    for (std::size_t i = 0; i < plan.targets.size() && i < kReshardRowsShown; ++i) {
        const TargetPlan& t = plan.targets[i];
        std::string sources;
        for (std::size_t r = 0; r < t.runs.size() && r < 6; ++r)
            sources += (r ? ", " : "") + std::string("rank ") +
                       std::to_string(t.runs[r].source_rank) + ": " +
                       human_bytes(t.runs[r].numel * plan.bytes_per_element);
        if (t.runs.size() > 6)
            sources += " and " + std::to_string(t.runs.size() - 6) + " more";
        table.rows.push_back(
            {{std::to_string(t.rank),
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
    return "The first " + std::to_string(kReshardRowsShown) + " of " +
           std::to_string(plan.targets.size()) +
           " new ranks are shown; the JSON report lists all of them.";
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

// The tensors worth a look: the ones holding NaN/Inf first, then the ones a warning names.
ReportTable content_table(const ContentReport& content)
{
    ReportTable table{.header = {"Tensor", "State", "Dtype", "Elements", "NaN", "+Inf", "-Inf"},
                      .right = {false, false, false, true, true, true, true}};
    for (const TensorContent& t : content.tensors) {
        if (t.stats.nonfinite() == 0 || table.rows.size() >= kReshardRowsShown)
            continue;
        const ValueStats& s = t.stats;
        table.rows.push_back({{t.name, t.state, std::string(to_string(t.type)), std::to_string(s.numel),
                               std::to_string(s.nan), std::to_string(s.posinf), std::to_string(s.neginf)}});
    }
    return table;
}

std::string significant(double value)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", value);
    return text;
}

// The tensors that differ, in model order (what only one side has last).
ReportTable diff_table(const DiffReport& diff)
{
    ReportTable table{.header = {"Tensor", "State", "Status", "Changed elements", "Max |a-b|", "Rel. L2"},
                      .right = {false, false, false, true, true, true}};
    for (const TensorDiff& t : diff.tensors) {
        if (t.status == DiffStatus::identical || table.rows.size() >= kReshardRowsShown)
            continue;
        const bool compared = t.status == DiffStatus::changed || t.status == DiffStatus::dtype_changed;
        const auto rel = t.rel_l2();
        table.rows.push_back({{t.name, t.state, std::string(to_string(t.status)),
                               compared ? std::to_string(t.sums.changed) + " of " + std::to_string(t.numel) : "",
                               compared ? significant(t.sums.max_abs_diff) : "",
                               compared ? (rel ? significant(*rel) : std::string("inf")) : ""}});
    }
    return table;
}

void diff_section(const DiffReport& diff, std::vector<ReportBlock>& doc)
{
    std::size_t same = 0;
    for (const TensorDiff& t : diff.tensors)
        same += t.status == DiffStatus::identical;
    const std::string compared = "Compared with " + diff.path_b.string() + " (" + diff.b.format + ")" +
                                 (diff.options.bitwise() ? ", bitwise" : ", within tolerance");
    doc.push_back({.kind = ReportBlock::Kind::heading, .level = 2, .text = "Comparison"});
    doc.push_back({.kind = ReportBlock::Kind::note, .text = compared});
    if (diff.identical())
        doc.push_back({.kind = ReportBlock::Kind::verdict,
                       .text = "All " + std::to_string(diff.tensors.size()) + " tensors are identical",
                       .good = true});
    else
        doc.push_back({.kind = ReportBlock::Kind::verdict,
                       .text = std::to_string(diff.tensors.size() - same) + " of " + std::to_string(diff.tensors.size()) +
                               " tensors differ",
                       .detail = diff.cancelled ? "The comparison was cancelled: not every tensor was compared."
                                                : "The tensors below differ (bitwise unless a tolerance is given); "
                                                  "relative change is ||a-b|| / ||a||.",
                       .good = false});
    if (!diff.problems.empty()) {
        ReportBlock problems{.kind = ReportBlock::Kind::problems};
        for (const Problem& p : diff.problems)
            problems.items.emplace_back(std::string(to_string(p.kind)), p.message);
        doc.push_back(std::move(problems));
    }
    if (same < diff.tensors.size())
        doc.push_back({.kind = ReportBlock::Kind::table, .table = diff_table(diff)});
}

} // namespace

std::vector<ReportBlock> report_document(const ReportInput& input)
{
    std::vector<ReportBlock> doc;
    auto heading = [&](int level, std::string text) {
        doc.push_back(
            {.kind = ReportBlock::Kind::heading, .level = level, .text = std::move(text)});
    };
    auto table = [&](ReportTable t) {
        doc.push_back({.kind = ReportBlock::Kind::table, .table = std::move(t)});
    };
    auto image = [&](const std::string& source, std::string alt) {
        if (!source.empty())
            doc.push_back(
                {.kind = ReportBlock::Kind::image, .text = std::move(alt), .source = source});
    };
    heading(1, input.title);
    if (!input.generator.empty())
        doc.push_back({.kind = ReportBlock::Kind::note, .text = "Generated by " + input.generator});
    if (input.verify) {
        const VerifyReport& report = *input.verify;
        const FailureSummary failure = classify_failure(report);
        heading(2, "Checkpoint " + input.checkpoint_path);
        if (failure.mode == FailureMode::none)
            doc.push_back(
                {.kind = ReportBlock::Kind::verdict, .text = verdict_line(input), .good = true});
        else
            doc.push_back({.kind = ReportBlock::Kind::verdict,
                           .text = failure.title,
                           .detail = failure.meaning,
                           .good = false});
        table(checkpoint_table(report));
        if (!input.ownership_image.empty()) {
            heading(3, "Ownership of the flat parameter space");
            image(input.ownership_image, "ownership map");
        }
        heading(3, "Shards");
        table(shard_table(report));
        if (!report.problems.empty()) {
            heading(3, "Problems");
            ReportBlock problems{.kind = ReportBlock::Kind::problems};
            for (const Problem& p : report.problems)
                problems.items.emplace_back(std::string(to_string(p.kind)), p.message);
            doc.push_back(std::move(problems));
        }
    }
    if (input.pipeline) {
        heading(2, "Pipeline plan");
        table(pipeline_settings(*input.pipeline));
        image(input.gantt_image, "pipeline timeline");
        table(stage_table(input.pipeline->plan));
    }
    if (input.content) {
        const ContentReport& content = *input.content;
        heading(2, "Tensor content");
        uint64_t nonfinite = 0;
        for (const TensorContent& t : content.tensors)
            nonfinite += t.stats.nonfinite() > 0;
        if (content.ok())
            doc.push_back({.kind = ReportBlock::Kind::verdict,
                           .text = "All " + std::to_string(content.tensors.size()) + " tensors are finite" +
                                   (content.format == "shardscope"
                                        ? ", no second moment is negative and every parameter is its rounded master"
                                        : ""),
                           .good = true});
        else
            doc.push_back({.kind = ReportBlock::Kind::verdict,
                           .text = content.cancelled ? std::string("Reading the tensors was cancelled")
                                                     : content.problems.front().message,
                           .detail = nonfinite > 0 ? std::to_string(nonfinite) + " of " +
                                                         std::to_string(content.tensors.size()) +
                                                         " tensors hold NaN or Inf: the run had diverged when this "
                                                         "step was saved. Resume from an earlier step."
                                                   : "The saved state is inconsistent (see the problems below): "
                                                     "resume from an earlier step.",
                           .good = false});
        if (!content.problems.empty() || !content.warnings.empty()) {
            ReportBlock problems{.kind = ReportBlock::Kind::problems};
            for (const Problem& p : content.problems)
                problems.items.emplace_back(std::string(to_string(p.kind)), p.message);
            for (const Problem& p : content.warnings)
                problems.items.emplace_back("warning: " + std::string(to_string(p.kind)), p.message);
            doc.push_back(std::move(problems));
        }
        if (nonfinite > 0)
            table(content_table(content));
    }
    if (input.diff)
        diff_section(*input.diff, doc);
    if (input.reshard) {
        heading(2, "Reshard preview: " + std::to_string(input.reshard->source_world_size) + " → " +
                       std::to_string(input.reshard->target_world_size) + " ranks");
        table(reshard_totals(*input.reshard));
        image(input.reshard_image, "reshard preview");
        table(reshard_targets(*input.reshard));
        if (const std::string more = reshard_more(*input.reshard); !more.empty())
            doc.push_back({.kind = ReportBlock::Kind::note, .text = more});
    }
    return doc;
}

} // namespace shardscope
