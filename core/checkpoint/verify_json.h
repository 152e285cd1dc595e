#pragma once
// The `verify --json` object (docs/shardctl.md, "verify"), built once: shardctl verify,
// shardctl-mpi verify and the exported report all print what this returns, so the keys cannot
// drift apart.

#include "core/checkpoint/verify.h"
#include "core/util/error.h"

#include <nlohmann/json.hpp>

namespace shardscope {

// {"kind", "message", "rank" (when >= 0), "path" (when set)}
nlohmann::json problem_json(const Problem& problem);

// A problem between processes, every field kept: {"kind" (its number), "rank", "path", "message"}.
nlohmann::json problem_wire_json(const Problem& problem);
Problem problem_from_wire_json(const nlohmann::json& wire);

// One shards[] entry: {"rank", "path", "bytes", "actual_bytes", "status", "detail" (when set)}, and
// back (for processes that send their checks to a coordinator; Error(invalid_manifest) if bad).
nlohmann::json shard_check_json(const ShardCheck& check);
ShardCheck shard_check_from_json(const nlohmann::json& entry);

// The foreign-format part: {"summary": {row: value}, "tensor_count", "tensors": [...]}.
nlohmann::json foreign_summary_json(const ForeignSummary& summary);

// ok, format, path, world_size, step, checksum, shards, problems, leftover_tmp_files, cancelled,
// seconds, and the foreign-format part where the report has one.
nlohmann::json verify_report_json(const VerifyReport& report);

} // namespace shardscope
