#pragma once
// Internal to core/inspect: a tensor's elements in its own row-major order, whatever the layout
// of its parts (runs of the flattened tensor, DCP boxes, strided torch views), read piece by
// piece so that no tensor is ever whole in memory. diff compares two checkpoints through it: the
// same element index means the same element on both sides, however each was sharded.

#include "core/inspect/content.h"
#include "core/util/fsutil.h"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>
#include <string>

namespace shardscope::inspect {

// A compressed part's (TensorPart::zstd_length) decompressed item, checked to hold its elements
// at byte_offset. Throws Error naming `shown` when it cannot be read or does not.
std::vector<std::byte> inflate_dcp_part(const storage::Reader& file, const TensorPart& part, std::size_t element_size,
                                        const std::string& shown);

// The elements of its file a part spans from its first: numel, or for a strided view (view_shape)
// 1 + sum (size - 1) * stride; nullopt where the strides do not fit the shape or that overflows.
std::optional<uint64_t> stored_span(const TensorPart& part);

// Whether a view's strides put every element in its own place of `numel` consecutive ones (a
// contiguous tensor, or a permutation of one such as a transpose): what does not depend on the
// elements' order (statistics) reads such a view as one run.
bool permutes_dense_storage(const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides);

// Elements [first, first + count) of a strided view (TensorPart::view_shape), in the view's own
// row-major order: their places in storage, sorted and read in runs through `read(stored,
// elements, out)` (elements consecutively from the part's stored-th); false as soon as it does.
bool gather_view(const TensorPart& part, std::size_t element_size, uint64_t first, uint64_t count, std::byte* out,
                 const std::function<bool(uint64_t stored, uint64_t elements, std::byte* out)>& read);

class TensorReader {
public:
    TensorReader(const storage::Folder& folder, const TensorContent& tensor);

    // Elements in the tensor (the product of its shape).
    uint64_t numel() const { return m_numel; }
    // Why the tensor's parts cannot be read as laid out (a chunk outside the tensor, strides that
    // leave their storage, parts out of order), found up front; nullopt when they can.
    const std::optional<std::string>& invalid() const { return m_invalid; }

    // Reads elements [first, first + count) into `out` (count * element_size bytes), or returns
    // the problem that stopped it, naming the file, rank and tensor.
    std::optional<Problem> read(uint64_t first, uint64_t count, std::byte* out);

    // Elements from `first` (at most `count` of them) stored as one run of plain bytes in a local
    // file: its descriptor and byte offset, so that a copy can go file to file without passing
    // through memory. Nullopt when they are compressed, a view, remote, or cannot be read as laid
    // out (read() then says why).
    struct LocalRun {
        int fd = -1;
        uint64_t offset = 0; // bytes
        uint64_t count = 0; // elements
    };
    std::optional<LocalRun> local_run(uint64_t first, uint64_t count);

private:
    // Elements from `first` stored consecutively in one part, from its `stored`-th element.
    struct Run {
        const TensorPart* part = nullptr;
        uint64_t stored = 0, count = 0;
    };
    std::optional<Problem> locate(uint64_t first, uint64_t count, Run& run);
    std::optional<Problem> locate_flat(uint64_t first, uint64_t count, Run& run);
    std::optional<Problem> locate_in_boxes(uint64_t first, uint64_t count, Run& run);
    std::optional<Problem> read_view(const TensorPart& part, uint64_t first, uint64_t count, std::byte* out);
    std::optional<Problem> pread_part(const TensorPart& part, uint64_t stored_element, uint64_t count, std::byte* out);
    std::optional<Problem> open_part(const TensorPart& part);
    Problem problem(ProblemKind kind, const TensorPart* part, const std::string& what) const;

    const storage::Folder& m_folder;
    std::filesystem::path m_dir;
    const TensorContent& m_tensor;
    std::size_t m_size; // bytes per element
    uint64_t m_numel = 0;
    bool m_boxes = false;
    std::optional<std::string> m_invalid; // why the layout cannot be read, found up front
    std::map<std::string, storage::OpenedObject> m_files;
    const TensorPart* m_inflated_part = nullptr; // the compressed part whose item is in m_inflated
    std::vector<std::byte> m_inflated;
    std::size_t m_hint = 0; // the part the last read ended in: reads go forward
};

} // namespace shardscope::inspect
