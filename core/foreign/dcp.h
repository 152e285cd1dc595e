#pragma once
// PyTorch Distributed Checkpoint (torch.distributed.checkpoint, FileSystemWriter layout): a
// `.metadata` file (a pickled Metadata dataclass) and `__<rank>_<n>.distcp` data files. The
// metadata is decoded with the restricted pickle reader: nothing is imported or called.

#include "core/checkpoint/verify.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/foreign/io/zip_reader.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxDcpMetadataBytes = 512ull << 20;
inline constexpr uint64_t kMaxDcpItems = 4u << 20; // tensors + bytes items + chunks
inline constexpr std::size_t kMaxDcpDims = 64;
inline constexpr uint64_t kMaxDcpDimensionValues = 8 * kMaxDcpItems; // chunk offsets and sizes in all

// Where a chunk's or item's bytes are (a _StorageInfo), as a value.
struct DcpStorage {
    bool present = false; // storage_data has an entry for this chunk / item
    std::string file; // relative_path
    uint64_t offset = 0;
    uint64_t length = 0;
    bool transformed = false; // _StorageInfo.transform_descriptors (e.g. compression) is not empty
    std::string transform; // those descriptors, joined by ',' ("stream.zstd/1"); "?" when not strs
};

// One chunk, 40 bytes: a DCP checkpoint of a large job has 10^5 of them. Its offsets and sizes
// are in DcpMetadata::numbers; read them with DcpMetadata::offsets() / sizes().
struct DcpChunk {
    uint32_t offsets_at = 0, sizes_at = 0;
    uint16_t offsets_rank = 0, sizes_rank = 0;
    int32_t file = -1; // index into DcpMetadata::files; -1: no storage_data entry
    bool transformed = false;
    uint16_t transform = 0; // index into DcpMetadata::transforms (0: none)
    uint64_t offset = 0, length = 0;
};

struct DcpTensor {
    std::string fqn;
    std::string dtype; // torch name: "float32", "bfloat16", ...
    std::vector<uint64_t> size;
    uint32_t first_chunk = 0, chunk_count = 0; // in DcpMetadata::chunks
};

struct DcpBytesItem {
    std::string fqn;
    DcpStorage storage;
};

struct DcpMetadata {
    int pickle_protocol = 0;
    std::vector<DcpTensor> tensors; // in state_dict_metadata order
    std::vector<DcpChunk> chunks; // each tensor's, in its order
    std::vector<uint64_t> numbers; // the chunks' offsets and sizes
    std::vector<DcpBytesItem> bytes; // non-tensor items (pickled objects in the data files)
    std::vector<std::string> files; // distinct relative_path values, sorted
    std::vector<std::string> transforms{std::string()}; // distinct transform_descriptors lists (0: none)
    std::map<std::string, std::string> info; // version, storage_meta fields, planner data summary

    std::span<const DcpChunk> chunks_of(const DcpTensor& t) const
    {
        return std::span(chunks).subspan(t.first_chunk, t.chunk_count);
    }
    std::span<const uint64_t> offsets(const DcpChunk& c) const
    {
        return std::span(numbers).subspan(c.offsets_at, c.offsets_rank);
    }
    std::span<const uint64_t> sizes(const DcpChunk& c) const
    {
        return std::span(numbers).subspan(c.sizes_at, c.sizes_rank);
    }
    std::string_view file(const DcpChunk& c) const
    {
        return c.file < 0 ? std::string_view() : std::string_view(files[c.file]);
    }
    DcpStorage storage(const DcpChunk& c) const
    {
        if (c.file < 0)
            return {};
        return {.present = true,
                .file = files[c.file],
                .offset = c.offset,
                .length = c.length,
                .transformed = c.transformed,
                .transform = c.transform < transforms.size() ? transforms[c.transform] : std::string("?")};
    }
};

// The first kDcpFirstTensors tensors of a long .metadata, as soon as they are read: a
// DcpMetadata of those alone, their chunks without storage (file -1) and nothing else, and no more
// than kDcpFirstChunks chunks (the tensors that fit). Called at most once, on the decoding thread,
// when that many tensors have been read (not for fewer). The names are the strs each was pickled
// right after (state_dict_metadata's keys); the finished decode names its tensors by the dict.
inline constexpr std::size_t kDcpFirstTensors = 256;
inline constexpr std::size_t kDcpFirstChunks = 1u << 16;
using DcpFirstTensors = std::function<void(const DcpMetadata& first)>;

// Decodes the pickled Metadata. Throws Error (invalid_pickle, forbidden_pickle_opcode,
// invalid_manifest for an unexpected structure) naming `display_path`. DCP's objects are folded
// as the pickle is read (dcp_metadata.cpp): memory follows the chunks described, not the opcodes.
DcpMetadata decode_dcp_metadata(std::string_view pickle_bytes, const std::string& display_path = ".metadata",
                                const PickleLimits& limits = {}, DcpFirstTensors first_tensors = {});
// The same, from the object `name` in `folder`, read through a window (twice) rather than held
// whole. Throws Error as fsutil::read_small_file does for a missing, outside or oversized file.
DcpMetadata decode_dcp_metadata_file(const storage::Folder& folder, const std::string& name,
                                     const std::string& display_path, DcpFirstTensors first_tensors = {});
inline DcpMetadata decode_dcp_metadata(const uint8_t* data, std::size_t size,
                                       const std::string& display_path = ".metadata", const PickleLimits& limits = {},
                                       DcpFirstTensors first_tensors = {})
{
    return decode_dcp_metadata(std::string_view(reinterpret_cast<const char*>(data), size), display_path, limits,
                               std::move(first_tensors));
}

// Element size of a torch dtype name ("float32" -> 4), 0 when unknown.
uint64_t torch_dtype_size(std::string_view dtype);

// The rank a DCP data file belongs to (`__<rank>_<n>.distcp`, or Hugging Face storage's
// `shard-<S>-model-<I>-of-<N>.safetensors`: dcp_hf_shard_rank), or -1. For a relative_path through
// folders (`__0_0/0.distcp`), the innermost component that names one.
int dcp_rank_of(const std::string& file_name);

// Where the `element_bytes` bytes of a chunk's elements start in its data file: inside the
// torch.save archive FileSystemWriter stores there (through the restricted reader; the archive's
// storage must be stored uncompressed and hold exactly those bytes), or at the range itself when
// it holds the raw elements. Error naming `shown` when neither.
uint64_t locate_dcp_chunk_data(const ZipReadAt& file_read, const DcpStorage& storage, uint64_t element_bytes,
                               const std::string& shown);

// Where a layout was described, for the sentences about how its chunks tile their tensors.
struct DcpTilingSource {
    std::string described; // what those sentences start with: "<dir>/.metadata", "<dir>"
    std::string path; // their Problem::path: ".metadata", or "" for a layout read from the files' headers
    // The layout comes from the data files' own headers (torch's Hugging Face storage): a sentence
    // names the files whose chunks overlap or leave the hole, since no one file describes it.
    bool from_headers = false;
    // Files were left out of the layout (each refused in its own sentence): their chunks are
    // missing, so a hole says nothing new and is not reported again.
    bool files_left_out = false;
};

// The chunks of `t` lie inside it and cover it exactly once; else one problem into `out` naming
// the tensor (layout_overlap for a chunk outside it or two that overlap, layout_gap for a hole).
// verify and stats both refuse a tensor so laid out.
void check_dcp_tiling(const DcpMetadata& meta, const DcpTensor& t, const DcpTilingSource& src,
                      std::vector<Problem>& out);

// Verifies a DCP folder (`dir`, listed): the metadata decodes; every referenced file exists
// (confined beneath `dir`) and every byte range lies within its file without overlapping another; every chunk has
// storage; chunks tile their tensor (in bounds, no overlap, full coverage). With `check_data`,
// each range's content too: FileSystemWriter stores every chunk (and every non-tensor item) as a
// torch.save archive, whose entries must pass their CRC-32 and whose storage must hold exactly
// the chunk's elements; a range that is not an archive must be the chunk's raw bytes.
VerifyReport verify_dcp(const storage::Folder& dir, const VerifyOptions& options, bool check_data = true);

} // namespace shardscope
