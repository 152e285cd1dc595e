// --to dcp: torch's FileSystemWriter layout (single_file_per_rank) as torch 1.13 reads it back —
// each tensor split by rows over --world-size ranks as torch.chunk splits it (a DTensor's
// Shard(0), a ShardedTensor's ChunkShardingSpec on dim 0), every chunk saved with torch.save (a
// stored zip: archive/data.pkl, archive/data/0, archive/version) into its rank's __R_0.distcp one
// after another, and .metadata, the pickle of a Metadata whose chunks and storage_data say where
// each chunk's archive lies (docs/shardctl.md, section 2.15).

#include "core/convert/internal/job.h"
#include "core/convert/internal/pickle_writer.h"
#include "core/util/printable.h"

#include <zlib.h>

namespace shardscope::convert {

namespace {

std::string rank_file(int rank)
{
    return "__" + std::to_string(rank) + "_0.distcp";
}
constexpr std::string_view kMetadataModule = "torch.distributed._shard.checkpoint.metadata";

struct TorchType {
    const char* dtype; // torch.<dtype>
    const char* storage; // torch.<storage>, the legacy storage class torch.save pickles
};

std::optional<TorchType> torch_type(ElementType type)
{
    switch (type) {
    case ElementType::F32: return TorchType{"float32", "FloatStorage"};
    case ElementType::F64: return TorchType{"float64", "DoubleStorage"};
    case ElementType::F16: return TorchType{"float16", "HalfStorage"};
    case ElementType::BF16: return TorchType{"bfloat16", "BFloat16Storage"};
    case ElementType::I8: return TorchType{"int8", "CharStorage"};
    case ElementType::U8: return TorchType{"uint8", "ByteStorage"};
    case ElementType::I16: return TorchType{"int16", "ShortStorage"};
    case ElementType::I32: return TorchType{"int32", "IntStorage"};
    case ElementType::I64: return TorchType{"int64", "LongStorage"};
    case ElementType::BOOL: return TorchType{"bool", "BoolStorage"};
    default: return std::nullopt; // unsigned 16-64 bit and F8: torch 1.13 has no such tensors
    }
}

void put_le(std::string& out, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void ints_tuple(PickleWriter& p, const std::vector<uint64_t>& values)
{
    p.mark();
    for (const uint64_t v : values)
        p.integer(static_cast<int64_t>(v));
    p.tuple();
}

void torch_size(PickleWriter& p, const std::vector<uint64_t>& values)
{
    p.global("torch", "Size");
    p.mark();
    ints_tuple(p, values);
    p.tuple();
    p.reduce();
}

// The data.pkl of torch.save(tensor): _rebuild_tensor_v2 over storage "0", contiguous.
std::string tensor_pickle(const TorchType& type, const std::vector<uint64_t>& shape, uint64_t numel)
{
    PickleWriter p;
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();
    p.text("storage");
    p.global("torch", type.storage);
    p.text("0");
    p.text("cpu");
    p.integer(static_cast<int64_t>(numel));
    p.tuple();
    p.persistent_id();
    p.integer(0);
    ints_tuple(p, shape);
    std::vector<uint64_t> strides(shape.size());
    uint64_t stride = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
        strides[d] = stride;
        stride *= shape[d];
    }
    ints_tuple(p, strides);
    p.boolean(false);
    p.global("collections", "OrderedDict");
    p.empty_tuple();
    p.reduce();
    p.tuple();
    p.reduce();
    return p.finish();
}

// Sizes and offsets from 4 GiB - 1 on take zip64 records (an embedding of 2^31 BF16 values is
// 4 GiB): the 32-bit field saturated, the value in the zip64 extra field, as miniz (torch) writes.
constexpr uint64_t kSaturated = 0xffffffffull;

// A stored (uncompressed) zip entry's local header; CRC-32 patched in once the data is written.
std::string local_header(const std::string& name, uint32_t crc, uint64_t size)
{
    const bool zip64 = size >= kSaturated;
    std::string h;
    put_le(h, 0x04034b50, 4);
    put_le(h, zip64 ? 45 : 20, 2); // version needed
    put_le(h, 0, 2); // flags
    put_le(h, 0, 2); // stored
    put_le(h, 0, 4); // time, date
    put_le(h, crc, 4);
    put_le(h, zip64 ? kSaturated : size, 4);
    put_le(h, zip64 ? kSaturated : size, 4);
    put_le(h, name.size(), 2);
    put_le(h, zip64 ? 20 : 0, 2);
    h += name;
    if (zip64) {
        put_le(h, 0x0001, 2);
        put_le(h, 16, 2);
        put_le(h, size, 8);
        put_le(h, size, 8);
    }
    return h;
}

struct ZipEntry {
    std::string name;
    uint32_t crc = 0;
    uint64_t size = 0, offset = 0; // offset of the local header within the archive
};

std::string central_directory(const std::vector<ZipEntry>& entries, uint64_t cd_offset)
{
    std::string cd;
    for (const ZipEntry& e : entries) {
        std::string extra; // only the saturated fields, in the order the format fixes
        if (e.size >= kSaturated) {
            put_le(extra, e.size, 8);
            put_le(extra, e.size, 8);
        }
        if (e.offset >= kSaturated)
            put_le(extra, e.offset, 8);
        put_le(cd, 0x02014b50, 4);
        put_le(cd, extra.empty() ? 20 : 45, 2); // made by
        put_le(cd, extra.empty() ? 20 : 45, 2); // needed
        put_le(cd, 0, 2);
        put_le(cd, 0, 2);
        put_le(cd, 0, 4);
        put_le(cd, e.crc, 4);
        put_le(cd, std::min(e.size, kSaturated), 4);
        put_le(cd, std::min(e.size, kSaturated), 4);
        put_le(cd, e.name.size(), 2);
        put_le(cd, extra.empty() ? 0 : extra.size() + 4, 2);
        put_le(cd, 0, 2); // comment
        put_le(cd, 0, 2); // disk
        put_le(cd, 0, 2); // internal attributes
        put_le(cd, 0, 4); // external attributes
        put_le(cd, std::min(e.offset, kSaturated), 4);
        cd += e.name;
        if (!extra.empty()) {
            put_le(cd, 0x0001, 2);
            put_le(cd, extra.size(), 2);
            cd += extra;
        }
    }
    const uint64_t cd_size = cd.size();
    if (cd_offset >= kSaturated) { // the zip64 end record and its locator, then the saturated one
        const uint64_t record_at = cd_offset + cd_size;
        put_le(cd, 0x06064b50, 4);
        put_le(cd, 44, 8); // the record's size after this field
        put_le(cd, 45, 2);
        put_le(cd, 45, 2);
        put_le(cd, 0, 4);
        put_le(cd, 0, 4);
        put_le(cd, entries.size(), 8);
        put_le(cd, entries.size(), 8);
        put_le(cd, cd_size, 8);
        put_le(cd, cd_offset, 8);
        put_le(cd, 0x07064b50, 4);
        put_le(cd, 0, 4);
        put_le(cd, record_at, 8);
        put_le(cd, 1, 4);
    }
    put_le(cd, 0x06054b50, 4);
    put_le(cd, 0, 4); // disks
    put_le(cd, entries.size(), 2);
    put_le(cd, entries.size(), 2);
    put_le(cd, cd_size, 4);
    put_le(cd, std::min(cd_offset, kSaturated), 4);
    put_le(cd, 0, 2);
    return cd;
}

// A tensor's rows split over the ranks as torch.chunk(tensor, world, dim=0) splits them: chunks
// of ceil(rows / world) rows, chunk k on rank k, the last one shorter and ranks past the rows
// without one. A 0-d tensor or one of no rows is one chunk, on rank 0; so is every tensor at world
// size 1.
struct Split {
    uint64_t step = 0; // rows a chunk (the last may hold fewer)
    int chunks = 1;
};

Split split_rows(const std::vector<uint64_t>& shape, int world)
{
    if (shape.empty() || shape[0] == 0)
        return {.step = 0, .chunks = 1};
    const uint64_t rows = shape[0];
    const uint64_t step = rows / uint64_t(world) + (rows % uint64_t(world) != 0);
    return {.step = step, .chunks = static_cast<int>(rows / step + (rows % step != 0))};
}

struct Chunk {
    std::vector<uint64_t> offsets, sizes; // the box of the tensor
    uint64_t first = 0, numel = 0; // its elements in the tensor's row-major order
};

Chunk chunk_of(const std::vector<uint64_t>& shape, const Split& split, int k)
{
    Chunk c{.offsets = std::vector<uint64_t>(shape.size(), 0), .sizes = shape};
    uint64_t row = 1;
    for (std::size_t d = 1; d < shape.size(); ++d)
        row *= shape[d];
    if (!shape.empty()) {
        c.offsets[0] = split.step * uint64_t(k);
        c.sizes[0] = std::min(split.step, shape[0] - c.offsets[0]);
    }
    c.first = c.offsets.empty() ? 0 : c.offsets[0] * row;
    c.numel = c.sizes.empty() ? 1 : c.sizes[0] * row;
    return c;
}

// Chunk `c` of output tensor `i` as one torch.save archive appended to `file`; returns its length.
uint64_t write_item(ConvertJob& job, std::size_t i, const Chunk& c, const TorchType& type, OutputFile& file)
{
    const uint64_t start = file.size();
    const ElementType to = job.out_types[i];
    const uint64_t bytes = c.numel * element_size(to);
    std::vector<ZipEntry> entries;
    const auto small = [&](const std::string& name, const std::string& data) {
        const auto crc = static_cast<uint32_t>(
            crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
        entries.push_back({.name = name, .crc = crc, .size = data.size(), .offset = file.size() - start});
        const std::string head = local_header(name, crc, data.size());
        file.write(head.data(), head.size());
        file.write(data.data(), data.size());
    };
    small("archive/data.pkl", tensor_pickle(type, c.sizes, c.numel));
    const std::string storage = "archive/data/0";
    const uint64_t header_at = file.size();
    entries.push_back({.name = storage, .size = bytes, .offset = header_at - start});
    const std::string head = local_header(storage, 0, bytes);
    file.write(head.data(), head.size());
    uLong crc = crc32(0, nullptr, 0);
    copy_elements(job, job.source.tensors[job.picked[i]], to, c.first, c.numel,
                  [&](const std::byte* data, std::size_t n) {
                      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(data), n);
                      file.write(data, n);
                  });
    entries.back().crc = static_cast<uint32_t>(crc);
    std::string crc_bytes;
    put_le(crc_bytes, entries.back().crc, 4);
    file.patch(header_at + 14, crc_bytes.data(), 4);
    small("archive/version", "3\n");
    const std::string cd = central_directory(entries, file.size() - start);
    file.write(cd.data(), cd.size());
    return file.size() - start;
}

// TensorProperties as torch 1.13 pickles it: a 5-tuple state (dtype, layout, requires_grad,
// memory format, pin_memory), the layout and memory format through the functions torch uses.
void tensor_properties(PickleWriter& p, const TorchType& type)
{
    p.global("torch.distributed._shard.sharded_tensor.metadata", "TensorProperties");
    p.empty_tuple();
    p.new_object();
    p.mark();
    p.global("torch", type.dtype);
    p.global("torch.serialization", "_get_layout");
    p.mark();
    p.text("torch.strided");
    p.tuple();
    p.reduce();
    p.boolean(false);
    p.global("builtins", "getattr");
    p.mark();
    p.global("torch.distributed._shard.sharded_tensor.metadata", "MEM_FORMAT_ENCODING");
    p.text("TORCH_CONTIGUOUS_FORMAT");
    p.tuple();
    p.reduce();
    p.boolean(false);
    p.tuple();
    p.build();
}

// Where chunk k of a tensor was written: in rank k's file.
struct Item {
    uint64_t offset = 0, length = 0;
};

std::string metadata_pickle(const ConvertJob& job, const std::vector<TorchType>& types,
                            const std::vector<Split>& splits, const std::vector<std::vector<Item>>& items)
{
    PickleWriter p;
    p.begin_object(kMetadataModule, "Metadata");
    p.text("state_dict_metadata");
    p.empty_dict();
    p.mark();
    for (std::size_t i = 0; i < job.tensors.size(); ++i) {
        const ConvertedTensor& t = job.tensors[i];
        p.text(t.name);
        p.begin_object(kMetadataModule, "TensorStorageMetadata");
        p.text("properties");
        tensor_properties(p, types[i]);
        p.text("size");
        torch_size(p, t.shape);
        p.text("chunks");
        p.empty_list();
        for (int k = 0; k < splits[i].chunks; ++k) {
            const Chunk c = chunk_of(t.shape, splits[i], k);
            p.begin_object(kMetadataModule, "ChunkStorageMetadata");
            p.text("offsets");
            torch_size(p, c.offsets);
            p.text("sizes");
            torch_size(p, c.sizes);
            p.end_object();
            p.append();
        }
        p.end_object();
    }
    p.set_items();
    p.text("planner_data");
    p.none();
    p.text("storage_data");
    p.empty_dict();
    p.mark();
    for (std::size_t i = 0; i < job.tensors.size(); ++i)
        for (int k = 0; k < splits[i].chunks; ++k) {
            p.begin_object(kMetadataModule, "MetadataIndex");
            p.text("fqn");
            p.text(job.tensors[i].name);
            p.text("offset");
            torch_size(p, chunk_of(job.tensors[i].shape, splits[i], k).offsets);
            p.text("index");
            p.integer(k);
            p.end_object();
            p.begin_object("torch.distributed._shard.checkpoint.filesystem", "_StorageInfo");
            p.text("relative_path");
            p.text(rank_file(k));
            p.text("offset");
            p.integer(static_cast<int64_t>(items[i][std::size_t(k)].offset));
            p.text("length");
            p.integer(static_cast<int64_t>(items[i][std::size_t(k)].length));
            p.end_object();
        }
    p.set_items();
    p.end_object();
    return p.finish();
}

} // namespace

std::vector<ConvertedFile> write_dcp(ConvertJob& job)
{
    std::vector<TorchType> types;
    std::vector<Split> splits;
    for (std::size_t i = 0; i < job.tensors.size(); ++i) {
        const auto type = torch_type(job.out_types[i]);
        if (!type)
            throw Error(ProblemKind::invalid_argument,
                        job.source.dir.string() + ": tensor '" + printable(job.tensors[i].name) + "': its dtype " +
                            job.tensors[i].dtype_out + " has no torch tensor type a DCP can hold");
        types.push_back(*type);
        splits.push_back(split_rows(job.tensors[i].shape, job.options.world_size));
        job.tensors[i].file = splits.back().chunks == 1 ? rank_file(0) : "__*_0.distcp";
    }
    // Rank by rank, one file open at a time, as each rank of a save writes its own: a rank whose
    // chunks are none (more ranks than a tensor's rows) still gets its (empty) file.
    std::vector<std::vector<Item>> items(job.tensors.size());
    std::vector<ConvertedFile> written;
    for (int rank = 0; rank < job.options.world_size; ++rank) {
        OutputFile data(job, rank_file(rank));
        for (std::size_t i = 0; i < job.tensors.size(); ++i) {
            if (rank >= splits[i].chunks)
                continue;
            const uint64_t offset = data.size();
            const Chunk c = chunk_of(job.tensors[i].shape, splits[i], rank);
            items[i].push_back({.offset = offset, .length = write_item(job, i, c, types[i], data)});
        }
        data.finish();
        written.push_back({.name = data.name(), .bytes = data.size()});
    }
    const std::string metadata = metadata_pickle(job, types, splits, items);
    OutputFile meta(job, ".metadata");
    meta.write(metadata.data(), metadata.size());
    meta.finish();
    written.push_back({.name = ".metadata", .bytes = meta.size()});
    return written;
}

} // namespace shardscope::convert
