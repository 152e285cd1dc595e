#pragma once
// Megatron-LM checkpoints, read-only (megatron.cpp says which files).

#include "core/checkpoint/verify.h"
#include "core/util/fsutil.h"

namespace shardscope {

// Megatron: `dir` is an iteration folder (iter_NNNNNNN/; core/open follows a root's tracker file),
// listed.
VerifyReport verify_megatron(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
