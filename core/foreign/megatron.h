#pragma once
// Megatron-LM checkpoints, read-only (megatron.cpp says which files).

#include "core/checkpoint/verify.h"
#include "core/util/fsutil.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

// Megatron: `dir` is an iteration folder (iter_NNNNNNN/; core/open follows a root's tracker file),
// listed.
VerifyReport verify_megatron(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

// What an iteration saved with `--ckpt-format torch_dist` (Megatron-LM's dist_checkpointing) has
// beside its DCP files. Parse split from verify, over bytes: each feeds a fuzzer.
inline constexpr uint64_t kMaxMegatronJsonBytes = 64ull << 20; // integrity.json of 10^5 files fits

// metadata.json: {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
// "common_backend": "torch", ...}, Megatron's CheckpointingConfig.
struct MegatronCheckpointConfig {
    std::string sharded_backend; // required: Megatron cannot load a folder without it
    std::string common_backend; // "" when absent
    std::vector<std::pair<std::string, std::string>> fields; // every key, its value as text, in file order
};
// Throws Error(invalid_manifest) naming `display` for malformed JSON, a non-object or no
// string sharded_backend.
MegatronCheckpointConfig parse_megatron_metadata_json(std::string_view text, const std::string& display);

// integrity.json (save_integrity_manifest): {"algorithm": "sha256", "files": {name: hex digest}},
// every file of the folder but itself. The names are returned as written: the verifier confines them.
struct MegatronIntegrity {
    std::vector<std::pair<std::string, std::string>> files; // name, lowercase SHA-256 hex; file order
};
// Throws Error naming `display`: invalid_manifest for malformed JSON, a missing or non-object
// `files`, a digest that is not 64 hex digits; unsupported_schema for an algorithm other than sha256.
MegatronIntegrity parse_megatron_integrity(std::string_view text, const std::string& display);

} // namespace shardscope
