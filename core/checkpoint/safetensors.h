#pragma once
// The safetensors container (8-byte little-endian header length, JSON header, data): a writer for
// rank shards and a header reader as strict as the reference implementation.

#include "core/storage/folder.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20; // the reference reader's limit
// What a header read asks for first: the length and, unless the header is larger, all of it.
inline constexpr uint64_t kHeaderProbeBytes = 64 << 10;
inline constexpr uint64_t kMaxSafetensorsHeaderValues = 4ull << 20; // JSON values in one header
inline constexpr int kMaxSafetensorsHeaderDepth = 16; // legitimate headers nest 3 deep

struct SafetensorsTensor {
    std::string name;
    std::string dtype; // "F16", "BF16", "F32", ...
    std::vector<uint64_t> shape;
    uint64_t begin = 0; // byte range relative to the start of the data section
    uint64_t end = 0;

    uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
    uint64_t header_length = 0; // the JSON's length (the 8-byte prefix not included)
    std::vector<SafetensorsTensor> tensors; // sorted by begin
    std::map<std::string, std::string> metadata;

    uint64_t data_start() const { return 8 + header_length; }
    const SafetensorsTensor* find(std::string_view name) const;
};

// Size in bytes of one element of a safetensors dtype, or nullopt for an unknown dtype.
std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype);

// The 8-byte prefix and the JSON header (space-padded to a multiple of 8 so the data is aligned)
// for tensors laid out back to back in the given order.
std::string make_safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata);

// What is wrong with a tensor's byte range [begin, end) for `bytes` of shape and dtype; "" when
// nothing is. The one sentence both header readers (this and core/foreign's listing) give.
std::string safetensors_range_fault(const std::string& name, uint64_t begin, uint64_t end, uint64_t bytes);

// "" for a header text JSON may parse; else why not: a NUL byte, where the JSON parser would
// stop and take the rest for padding, while the reference reader refuses the file.
std::string safetensors_text_fault(std::string_view json);

// Validates a header against a file of `file_size` bytes: JSON object, known dtypes,
// shape x dtype size == byte range, ranges contiguous from 0 with no gap or overlap, the last one
// ending at the end of the file, no duplicate names, string-to-string __metadata__.
// Throws Error(invalid_shard) with `display_path` and `rank` in the message.
SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t file_size, const std::string& display_path,
                                           int rank = -1);

// The header JSON of `file` (`file_size` bytes): the 8-byte length checked against the 100 MB
// limit and the file's size. Throws Error(invalid_shard / unreadable) naming `display_path`.
std::string read_safetensors_header_json(const storage::Reader& file, uint64_t file_size,
                                         const std::string& display_path, int rank = -1);

// Reads and validates the header of `file` of `file_size` bytes.
SafetensorsHeader read_safetensors_header(const storage::Reader& file, uint64_t file_size,
                                          const std::string& display_path, int rank = -1);

} // namespace shardscope
