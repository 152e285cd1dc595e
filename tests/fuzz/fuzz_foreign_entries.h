#pragma once
// Fuzzing entry points for the foreign-format readers (see fuzz_entries.h for the contract).

#include "core/util/error.h"
#include "core/foreign/internal/common.h"
#include "core/foreign/megatron.h"
#include "core/foreign/safetensors_index.h"
#include "core/foreign/torch_archive.h"
#include "core/util/fsutil.h"
#include "core/foreign/dcp.h"
#include "core/foreign/dcp_hf.h"
#include "core/foreign/dcp_transform.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/foreign/io/zip_reader.h"
#include "fuzz_entries.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <vector>

namespace shardscope::fuzz {

// Megatron's integrity.json and metadata.json: the same JSON inputs as the index's corpus.
inline void megatron_json_one(const uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const MegatronIntegrity integrity = parse_megatron_integrity(text, "fuzz/integrity.json");
        for (const auto& [name, digest] : integrity.files)
            require(digest.size() == 64, "every digest is 64 hex digits");
    } catch (const Error&) {
    }
    try {
        const MegatronCheckpointConfig config = parse_megatron_metadata_json(text, "fuzz/metadata.json");
        require(!config.fields.empty(), "a config with sharded_backend has fields");
    } catch (const Error&) {
    }
}

// DCP_SHARDING_INFO, the JSON text in a Hugging Face storage shard's __metadata__.
inline void sharding_info_one(const uint8_t* data, std::size_t size)
{
    try {
        const auto info = parse_dcp_sharding_info(as_text(data, size), "fuzz/shard.safetensors");
        std::set<std::string_view> seen;
        for (const auto& [fqn, offsets] : info) {
            require(seen.insert(fqn).second, "every fqn once");
            require(offsets.size() <= kMaxDcpDims, "offsets within the rank limit");
        }
    } catch (const Error& e) {
        require(std::string_view(e.what()).starts_with("fuzz/shard.safetensors: DCP_SHARDING_INFO"),
                "a refusal names the file and DCP_SHARDING_INFO");
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
    }
}

// model.safetensors.index.json (and, over the same JSON inputs, Megatron's and DCP_SHARDING_INFO)
inline void index_one(const uint8_t* data, std::size_t size)
{
    megatron_json_one(data, size);
    sharding_info_one(data, size);
    SafetensorsIndex index;
    try {
        index = parse_safetensors_index(data, size, "fuzz/model.safetensors.index.json");
    } catch (const Error&) {
        return;
    }
    require(index.files.size() <= kMaxIndexFiles, "file count within limit");
    require(index.weight_map.size() <= kMaxIndexEntries, "entry count within limit");
    for (std::size_t i = 0; i < index.weight_map.size(); ++i) {
        require(index.weight_map.file(i) < index.files.size(), "every entry names a listed file");
        require(index.weight_map.find(index.weight_map.name(i)) == i, "every name is found again");
    }
    for (const auto& file : index.files)
        require(!fsutil::unsafe_name_reason(file), "index file names stay inside the folder");
}

// A pickle (PyTorch DCP .metadata, torch.save's data.pkl): parse with small limits so that the
// limits themselves are exercised, then walk and describe every node the way the GUI would.
inline void pickle_one(const uint8_t* data, std::size_t size)
{
    PickleLimits limits;
    limits.max_nodes = 1u << 16;
    limits.max_stack = 1u << 12;
    limits.max_memo = 1u << 12;
    limits.max_string_bytes = 1u << 16;
    limits.max_total_string_bytes = 1u << 20;
    limits.max_container_items = 1u << 16;
    // The DCP reader folds as it reads (its own store over the same machine): whatever it
    // returns must hold together.
    // (and so must the first tensors it hands over early, from an input that has that many)
    auto holds_together = [](const DcpMetadata& meta) {
        for (const DcpTensor& t : meta.tensors) {
            require(uint64_t(t.first_chunk) + t.chunk_count <= meta.chunks.size(),
                    "a tensor's chunks inside the array");
            for (const DcpChunk& c : meta.chunks_of(t)) {
                require(uint64_t(c.offsets_at) + c.offsets_rank <= meta.numbers.size() &&
                            uint64_t(c.sizes_at) + c.sizes_rank <= meta.numbers.size(),
                        "a chunk's dims inside the numbers");
                require(c.file < int32_t(meta.files.size()), "a chunk's file is listed");
            }
        }
    };
    try {
        holds_together(decode_dcp_metadata(data, size, "fuzz/.metadata", limits, holds_together));
    } catch (const Error&) {
    }
    PickleDocument doc;
    try {
        doc = parse_pickle(data, size, "fuzz/.metadata", limits);
    } catch (const Error&) {
        return;
    }
    require(doc.size() <= limits.max_nodes, "node count within limit");
    for (uint32_t id = 0; id < doc.size(); ++id) {
        for (uint32_t item : doc.at(id).items)
            require(item == kNoPickleValue || item < doc.size(), "item ids inside the arena");
        (void)doc.class_name(id);
        (void)doc.as_int(id);
        (void)doc.as_sequence(id);
        (void)doc.dict_get(id, "state_dict_metadata");
        (void)doc.attribute(id, "storage_data");
        require(doc.describe(id).size() < (1u << 20), "describe() stays bounded");
    }
    if (doc.root() != kNoPickleValue)
        (void)doc.describe(doc.root(), 8);
}

// A zip archive (torch.save's .pt files, the items DCP stores): the directory, the CRC-32 check of
// the first entries (stored or deflated) and the tensor listing through the restricted pickle
// reader, all over bytes in memory.
inline void zip_one(const uint8_t* data, std::size_t size)
{
    const std::string_view file(reinterpret_cast<const char*>(data), size);
    const ZipReadAt read = zip_read_memory(file);
    // As a DCP item compressed by torch's ZStandard extension: decoded within its limit, or
    // refused in a sentence.
    try {
        const auto inflated = inflate_dcp_zstd(read, 0, size, 1u << 20, "fuzz/__0_0.distcp: item");
        require(inflated.size() <= (1u << 20), "decompressed within the limit");
    } catch (const Error& e) {
        require(std::strlen(e.what()) <= kMaxMessageBytes, "error sentences stay short");
    }
    ZipDirectory directory;
    try {
        directory = read_zip_directory(read, size, "fuzz/archive.pt");
    } catch (const Error&) {
        return;
    }
    require(directory.entries.size() <= kMaxZipEntries, "entry count within limit");
    for (const auto& entry : directory.entries)
        require(entry.compressed_size <= size, "an entry's stored bytes fit in the file");
    for (std::size_t i = 0; i < std::min<std::size_t>(directory.entries.size(), 64); ++i) {
        const ZipEntryCheck check = check_zip_entry(read, size, directory, i);
        require(check.ok || !check.problem.empty(), "a failed entry says why");
    }
    const TorchArchiveListing listing = list_torch_archive(read, size, directory, "fuzz/archive.pt");
    require(listing.tensors.size() <= foreign::kMaxListedTensors, "listed tensors within limit");
    require(listing.tensors.size() <= listing.tensors_total, "the count covers the list");
}

} // namespace shardscope::fuzz
