#pragma once
// Test-side writers for the foreign formats, written from the published descriptions (pickle
// opcodes, the zip APPNOTE, safetensors, DCP's Metadata dataclasses, torch.save's archive
// layout). They share no code with the readers under test, so a reader bug cannot hide behind
// a matching writer bug. Fixtures are generated at test time; nothing binary is committed.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fixtures {

namespace fs = std::filesystem;

inline void put_le(std::string& out, uint64_t v, int n)
{
    for (int i = 0; i < n; ++i)
        out += static_cast<char>((v >> (8 * i)) & 0xff);
}

inline void write_file(const fs::path& path, const std::string& bytes)
{
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// ---- pickle (protocols 2-5 opcodes, as CPython's pickle module emits them) ---------------------
struct PickleWriter {
    std::string out;
    int memo = 0;
    // As CPython's pickler writes: every str and class memoized once and fetched with a GET after.
    bool like_cpython = false;
    std::map<std::string, int> memoized; // str (or "module\nname" of a class) -> memo index

    PickleWriter& op(unsigned char c)
    {
        out += static_cast<char>(c);
        return *this;
    }
    PickleWriter& proto(int v)
    {
        op(0x80);
        return op(static_cast<unsigned char>(v));
    }
    // A GET of `key` when it was memoized before (like_cpython only).
    bool fetched(const std::string& key)
    {
        if (!like_cpython)
            return false;
        const auto it = memoized.find(key);
        if (it == memoized.end())
            return false;
        get(it->second);
        return true;
    }
    PickleWriter& str(const std::string& s)
    {
        if (fetched(s))
            return *this;
        if (like_cpython)
            memoized[s] = memo;
        write_str(s);
        return like_cpython ? memoize() : *this;
    }
    PickleWriter& write_str(const std::string& s)
    {
        if (s.size() < 256) {
            op(0x8c); // SHORT_BINUNICODE
            op(static_cast<unsigned char>(s.size()));
        } else {
            op('X');
            put_le(out, s.size(), 4);
        }
        out += s;
        return *this;
    }
    PickleWriter& integer(int64_t v)
    {
        if (v >= 0 && v < 256) {
            op('K');
            op(static_cast<unsigned char>(v));
        } else if (v >= 0 && v < 65536) {
            op('M');
            put_le(out, static_cast<uint64_t>(v), 2);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            op('J');
            put_le(out, static_cast<uint32_t>(v), 4);
        } else {
            op(0x8a);
            op(8);
            put_le(out, static_cast<uint64_t>(v), 8);
        }
        return *this;
    }
    PickleWriter& global(const std::string& module, const std::string& name) // protocol 2: GLOBAL
    {
        op('c');
        out += module + "\n" + name + "\n";
        return *this;
    }
    PickleWriter& stack_global(const std::string& module, const std::string& name) // protocol 4
    {
        if (fetched(module + "\n" + name))
            return *this;
        if (like_cpython) {
            str(module).str(name);
            memoized[module + "\n" + name] = memo;
        } else {
            str(module).memoize();
            str(name).memoize();
        }
        return op(0x93).memoize();
    }
    PickleWriter& memoize()
    {
        ++memo;
        return op(0x94);
    }
    PickleWriter& get(int index)
    {
        if (index < 256) {
            op('h');
            return op(static_cast<unsigned char>(index));
        }
        op('j'); // LONG_BINGET
        put_le(out, static_cast<uint64_t>(index), 4);
        return *this;
    }
    PickleWriter& mark() { return op('('); }
    PickleWriter& none() { return op('N'); }
    PickleWriter& boolean(bool b) { return op(b ? 0x88 : 0x89); }
    PickleWriter& stop() { return op('.'); }
    // torch.Size((dims...)): REDUCE(torch.Size, (tuple,))
    PickleWriter& torch_size(const std::vector<uint64_t>& dims)
    {
        stack_global("torch", "Size");
        mark();
        for (auto d : dims)
            integer(static_cast<int64_t>(d));
        op('t').op(0x85).op('R');
        return memoize();
    }
    // cls() via NEWOBJ then its __dict__ via BUILD: the caller writes the key/value pairs.
    template <typename Fields>
    PickleWriter& dataclass(const std::string& module, const std::string& name, Fields&& fields)
    {
        stack_global(module, name);
        op(')').op(0x81).memoize(); // EMPTY_TUPLE, NEWOBJ
        op('}').memoize().mark();
        fields(*this);
        return op('u').op('b'); // SETITEMS, BUILD
    }
};

// ---- zip (APPNOTE 6.3: local headers, central directory, end record) -------------------------
inline uint32_t crc32(const std::string& data)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t crc = 0xffffffffu;
    for (unsigned char b : data)
        crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

struct ZipWriter {
    struct Entry {
        std::string name;
        uint32_t crc = 0;
        uint64_t size = 0, stored_size = 0, offset = 0, data_offset = 0;
        uint16_t method = 0;
    };
    std::string out;
    std::vector<Entry> entries;

    // `stored_bytes` is what goes into the file (already deflated when method is 8); `raw` is the
    // uncompressed content the CRC covers. torch.save pads local headers so data is 64-aligned.
    void add(const std::string& name, const std::string& raw, const std::string& stored_bytes, uint16_t method = 0,
             bool align = true)
    {
        Entry e{name, crc32(raw), raw.size(), stored_bytes.size(), out.size(), 0, method};
        std::string extra;
        if (align) {
            const std::size_t base = out.size() + 30 + name.size() + 4;
            const std::size_t pad = (64 - base % 64) % 64;
            put_le(extra, 0x4246, 2); // "FB", as PyTorch writes it
            put_le(extra, pad, 2);
            extra.append(pad, 'Z');
        }
        put_le(out, 0x04034b50, 4);
        put_le(out, 20, 2);
        put_le(out, 0, 2);
        put_le(out, method, 2);
        put_le(out, 0, 4); // time, date
        put_le(out, e.crc, 4);
        put_le(out, e.stored_size, 4);
        put_le(out, e.size, 4);
        put_le(out, name.size(), 2);
        put_le(out, extra.size(), 2);
        out += name + extra;
        e.data_offset = out.size();
        out += stored_bytes;
        entries.push_back(e);
    }
    void add(const std::string& name, const std::string& raw) { add(name, raw, raw); }
    std::string finish()
    {
        const uint64_t cd = out.size();
        for (const auto& e : entries) {
            put_le(out, 0x02014b50, 4);
            put_le(out, 20, 2);
            put_le(out, 20, 2);
            put_le(out, 0, 2);
            put_le(out, e.method, 2);
            put_le(out, 0, 4);
            put_le(out, e.crc, 4);
            put_le(out, e.stored_size, 4);
            put_le(out, e.size, 4);
            put_le(out, e.name.size(), 2);
            put_le(out, 0, 2); // extra
            put_le(out, 0, 2); // comment
            put_le(out, 0, 2); // disk
            put_le(out, 0, 2);
            put_le(out, 0, 4);
            put_le(out, e.offset, 4);
            out += e.name;
        }
        const uint64_t cd_size = out.size() - cd;
        put_le(out, 0x06054b50, 4);
        put_le(out, 0, 4);
        put_le(out, entries.size(), 2);
        put_le(out, entries.size(), 2);
        put_le(out, cd_size, 4);
        put_le(out, cd, 4);
        put_le(out, 0, 2);
        return out;
    }
};

// torch._utils._rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), 0, shape, (), False,
// OrderedDict()): how torch.save pickles a float32 tensor owning its storage.
inline void pickle_tensor(PickleWriter& p, const std::string& key, const std::vector<uint64_t>& shape, int64_t numel)
{
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark().str("storage").global("torch", "FloatStorage").str(key).str("cpu").integer(numel).op('t').op('Q');
    p.integer(0);
    p.mark();
    for (auto d : shape)
        p.integer(static_cast<int64_t>(d));
    p.op('t');
    p.mark(); // row-major strides, as torch.save writes a contiguous tensor's
    std::vector<int64_t> strides(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;)
        strides[d - 1] = strides[d] * static_cast<int64_t>(shape[d]);
    for (const int64_t stride : strides)
        p.integer(stride);
    p.op('t');
    p.boolean(false);
    p.global("collections", "OrderedDict").op(')').op('R');
    p.op('t').op('R');
}

// The same record for a view: storage of class `storage_class` ("FloatStorage", ...) holding
// `storage_numel` elements, the view's element offset, shape and strides, as torch.save writes a
// slice or a transpose.
inline void pickle_tensor_view(PickleWriter& p, const std::string& key, const std::string& storage_class,
                               int64_t storage_numel, int64_t offset, const std::vector<uint64_t>& shape,
                               const std::vector<int64_t>& stride)
{
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark().str("storage").global("torch", storage_class).str(key).str("cpu").integer(storage_numel).op('t').op('Q');
    p.integer(offset);
    p.mark();
    for (auto d : shape)
        p.integer(static_cast<int64_t>(d));
    p.op('t');
    p.mark();
    for (auto st : stride)
        p.integer(st);
    p.op('t');
    p.boolean(false);
    p.global("collections", "OrderedDict").op(')').op('R');
    p.op('t').op('R');
}

inline uint64_t volume(const std::vector<uint64_t>& shape)
{
    uint64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

// The zip around a pickle and its float32 storages "0", "1", ... of the given element counts.
inline std::string torch_zip(const std::string& prefix, const std::string& pickle, const std::vector<uint64_t>& numels)
{
    ZipWriter zip;
    zip.add(prefix + "/data.pkl", pickle);
    zip.add(prefix + "/byteorder", "little");
    for (std::size_t i = 0; i < numels.size(); ++i) {
        // Each float32's top byte kept below 0x40: positive and finite, whatever the storage, so
        // a reader that reads every value finds no NaN the fixture did not mean.
        std::string data;
        for (uint64_t k = 0; k < numels[i] * 4; ++k)
            data += static_cast<char>((k * 7 + i) & (k % 4 == 3 ? 0x3f : 0xff));
        zip.add(prefix + "/data/" + std::to_string(i), data);
    }
    zip.add(prefix + "/version", "3\n");
    return zip.finish();
}

// Element `e` of torch_zip's storage "0" as the float32 it holds, decoded from the pattern above
// (byte k of the storage is (k * 7) & 0xff, its top byte & 0x3f): the values a reader of the
// archive must find.
inline float torch_zip_element(uint64_t e)
{
    unsigned char b[4];
    for (uint64_t k = 0; k < 4; ++k)
        b[k] = static_cast<unsigned char>(((e * 4 + k) * 7) & (k == 3 ? 0x3f : 0xff));
    float f;
    std::memcpy(&f, b, 4);
    return f;
}

// A torch.save-style archive holding an OrderedDict {name: tensor} whose tensors each own a
// float32 storage; `pickle_override` replaces data.pkl (hostile variants).
struct TorchTensor {
    std::string name;
    std::vector<uint64_t> shape;
};
inline std::string torch_archive(const std::string& prefix, const std::vector<TorchTensor>& tensors,
                                 const std::string& pickle_override = {}, int64_t numel_delta = 0)
{
    PickleWriter p;
    p.proto(2);
    p.global("collections", "OrderedDict").op(')').op('R').op('q').op(0);
    p.mark();
    std::vector<uint64_t> numels;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        numels.push_back(volume(tensors[i].shape));
        p.str(tensors[i].name);
        pickle_tensor(p, std::to_string(i), tensors[i].shape, static_cast<int64_t>(numels.back()) + numel_delta);
    }
    p.op('u').stop();
    return torch_zip(prefix, pickle_override.empty() ? p.out : pickle_override, numels);
}

// torch.save(tensor) of one float32 tensor, as DCP's FileSystemWriter stores each chunk (the
// archive's top folder is "archive" when saving to a stream). `stored_numel` differs from the
// shape's volume for a broken variant.
inline std::string torch_tensor_archive(const std::vector<uint64_t>& shape, uint64_t stored_numel)
{
    PickleWriter p;
    p.proto(2);
    pickle_tensor(p, "0", shape, static_cast<int64_t>(stored_numel));
    p.stop();
    return torch_zip("archive", p.out, {stored_numel});
}
inline std::string torch_tensor_archive(const std::vector<uint64_t>& shape)
{
    return torch_tensor_archive(shape, volume(shape));
}

// ---- torch.distributed.checkpoint .metadata (pickle protocol 4, as pickle.dump writes it) -----
struct DcpChunkSpec {
    std::vector<uint64_t> offsets, sizes;
    std::string file;
    uint64_t offset = 0, length = 0;
    std::string transform; // a storage extension's descriptor (e.g. "zstd"); empty: stored as is
};
struct DcpTensorSpec {
    std::string fqn;
    std::vector<uint64_t> size;
    std::vector<DcpChunkSpec> chunks;
    std::string dtype = "float32"; // torch's name: float8_e4m3fn, bfloat16, ...
};

// A storage_data entry written as given, after the tensors' own: a repeated key, a key no
// tensor has, a bytes item's (no offsets), or a malformed offset.
struct DcpStorageEntry {
    std::string fqn;
    std::optional<std::vector<uint64_t>> offsets; // nullopt: offset None (a bytes item's key)
    std::string file;
    uint64_t offset = 0, length = 0;
    bool offset_is_text = false; // a str where the offset belongs
};

// With `like_cpython`, as CPython's pickler writes it: strs and classes memoized once and
// fetched after, dict items and list items in batches of 1000 (SETITEMS / APPENDS).
// `more_fields` writes key/value pairs after the dataclass's own, as an attribute set on the
// instance after it was made (Megatron's mcore_data) lands last in its __dict__.
using PickleFields = std::function<void(PickleWriter&)>;
inline std::string dcp_metadata(const std::vector<DcpTensorSpec>& tensors, bool frame = true,
                                const std::vector<std::string>& bytes_items = {},
                                const std::vector<DcpStorageEntry>& extra_storage = {}, bool like_cpython = false,
                                const PickleFields& more_fields = {})
{
    const std::string meta = "torch.distributed.checkpoint.metadata";
    PickleWriter p;
    p.like_cpython = like_cpython;
    // Ends a batch of 1000 items and starts the next (CPython's _BATCHSIZE).
    auto batch = [&](PickleWriter& w, std::size_t& items, unsigned char end) {
        if (like_cpython && ++items % 1000 == 0)
            w.op(end).mark();
    };
    std::size_t items = 0;
    p.dataclass(meta, "Metadata", [&](PickleWriter& w) {
        w.str("state_dict_metadata").op('}').memoize().mark();
        for (const auto& t : tensors) {
            w.str(t.fqn);
            w.dataclass(meta, "TensorStorageMetadata", [&](PickleWriter& f) {
                f.str("properties");
                // TensorProperties.__getstate__: (dtype, layout, requires_grad, memory format, pin_memory)
                f.stack_global(meta, "TensorProperties").op(')').op(0x81).memoize();
                f.mark().stack_global("torch", t.dtype).stack_global("torch", "strided").boolean(false);
                f.stack_global(meta, "_MEM_FORMAT_ENCODING").mark().integer(1).op('t').op('R').memoize();
                f.boolean(false).op('t').memoize().op('b');
                f.str("size").torch_size(t.size);
                f.str("chunks").op(']').memoize().mark();
                std::size_t chunks = 0;
                for (const auto& c : t.chunks) {
                    f.dataclass(meta, "ChunkStorageMetadata", [&](PickleWriter& g) {
                        g.str("offsets").torch_size(c.offsets).str("sizes").torch_size(c.sizes);
                    });
                    batch(f, chunks, 'e');
                }
                f.op('e');
            });
            batch(w, items, 'u');
        }
        for (const auto& fqn : bytes_items) {
            w.str(fqn);
            if (like_cpython) // Python 3.11+: an object without fields gets no BUILD
                w.stack_global(meta, "BytesStorageMetadata").op(')').op(0x81).memoize();
            else
                w.dataclass(meta, "BytesStorageMetadata", [](PickleWriter&) {});
            batch(w, items, 'u');
        }
        w.op('u');
        items = 0;
        w.str("planner_data").none();
        w.str("storage_data").op('}').memoize().mark();
        for (const auto& t : tensors)
            for (std::size_t i = 0; i < t.chunks.size(); ++i) {
                const auto& c = t.chunks[i];
                w.dataclass(meta, "MetadataIndex", [&](PickleWriter& g) {
                    g.str("fqn").str(t.fqn).str("offset").torch_size(c.offsets).str("index").integer(int64_t(i));
                });
                w.dataclass("torch.distributed.checkpoint.filesystem", "_StorageInfo", [&](PickleWriter& g) {
                    g.str("relative_path").str(c.file).str("offset").integer(int64_t(c.offset));
                    g.str("length").integer(int64_t(c.length));
                    if (!c.transform.empty()) // newer writers: _StorageInfo.transform_descriptors
                        g.str("transform_descriptors").op(']').mark().str(c.transform).op('e');
                });
                batch(w, items, 'u');
            }
        for (const auto& e : extra_storage) {
            w.dataclass(meta, "MetadataIndex", [&](PickleWriter& g) {
                g.str("fqn").str(e.fqn).str("offset");
                if (e.offset_is_text)
                    g.str("not a size");
                else if (e.offsets)
                    g.torch_size(*e.offsets);
                else
                    g.none();
                g.str("index").none();
            });
            w.dataclass("torch.distributed.checkpoint.filesystem", "_StorageInfo", [&](PickleWriter& g) {
                g.str("relative_path").str(e.file).str("offset").integer(int64_t(e.offset));
                g.str("length").integer(int64_t(e.length));
            });
        }
        w.op('u');
        if (more_fields)
            more_fields(w);
    });
    p.stop();
    std::string out;
    out += static_cast<char>(0x80);
    out += static_cast<char>(4);
    if (frame) {
        out += static_cast<char>(0x95);
        put_le(out, p.out.size(), 8);
    }
    return out + p.out;
}

// Lays the chunks out as FileSystemWriter does: each chunk's torch.save archive appended to its
// file, its offset and length recorded in the spec. Returns the files' contents.
inline std::map<std::string, std::string> dcp_layout(std::vector<DcpTensorSpec>& tensors)
{
    std::map<std::string, std::string> files;
    for (auto& t : tensors)
        for (auto& c : t.chunks) {
            std::string& content = files[c.file];
            const std::string archive = torch_tensor_archive(c.sizes);
            c.offset = content.size();
            c.length = archive.size();
            content += archive;
        }
    return files;
}

// ---- torch Hugging Face storage, per rank (HuggingFaceStorageWriter with save_distributed) ------
// One entry of a shard file: a chunk of `fqn` at `offsets` holding `bytes` (row-major).
struct DcpHfChunkSpec {
    std::string fqn;
    std::vector<uint64_t> offsets, sizes;
    std::string bytes;
    std::string dtype = "F32";
};

inline std::string json_text(const std::string& s)
{
    std::string out = "\"";
    for (char c : s)
        out += c == '"' ? std::string("\\\"") : c == '\\' ? std::string("\\\\") : std::string(1, c);
    return out + "\"";
}
inline std::string json_dims(const std::vector<uint64_t>& dims)
{
    std::string out = "[";
    for (std::size_t i = 0; i < dims.size(); ++i)
        out += (i ? "," : "") + std::to_string(dims[i]);
    return out + "]";
}

// The file as torch writes it: a safetensors file whose __metadata__ holds DCP_SHARDING_INFO
// (`info` when given, else each chunk's saved_offsets), DCP_VERSION "1.0" and format "pt".
inline std::string dcp_hf_shard(const std::vector<DcpHfChunkSpec>& chunks, const std::optional<std::string>& info = {})
{
    std::string sharding = "{";
    std::string header = "{";
    uint64_t at = 0;
    std::string data;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        const auto& c = chunks[i];
        sharding += (i ? ", " : "") + json_text(c.fqn) + ": {\"saved_offsets\": " + json_dims(c.offsets) + "}";
        header += json_text(c.fqn) + ":{\"dtype\":\"" + c.dtype + "\",\"shape\":" + json_dims(c.sizes) +
            ",\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + c.bytes.size()) + "]},";
        at += c.bytes.size();
        data += c.bytes;
    }
    sharding += "}";
    header += "\"__metadata__\":{\"DCP_SHARDING_INFO\":" + json_text(info ? *info : sharding) +
        ",\"DCP_VERSION\":\"1.0\",\"format\":\"pt\"}}";
    while (header.size() % 8)
        header += ' ';
    std::string out;
    put_le(out, header.size(), 8);
    return out + header + data;
}

// shard-<S>-model-00001-of-00001.safetensors, S counted from 1 as the writer does (rank S - 1).
inline std::string dcp_hf_shard_name(int rank)
{
    std::string s = std::to_string(rank + 1);
    return "shard-" + std::string(5 - std::min<std::size_t>(5, s.size()), '0') + s +
        "-model-00001-of-00001.safetensors";
}

// ---- zstd frames (RFC 8878) of raw blocks, written by hand --------------------------------------
// `content` as one frame of raw (stored) blocks; with `declared`, a Frame_Content_Size field saying
// so (8 bytes), true or not.
inline std::string zstd_raw_frame(const std::string& content, std::optional<uint64_t> declared = {})
{
    std::string out;
    put_le(out, 0xFD2FB528, 4);
    out += static_cast<char>(declared ? 0xC0 : 0x00); // FCS field 8 bytes or none; not single-segment
    out += static_cast<char>(7 << 3); // window 2^17: a raw block's maximum
    if (declared)
        put_le(out, *declared, 8);
    std::size_t at = 0;
    do {
        const std::size_t n = std::min<std::size_t>(content.size() - at, 1u << 17);
        const bool last = at + n == content.size();
        put_le(out, (uint64_t(n) << 3) | (last ? 1 : 0), 3);
        out += content.substr(at, n);
        at += n;
    } while (at < content.size());
    return out;
}

} // namespace fixtures
