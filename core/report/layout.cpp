// Table fitting and line breaking for the PDF (layout.h).

#include "core/report/layout.h"

#include "core/util/printable.h"

#include <algorithm>
#include <numeric>

namespace shardscope {

std::vector<std::string> break_pieces(std::string_view text)
{
    std::vector<std::string> pieces;
    std::string piece;
    for (char c : text) {
        if (c == ' ' || c == '\n') {
            if (!piece.empty())
                pieces.push_back(std::move(piece));
            piece.clear();
            continue;
        }
        piece += c;
        if (c == '/' && piece.size() > 1) {
            pieces.push_back(std::move(piece));
            piece.clear();
        }
    }
    if (!piece.empty())
        pieces.push_back(std::move(piece));
    return pieces;
}

namespace {

struct ColumnNeeds {
    double min = 0; // the longest piece
    double natural = 0; // the longest cell on one line
};

std::vector<ColumnNeeds> column_needs(const ReportTable& table, bool own_line, const TextMeasure& measure)
{
    std::vector<ColumnNeeds> needs(table.header.size());
    auto consider = [&](std::size_t c, const std::string& text, bool header) {
        if (own_line && int(c) == table.own_line_column)
            return;
        const bool mono = !header && int(c) == table.own_line_column;
        for (const std::string& piece : break_pieces(text))
            needs[c].min = std::max(needs[c].min, measure(piece, mono));
        needs[c].natural = std::max(needs[c].natural, measure(text, mono));
    };
    for (std::size_t c = 0; c < table.header.size(); ++c)
        consider(c, table.header[c], true);
    for (const auto& row : table.rows)
        for (std::size_t c = 0; c < row.cells.size() && c < needs.size(); ++c)
            consider(c, row.cells[c], false);
    return needs;
}

// Widths filling `available`: the natural widths when they fit, else the minimum widths plus the
// rest shared by how much each column would still like.
std::vector<double> distribute(const std::vector<ColumnNeeds>& needs, double available, double scale, double padding,
                               bool own_line, int own_line_column)
{
    std::vector<double> min(needs.size()), natural(needs.size());
    for (std::size_t c = 0; c < needs.size(); ++c) {
        const bool shown = !(own_line && int(c) == own_line_column);
        min[c] = shown ? needs[c].min * scale + padding : 0;
        natural[c] = shown ? needs[c].natural * scale + padding : 0;
    }
    const double sum_min = std::accumulate(min.begin(), min.end(), 0.0);
    const double sum_natural = std::accumulate(natural.begin(), natural.end(), 0.0);
    std::vector<double> widths(needs.size());
    if (sum_natural <= available) {
        for (std::size_t c = 0; c < needs.size(); ++c)
            widths[c] = natural[c] + (available - sum_natural) * (sum_natural > 0 ? natural[c] / sum_natural : 0);
    } else if (sum_min <= available) {
        const double want = sum_natural - sum_min;
        for (std::size_t c = 0; c < needs.size(); ++c)
            widths[c] = min[c] + (available - sum_min) * (want > 0 ? (natural[c] - min[c]) / want : 0);
    } else { // the last resort: shrink every column alike, words will break
        for (std::size_t c = 0; c < needs.size(); ++c)
            widths[c] = sum_min > 0 ? min[c] * available / sum_min : 0;
    }
    return widths;
}

} // namespace

TableFit fit_table(const ReportTable& table, double portrait_width, double landscape_width, double padding,
                   const TextMeasure& measure)
{
    const bool can_detach = table.own_line_column >= 0 && std::size_t(table.own_line_column) < table.header.size();
    const std::vector<ColumnNeeds> inline_needs = column_needs(table, false, measure);
    const std::vector<ColumnNeeds> detached_needs = can_detach ? column_needs(table, true, measure) : inline_needs;
    auto fits = [&](const std::vector<ColumnNeeds>& needs, double available, double scale, bool own_line) {
        double sum = 0;
        for (std::size_t c = 0; c < needs.size(); ++c)
            if (!(own_line && int(c) == table.own_line_column))
                sum += needs[c].min * scale + padding;
        return sum <= available;
    };
    // Most readable first: the whole table at body size; then the long column on its own line;
    // then smaller type; then a landscape page.
    struct Attempt {
        bool landscape;
        double scale;
        bool own_line;
    };
    std::vector<Attempt> attempts{{false, 1.0, false}};
    for (bool landscape : {false, true})
        for (double scale : {1.0, 0.9, 0.8}) {
            if (can_detach)
                attempts.push_back({landscape, scale, true});
            else
                attempts.push_back({landscape, scale, false});
        }
    for (const Attempt& a : attempts) {
        const auto& needs = a.own_line ? detached_needs : inline_needs;
        const double available = a.landscape ? landscape_width : portrait_width;
        if (fits(needs, available, a.scale, a.own_line))
            return {.scale = a.scale,
                    .landscape = a.landscape,
                    .own_line = a.own_line,
                    .widths = distribute(needs, available, a.scale, padding, a.own_line, table.own_line_column)};
    }
    return {.scale = 0.8,
            .landscape = true,
            .own_line = can_detach,
            .breaks_words = true,
            .widths = distribute(detached_needs, landscape_width, 0.8, padding, can_detach, table.own_line_column)};
}

std::vector<std::string> wrap_text(std::string_view text, double width, bool break_words,
                                   const std::function<double(std::string_view)>& measure)
{
    std::vector<std::string> lines;
    std::string line;
    // Pieces keep their trailing '/', spaces are re-inserted between pieces a space separated.
    std::vector<std::pair<std::string, bool>> pieces; // piece, preceded by a space
    {
        std::string piece;
        bool space_before = false, pending_space = false;
        for (char c : text) {
            if (c == ' ' || c == '\n') {
                if (!piece.empty())
                    pieces.emplace_back(std::move(piece), space_before);
                piece.clear();
                pending_space = true;
                continue;
            }
            if (piece.empty()) {
                space_before = pending_space && !pieces.empty();
                pending_space = false;
            }
            piece += c;
            if (c == '/' && piece.size() > 1) {
                pieces.emplace_back(std::move(piece), space_before);
                piece.clear();
            }
        }
        if (!piece.empty())
            pieces.emplace_back(std::move(piece), space_before);
    }
    for (auto& [piece, space] : pieces) {
        const std::string joined = line.empty() ? piece : line + (space ? " " : "") + piece;
        if (line.empty() || measure(joined) <= width) {
            line = joined;
        } else {
            lines.push_back(std::move(line));
            line = piece;
        }
        // A piece wider than the column: only as the last resort, break it between characters.
        while (break_words && measure(line) > width) {
            std::size_t cut = 0;
            for (std::size_t at = 0; at < line.size();) {
                const std::size_t next =
                    at + std::max<std::size_t>(1, utf8_sequence_length(std::string_view(line).substr(at)));
                if (cut > 0 && measure(std::string_view(line).substr(0, next)) > width)
                    break;
                cut = next;
                at = next;
            }
            if (cut == 0 || cut >= line.size())
                break;
            lines.push_back(line.substr(0, cut));
            line.erase(0, cut);
        }
    }
    if (!line.empty() || lines.empty())
        lines.push_back(std::move(line));
    return lines;
}

HeadingPlace place_heading(const std::vector<ReportBlock>& blocks, std::size_t index, double y, double bottom,
                           bool on_landscape, const BlockRoomMeasure& room)
{
    HeadingPlace place{.landscape = on_landscape, .headed = index};
    double needed = 0;
    needed += room(blocks[place.headed++]).whole;
    // Its notes and subsections' headings lead on to the first block of substance; the next
    // section's heading ends it (a section of notes only keeps its notes).
    auto leads_on = [&](const ReportBlock& b) {
        return b.kind == ReportBlock::Kind::note ||
            (b.kind == ReportBlock::Kind::heading && b.level > blocks[index].level);
    };
    while (place.headed < blocks.size() && leads_on(blocks[place.headed]))
        needed += room(blocks[place.headed++]).whole;
    if (place.headed < blocks.size() && blocks[place.headed].kind != ReportBlock::Kind::heading) {
        const BlockRoom headed = room(blocks[place.headed]);
        needed += headed.first;
        place.landscape = headed.landscape;
    } else {
        place.landscape = false; // trailing notes go where the text goes
    }
    // At the top of a page a break gains nothing: what does not fit there fits nowhere.
    place.new_page = place.landscape != on_landscape || (y > 0 && y + needed > bottom);
    return place;
}

} // namespace shardscope
