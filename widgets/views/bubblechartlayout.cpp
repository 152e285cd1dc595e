#include "widgets/views/bubblechartlayout.h"

#include <algorithm>
#include <cmath>

namespace shardwidgets {

double BubbleChartLayout::xEnd(const std::vector<std::vector<ChartPoint>>& lines, int currentM)
{
    double end = std::max(2.0, double(currentM));
    for (const auto& line : lines)
        for (const ChartPoint& p : line)
            end = std::max(end, p.x);
    return end;
}

std::vector<int> BubbleChartLayout::sameAs(const std::vector<std::vector<ChartPoint>>& lines, double tolerance)
{
    std::vector<int> out(lines.size(), -1);
    auto same = [tolerance](const std::vector<ChartPoint>& a, const std::vector<ChartPoint>& b) {
        if (a.empty() || a.size() != b.size())
            return false;
        for (std::size_t k = 0; k < a.size(); ++k)
            if (a[k].x != b[k].x || std::abs(a[k].y - b[k].y) > tolerance)
                return false;
        return true;
    };
    for (std::size_t i = 0; i < lines.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (out[j] < 0 && same(lines[i], lines[j])) {
                out[i] = int(j);
                break;
            }
    return out;
}

double BubbleChartLayout::pixelTolerance(double pixels, double plotHeight, double yMin, double yMax)
{
    return plotHeight > 0 ? pixels * std::abs(yMax - yMin) / plotHeight : 0.0;
}

int BubbleChartLayout::stackRank(const std::vector<int>& sameAs, int line)
{
    if (line < 0 || line >= int(sameAs.size()) || sameAs[std::size_t(line)] < 0)
        return 0;
    int rank = 1;
    for (int i = 0; i < line; ++i)
        rank += sameAs[std::size_t(i)] == sameAs[std::size_t(line)];
    return rank;
}

std::vector<double> BubbleChartLayout::dashPattern(int rank)
{
    if (rank <= 0)
        return {};
    // Dash 3, gap 3 * rank: the second curve of a stack covers half, the third a third...
    return {3.0, 3.0 * rank};
}

} // namespace shardwidgets
