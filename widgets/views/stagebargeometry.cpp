#include "widgets/views/stagebargeometry.h"

#include <algorithm>
#include <cmath>

namespace shardwidgets {

StageBarGeometry StageBarGeometry::layout(const std::vector<double>& costs, double left, double width)
{
    StageBarGeometry geometry;
    double total = 0;
    for (double cost : costs)
        total += std::max(0.0, cost);
    geometry.edges.reserve(costs.size() + 1);
    double x = left;
    geometry.edges.push_back(x);
    for (double cost : costs) {
        const double share = total > 0 ? std::max(0.0, cost) / total : 1.0 / double(costs.size());
        x += share * width;
        geometry.edges.push_back(x);
    }
    if (!costs.empty())
        geometry.edges.back() = left + width; // no rounding drift at the right end
    return geometry;
}

int StageBarGeometry::layerAt(double x) const
{
    if (edges.size() < 2 || x < edges.front() || x > edges.back())
        return -1;
    const auto it = std::upper_bound(edges.begin(), edges.end(), x);
    const int layer = int(it - edges.begin()) - 1;
    return std::clamp(layer, 0, layerCount() - 1);
}

int StageBarGeometry::snapEdge(double x) const
{
    const int layers = layerCount();
    if (layers < 2)
        return 1;
    int best = 1;
    double bestDistance = std::abs(edges[1] - x);
    for (int edge = 2; edge < layers; ++edge) {
        const double distance = std::abs(edges[std::size_t(edge)] - x);
        if (distance < bestDistance) {
            best = edge;
            bestDistance = distance;
        }
    }
    return best;
}

int StageBarGeometry::boundaryAt(const std::vector<int>& boundaries, double x) const
{
    int best = -1;
    double bestDistance = grabTolerance;
    for (std::size_t i = 0; i < boundaries.size(); ++i) {
        const int edge = boundaries[i];
        if (edge <= 0 || edge >= int(edges.size()))
            continue;
        const double distance = std::abs(edges[std::size_t(edge)] - x);
        if (distance <= bestDistance) {
            best = int(i);
            bestDistance = distance;
        }
    }
    return best;
}

int StageBarGeometry::captionForm(const std::vector<double>& pieceWidths,
                                  const std::vector<std::vector<double>>& textWidths)
{
    for (std::size_t form = 0; form + 1 < textWidths.size(); ++form) {
        bool all = true;
        for (std::size_t piece = 0; piece < pieceWidths.size() && all; ++piece)
            all = captionFits(textWidths[form][piece], pieceWidths[piece]);
        if (all)
            return int(form);
    }
    return int(textWidths.size()) - 1;
}

int StageBarGeometry::moveBoundary(std::vector<int>& boundaries, int index, int edge) const
{
    const int count = int(boundaries.size());
    if (index < 0 || index >= count)
        return -1;
    const int lowest = index == 0 ? 1 : boundaries[std::size_t(index - 1)] + 1;
    const int highest = index == count - 1 ? layerCount() - 1 : boundaries[std::size_t(index + 1)] - 1;
    const int clamped = std::clamp(edge, lowest, std::max(lowest, highest));
    boundaries[std::size_t(index)] = clamped;
    return clamped;
}

} // namespace shardwidgets
