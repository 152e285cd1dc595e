// Markdown and HTML from the report's blocks (document.h). The PDF paints the same blocks
// (widgets/export, fitted to the page by layout.h), so all three show the same sections in the
// same order.

#include "core/report/document.h"
#include "core/report/report.h"

#include <sstream>

namespace shardscope {

namespace {

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

void markdown_table(std::ostringstream& out, const ReportTable& table)
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
        for (std::size_t c = 0; c < row.cells.size(); ++c) {
            const std::string& cell = row.cells[c];
            if (int(c) == table.own_line_column && !cell.empty())
                out << " `" << md_cell(cell) << "` |";
            else
                out << ' ' << md_cell(cell) << " |";
        }
        out << '\n';
    }
    out << '\n';
}

void html_table(std::ostringstream& out, const ReportTable& table)
{
    out << "<table border=\"1\" cellspacing=\"0\" cellpadding=\"4\">\n<thead><tr>";
    for (const auto& h : table.header)
        out << "<th>" << html_escape(h) << "</th>";
    out << "</tr></thead>\n";
    for (const auto& row : table.rows) {
        out << "<tr>";
        for (std::size_t c = 0; c < row.cells.size(); ++c) {
            const std::string& cell = row.cells[c];
            std::string style;
            if (cell.rfind("✗", 0) == 0)
                style = " style=\"color:#c01c28;font-weight:bold\"";
            else if (cell.rfind("✓", 0) == 0)
                style = " style=\"color:#1a7f37\"";
            if (int(c) == table.own_line_column)
                out << "<td><code>" << html_escape(cell) << "</code></td>";
            else
                out << "<td" << (table.right[c] ? " align=\"right\"" : "") << style << '>' << html_escape(cell)
                    << "</td>";
        }
        out << "</tr>\n";
    }
    out << "</table>\n";
}

} // namespace

std::string report_markdown(const ReportInput& input)
{
    std::ostringstream out;
    for (const ReportBlock& block : report_document(input)) {
        switch (block.kind) {
        case ReportBlock::Kind::heading:
            out << std::string(static_cast<std::size_t>(block.level), '#') << ' ' << block.text << "\n\n";
            break;
        case ReportBlock::Kind::note: out << '_' << block.text << "_\n\n"; break;
        case ReportBlock::Kind::verdict:
            out << "**" << (block.good ? "✓ " : block.unknown ? "? " : "✗ ") << block.text << "**\n\n";
            if (!block.detail.empty())
                out << block.detail << "\n\n";
            break;
        case ReportBlock::Kind::table: markdown_table(out, block.table); break;
        case ReportBlock::Kind::problems:
            for (const auto& [kind, message] : block.items)
                out << "- `" << kind << "` " << md_cell(message) << '\n';
            out << '\n';
            break;
        case ReportBlock::Kind::image: out << "![" << block.text << "](" << block.source << ")\n\n"; break;
        }
    }
    return out.str();
}

std::string report_html(const ReportInput& input)
{
    std::ostringstream out;
    out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << html_escape(input.title)
        << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#1f2328}"
           "table{border-collapse:collapse;margin:8px 0 16px "
           "0}th{background:#eef1f4;text-align:left}"
           "th,td{border:1px solid #c8ccd0;padding:3px 8px;font-size:10pt;vertical-align:top}"
           "code{font-family:monospace;font-size:9pt}"
           ".bad{background:#fde7e9;border-left:4px solid #c01c28;padding:8px 12px}"
           ".good{background:#e6f4ea;border-left:4px solid #1a7f37;padding:8px 12px}"
           ".unknown{background:#fff4d6;border-left:4px solid #9a6700;padding:8px 12px}"
           "img{max-width:100%}</style></head><body>\n";
    for (const ReportBlock& block : report_document(input)) {
        switch (block.kind) {
        case ReportBlock::Kind::heading:
            out << "<h" << block.level << '>' << html_escape(block.text) << "</h" << block.level << ">\n";
            break;
        case ReportBlock::Kind::note: out << "<p><i>" << html_escape(block.text) << "</i></p>\n"; break;
        case ReportBlock::Kind::verdict:
            out << "<table class=\""
                << (block.good          ? "good"
                        : block.unknown ? "unknown"
                                        : "bad")
                << "\" width=\"100%\" cellpadding=\"8\" bgcolor=\""
                << (block.good          ? "#e6f4ea"
                        : block.unknown ? "#fff4d6"
                                        : "#fde7e9")
                << "\"><tr><td><b>"
                << (block.good          ? "✓ "
                        : block.unknown ? "? "
                                        : "✗ ")
                << html_escape(block.text) << "</b>";
            if (!block.detail.empty())
                out << "<br>" << html_escape(block.detail);
            out << "</td></tr></table>\n";
            break;
        case ReportBlock::Kind::table: html_table(out, block.table); break;
        case ReportBlock::Kind::problems:
            out << "<ul>\n";
            for (const auto& [kind, message] : block.items)
                out << "<li><code>" << html_escape(kind) << "</code> " << html_escape(message) << "</li>\n";
            out << "</ul>\n";
            break;
        case ReportBlock::Kind::image:
            out << "<p><img src=\"" << html_escape(block.source) << "\" alt=\"" << html_escape(block.text)
                << "\"></p>\n";
            break;
        }
    }
    out << "</body></html>\n";
    return out.str();
}

} // namespace shardscope
