#pragma once
// The one way in to verification: a path's format is detected once (detect.h) and the matching
// verifier, ShardScope's own (core/checkpoint) or a foreign format's (core/foreign), reads the
// directory detection listed. Everything foreign is read-only and nothing is executed.

#include "core/checkpoint/verify.h"
#include "core/open/detect.h"

#include <filesystem>

namespace shardscope {

// Verifies what `detected` found. `check_data` false skips a foreign format's full-data pass (zip
// CRC-32s, DCP's stored ranges) and reads headers and metadata only (shardctl info); ShardScope
// checkpoints are always hashed. A step that could not be chosen (detected.problem) is reported
// as the checkpoint's problem.
VerifyReport verify_checkpoint(const DetectedFormat& detected, const VerifyOptions& options, bool check_data = true);

// detect_format + verify_checkpoint. Throws Error(cannot_open) when `path` is unusable, and
// Error(remote_error) when its server fails; a bad checkpoint is reported, not thrown.
VerifyReport verify_checkpoint(const storage::Location& path, const VerifyOptions& options = {});

// What to read again of a checkpoint verify read (its values, a conversion): the step folder it
// verified rather than the root again, whose `latest` may have moved meanwhile; or the one file
// `given` names.
storage::Location verified_location(const storage::Location& given, const VerifyReport& verified);

} // namespace shardscope
