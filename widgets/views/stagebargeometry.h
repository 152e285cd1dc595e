#pragma once
// Geometry of the stage bar, without a window: every layer is a segment whose width is
// proportional to its compute cost; a boundary is the left edge of the first layer of a piece.
// Hit-testing a boundary, snapping a drag to the nearest layer edge and keeping every piece at
// least one layer wide all live here, so they can be tested as plain arithmetic.

#include <vector>

namespace shardwidgets {

struct StageBarGeometry {
    std::vector<double> edges; // edges[i] = x of layer i's left edge; edges.back() = right end
    double grabTolerance = 5.0; // pixels either side of a boundary that still grab it

    // `costs` one per layer (>= 0; all zero is drawn uniformly) laid out over [left, left+width].
    static StageBarGeometry layout(const std::vector<double>& costs, double left, double width);

    int layerCount() const { return edges.empty() ? 0 : int(edges.size()) - 1; }
    double edgeX(int layerEdge) const { return edges.at(std::size_t(layerEdge)); }
    // The layer under x, or -1 outside the bar.
    int layerAt(double x) const;
    // The nearest interior layer edge (1 .. layers-1) to x.
    int snapEdge(double x) const;
    // Index into `boundaries` of the boundary within grabTolerance of x (the nearest), or -1.
    int boundaryAt(const std::vector<int>& boundaries, double x) const;
    // Which caption form every piece shows: `textWidths[form][piece]` is the width of the piece's
    // caption in that form (longest form first), `pieceWidths[piece]` the room under it. The first
    // form that fits every piece, so the bar never mixes "Stage 0 · 0–2" with bare numbers; when
    // none fits them all, the last (shortest) form, drawn only in the pieces it fits.
    static int captionForm(const std::vector<double>& pieceWidths, const std::vector<std::vector<double>>& textWidths);
    static bool captionFits(double textWidth, double pieceWidth) { return textWidth + 4 <= pieceWidth; }

    // `boundaries` with boundary `index` moved to layer edge `edge`, clamped so that every piece
    // keeps at least one layer. Returns the edge actually used.
    int moveBoundary(std::vector<int>& boundaries, int index, int edge) const;
};

} // namespace shardwidgets
