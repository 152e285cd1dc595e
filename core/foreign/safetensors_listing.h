#pragma once
// One safetensors file's header read in a single streaming pass into compact arrays, for listing
// checkpoints of 10^5 tensors (core/checkpoint's SafetensorsHeader builds a DOM and a string per
// field: fine for a shard of a few tensors, the bulk of `shardctl info` time for an MoE index).
// It accepts, rejects and words its errors exactly as parse_safetensors_header does
// (tst_foreign_safetensors compares the two on fixtures and hostile headers).

#include "core/checkpoint/safetensors.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

struct SafetensorsListing {
    struct Tensor {
        uint32_t name_offset = 0, name_size = 0; // in `names`
        uint32_t dims_offset = 0; // in `dims`
        uint16_t rank = 0;
        uint8_t dtype = 0; // index into safetensors_dtype_names()
        uint64_t begin = 0, end = 0; // relative to the data section
        uint64_t bytes() const { return end - begin; }
    };
    uint64_t header_length = 0;
    std::string names;
    std::vector<uint64_t> dims;
    std::vector<Tensor> tensors; // sorted by begin
    std::vector<std::pair<std::string, std::string>> metadata; // __metadata__, by key

    uint64_t data_start() const { return 8 + header_length; }
    std::string_view name(const Tensor& t) const { return std::string_view(names).substr(t.name_offset, t.name_size); }
    std::span<const uint64_t> shape(const Tensor& t) const { return {dims.data() + t.dims_offset, t.rank}; }
    std::string_view dtype(const Tensor& t) const;
};

// The dtypes safetensors_dtype_size knows, in a fixed order (SafetensorsListing::Tensor::dtype).
std::span<const std::string_view> safetensors_dtype_names();

// As parse_safetensors_header: the same checks, the same Error(invalid_shard) sentences.
SafetensorsListing list_safetensors_header(std::string_view json, uint64_t file_size, const std::string& display_path,
                                           int rank = -1);

// As read_safetensors_header: the 8-byte length, its limits, then list_safetensors_header.
SafetensorsListing read_safetensors_listing(const storage::Reader& file, uint64_t file_size,
                                            const std::string& display_path, int rank = -1);

} // namespace shardscope
