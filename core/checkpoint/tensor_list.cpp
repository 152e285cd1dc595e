#include "core/checkpoint/tensor_list.h"

#include "core/checkpoint/foreign_summary.h"

#include <algorithm>
#include <stdexcept>

namespace shardscope {

namespace {

uint32_t narrow(std::size_t n)
{
    // Names, shapes and chunk counts come from files the limits already bound (kMaxListedTensors,
    // kMaxDcpItems, header sizes): nothing listed reaches 2^32 of them.
    if (n > UINT32_MAX)
        throw std::length_error("a foreign tensor list of more than 2^32 names, numbers or chunks");
    return static_cast<uint32_t>(n);
}

} // namespace

ForeignChunkView foreign_chunk_at(const ForeignTensorList& list, std::size_t i)
{
    const ForeignTensorList::ChunkRow& c = list.m_chunks[i];
    const uint64_t* dims = list.m_numbers.data() + c.dims_at;
    return ForeignChunkView{.offsets = std::span<const uint64_t>(dims, c.offsets_count),
                            .sizes = std::span<const uint64_t>(dims + c.offsets_count, c.sizes_count),
                            .file = list.m_strings[c.file],
                            .offset = c.offset,
                            .length = c.length};
}

ForeignTensorView foreign_tensor_at(const ForeignTensorList& list, std::size_t i)
{
    const ForeignTensorList::Row& r = list.m_rows[i];
    return ForeignTensorView{.name = list.text(r.name_at, r.name_size),
                             .dtype = list.m_strings[r.dtype],
                             .shape = std::span<const uint64_t>(list.m_numbers.data() + r.dims_at, r.rank),
                             .file = list.m_strings[r.file],
                             .offset = r.offset,
                             .bytes = r.bytes,
                             .detail = list.text(r.detail_at, r.detail_size),
                             .chunks = {&list, r.chunks_at, r.chunk_count}};
}

ForeignTensor ForeignTensorView::copy() const
{
    ForeignTensor t{.name = std::string(name),
                    .dtype = std::string(dtype),
                    .shape = std::vector<uint64_t>(shape.begin(), shape.end()),
                    .file = std::string(file),
                    .offset = offset,
                    .bytes = bytes,
                    .detail = std::string(detail)};
    for (const ForeignChunkView c : chunks)
        t.chunks.push_back(ForeignChunk{.offsets = std::vector<uint64_t>(c.offsets.begin(), c.offsets.end()),
                                        .sizes = std::vector<uint64_t>(c.sizes.begin(), c.sizes.end()),
                                        .file = std::string(c.file),
                                        .offset = c.offset,
                                        .length = c.length});
    return t;
}

void ForeignTensorList::clear()
{
    *this = ForeignTensorList();
}

uint32_t ForeignTensorList::intern(std::string_view text)
{
    if (text.empty())
        return 0;
    const auto found = m_string_ids.find(text);
    if (found != m_string_ids.end())
        return found->second;
    const uint32_t id = narrow(m_strings.size());
    m_strings.emplace_back(text);
    m_string_ids.emplace(std::string(text), id);
    return id;
}

uint64_t ForeignTensorList::add_text(std::string_view text)
{
    const uint64_t at = m_texts.size();
    m_texts.append(text);
    return at;
}

uint32_t ForeignTensorList::add_numbers(std::span<const uint64_t> numbers)
{
    const uint32_t at = narrow(m_numbers.size());
    m_numbers.insert(m_numbers.end(), numbers.begin(), numbers.end());
    return at;
}

void ForeignTensorList::add_chunk(const ForeignChunkView& c)
{
    // Stored as read, even when offsets and sizes disagree in length (the verifier reports that
    // chunk and shows both as they are).
    const uint32_t at = add_numbers(c.offsets);
    add_numbers(c.sizes);
    m_chunks.push_back(ChunkRow{.offset = c.offset,
                                .length = c.length,
                                .dims_at = at,
                                .offsets_count = narrow(c.offsets.size()),
                                .sizes_count = narrow(c.sizes.size()),
                                .file = intern(c.file)});
}

void ForeignTensorList::add(const ForeignTensorFields& t, std::size_t chunks)
{
    const std::size_t owned = std::min(chunks, m_chunks.size()); // the last `chunks` added
    m_rows.push_back(Row{.name_at = add_text(t.name),
                         .detail_at = add_text(t.detail),
                         .offset = t.offset,
                         .bytes = t.bytes,
                         .dims_at = add_numbers(t.shape),
                         .chunks_at = narrow(m_chunks.size() - owned),
                         .name_size = narrow(t.name.size()),
                         .detail_size = narrow(t.detail.size()),
                         .dtype = intern(t.dtype),
                         .file = intern(t.file),
                         .rank = narrow(t.shape.size()),
                         .chunk_count = narrow(owned)});
}

void ForeignTensorList::push_back(const ForeignTensor& t)
{
    for (const ForeignChunk& c : t.chunks)
        add_chunk(ForeignChunkView{
            .offsets = c.offsets, .sizes = c.sizes, .file = c.file, .offset = c.offset, .length = c.length});
    add(ForeignTensorFields{.name = t.name,
                            .dtype = t.dtype,
                            .shape = t.shape,
                            .file = t.file,
                            .offset = t.offset,
                            .bytes = t.bytes,
                            .detail = t.detail},
        t.chunks.size());
}

std::size_t ForeignTensorList::memory_bytes() const
{
    std::size_t bytes = m_rows.capacity() * sizeof(Row) + m_chunks.capacity() * sizeof(ChunkRow) + m_texts.capacity() +
        m_numbers.capacity() * sizeof(uint64_t);
    for (const std::string& s : m_strings)
        bytes += sizeof(std::string) + 2 * s.capacity() + 64; // the string, its map key and node
    return bytes;
}

} // namespace shardscope
