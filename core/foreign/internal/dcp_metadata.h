#pragma once
// What the pieces of the DCP .metadata decoder share (dcp_metadata.cpp, dcp_metadata_scan.cpp,
// dcp_metadata_fold.cpp and internal/dcp_store.h): what pass one finds about the memo, and the
// values and records the store keeps. Private to core/foreign.

#include "core/foreign/io/pickle_input.h"
#include "core/foreign/io/pickle_reader.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardscope::foreign::dcp {

// The memo indices stored so far, with a byte for each (never 0): distinct ones count (MEMOIZE's
// index is that count, as in CPython); dense indices in a vector, others in a map.
class MemoBytes {
public:
    // Sets `index`'s byte; true when the index is new.
    bool set(uint64_t index, uint8_t byte)
    {
        if (index == m_dense.size() && m_sparse.empty()) { // the next index (MEMOIZE's): appended
            m_dense.push_back(byte);
            ++m_count;
            return true;
        }
        const bool fresh = get(index) == 0;
        if (index < m_dense.size() || index < 2 * m_count + 4096) {
            if (index >= m_dense.size())
                m_dense.resize(static_cast<std::size_t>(index) + 1, 0);
            m_dense[index] = byte;
            if (!fresh && !m_sparse.empty())
                m_sparse.erase(index); // now dense: in one place only
        } else {
            m_sparse[index] = byte;
        }
        m_count += fresh;
        return fresh;
    }
    // ORs `bits` into the index's byte (a new index gets them).
    void mark(uint64_t index, uint8_t bits)
    {
        if (index < m_dense.size() && m_dense[index]) [[likely]]
            m_dense[index] |= bits;
        else
            mark_slow(index, bits);
    }
    uint8_t get(uint64_t index) const
    {
        if (index < m_dense.size() && m_dense[index])
            return m_dense[index];
        if (m_sparse.empty()) // (the dense vector may have grown past an index stored sparse)
            return 0;
        const auto it = m_sparse.find(index);
        return it == m_sparse.end() ? 0 : it->second;
    }
    uint64_t count() const { return m_count; }

private:
    // mark()'s other case, never inlined: set() inlined into pass one's loop (mark() runs for every
    // MEMOIZE, PUT and GET there) made that loop, a tenth of a decode, 1.8x as slow.
    [[gnu::noinline]] void mark_slow(uint64_t index, uint8_t bits) { set(index, get(index) | bits); }

    std::vector<uint8_t> m_dense;
    std::unordered_map<uint64_t, uint8_t> m_sparse;
    uint64_t m_count = 0;
};

// The memo entries a GET reads (a few thousand of a DCP .metadata's millions): open addressing,
// since every GET of pass two looks one up.
class MemoHandles {
public:
    void set(uint64_t index, uint32_t handle)
    {
        if (2 * (m_size + 1) > m_slots.size())
            rehash(std::max<std::size_t>(64, 2 * m_slots.size()));
        Slot& s = find(index);
        m_size += s.index == kEmpty;
        s = {index, handle};
    }
    uint32_t get(uint64_t index) const
    {
        if (m_slots.empty())
            return kNoPickleValue;
        const Slot& s = const_cast<MemoHandles*>(this)->find(index);
        return s.index == index ? s.handle : kNoPickleValue;
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    struct Slot {
        uint64_t index = kEmpty;
        uint32_t handle = kNoPickleValue;
    };
    Slot& find(uint64_t index)
    {
        const std::size_t mask = m_slots.size() - 1;
        for (std::size_t i = (index * 0x9e3779b97f4a7c15ull) >> 20 & mask;; i = (i + 1) & mask)
            if (m_slots[i].index == index || m_slots[i].index == kEmpty)
                return m_slots[i];
    }
    void rehash(std::size_t capacity)
    {
        std::vector<Slot> old(capacity);
        old.swap(m_slots);
        for (const Slot& s : old)
            if (s.index != kEmpty)
                find(s.index) = s;
    }
    std::vector<Slot> m_slots;
    std::size_t m_size = 0;
};

// What the first pass finds: the memo indices stored (kStored) and those a GET reads (kFetched).
// The second pass marks the indices it has stored (kStoredAgain), to count them as the first did:
// MEMOIZE's index is that count.
constexpr uint8_t kStored = 0x01;
constexpr uint8_t kFetched = 0x80;
constexpr uint8_t kStoredAgain = 0x40;
struct MemoUse {
    MemoBytes entries;
    uint64_t stored_again = 0;
};

// Pass one (dcp_metadata_scan.cpp): which memo entries are ever read.
MemoUse scan_memo_use(PickleInput in, const PickleLimits& limits);

// What a folded value is. Records are permanent values with kind new_object.
enum class Fold : uint8_t { none, dims, chunk, tensor, bytes_item, properties, index, storage };

// Handles: scratch slots below kInline; non-negative ints below 2^30 inline; permanent values above.
constexpr uint32_t kInline = 1u << 30;
constexpr uint32_t kKept = 1u << 31;

struct Value {
    PickleKind kind = PickleKind::none;
    Fold fold = Fold::none;
    bool boolean = false;
    uint32_t a = 0;
    uint64_t b = 0;
};
// An object's fields in the scratch pool, from its Value's `a`.
enum ObjectField : uint32_t {
    cls_field,
    args_field,
    kwargs_field,
    state_field,
    dict_field,
    list_field,
    folded_field,
    kObjectFields
};

struct StorageRecord {
    uint32_t file = kNoPickleValue; // a str handle
    bool transformed = false;
    uint16_t transform = 0; // index into DcpStore::m_transforms (0: none)
    uint64_t offset = 0, length = 0;
};
struct TensorRecord {
    uint32_t properties = kNoPickleValue, size = kNoPickleValue;
    uint32_t chunks_begin = 0, chunks_count = 0; // in m_tensor_chunks
};

struct Folded {
    Value value;
    std::string problem; // why it does not fold, when asked
};

struct Decoded {
    int protocol = 0;
    uint32_t root = kNoPickleValue;
};

// The field and class names of DCP's objects, looked up by str handle (DcpStore::name_text).
enum class Name : uint8_t {
    offsets,
    sizes,
    fqn,
    offset,
    relative_path,
    length,
    transform_descriptors,
    dtype,
    properties,
    size,
    chunks,
    ChunkStorageMetadata,
    MetadataIndex,
    StorageInfo,
    TensorProperties,
    TensorStorageMetadata,
    BytesStorageMetadata,
    kCount
};
inline constexpr std::string_view kNameTexts[] = {
    "offsets",
    "sizes",
    "fqn",
    "offset",
    "relative_path",
    "length",
    "transform_descriptors",
    "dtype",
    "properties",
    "size",
    "chunks",
    "ChunkStorageMetadata",
    "MetadataIndex",
    "_StorageInfo",
    "TensorProperties",
    "TensorStorageMetadata",
    "BytesStorageMetadata",
};
static_assert(std::size(kNameTexts) == static_cast<std::size_t>(Name::kCount));

} // namespace shardscope::foreign::dcp
