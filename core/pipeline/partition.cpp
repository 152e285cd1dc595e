#include "core/pipeline/partition.h"

#include "core/util/error.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>

namespace shardscope::pipeline {
namespace {

[[noreturn]] void bad_partition(const std::string& sentence)
{
    throw Error(ProblemKind::invalid_schedule, sentence);
}

void check_piece_count(int layer_count, int pieces)
{
    if (pieces < 1)
        bad_partition("a partition needs at least one piece, not " + std::to_string(pieces));
    if (pieces > layer_count)
        bad_partition("cannot cut " + std::to_string(layer_count) + " layers into " + std::to_string(pieces) +
                      " pieces (stages x virtual stages): every piece needs at least one layer");
}

std::vector<int> uniform_boundaries(int layer_count, int pieces)
{
    std::vector<int> boundaries;
    const int base = layer_count / pieces;
    const int extra = layer_count % pieces;
    int next = 0;
    for (int p = 0; p + 1 < pieces; ++p) {
        next += base + (p < extra ? 1 : 0);
        boundaries.push_back(next);
    }
    return boundaries;
}

// Exact min-max contiguous partition. best[j] = the smallest possible largest piece when the
// first j layers form k pieces. best is non-decreasing in j and the last piece's weight
// S[j] - S[i] non-increasing in i, so the optimal split is at their crossing, found by binary
// search; both facts also hold for the rounded floating-point values, so the result is the
// exact optimum of the same arithmetic that the greedy reconstruction below uses.
std::vector<int> min_max_boundaries(const std::vector<double>& weights, int pieces)
{
    const int n = static_cast<int>(weights.size());
    std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
    for (int i = 0; i < n; ++i)
        prefix[i + 1] = prefix[i] + weights[i];
    auto range = [&](int from, int to) { return prefix[to] - prefix[from]; };

    std::vector<double> best(prefix); // k = 1: one piece holds layers [0, j)
    std::vector<double> next(best.size());
    for (int k = 2; k <= pieces; ++k) {
        // Layers [0, j) into k pieces needs j >= k; the last piece is [i, j) with i in [k-1, j-1].
        for (int j = k; j <= n - (pieces - k); ++j) {
            int lo = k - 1;
            int hi = j - 1;
            // smallest i in [lo, hi] with best[i] >= range(i, j); hi + 1 if none
            int first = hi + 1;
            while (lo <= hi) {
                const int mid = lo + (hi - lo) / 2;
                if (best[mid] >= range(mid, j)) {
                    first = mid;
                    hi = mid - 1;
                } else {
                    lo = mid + 1;
                }
            }
            double value = std::numeric_limits<double>::infinity();
            if (first <= j - 1)
                value = std::max(best[first], range(first, j));
            if (first - 1 >= k - 1)
                value = std::min(value, std::max(best[first - 1], range(first - 1, j)));
            next[j] = value;
        }
        std::swap(best, next);
    }
    const double bottleneck = best[n];

    // Greedy from the right: each piece takes as many layers as fit under the bottleneck while
    // leaving at least one layer for every piece still to its left. Feasible because the
    // bottleneck is attained, and no single layer exceeds it.
    std::vector<int> boundaries(static_cast<std::size_t>(pieces - 1));
    int end = n;
    for (int p = pieces - 1; p >= 1; --p) {
        int start = end - 1;
        while (start - 1 >= p && range(start - 1, end) <= bottleneck)
            --start;
        boundaries[p - 1] = start;
        end = start;
    }
    return boundaries;
}

// A layer's costs into its piece, a piece's into its stage: the same six sums.
template <class Sum, class Part>
void add_costs(Sum& sum, const Part& part)
{
    sum.params += part.params;
    sum.fwd_ms += part.fwd_ms;
    sum.bwd_ms += part.bwd_ms;
    sum.bwd_input_ms += part.bwd_input_ms;
    sum.bwd_weight_ms += part.bwd_weight_ms;
    sum.activation_bytes += part.activation_bytes;
}

} // namespace

PartitionSpec parse_partition_spec(std::string_view text)
{
    if (text == "uniform")
        return {PartitionMethod::uniform, {}};
    if (text == "params")
        return {PartitionMethod::params, {}};
    if (text == "compute")
        return {PartitionMethod::compute, {}};
    constexpr std::string_view kManual = "manual:";
    if (text.substr(0, kManual.size()) != kManual)
        throw Error(ProblemKind::invalid_argument,
                    "--partition must be uniform, params, compute or manual:B1,B2,..., not '" + std::string(text) +
                        "'");
    PartitionSpec spec{PartitionMethod::manual, {}};
    std::string_view rest = text.substr(kManual.size());
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        int value = 0;
        const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (item.empty() || error != std::errc() || end != item.data() + item.size())
            throw Error(ProblemKind::invalid_argument,
                        "manual partition boundaries must be layer indices separated by commas; '" + std::string(item) +
                            "' in '" + std::string(text) + "' is not one");
        spec.manual_boundaries.push_back(value);
        if (comma == std::string_view::npos)
            break;
        rest.remove_prefix(comma + 1);
        if (rest.empty())
            throw Error(ProblemKind::invalid_argument,
                        "manual partition '" + std::string(text) + "' ends with a comma");
    }
    return spec;
}

std::string to_string(const PartitionSpec& spec)
{
    switch (spec.method) {
    case PartitionMethod::uniform: return "uniform";
    case PartitionMethod::params: return "params";
    case PartitionMethod::compute: return "compute";
    case PartitionMethod::manual: break;
    }
    std::string text = "manual:";
    for (std::size_t i = 0; i < spec.manual_boundaries.size(); ++i) {
        if (i > 0)
            text += ',';
        text += std::to_string(spec.manual_boundaries[i]);
    }
    return text;
}

void validate_boundaries(int layer_count, int pieces, const std::vector<int>& boundaries)
{
    check_piece_count(layer_count, pieces);
    if (static_cast<int>(boundaries.size()) != pieces - 1)
        bad_partition(std::to_string(pieces) + " pieces need " + std::to_string(pieces - 1) + " boundaries, got " +
                      std::to_string(boundaries.size()));
    int previous = 0;
    for (std::size_t i = 0; i < boundaries.size(); ++i) {
        const int b = boundaries[i];
        if (b <= previous || b >= layer_count)
            bad_partition("boundary " + std::to_string(i + 1) + " (" + std::to_string(b) + ") must be greater than " +
                          std::to_string(previous) + " and less than the layer count " + std::to_string(layer_count) +
                          " (boundaries are strictly increasing first-layer indices)");
        previous = b;
    }
}

std::vector<int> partition(const Profile& profile, int pieces, const PartitionSpec& spec)
{
    const int layer_count = static_cast<int>(profile.layers.size());
    check_piece_count(layer_count, pieces);
    std::vector<double> weights;
    switch (spec.method) {
    case PartitionMethod::uniform: return uniform_boundaries(layer_count, pieces);
    case PartitionMethod::manual:
        validate_boundaries(layer_count, pieces, spec.manual_boundaries);
        return spec.manual_boundaries;
    case PartitionMethod::params:
        for (const Layer& layer : profile.layers)
            weights.push_back(static_cast<double>(layer.params));
        break;
    case PartitionMethod::compute:
        for (const Layer& layer : profile.layers)
            weights.push_back(layer.fwd_ms + layer.bwd_ms);
        break;
    }
    return min_max_boundaries(weights, pieces);
}

int piece_of(int stage, int chunk, int stages, Placement placement)
{
    if (placement == Placement::vshape)
        return chunk == 0 ? stage : 2 * stages - 1 - stage;
    return chunk * stages + stage;
}

int stage_of_piece(int piece, int stages, Placement placement)
{
    if (placement == Placement::vshape)
        return piece < stages ? piece : 2 * stages - 1 - piece;
    return piece % stages;
}

int chunk_of_piece(int piece, int stages, Placement placement)
{
    if (placement == Placement::vshape)
        return piece < stages ? 0 : 1;
    return piece / stages;
}

std::vector<PieceCost> piece_costs(const Profile& profile, int stages, const std::vector<int>& boundaries,
                                   Placement placement)
{
    const int layer_count = static_cast<int>(profile.layers.size());
    const int pieces = static_cast<int>(boundaries.size()) + 1;
    validate_boundaries(layer_count, pieces, boundaries);
    if (stages < 1 || pieces % stages != 0)
        bad_partition(std::to_string(pieces) + " pieces cannot be spread evenly over " + std::to_string(stages) +
                      " stages");
    if (placement == Placement::vshape && pieces != 2 * stages)
        bad_partition("a V-shaped placement needs 2 pieces per stage, not " + std::to_string(pieces) + " pieces on " +
                      std::to_string(stages) + " stages");
    std::vector<PieceCost> costs(static_cast<std::size_t>(pieces));
    for (int p = 0; p < pieces; ++p) {
        PieceCost& cost = costs[p];
        cost.piece = p;
        cost.stage = stage_of_piece(p, stages, placement);
        cost.chunk = chunk_of_piece(p, stages, placement);
        cost.first_layer = p == 0 ? 0 : boundaries[p - 1];
        cost.last_layer = (p + 1 < pieces ? boundaries[p] : layer_count) - 1;
        for (int l = cost.first_layer; l <= cost.last_layer; ++l) {
            add_costs(cost, profile.layers[l]);
        }
        cost.output_bytes = layer_output_bytes(profile, profile.layers[cost.last_layer]);
    }
    return costs;
}

std::vector<StageCost> stage_costs(const std::vector<PieceCost>& pieces, int stages)
{
    std::vector<StageCost> costs(static_cast<std::size_t>(std::max(stages, 0)));
    for (int s = 0; s < stages; ++s)
        costs[s].stage = s;
    for (const PieceCost& piece : pieces) {
        StageCost& cost = costs.at(static_cast<std::size_t>(piece.stage));
        cost.layer_count += piece.last_layer - piece.first_layer + 1;
        add_costs(cost, piece);
    }
    return costs;
}

} // namespace shardscope::pipeline
