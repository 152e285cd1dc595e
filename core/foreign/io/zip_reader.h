#pragma once
// A read-only zip reader for checking archives without trusting them: PyTorch's torch.save files
// (DeepSpeed's *.pt, Megatron's model_optim_rng.pt) are zip archives of stored entries. It reads
// the end-of-central-directory record (zip64 included), the central directory and each local
// header, and checks every entry's CRC-32 and sizes (stored and deflated entries, zlib). Every
// count and offset is bounded and overflow-checked against the file's size.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxZipEntries = 1u << 20;
inline constexpr uint64_t kMaxZipCentralDirectory = 256ull << 20;

struct ZipEntry {
    std::string name;
    uint16_t flags = 0;
    uint16_t method = 0; // 0 stored, 8 deflated
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t uncompressed_size = 0;
    uint64_t local_header_offset = 0;
};

struct ZipDirectory {
    std::vector<ZipEntry> entries; // central directory order
    uint64_t central_directory_offset = 0;
    uint64_t central_directory_size = 0;
    bool zip64 = false;
};

// Reads `size` bytes at `offset` into `buffer`; false on a read error or a short read.
using ZipReadAt = std::function<bool(void* buffer, std::size_t size, uint64_t offset)>;

// Parses the end records and the central directory. Throws Error(invalid_archive) naming
// `display_path` when the file is not a zip archive or its directory is inconsistent (entries
// past the end of the file, overlapping entries, counts that disagree, limits exceeded).
ZipDirectory read_zip_directory(const ZipReadAt& read, uint64_t file_size, const std::string& display_path);
// The same over bytes in memory (tests, fuzzing).
ZipDirectory parse_zip_directory(std::string_view file, const std::string& display_path = "<zip>");

struct ZipEntryCheck {
    bool ok = false;
    bool crc_mismatch = false; // the data is there but its CRC-32 or size is wrong
    uint64_t data_offset = 0; // where the entry's (compressed) bytes start in the file
    uint32_t actual_crc32 = 0;
    uint64_t actual_size = 0;
    std::string problem; // why not ok (without the file name)
};

// Finds where `entry`'s data starts after its local header, without reading the data: ok, or a
// problem (bad local header, data running into the central directory, encryption, an unknown
// compression method).
ZipEntryCheck locate_zip_entry(const ZipReadAt& read, const ZipDirectory& directory, const ZipEntry& entry);

// Reads one entry's local header and data, recomputing its CRC-32 (inflating deflated data).
// `progress` gets compressed bytes read so far; `cancel` is checked between chunks.
ZipEntryCheck check_zip_entry(const ZipReadAt& read, uint64_t file_size, const ZipDirectory& directory,
                              std::size_t index, const std::atomic<bool>* cancel = nullptr,
                              const std::function<void(uint64_t)>& progress = {});

// The uncompressed bytes of a small entry (at most `max_bytes`), CRC-checked. Throws
// Error(invalid_archive / crc_mismatch) naming `display_path`.
std::string read_zip_entry(const ZipReadAt& read, uint64_t file_size, const ZipDirectory& directory, std::size_t index,
                           uint64_t max_bytes, const std::string& display_path);

// ZipReadAt over memory (a file's is storage::read_function).
ZipReadAt zip_read_memory(std::string_view data);

} // namespace shardscope
