#pragma once
// Hugging Face sharded safetensors: `model.safetensors.index.json` ({"metadata": {"total_size":
// N}, "weight_map": {tensor: file}}) plus the files it names. Parsing the index is separate from
// verifying the folder so that it can be tested and fuzzed on bytes alone.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxIndexBytes = 64ull << 20;   // index.json read at most
inline constexpr uint64_t kMaxIndexEntries = 4u << 20;    // weight_map entries
inline constexpr uint64_t kMaxIndexFiles = 1u << 16;      // distinct files

struct SafetensorsIndex {
    std::optional<uint64_t> total_size;           // metadata.total_size when present
    std::map<std::string, std::string> metadata;  // other metadata rendered as text
    std::map<std::string, std::string> weight_map; // tensor -> file
    std::vector<std::string> files;               // distinct files, sorted
};

// Parses the index JSON. Throws Error(invalid_manifest) naming `display_path` on bad input: not a
// JSON object, weight_map missing or not string-to-string, duplicate tensor names, a file name
// that is not a plain relative path inside the folder, too many entries, a non-integer
// total_size.
SafetensorsIndex parse_safetensors_index(std::string_view json, const std::string& display_path);
inline SafetensorsIndex parse_safetensors_index(const uint8_t* data, std::size_t size,
                                                const std::string& display_path = "<index>")
{
    return parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(data), size), display_path);
}

// Verifies a folder holding `index_name` (default model.safetensors.index.json): every file of
// the weight_map exists and is valid safetensors, every mapped tensor is in its file, no file
// holds unmapped tensors, metadata.total_size equals the sum of tensor bytes.
VerifyReport verify_safetensors_index(const std::filesystem::path& dir, const VerifyOptions& options,
                                      const std::string& index_name = "model.safetensors.index.json");

// Verifies one .safetensors file or every .safetensors file of a folder without an index.
VerifyReport verify_safetensors_files(const std::filesystem::path& path, const VerifyOptions& options);

} // namespace shardscope
