#pragma once
// The per-rank halves of load, verify and reshard, for a process that owns only some ranks of a
// job (shardctl-mpi runs one per MPI rank). Each reads only its own files; agreeing on the result
// is the caller's business. Same checks as load_sharded and verify_checkpoint (open_shard).

#include "core/checkpoint/verify.h"
#include "core/checkpoint/reshard.h"

#include <optional>

namespace shardscope {

// Reads rank `record.rank`'s shard, hashing every byte as it lands; Error (hash_mismatch, ...)
// naming the rank and file when a check fails.
RankState load_rank_shard(const std::filesystem::path& dir, const Manifest& manifest, const ShardRecord& record);

// Verifies one shard (SHA-256, or XXH3 with `fast`). Never throws for a bad shard: the status
// says what is wrong and `problem` is set.
ShardCheck check_rank_shard(const std::filesystem::path& dir, const Manifest& manifest, const ShardRecord& record,
                            bool fast, std::optional<Problem>& problem);

// The report verify_native gives, put together from the checks of the processes that each
// verified some ranks (check_rank_shard): `checks` in any order, at most one per rank; `problem`
// the one they agreed on. Shards come in manifest order, and the directory is listed again for
// leftover .tmp files.
VerifyReport gathered_verify_report(const std::filesystem::path& dir, const Manifest& manifest,
                                    std::vector<ShardCheck> checks, const std::optional<Problem>& problem, bool fast,
                                    double seconds);

// Materialises one reshard target by reading exactly its copy runs from the source shards (whose
// hashes the caller has verified). The result is written like any rank's state.
RankState read_reshard_target(const std::filesystem::path& source_dir, const Manifest& source,
                              const TargetPlan& target);

} // namespace shardscope
