#pragma once
// Recognising what kind of checkpoint a path holds, by its files alone (nothing is executed).

#include "core/util/enum_names.h"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

enum class CheckpointFormat { shardscope, safetensors, safetensors_index, torch_dcp, deepspeed, megatron, unknown };
inline constexpr std::string_view kCheckpointFormatNames[] = {
    "shardscope", "safetensors", "safetensors-index", "torch-dcp", "deepspeed", "megatron", "unknown"};
static_assert(std::size(kCheckpointFormatNames) == std::size_t(CheckpointFormat::unknown) + 1);
std::string_view to_string(CheckpointFormat format);

struct DetectedFormat {
    CheckpointFormat format = CheckpointFormat::unknown;
    std::filesystem::path path; // what was inspected (a step directory after `latest`)
    std::vector<std::string> files; // the format's files found there (relative names)
    std::string reason; // what gave it away
};

// Throws Error(cannot_open) when `path` does not exist.
DetectedFormat detect_format(const std::filesystem::path& path);

} // namespace shardscope
