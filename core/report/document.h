#pragma once
// The report as a list of blocks (headings, the verdict, tables, problems, pictures, notes),
// defined once in report_document(): Markdown, HTML and the PDF render exactly these, in this
// order, so the three cannot drift apart.

#include "core/report/report.h"

#include <string>
#include <utility>
#include <vector>

namespace shardscope {

struct ReportTable {
    struct Row {
        std::vector<std::string> cells;
    };
    std::vector<std::string> header;
    std::vector<Row> rows;
    std::vector<bool> right; // right-aligned columns
    // A column of long unbreakable values (the full SHA-256), shown in monospace; a renderer with
    // a page too narrow for it puts it on a line of its own under each row (layout.h).
    int own_line_column = -1;
};

struct ReportBlock {
    enum class Kind { heading, note, verdict, table, problems, image };
    Kind kind = Kind::note;
    int level = 1; // heading: 1 (title), 2 (section), 3 (subsection)
    std::string text; // heading, note, verdict title, image alt text
    std::string detail; // verdict: what it means for resuming
    bool good = true; // verdict: safe to resume
    bool unknown = false; // verdict: not known yet (the values were not read): neither good nor bad
    ReportTable table;
    std::vector<std::pair<std::string, std::string>> items; // problems: kind, message
    std::string source; // image: file name or data: URI
};

// The verdict comes first: what is wrong and what it means for resuming, before any detail.
std::vector<ReportBlock> report_document(const ReportInput& input);

// What the report is about in a few words, for a page footer: "w8 · step 0", "uniform-16".
std::string report_subject(const ReportInput& input);
// A file name for the exported report: "shardscope-w8-step-0.pdf" (only [A-Za-z0-9._-]).
std::string report_file_name(const ReportInput& input, std::string_view suffix);

} // namespace shardscope
