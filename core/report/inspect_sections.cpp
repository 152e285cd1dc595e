// The report's sections about what the tensors hold (internal/sections.h): the content-health
// verdict and section (shardctl stats) and the comparison (shardctl diff).

#include "core/report/internal/sections.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cstdio>

namespace shardscope::report {

namespace {

// The files that failed verification and, per tensor (-1: none), its mark: the tensors whose
// figures are not the saved values (tensors_read_from), as the app marks them.
struct FailedSources {
    std::vector<std::string> files;
    std::vector<std::string> why; // per file: its status in words, "hash mismatch"
    std::vector<TensorFromFiles> marks;
    std::vector<int> mark_of; // per tensor
};

FailedSources failed_sources(const ContentReport& content, const VerifyReport* verify)
{
    FailedSources out;
    if (!verify)
        return out;
    out.files = failed_files(*verify);
    for (const std::string& file : out.files)
        for (const ShardCheck& shard : verify->shards)
            if (shard.path == file) {
                std::string words(to_string(shard.status));
                std::replace(words.begin(), words.end(), '_', ' ');
                out.why.push_back(std::move(words));
                break;
            }
    out.marks = tensors_read_from(content, out.files);
    out.mark_of.assign(content.tensors.size(), -1);
    for (std::size_t i = 0; i < out.marks.size(); ++i)
        out.mark_of[out.marks[i].tensor] = int(i);
    return out;
}

// "✗ rank3.safetensors (hash mismatch): 31250 of 281250 elements", or what was not read at all.
std::string failed_cell(const FailedSources& failed, const TensorContent& t, const TensorFromFiles& mark)
{
    const uint64_t whole = t.stats.numel + mark.unread;
    std::string cell = "✗ ";
    for (std::size_t i = 0; i < mark.files.size(); ++i)
        cell += (i ? ", " : "") + printable(failed.files[mark.files[i]]) + " (" + failed.why[mark.files[i]] + ")";
    if (!mark.files.empty() && mark.numel < whole)
        cell += ": " + std::to_string(mark.numel) + " of " + std::to_string(whole) + " elements";
    if (mark.unread > 0)
        cell += (mark.files.empty() ? "" : "; ") + std::to_string(mark.unread) + " of " + std::to_string(whole) +
            " elements not read" +
            (failed.files.size() == 1 ? " (" + printable(failed.files.front()) + ", " + failed.why.front() + ")" : "");
    return cell;
}

// The tensors worth a look, in model order: the ones holding NaN/Inf and the ones whose values
// came from files that failed verification (marked in their own column).
ReportTable content_table(const ContentReport& content, const FailedSources& failed, std::size_t& left_out)
{
    const bool marking = !failed.marks.empty();
    ReportTable table{.header = {"Tensor", "State", "Dtype", "Elements", "NaN", "+Inf", "-Inf"},
                      .right = {false, false, false, true, true, true, true}};
    if (marking) {
        table.header.push_back("From a file that failed verification");
        table.right.push_back(false);
    }
    left_out = 0;
    for (std::size_t i = 0; i < content.tensors.size(); ++i) {
        const TensorContent& t = content.tensors[i];
        const int mark = marking ? failed.mark_of[i] : -1;
        if (t.stats.nonfinite() == 0 && mark < 0)
            continue;
        if (table.rows.size() >= kRowsShown) {
            ++left_out;
            continue;
        }
        const ValueStats& s = t.stats;
        ReportTable::Row row{{printable(t.name), t.state, std::string(to_string(t.type)), std::to_string(s.numel),
                              std::to_string(s.nan), std::to_string(s.posinf), std::to_string(s.neginf)}};
        if (marking)
            row.cells.push_back(mark < 0 ? std::string() : failed_cell(failed, t, failed.marks[std::size_t(mark)]));
        table.rows.push_back(std::move(row));
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

void content_section(const ContentReport& content, const VerifyReport* verify, std::vector<ReportBlock>& doc)
{
    doc.push_back({.kind = ReportBlock::Kind::heading, .level = 2, .text = "Tensor content"});
    const FailedSources failed = failed_sources(content, verify);
    if (!failed.marks.empty()) { // figures from damaged bytes are not "finite" in any sense that helps
        std::string names;
        for (std::size_t i = 0; i < failed.files.size() && i < 4; ++i)
            names += (i ? ", " : "") + printable(failed.files[i]);
        doc.push_back({.kind = ReportBlock::Kind::note,
                       .text = "The values of " + std::to_string(failed.marks.size()) + " of " +
                           std::to_string(content.tensors.size()) +
                           " tensors come, in whole or in part, from files that failed verification (" + names +
                           (failed.files.size() > 4 ? ", ..." : "") +
                           "): their statistics are not the saved values. They are marked below."});
    } else if (content.ok()) { // what the values showed; the verdict at the top says what it means for resuming
        doc.push_back({.kind = ReportBlock::Kind::note, .text = content_verdict(content).text + "."});
    }
    if (!content.problems.empty() || !content.warnings.empty()) {
        ReportBlock problems = problems_block(content.problems);
        for (const Problem& p : content.warnings)
            problems.items.emplace_back("warning: " + std::string(to_string(p.kind)), p.message);
        doc.push_back(std::move(problems));
    }
    std::size_t left_out = 0;
    if (ReportTable tensors = content_table(content, failed, left_out); !tensors.rows.empty())
        doc.push_back({.kind = ReportBlock::Kind::table, .table = std::move(tensors)});
    if (left_out > 0)
        doc.push_back(
            {.kind = ReportBlock::Kind::note,
             .text = std::to_string(left_out) + " more tensors are not shown; the JSON report lists all of them."});
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
