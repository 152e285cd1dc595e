#pragma once
// The tensors a foreign checkpoint lists, stored compactly: a mixture-of-experts index
// names 10^5 tensors and a large FSDP job's DCP metadata as many chunks, and a vector of
// ForeignTensor (four strings and two vectors per tensor, each with its own heap block) took
// ~370 bytes a tensor. Here every name and detail text lives in one arena, dtype and file names
// are interned (an index has a few hundred files and a handful of dtypes), shapes and chunk
// offsets/sizes share one array of numbers, and a tensor is a 64-byte row.
//
// A producer builds one ForeignTensor (or ForeignChunk) at a time and appends it; readers get
// ForeignTensorView / ForeignChunkView values whose fields are named as ForeignTensor's and
// point into the list (and hold its address): valid while the list lives where it is, not
// moved, appended to or cleared.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

struct ForeignChunk;
struct ForeignTensor;

struct ForeignChunkView {
    std::span<const uint64_t> offsets; // element offsets into the tensor, per dimension
    std::span<const uint64_t> sizes;
    std::string_view file; // empty when the metadata records no storage for it
    uint64_t offset = 0; // byte range in that file
    uint64_t length = 0;
};

class ForeignTensorList;
struct ForeignTensorView;
ForeignChunkView foreign_chunk_at(const ForeignTensorList& list, std::size_t i);
ForeignTensorView foreign_tensor_at(const ForeignTensorList& list, std::size_t i);

// An index-based range over a list's rows: size(), operator[] and iteration, by value.
template <class Owner, class Value, Value (*At)(const Owner&, std::size_t)>
class IndexRange {
public:
    class iterator {
    public:
        using value_type = Value;
        using difference_type = std::ptrdiff_t;
        iterator() = default;
        iterator(const Owner* owner, std::size_t i) : m_owner(owner), m_i(i) {}
        Value operator*() const { return At(*m_owner, m_i); }
        iterator& operator++()
        {
            ++m_i;
            return *this;
        }
        iterator operator++(int)
        {
            iterator before = *this;
            ++m_i;
            return before;
        }
        bool operator==(const iterator& other) const { return m_i == other.m_i; }

    private:
        const Owner* m_owner = nullptr;
        std::size_t m_i = 0;
    };
    IndexRange() = default;
    IndexRange(const Owner* owner, std::size_t begin, std::size_t count)
        : m_owner(owner), m_begin(begin), m_count(count)
    {}
    std::size_t size() const { return m_count; }
    bool empty() const { return m_count == 0; }
    Value operator[](std::size_t i) const { return At(*m_owner, m_begin + i); }
    iterator begin() const { return {m_owner, m_begin}; }
    iterator end() const { return {m_owner, m_begin + m_count}; }

private:
    const Owner* m_owner = nullptr;
    std::size_t m_begin = 0;
    std::size_t m_count = 0;
};

struct ForeignTensorView {
    std::string_view name;
    std::string_view dtype;
    std::span<const uint64_t> shape;
    std::string_view file; // the file holding it (or its first chunk)
    uint64_t offset = 0; // byte offset in that file
    uint64_t bytes = 0;
    std::string_view detail; // e.g. "3 chunks", the chunk grid, a storage key
    // DCP: every chunk and its storage.
    IndexRange<ForeignTensorList, ForeignChunkView, &foreign_chunk_at> chunks;

    ForeignTensor copy() const; // an owning copy
};

// A tensor without chunks as a producer hands it over, nothing copied until the list stores it.
struct ForeignTensorFields {
    std::string_view name;
    std::string_view dtype;
    std::span<const uint64_t> shape;
    std::string_view file;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    std::string_view detail;
};

class ForeignTensorList {
public:
    std::size_t size() const { return m_rows.size(); }
    bool empty() const { return m_rows.empty(); }
    // Room for `tensors` rows, their names and details (`text_bytes`) and shapes (`numbers`):
    // a list of known size grows without the doubling copies (and their peak) of appending.
    void reserve(std::size_t tensors, std::size_t text_bytes = 0, std::size_t numbers = 0, std::size_t chunks = 0)
    {
        m_rows.reserve(tensors);
        m_texts.reserve(text_bytes);
        m_numbers.reserve(numbers);
        m_chunks.reserve(chunks);
    }
    void clear();
    void push_back(const ForeignTensor& tensor);
    // Without a ForeignTensor: a tensor's chunks first (add_chunk), then the tensor, which owns
    // the last `chunks` chunks added.
    void add_chunk(const ForeignChunkView& chunk);
    void add(const ForeignTensorFields& tensor, std::size_t chunks = 0);

    ForeignTensorView operator[](std::size_t i) const { return foreign_tensor_at(*this, i); }
    ForeignTensorView back() const { return foreign_tensor_at(*this, m_rows.size() - 1); }
    using Range = IndexRange<ForeignTensorList, ForeignTensorView, &foreign_tensor_at>;
    Range::iterator begin() const { return {this, 0}; }
    Range::iterator end() const { return {this, m_rows.size()}; }

    // Bytes held, for the benchmark's per-tensor figure.
    std::size_t memory_bytes() const;

private:
    friend ForeignChunkView foreign_chunk_at(const ForeignTensorList& list, std::size_t i);
    friend ForeignTensorView foreign_tensor_at(const ForeignTensorList& list, std::size_t i);
    struct Row { // 64 bytes
        uint64_t name_at = 0;
        uint64_t detail_at = 0;
        uint64_t offset = 0;
        uint64_t bytes = 0;
        uint32_t dims_at = 0; // shape: rank numbers
        uint32_t chunks_at = 0;
        uint32_t name_size = 0;
        uint32_t detail_size = 0;
        uint32_t dtype = 0; // into m_strings
        uint32_t file = 0; // into m_strings
        uint32_t rank = 0;
        uint32_t chunk_count = 0;
    };
    struct ChunkRow { // 32 bytes
        uint64_t offset = 0;
        uint64_t length = 0;
        uint32_t dims_at = 0; // offsets, then sizes: as many as the file has of each
        uint32_t offsets_count = 0;
        uint32_t sizes_count = 0;
        uint32_t file = 0;
    };
    static_assert(sizeof(Row) == 64 && sizeof(ChunkRow) == 32, "the per-tensor cost the header states");
    uint32_t intern(std::string_view text);
    uint64_t add_text(std::string_view text);
    uint32_t add_numbers(std::span<const uint64_t> numbers);
    std::string_view text(uint64_t at, uint32_t size) const { return std::string_view(m_texts).substr(at, size); }

    std::vector<Row> m_rows;
    std::vector<ChunkRow> m_chunks;
    std::string m_texts; // names and details, end to end
    std::vector<uint64_t> m_numbers; // shapes, chunk offsets and sizes
    std::vector<std::string> m_strings{""}; // interned dtypes and files; 0 is ""
    std::map<std::string, uint32_t, std::less<>> m_string_ids;
};

} // namespace shardscope
