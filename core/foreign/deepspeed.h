#pragma once
// DeepSpeed checkpoints, read-only (deepspeed.cpp says which files).

#include "core/checkpoint/verify.h"
#include "core/util/fsutil.h"

namespace shardscope {

// DeepSpeed: `dir` is a tag folder (global_stepN/; core/open follows a root's `latest`), listed.
// `check_data` false skips the CRC pass over every byte (shardctl info: structure only).
VerifyReport verify_deepspeed(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
