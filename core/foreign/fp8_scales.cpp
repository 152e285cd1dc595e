// FP8 block scales (fp8_scales.h): the shape rule and the check over a verified tensor list.

#include "core/foreign/fp8_scales.h"

#include "core/util/printable.h"

#include <algorithm>
#include <map>
#include <vector>

namespace shardscope {

namespace {

uint64_t blocks(uint64_t extent)
{
    return extent / kFp8ScaleBlock + (extent % kFp8ScaleBlock != 0);
}

bool is_f32_name(std::string_view dtype)
{
    return dtype == "F32" || dtype == "float32";
}

} // namespace

std::string fp8_scale_shape_problem(std::span<const uint64_t> weight, std::span<const uint64_t> scale)
{
    if (weight.size() != 2)
        return "the weight's shape is " + join_dims(weight) + ", and 128x128 blocks need two dimensions";
    const std::vector<uint64_t> expected = {blocks(weight[0]), blocks(weight[1])};
    if (!std::equal(scale.begin(), scale.end(), expected.begin(), expected.end()))
        return "the scale tensor's shape is " + join_dims(scale) + ", and a weight of shape " + join_dims(weight) +
            " needs " + join_dims(expected) + " (one scale per 128x128 block)";
    return "";
}

bool is_fp8_dtype_name(std::string_view dtype)
{
    return dtype.starts_with("F8_") || dtype.starts_with("float8_");
}

void check_fp8_scale_partners(VerifyReport& report)
{
    if (!report.foreign)
        return;
    const ForeignTensorList& list = report.foreign->tensors;
    std::map<std::string_view, std::size_t> by_name; // the first of a name, as stats pairs them
    for (std::size_t i = 0; i < list.size(); ++i)
        if (list[i].name.ends_with(kFp8ScaleSuffix))
            by_name.try_emplace(list[i].name, i);
    if (by_name.empty())
        return;
    std::vector<Problem> found;
    for (std::size_t i = 0; i < list.size() && found.size() < 100; ++i) {
        const ForeignTensorView weight = list[i];
        if (!is_fp8_dtype_name(weight.dtype))
            continue;
        const std::string scale_name = std::string(weight.name) + std::string(kFp8ScaleSuffix);
        const auto it = by_name.find(scale_name);
        if (it == by_name.end())
            continue;
        const ForeignTensorView scale = list[it->second];
        std::string why = is_f32_name(scale.dtype)
            ? fp8_scale_shape_problem(weight.shape, scale.shape)
            : "the scale tensor's dtype is " + printable(scale.dtype) + ", not F32";
        if (why.empty())
            continue;
        const std::string file(scale.file.empty() ? weight.file : scale.file);
        found.push_back({.kind = ProblemKind::invalid_fp8_scale,
                         .message = (file.empty() ? report.dir : report.dir / file).string() + ": FP8 weight '" +
                             printable(weight.name) + "' cannot be dequantized by '" + printable(scale_name) +
                             "': " + why,
                         .path = file});
    }
    report.problems.insert(report.problems.end(), found.begin(), found.end());
}

} // namespace shardscope
