#pragma once
// torch.distributed.checkpoint's Hugging Face storage, sharded (HuggingFaceStorageWriter with
// save_distributed=True; torchtitan writes it under step-N/sharded/): a
// `shard-<S>-model-<I>-of-<N>.safetensors` file per rank S and output file I, whose entries are
// chunks of tensors, each placed by the DCP_SHARDING_INFO JSON of the file's __metadata__
// ({fqn: {"saved_offsets": [...]}}). There is no .metadata: the tensors are assembled from the
// headers as torch's HuggingFaceStorageReader.read_metadata does (a tensor's size is, per
// dimension, the largest saved offset + chunk size of its chunks), then verified and read like
// any DCP layout.

#include "core/checkpoint/verify.h"
#include "core/foreign/dcp.h"
#include "core/foreign/safetensors_listing.h"
#include "core/util/fsutil.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

// The rank of `shard-<S>-model-<I>-of-<N>.safetensors`: S - 1 (the writer numbers its shards
// from 1 in rank order); -1 when the name is not that, or S is 0.
int dcp_hf_shard_rank(std::string_view name);
// True for a name of that pattern (any S).
bool is_dcp_hf_shard_name(std::string_view name);

// DCP_SHARDING_INFO's text: each fqn and its saved_offsets, in the JSON's order. Throws
// Error(invalid_shard) naming `display` for anything else (not an object, a missing or
// non-integer saved_offsets, a repeated fqn, more than kMaxDcpDims offsets).
std::vector<std::pair<std::string, std::vector<uint64_t>>> parse_dcp_sharding_info(std::string_view json,
                                                                                   const std::string& display);

// One shard file's header, as read.
struct DcpHfShard {
    std::string file; // relative name
    SafetensorsListing listing;
};

// The layout the shards describe. A file whose DCP_SHARDING_INFO disagrees with its header (an
// entry for a tensor it does not hold, none for one it holds, offsets of another rank than the
// tensor's shape), or whose chunk disagrees with other files about its tensor's dtype or rank,
// is left out with one problem naming it (invalid_shard), added to `problems`; `dir` names them.
DcpMetadata assemble_dcp_hf(const std::vector<DcpHfShard>& shards, const std::filesystem::path& dir,
                            std::vector<Problem>& problems);

// Reads the header of every shard file in the folder (confined beneath it) and assembles them.
struct DcpHfLayout {
    DcpMetadata meta;
    std::vector<Problem> problems; // files that cannot be opened or read, or were left out
};
DcpHfLayout read_dcp_hf(const storage::Folder& dir);

// Verifies the folder as one DCP checkpoint: every header strictly, the chunks tiling their
// tensors (no overlap, no hole), every range inside its file; with `check_data`, each chunk's
// bytes read.
VerifyReport verify_dcp_hf(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
