#pragma once
// Megatron-LM checkpoints, read-only (megatron.cpp says which files).

#include "core/checkpoint/verify.h"

#include <filesystem>

namespace shardscope {

// Megatron: `path` is the root (with latest_checkpointed_iteration.txt or iter_* folders) or an
// iteration folder.
VerifyReport verify_megatron(const std::filesystem::path& path, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
