// The report's sections about what the tensors hold (internal/sections.h): the content-health
// verdict and section (shardctl stats) and the comparison (shardctl diff).

#include "core/report/internal/sections.h"
#include "core/util/printable.h"

#include <cstdio>

namespace shardscope::report {

namespace {

// The tensors worth a look: the ones holding NaN/Inf first, then the ones a warning names.
ReportTable content_table(const ContentReport& content)
{
    ReportTable table{.header = {"Tensor", "State", "Dtype", "Elements", "NaN", "+Inf", "-Inf"},
                      .right = {false, false, false, true, true, true, true}};
    for (const TensorContent& t : content.tensors) {
        if (t.stats.nonfinite() == 0 || table.rows.size() >= kRowsShown)
            continue;
        const ValueStats& s = t.stats;
        table.rows.push_back({{printable(t.name), t.state, std::string(to_string(t.type)), std::to_string(s.numel),
                               std::to_string(s.nan), std::to_string(s.posinf), std::to_string(s.neginf)}});
    }
    return table;
}

} // namespace

ReportBlock problems_block(const std::vector<Problem>& problems)
{
    ReportBlock block{.kind = ReportBlock::Kind::problems};
    for (const Problem& p : problems)
        block.items.emplace_back(std::string(to_string(p.kind)), p.message);
    return block;
}

ReportBlock content_verdict(const ContentReport& content)
{
    uint64_t nonfinite = 0;
    for (const TensorContent& t : content.tensors)
        nonfinite += t.stats.nonfinite() > 0;
    if (content.ok())
        return {.kind = ReportBlock::Kind::verdict,
                .text = "All " + std::to_string(content.tensors.size()) + " tensors are finite" +
                    (content.format == "shardscope"
                         ? ", no second moment is negative and every parameter is its rounded master"
                         : ""),
                .good = true};
    return {.kind = ReportBlock::Kind::verdict,
            .text =
                content.cancelled ? std::string("Reading the tensors was cancelled") : content.problems.front().message,
            .detail = nonfinite > 0 ? std::to_string(nonfinite) + " of " + std::to_string(content.tensors.size()) +
                    " tensors hold NaN or Inf: the run had diverged when this step was saved. "
                    "Resume from an earlier step."
                                    : "The saved state is inconsistent (see the problems below): resume from an "
                                      "earlier step.",
            .good = false};
}

void content_section(const ContentReport& content, std::vector<ReportBlock>& doc)
{
    doc.push_back({.kind = ReportBlock::Kind::heading, .level = 2, .text = "Tensor content"});
    if (content.ok()) // what the values showed; the verdict at the top says what it means for resuming
        doc.push_back({.kind = ReportBlock::Kind::note, .text = content_verdict(content).text + "."});
    if (!content.problems.empty() || !content.warnings.empty()) {
        ReportBlock problems = problems_block(content.problems);
        for (const Problem& p : content.warnings)
            problems.items.emplace_back("warning: " + std::string(to_string(p.kind)), p.message);
        doc.push_back(std::move(problems));
    }
    if (const ReportTable nonfinite = content_table(content); !nonfinite.rows.empty())
        doc.push_back({.kind = ReportBlock::Kind::table, .table = nonfinite});
}

namespace {

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
        if (t.status == DiffStatus::identical || table.rows.size() >= kRowsShown)
            continue;
        const bool compared = t.status == DiffStatus::changed || t.status == DiffStatus::dtype_changed;
        const auto rel = t.rel_l2();
        table.rows.push_back({{printable(t.name), t.state, std::string(to_string(t.status)),
                               compared ? std::to_string(t.sums.changed) + " of " + std::to_string(t.numel) : "",
                               compared ? significant(t.sums.max_abs_diff) : "",
                               compared ? (rel ? significant(*rel) : std::string("inf")) : ""}});
    }
    return table;
}

} // namespace

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
                       .text = std::to_string(diff.tensors.size() - same) + " of " +
                           std::to_string(diff.tensors.size()) + " tensors differ",
                       .detail = diff.cancelled ? "The comparison was cancelled: not every tensor was compared."
                                                : "The tensors below differ (bitwise unless a tolerance is given); "
                                                  "relative change is ||a-b|| / ||a||.",
                       .good = false});
    if (!diff.problems.empty())
        doc.push_back(problems_block(diff.problems));
    if (same < diff.tensors.size())
        doc.push_back({.kind = ReportBlock::Kind::table, .table = diff_table(diff)});
}

} // namespace shardscope::report
