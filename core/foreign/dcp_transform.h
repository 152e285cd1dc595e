#pragma once
// DCP's storage extensions (torch.distributed.checkpoint._extension, torch 2.6+): a
// _StorageInfo's transform_descriptors name the stream transforms an item's bytes went through
// when written; the range in the data file holds the transformed bytes, and undoing them gives what
// an untransformed item holds (a torch.save archive of the chunk, or a non-tensor item's bytes).
// torch ships one: ZStandard, "stream.zstd/1", one or more zstd frames.

#include "core/foreign/io/zip_reader.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// True when ShardScope undoes `transform` (DcpStorage::transform: the descriptors joined by ','):
// "stream.zstd/<1.x>" alone, as torch's ExtensionRegistry accepts it.
bool dcp_transform_known(std::string_view transform);

// What a chunk's decompressed item may take at most: its elements plus a torch.save archive's
// own entries (data.pkl, version, zip records and padding); a non-tensor item (or a chunk of
// unknown dtype) at most kMaxDcpInflatedItem.
inline constexpr uint64_t kMaxDcpInflatedItem = 1ull << 30;
inline constexpr uint64_t kDcpArchiveOverhead = 1ull << 20;
uint64_t dcp_inflated_limit(uint64_t element_bytes);

// Undoes zstd over the `length` bytes at `offset` (read through `read`): every frame in turn,
// into memory. Throws Error(invalid_archive) naming `shown` (the file and item) when the bytes are
// not zstd frames, are cut or corrupt, a frame expands past the content size its header declares,
// or the whole expands past `max_bytes`.
std::vector<std::byte> inflate_dcp_zstd(const ZipReadAt& read, uint64_t offset, uint64_t length, uint64_t max_bytes,
                                        const std::string& shown);

} // namespace shardscope
