#pragma once
// One entry point for the checkpoint formats ShardScope did not write: verify_checkpoint (and so
// shardctl verify and the app) dispatches here by detected format; shardctl info uses the
// structure-only variant. Everything is read-only and nothing foreign is executed.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"
#include "core/foreign/detect.h"

#include <optional>

namespace shardscope {

// True when `detected` is a foreign format this module handles. A directory of rank<N>.safetensors
// without a manifest stays native (it is a ShardScope checkpoint whose save did not finish).
bool is_foreign(const DetectedFormat& detected);

// Verifies a foreign checkpoint. `check_data` false skips the full-data pass (zip CRC-32s) and
// only reads headers and metadata. Throws Error(cannot_open) when `path` is unusable.
VerifyReport verify_foreign(const DetectedFormat& detected, const VerifyOptions& options, bool check_data = true);

// detect_format + verify_foreign, or nullopt for a native (or unrecognised) checkpoint.
std::optional<VerifyReport> verify_if_foreign(const std::filesystem::path& path, const VerifyOptions& options,
                                              bool check_data = true);

} // namespace shardscope
