#pragma once
// FP8 weights stored block-quantized, as DeepSeek-V3 ships them: a 2-D FP8 weight W of shape
// [R, C] comes with a partner W_scale_inv, F32 of shape [ceil(R/128), ceil(C/128)], one scale per
// 128x128 block. The rule is checked in one place for the two readers that need it: verify (a
// partner that cannot dequantize its weight makes the checkpoint unusable as shipped) and stats /
// diff (core/inspect's dequantize, which then reads the weight raw).

#include "core/checkpoint/verify.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace shardscope {

inline constexpr uint64_t kFp8ScaleBlock = 128;
inline constexpr std::string_view kFp8ScaleSuffix = "_scale_inv";

// Why a scale tensor of shape `scale` cannot dequantize a weight of shape `weight` by 128x128
// blocks (the weight not 2-D, the scale shape not one per block), or "" when it can.
std::string fp8_scale_shape_problem(std::span<const uint64_t> weight, std::span<const uint64_t> scale);

// True for a dtype name of an FP8 element, in safetensors' spelling (F8_E4M3) or torch's (float8_e4m3fn).
bool is_fp8_dtype_name(std::string_view dtype);

// Over a foreign report's tensor list: every FP8 weight whose `_scale_inv` partner is listed with
// a dtype other than F32 or a shape that does not fit it is one invalid_fp8_scale problem naming
// the partner's file and both tensors. A weight without a partner is not one (per-tensor scales).
void check_fp8_scale_partners(VerifyReport& report);

} // namespace shardscope
