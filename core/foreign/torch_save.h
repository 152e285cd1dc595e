#pragma once
// Plain torch.save checkpoints, read-only: one archive (a .pt, .pth or .bin file), a Hugging Face
// folder saved before safetensors (pytorch_model.bin), or one sharded by its index
// (pytorch_model.bin.index.json, the weight_map JSON of model.safetensors.index.json).

#include "core/checkpoint/verify.h"
#include "core/storage/folder.h"

#include <string>
#include <vector>

namespace shardscope {

// `files` are the archives of `dir` (its listing, or the one file named) to check: every zip
// entry's CRC-32 (unless `check_data` is false) and data.pkl's tensors, read without running
// pickle. With `index` (the index's name in `dir`), its weight_map names the files instead, and
// each file must hold what it maps there (missing_tensor) and nothing it maps elsewhere
// (unmapped_tensor).
VerifyReport verify_torch_save(const storage::Folder& dir, const std::vector<std::string>& files,
                               const std::string& index, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
