#pragma once
// Value types for what a checkpoint ShardScope did not write holds (safetensors, index, DCP,
// DeepSpeed, Megatron): summary rows for the manifest panel and the tensors with where their bytes
// are. Plain data: the verifiers fill them, the CLI, the report and the app show them.

#include "core/checkpoint/tensor_list.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardscope {

// One piece of a tensor stored on its own (DCP's chunks): where in the tensor, where on disk.
// ForeignChunk and ForeignTensor are what a reader builds, one at a time; a summary keeps them
// in a ForeignTensorList and hands out views with the same field names.
struct ForeignChunk {
    std::vector<uint64_t> offsets; // element offsets into the tensor, per dimension
    std::vector<uint64_t> sizes;
    std::string file; // empty when the metadata records no storage for it
    uint64_t offset = 0; // byte range in that file
    uint64_t length = 0;
};
struct ForeignTensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    std::string file; // the file holding it (or its first chunk)
    uint64_t offset = 0; // byte offset in that file
    uint64_t bytes = 0;
    std::string detail; // e.g. "3 chunks", the chunk grid, a storage key
    std::vector<ForeignChunk> chunks; // DCP: every chunk and its storage
};
struct ForeignRange {
    uint64_t offset = 0;
    uint64_t numel = 0;
    int id = -1; // a rank, or an index into ForeignLayout::tensor_names
};
// Who holds which elements, where the format records it (DCP's chunks): every tensor's chunks
// laid end to end, tensors in metadata order and chunks by their offsets, so that each chunk is one
// contiguous range of this space. Row-split tensors keep their real flat order.
struct ForeignLayout {
    uint64_t total = 0; // elements
    std::vector<ForeignRange> holders; // id = rank; adjacent chunks of one rank merged
    std::vector<ForeignRange> tensors; // id = index into tensor_names
    std::vector<std::string> tensor_names;
    std::vector<std::vector<uint64_t>> tensor_shapes;
};
struct ForeignSummary {
    std::vector<std::pair<std::string, std::string>> rows; // property, value
    ForeignTensorList tensors; // compact (tensor_list.h)
    uint64_t tensors_total = 0; // tensors may be capped for display; this is the real count
    std::optional<ForeignLayout> layout;
    // What the format knows as numbers (the rows above are for display): the ranks that wrote it
    // (DCP: ranks; DeepSpeed: data-parallel size; Megatron: tensor x pipeline ranks) and the
    // training step (DeepSpeed's global_stepN, Megatron's iteration). Absent when not known.
    std::optional<int64_t> world_size, step;
};

} // namespace shardscope
