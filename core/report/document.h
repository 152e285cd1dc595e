#pragma once
// The report as a list of blocks (headings, the verdict, tables, problems, pictures, notes),
// defined once in report_document(): Markdown, HTML and the PDF render exactly these, in this
// order, so the three cannot drift apart.

#include "core/report/report.h"

#include <string>
#include <utility>
#include <vector>

namespace shardscope
{

struct ReportTable {
    struct Row {
        std::vector<std::string> cells;
    };
    std::vector<std::string> header;
    std::vector<Row> rows;
    std::vector<bool> right; // right-aligned columns
};

struct ReportBlock {
    enum class Kind { heading, note, verdict, table, problems, image };
    Kind kind = Kind::note;
    int level = 1;      // heading: 1 (title), 2 (section), 3 (subsection)
    std::string text;   // heading, note, verdict title, image alt text
    std::string detail; // verdict: what it means for resuming
    bool good = true;   // verdict: no failure
    ReportTable table;
    std::vector<std::pair<std::string, std::string>> items; // problems: kind, message
    std::string source;                                     // image: file name or data: URI
};

std::vector<ReportBlock> report_document(const ReportInput& input);

} // namespace shardscope
