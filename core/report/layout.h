#pragma once
// Fitting the report's tables to a page, for the renderer that has one (the PDF). Plain geometry
// over a text-measuring callback, so it is tested without fonts or a window: a column is never
// narrower than its longest word, a full SHA-256 goes on its own line before the type gets
// smaller, the page turns to landscape before a word is broken, and a heading never ends a page.

#include "core/report/document.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// The width of `text` at the body type size; `mono`: in the monospace face.
using TextMeasure = std::function<double(std::string_view text, bool mono)>;

struct TableFit {
    double scale = 1.0; // type size relative to the body's (1.0, 0.9, 0.8)
    bool landscape = false; // the table needs a landscape page
    bool own_line = false; // the table's own_line_column is drawn on a line of its own
    bool breaks_words = false; // nothing fitted, not even landscape at the smallest type
    std::vector<double> widths; // per column, padding included; 0 for a column on its own line
};

// `padding`: a cell's left plus right padding, in the measure's units.
TableFit fit_table(const ReportTable& table, double portrait_width, double landscape_width, double padding,
                   const TextMeasure& measure);

// Where a line may break: after a space (which is dropped) or after a '/' (paths). The pieces
// are the unbreakable "words" a column must hold.
std::vector<std::string> break_pieces(std::string_view text);

// `text` in lines no wider than `width`, broken only between pieces; a piece wider than `width`
// on its own is broken between characters only when `break_words` (the last resort).
std::vector<std::string> wrap_text(std::string_view text, double width, bool break_words,
                                   const std::function<double(std::string_view)>& measure);

// How much room a block takes, as the renderer measures it on the current page.
struct BlockRoom {
    double whole = 0; // the block and the space after it
    // Its top that the renderer never splits from the rest: the whole of a picture, a verdict or a
    // short table; a long table's header and first row; a problem list's first item.
    double first = 0;
    bool landscape = false; // it is drawn on a landscape page of its own
};
using BlockRoomMeasure = std::function<BlockRoom(const ReportBlock& block)>;

// Where heading `index` of `blocks` goes. It stays with what it heads: itself, the notes and
// subsection headings right after it and the first part of the block they lead to (unless that
// is the next section's heading) must fit below `y` on a page whose text ends at `bottom`, else
// the heading starts the next page. A heading of a landscape table starts the table's landscape
// page.
struct HeadingPlace {
    bool new_page = false; // break before the heading
    bool landscape = false; // the page it is on is landscape (the headed block's)
    std::size_t headed = 0; // the block it leads to: the first after it that is not a note or a subheading
};
HeadingPlace place_heading(const std::vector<ReportBlock>& blocks, std::size_t index, double y, double bottom,
                           bool on_landscape, const BlockRoomMeasure& room);

} // namespace shardscope
