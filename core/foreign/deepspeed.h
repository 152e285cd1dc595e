#pragma once
// DeepSpeed checkpoints, read-only (deepspeed.cpp says which files).

#include "core/checkpoint/verify.h"
#include "core/util/fsutil.h"

namespace shardscope {

// DeepSpeed: `dir` is a tag folder (global_stepN/; core/open follows a root's `latest`), listed.
// `check_data` false skips the CRC pass over every byte (shardctl info: structure only).
// A universal checkpoint (DeepSpeed's ds_to_universal) is read too: zero/<parameter>/fp32.pt,
// exp_avg.pt, exp_avg_sq.pt (and step.pt) per parameter and zero/optimizer_state.pt, each file a
// shard of the report; the three of a parameter folder are required.
VerifyReport verify_deepspeed(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

// True when `dir` holds a universal checkpoint's zero/ folder (with its optimizer_state.pt).
bool is_deepspeed_universal(const storage::Folder& dir);

} // namespace shardscope
