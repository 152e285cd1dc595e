#pragma once
// DeepSpeed checkpoints, read-only (deepspeed.cpp says which files).

#include "core/checkpoint/verify.h"

#include <filesystem>

namespace shardscope {

// DeepSpeed: `path` is the root (with `latest` or global_step* folders) or a tag folder.
// `check_data` false skips the CRC pass over every byte (shardctl info: structure only).
VerifyReport verify_deepspeed(const std::filesystem::path& path, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
