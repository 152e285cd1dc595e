#pragma once
// Internal to core/inspect: FP8 weights stored block-quantized, as DeepSeek-V3 ships them
// (dequantize.cpp). A 2-D FP8 weight W of shape [R, C] comes with a partner W_scale_inv, F32 of
// shape [ceil(R/128), ceil(C/128)]: one scale per 128x128 block, and the weight's value at (r, c)
// is its stored FP8 value times scale_inv[r / 128][c / 128]. Statistics of the stored bytes alone
// describe neither the model nor its NaNs' surroundings, so stats and diff read through this.

#include "core/foreign/fp8_scales.h"
#include "core/inspect/content.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::inspect {

// The block and the partner's name suffix are core/foreign's (fp8_scales.h), which owns the rule.
inline constexpr uint64_t kScaleBlock = kFp8ScaleBlock;
inline constexpr std::string_view kScaleSuffix = kFp8ScaleSuffix;

// Pairs every FP8 tensor of a laid-out report with the tensor named like it plus "_scale_inv"
// (the first of that name) and reads the scale values into the weight's `scale` and `scale_inv`.
// Returns the FP8 tensors left raw, in report order: without a partner, or with one that cannot
// dequantize them (and why). convert refuses to cast those; stats reports them (below).
struct UnpairedFp8 {
    std::size_t weight = 0; // index in report.tensors
    std::optional<std::size_t> scale; // its partner, when it has one
    std::string why; // why the partner cannot be used ("" without one)
};
std::vector<UnpairedFp8> pair_fp8_weights(ContentReport& report);

// The file a tensor's sentences name: its first part's, or the checkpoint folder without parts.
std::string file_of(const ContentReport& report, const TensorContent& t);

// pair_fp8_weights for stats and diff (one float per 16384 weights read: a few KiB per weight):
// a partner of the wrong dtype or shape, one that cannot be read, or an FP8 "*.weight" without one
// where the report has other scale tensors, is one problem of the report naming the file and the
// tensors; that weight stays raw.
void pair_fp8_scales(ContentReport& report);

// Multiplies `values`, the decoded elements [at, at + n) of `part` in the order the part stores
// them, by their blocks' scales. `tensor` must be paired (scale >= 0).
void dequantize_stored(const TensorContent& tensor, const TensorPart& part, uint64_t at, double* values, std::size_t n);

// The same for the tensor's row-major elements [first, first + n), as diff reads them.
void dequantize_row_major(const TensorContent& tensor, uint64_t first, double* values, std::size_t n);

} // namespace shardscope::inspect
