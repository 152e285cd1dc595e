// FP8 weights with 128x128 block scales (internal/dequantize.h): pairing, the scales read once,
// and each element's block found from where its part stores it.

#include "core/inspect/internal/dequantize.h"

#include "core/inspect/internal/tensor_reader.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

namespace shardscope::inspect {

namespace {

bool is_fp8(ElementType type)
{
    return type == ElementType::F8_E4M3 || type == ElementType::F8_E5M2;
}

uint64_t blocks(uint64_t extent)
{
    return extent / kScaleBlock + (extent % kScaleBlock != 0);
}

std::string in_quotes(const std::string& name)
{
    return "'" + printable(name) + "'";
}

// The scale values of `weight` read from `scale`, or why they cannot be used ("" when they can).
std::string read_scales(const ContentReport& report, const TensorContent& weight, const TensorContent& scale,
                        std::vector<float>& out)
{
    if (weight.shape.size() != 2)
        return fp8_scale_shape_problem(weight.shape, scale.shape);
    // Every element the scan will scale must lie inside the tensor: the layout the reader accepts.
    if (const TensorReader layout(*report.folder, weight); layout.invalid())
        return "the weight's layout cannot be read (" + *layout.invalid() + ")";
    if (scale.type != ElementType::F32)
        return "the scale tensor's dtype is " + std::string(to_string(scale.type)) + ", not F32";
    if (std::string why = fp8_scale_shape_problem(weight.shape, scale.shape); !why.empty())
        return why;
    const std::vector<uint64_t>& expected = scale.shape; // one scale per block, as checked
    // Its parts must hold every element before anything is allocated: a forged DCP size is not
    // backed by file bytes, and the reader would otherwise be asked for elements that are nowhere.
    const uint64_t numel = expected[0] * expected[1]; // no overflow: a scale per 16384 weights
    uint64_t held = 0;
    for (const TensorPart& p : scale.parts)
        held += p.numel; // bounded by the files' sizes
    if (held != numel)
        return "the scale tensor's parts hold " + std::to_string(held) + " of its " + std::to_string(numel) +
            " elements";
    std::vector<std::byte> bytes(numel * 4);
    TensorReader reader(*report.folder, scale);
    if (const auto failed = reader.read(0, numel, bytes.data()))
        return "the scale tensor cannot be read (" + failed->message + ")";
    out.resize(numel);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return "";
}

} // namespace

std::string file_of(const ContentReport& report, const TensorContent& t)
{
    return t.parts.empty() ? report.dir.string() : (report.dir / t.parts[0].file).string();
}

std::vector<UnpairedFp8> pair_fp8_weights(ContentReport& report)
{
    std::vector<UnpairedFp8> unpaired;
    if (!report.folder)
        return unpaired; // nothing was laid out to read the scales through
    std::map<std::string, std::size_t, std::less<>> by_name; // the first of a name: as diff pairs
    for (std::size_t i = 0; i < report.tensors.size(); ++i)
        if (report.tensors[i].state.empty()) // native checkpoints hold no FP8
            by_name.try_emplace(report.tensors[i].name, i);
    for (std::size_t w = 0; w < report.tensors.size(); ++w) {
        TensorContent& weight = report.tensors[w];
        if (!weight.state.empty() || !is_fp8(weight.type))
            continue;
        const auto it = by_name.find(weight.name + std::string(kScaleSuffix));
        if (it == by_name.end()) {
            unpaired.push_back({.weight = w});
            continue;
        }
        std::vector<float> values;
        std::string why = read_scales(report, weight, report.tensors[it->second], values);
        if (why.empty()) {
            weight.scale = static_cast<int>(it->second);
            weight.scale_inv = std::move(values);
        } else {
            unpaired.push_back({.weight = w, .scale = it->second, .why = std::move(why)});
        }
    }
    return unpaired;
}

void pair_fp8_scales(ContentReport& report)
{
    const bool any_scale = std::any_of(report.tensors.begin(), report.tensors.end(), [](const TensorContent& t) {
        return t.state.empty() && t.name.ends_with(kScaleSuffix);
    });
    for (const UnpairedFp8& u : pair_fp8_weights(report)) {
        if (report.problems.size() >= 100)
            break;
        const TensorContent& weight = report.tensors[u.weight];
        const std::string scale_name = weight.name + std::string(kScaleSuffix);
        if (!u.scale) {
            // An FP8 checkpoint without block scales (per-tensor scales, or none) is read raw as
            // it always was; a missing partner matters only where the others have theirs.
            if (any_scale && weight.name.ends_with(".weight"))
                report.problems.push_back({.kind = ProblemKind::invalid_fp8_scale,
                                           .message = file_of(report, weight) + ": FP8 weight " +
                                               in_quotes(weight.name) + " has no scale tensor " +
                                               in_quotes(scale_name) +
                                               " though other weights of the checkpoint have theirs, so its statistics "
                                               "are of the raw FP8 values",
                                           .path = weight.parts.empty() ? "" : weight.parts[0].file});
            continue;
        }
        const TensorContent& scale = report.tensors[*u.scale];
        report.problems.push_back({.kind = ProblemKind::invalid_fp8_scale,
                                   .message = file_of(report, scale) + ": FP8 weight " + in_quotes(weight.name) +
                                       " cannot be dequantized by " + in_quotes(scale_name) + ": " + u.why +
                                       "; its statistics are of the raw FP8 values",
                                   .path = scale.parts.empty() ? "" : scale.parts[0].file});
    }
}

void dequantize_row_major(const TensorContent& tensor, uint64_t first, double* values, std::size_t n)
{
    const uint64_t cols = tensor.shape[1];
    if (n == 0 || cols == 0)
        return;
    const uint64_t scale_cols = blocks(cols);
    uint64_t r = first / cols, c = first % cols;
    for (std::size_t i = 0; i < n; ++i) {
        values[i] *= tensor.scale_inv[(r / kScaleBlock) * scale_cols + c / kScaleBlock];
        if (++c == cols) {
            c = 0;
            ++r;
        }
    }
}

void dequantize_stored(const TensorContent& tensor, const TensorPart& part, uint64_t at, double* values, std::size_t n)
{
    if (n == 0)
        return;
    const uint64_t scale_cols = blocks(tensor.shape[1]);
    if (!part.box_offsets.empty()) { // a DCP chunk: a box of the tensor, stored row-major
        const uint64_t width = part.box_sizes[1];
        uint64_t r = part.box_offsets[0] + at / width, c = at % width;
        for (std::size_t i = 0; i < n; ++i) {
            values[i] *= tensor.scale_inv[(r / kScaleBlock) * scale_cols + (part.box_offsets[1] + c) / kScaleBlock];
            if (++c == width) {
                c = 0;
                ++r;
            }
        }
        return;
    }
    if (part.view_shape.empty())
        return dequantize_row_major(tensor, part.first_element + at, values, n);
    // A permuted torch view (a transpose) stored in its storage's order: the storage position
    // splits into the view's indices from the largest stride down (the strides are a permutation
    // of a dense layout's, which the layout checked); dimensions of extent 1 take no part.
    const std::size_t dims = part.view_shape.size();
    std::vector<std::size_t> order(dims);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return part.view_strides[a] > part.view_strides[b]; });
    for (std::size_t i = 0; i < n; ++i) {
        uint64_t rest = at + i, flat = 0;
        std::vector<uint64_t> index(dims, 0);
        for (const std::size_t d : order)
            if (part.view_shape[d] > 1 && part.view_strides[d] > 0) {
                const auto stride = static_cast<uint64_t>(part.view_strides[d]);
                index[d] = std::min(rest / stride, part.view_shape[d] - 1); // inside the view, whatever the strides
                rest %= stride;
            }
        for (std::size_t d = 0; d < dims; ++d)
            flat = flat * part.view_shape[d] + index[d];
        dequantize_row_major(tensor, part.first_element + flat, values + i, 1);
    }
}

} // namespace shardscope::inspect
