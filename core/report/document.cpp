// The report's sections, defined once (document.h): what is said and in which order. The
// renderers (render.cpp) only format these blocks.

#include "core/report/document.h"
#include "core/report/internal/sections.h"

#include "core/util/printable.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

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

ReportTable checkpoint_table(const VerifyReport& report)
{
    ReportTable table{.header = {"Property", "Value"}, .right = {false, false}};
    auto add = [&](std::string key, std::string value) { table.rows.push_back({{std::move(key), std::move(value)}}); };
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

// The training state (optimizer, schedule, data loader, RNG) as one row per value, keyed by its
// path ("optimizer.lr"): a person reads rows, not a JSON blob. Lists of plain values stay one row.
void flatten_state(const nlohmann::json& value, const std::string& key, ReportTable& table)
{
    constexpr std::size_t kStateRowsShown = 64;
    if (table.rows.size() >= kStateRowsShown)
        return;
    auto scalar = [](const nlohmann::json& v) {
        return v.is_string() ? printable(v.get_ref<const std::string&>()) : printable(v.dump());
    };
    if (value.is_object() && !value.empty()) {
        for (const auto& [k, v] : value.items())
            flatten_state(v, key.empty() ? k : key + "." + k, table);
        return;
    }
    if (value.is_array() && std::any_of(value.begin(), value.end(), [](const auto& v) { return v.is_structured(); })) {
        for (std::size_t i = 0; i < value.size(); ++i)
            flatten_state(value[i], key + "[" + std::to_string(i) + "]", table);
        return;
    }
    std::string text;
    if (value.is_array()) {
        for (const auto& v : value)
            text += (text.empty() ? "" : ", ") + scalar(v);
        text = "[" + text + "]";
    } else {
        text = scalar(value);
    }
    table.rows.push_back({{key.empty() ? "(value)" : printable(key), text}});
}

ReportTable training_state_table(const nlohmann::json& state)
{
    ReportTable table{.header = {"Training state", "Value"}, .right = {false, false}};
    flatten_state(state, "", table);
    return table;
}

ReportTable shard_table(const VerifyReport& report)
{
    if (report.foreign) { // files without parameter ranges or recorded digests
        ReportTable table{.header = {"Rank", "File", "Bytes", "Status", "Detail"},
                          .right = {true, false, true, false, false}};
        for (const ShardCheck& check : report.shards)
            table.rows.push_back(
                {{check.rank >= 0 ? std::to_string(check.rank) : "-", check.path, std::to_string(check.actual_bytes),
                  (check.status == ShardStatus::ok ? "✓ " : "✗ ") + words(to_string(check.status)), check.detail}});
        return table;
    }
    ReportTable table{.header = {"Rank", "File", "Bytes", "Param offset", "Elements", "SHA-256", "Status"},
                      .right = {true, false, true, true, true, false, false}};
    for (std::size_t i = 0; i < report.shards.size(); ++i) {
        const ShardCheck& check = report.shards[i];
        const ShardRecord* record =
            report.manifest && i < report.manifest->shards.size() ? &report.manifest->shards[i] : nullptr;
        const std::string mark = check.status == ShardStatus::ok ? "✓ "
            : check.status == ShardStatus::pending               ? "… "
                                                                 : "✗ ";
        table.rows.push_back({{std::to_string(check.rank), check.path, std::to_string(check.expected_bytes),
                               record ? std::to_string(record->param_shard_offset) : "",
                               record ? std::to_string(record->param_shard_numel) : "", record ? record->sha256 : "",
                               mark + words(to_string(check.status))}});
    }
    table.own_line_column = 5; // the full digest: a person compares it with sha256sum's output
    return table;
}

ReportTable stage_table(const pipeline::Plan& plan)
{
    ReportTable table{
        .header = {"Stage", "Layers", "Busy (ms)", "Idle (ms)", "Bubble", "Peak activations", "Peak activation memory"},
        .right = {true, false, true, true, true, true, true}};
    for (const auto& s : plan.timeline.stage_stats)
        table.rows.push_back({{std::to_string(s.stage), pipeline::stage_layers(plan, s.stage), fixed(s.busy, 3),
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

ReportTable reshard_totals(const ReshardPlan& plan)
{
    ReportTable table{.header = {"Reshard", "Value"}, .right = {false, false}};
    auto add = [&](std::string k, std::string v) { table.rows.push_back({{std::move(k), std::move(v)}}); };
    auto share = [&](uint64_t bytes) {
        return plan.bytes_written ? " (" + percent(double(bytes) / double(plan.bytes_written)) + ")" : std::string();
    };
    add("World size", std::to_string(plan.source_world_size) + " → " + std::to_string(plan.target_world_size));
    add("Parameters",
        std::to_string(plan.numel_total) + " (" + std::string(to_string(plan.dtype)) + ", " +
            std::to_string(plan.bytes_per_element) + " bytes per element with optimizer state)");
    add("Bytes read", human_bytes(plan.bytes_read));
    add("Bytes written", human_bytes(plan.bytes_written));
    add("Staying on the same rank index", human_bytes(plan.bytes_staying) + share(plan.bytes_staying));
    add("Moving to another rank", human_bytes(plan.bytes_moving) + share(plan.bytes_moving));
    return table;
}

// Long plans (thousands of ranks) would bury the report: the text forms show the first rows and
// say where the rest is; the JSON always carries every target.
ReportTable reshard_targets(const ReshardPlan& plan)
{
    ReportTable table{.header = {"New rank", "Elements", "Bytes", "Sources", "Staying", "Moving"},
                      .right = {true, false, true, false, true, true}};
    for (std::size_t i = 0; i < plan.targets.size() && i < report::kRowsShown; ++i) {
        const TargetPlan& t = plan.targets[i];
        std::string sources;
        for (std::size_t r = 0; r < t.runs.size() && r < 6; ++r)
            sources += (r ? ", " : "") + std::string("rank ") + std::to_string(t.runs[r].source_rank) + ": " +
                human_bytes(t.runs[r].numel * plan.bytes_per_element);
        if (t.runs.size() > 6)
            sources += " and " + std::to_string(t.runs.size() - 6) + " more";
        table.rows.push_back(
            {{std::to_string(t.rank), "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.numel) + ")",
              human_bytes(t.bytes), sources.empty() ? "nothing (empty shard)" : sources, human_bytes(t.bytes_staying),
              human_bytes(t.bytes - t.bytes_staying)}});
    }
    return table;
}

std::string reshard_more(const ReshardPlan& plan)
{
    if (plan.targets.size() <= report::kRowsShown)
        return {};
    return "The first " + std::to_string(report::kRowsShown) + " of " + std::to_string(plan.targets.size()) +
        " new ranks are shown; the JSON report lists all of them.";
}

// The one verdict first, then what it rests on: what was checked and what was not.
void resume_blocks(const ReportInput& input, std::vector<ReportBlock>& doc)
{
    const ResumeVerdict verdict = report_verdict(input);
    doc.push_back({.kind = ReportBlock::Kind::verdict,
                   .text = verdict.title,
                   .detail = verdict.meaning,
                   .good = verdict.safe(),
                   .unknown = verdict.state == ResumeState::unchecked});
    ReportBlock basis{.kind = ReportBlock::Kind::problems};
    for (const auto& line : verdict.checked)
        basis.items.emplace_back("checked", line);
    for (const auto& line : verdict.not_checked)
        basis.items.emplace_back("not checked", line);
    if (!basis.items.empty())
        doc.push_back(std::move(basis));
}

std::string base_name(std::string_view path)
{
    while (path.size() > 1 && path.back() == '/')
        path.remove_suffix(1);
    const auto slash = path.find_last_of('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::optional<long long> step_of(const VerifyReport& report)
{
    if (report.manifest)
        return report.manifest->step;
    if (report.foreign)
        for (const auto& [key, value] : report.foreign->rows)
            if (key == "step" || key == "iteration")
                try {
                    return std::stoll(value);
                } catch (...) {
                }
    return std::nullopt;
}

} // namespace

std::vector<ReportBlock> report_document(const ReportInput& input)
{
    std::vector<ReportBlock> doc;
    auto heading = [&](int level, std::string text) {
        doc.push_back({.kind = ReportBlock::Kind::heading, .level = level, .text = std::move(text)});
    };
    auto table = [&](ReportTable t) { doc.push_back({.kind = ReportBlock::Kind::table, .table = std::move(t)}); };
    auto image = [&](const std::string& source, std::string alt) {
        if (!source.empty())
            doc.push_back({.kind = ReportBlock::Kind::image, .text = std::move(alt), .source = source});
    };
    heading(1, input.title);
    // The verdict first: a reader deciding whether to resume stops here.
    if (input.verify)
        resume_blocks(input, doc);
    else if (input.content)
        doc.push_back(report::content_verdict(*input.content));
    if (!input.generator.empty())
        doc.push_back({.kind = ReportBlock::Kind::note, .text = "Generated by " + input.generator});
    if (input.verify) {
        const VerifyReport& report = *input.verify;
        heading(2, "Checkpoint " + input.checkpoint_path);
        table(checkpoint_table(report));
        if (report.manifest && !report.manifest->training_state.is_null())
            table(training_state_table(report.manifest->training_state));
        if (!input.ownership_image.empty()) {
            heading(3, "Ownership of the flat parameter space");
            image(input.ownership_image, "ownership map");
        }
        heading(3, "Shards");
        table(shard_table(report));
        if (!report.problems.empty()) {
            heading(3, "Problems");
            doc.push_back(report::problems_block(report.problems));
        }
    }
    if (input.pipeline) {
        heading(2, "Pipeline plan");
        table(pipeline_settings(*input.pipeline));
        image(input.gantt_image, "pipeline timeline");
        table(stage_table(input.pipeline->plan));
    }
    if (input.content)
        report::content_section(*input.content, input.verify ? &*input.verify : nullptr, doc);
    if (input.diff)
        report::diff_section(*input.diff, doc);
    if (input.reshard) {
        heading(2,
                "Reshard preview: " + std::to_string(input.reshard->source_world_size) + " → " +
                    std::to_string(input.reshard->target_world_size) + " ranks");
        table(reshard_totals(*input.reshard));
        image(input.reshard_image, "reshard preview");
        table(reshard_targets(*input.reshard));
        if (const std::string more = reshard_more(*input.reshard); !more.empty())
            doc.push_back({.kind = ReportBlock::Kind::note, .text = more});
    }
    return doc;
}

std::string report_subject(const ReportInput& input)
{
    if (input.verify) {
        std::string name = base_name(input.verify->dir.string());
        if (name.empty() || name == ".")
            name = base_name(input.checkpoint_path);
        const std::string lower_name = [&] {
            std::string l = name;
            std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return char(std::tolower(c)); });
            return l;
        }();
        // A run's step folder ("step-000100") says little alone: name the run too.
        if (lower_name.rfind("step", 0) == 0) {
            std::string_view dir = input.verify->dir.native();
            while (dir.size() > 1 && dir.back() == '/')
                dir.remove_suffix(1);
            const auto slash = dir.find_last_of('/');
            const std::string parent = slash == std::string_view::npos ? "" : base_name(dir.substr(0, slash));
            if (!parent.empty() && parent != "/")
                name = parent + "/" + name;
        }
        name = printable(name, 80);
        if (const auto step = step_of(*input.verify); step && lower_name.find("step") == std::string::npos)
            name += " · step " + std::to_string(*step);
        return name;
    }
    if (input.pipeline)
        return "pipeline plan " + printable(input.pipeline->profile_name, 80);
    return "report";
}

std::string report_file_name(const ReportInput& input, std::string_view suffix)
{
    std::string subject = report_subject(input);
    // "w8 · step 0" → "w8-step-0": only characters every file system and shell take as they are.
    std::string stem = "shardscope-";
    bool dash = false;
    for (std::size_t i = 0; i < subject.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(subject[i]);
        if (std::isalnum(c) || c == '.' || c == '_') {
            if (dash && stem.back() != '-')
                stem += '-';
            stem += char(c);
            dash = false;
        } else {
            dash = true;
        }
    }
    while (!stem.empty() && (stem.back() == '-' || stem.back() == '.'))
        stem.pop_back();
    return stem + "." + std::string(suffix);
}

} // namespace shardscope
