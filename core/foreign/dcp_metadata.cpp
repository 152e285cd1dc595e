// Decoding DCP's .metadata (a pickled Metadata object) through the restricted pickle reader into
// plain DcpMetadata: nothing is imported or called.

#include "core/foreign/dcp.h"

#include "core/foreign/io/pickle_reader.h"
#include "core/util/error.h"

#include <map>
#include <set>
#include <span>
#include <type_traits>
#include <unordered_map>

namespace shardscope {

uint64_t torch_dtype_size(std::string_view dtype)
{
    static const std::map<std::string_view, uint64_t> sizes = {
        {"float32", 4}, {"float", 4}, {"float64", 8}, {"double", 8}, {"float16", 2}, {"half", 2},
        {"bfloat16", 2}, {"int64", 8}, {"long", 8}, {"int32", 4}, {"int", 4}, {"int16", 2},
        {"short", 2}, {"int8", 1}, {"uint8", 1}, {"bool", 1}, {"uint16", 2}, {"uint32", 4},
        {"uint64", 8}, {"complex64", 8}, {"cfloat", 8}, {"complex128", 16}, {"cdouble", 16},
        {"complex32", 4}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1}, {"float8_e4m3fnuz", 1},
        {"float8_e5m2fnuz", 1},
    };
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

namespace {

// What a value is, for an error message: built only when there is an error (a DCP .metadata of
// 10^5 chunks would otherwise make several strings per chunk that are never read).
template <class F>
concept Describer = std::is_invocable_r_v<std::string, F>;

class Decoder {
public:
    Decoder(const PickleDocument& doc, std::string path) : m_doc(doc), m_path(std::move(path)) {}

    [[noreturn]] void bad(const std::string& what) const
    {
        throw Error(ProblemKind::invalid_manifest, m_path + ": unexpected DCP metadata: " + what, m_path);
    }
    void count()
    {
        if (++m_items > kMaxDcpItems)
            bad("more than " + std::to_string(kMaxDcpItems) + " tensors, chunks and storage entries (limit)");
    }
    std::string absent_or(uint32_t id) const
    {
        return id == kNoPickleValue ? std::string("absent") : m_doc.describe(id);
    }
    // A str node's text, a view into the document.
    std::string_view text(uint32_t id, Describer auto&& what) const
    {
        const auto s = m_doc.as_string(id);
        if (!s)
            bad(what() + " is " + absent_or(id) + ", not a str");
        return *s;
    }
    uint64_t number(uint32_t id, Describer auto&& what) const
    {
        const auto v = m_doc.as_int(id);
        if (!v || *v < 0)
            bad(what() + " is " + absent_or(id) + ", not a non-negative int");
        return static_cast<uint64_t>(*v);
    }
    std::vector<uint64_t> dims(uint32_t id, Describer auto&& what) const
    {
        const auto items = m_doc.as_sequence(id);
        if (!items)
            bad(what() + " is " + absent_or(id) + ", not a torch.Size or tuple");
        if (items->size() > kMaxDcpDims)
            bad(what() + " has " + std::to_string(items->size()) + " dimensions (limit " + std::to_string(kMaxDcpDims) + ")");
        std::vector<uint64_t> out;
        out.reserve(items->size());
        for (const uint32_t item : *items)
            out.push_back(number(item, what));
        return out;
    }
    std::string dtype(uint32_t properties, const std::string& fqn) const
    {
        uint32_t dtype = kNoPickleValue;
        const uint32_t state = properties < m_doc.size() ? m_doc.at(properties).state : kNoPickleValue;
        if (state != kNoPickleValue && m_doc.is(state, PickleKind::tuple) && !m_doc.at(state).items.empty())
            dtype = m_doc.at(state).items[0]; // TensorProperties.__getstate__: (dtype, layout, ...)
        else
            dtype = m_doc.attribute(properties, "dtype");
        if (!m_doc.is(dtype, PickleKind::global))
            bad("tensor '" + fqn + "' has no dtype");
        return std::string(m_doc.at(dtype).name);
    }
    DcpStorage storage_info(uint32_t info, Describer auto&& what) const
    {
        DcpStorage s;
        s.present = true;
        s.file = text(m_doc.attribute(info, "relative_path"), [&] { return what() + ".relative_path"; });
        s.offset = number(m_doc.attribute(info, "offset"), [&] { return what() + ".offset"; });
        s.length = number(m_doc.attribute(info, "length"), [&] { return what() + ".length"; });
        if (const auto descriptors = m_doc.as_sequence(m_doc.attribute(info, "transform_descriptors")))
            s.transformed = !descriptors->empty();
        return s;
    }

    DcpMetadata run()
    {
        DcpMetadata out;
        out.pickle_protocol = m_doc.protocol();
        const uint32_t root = m_doc.root();
        const std::string cls = m_doc.class_name(root);
        if (!cls.ends_with("Metadata"))
            bad("the pickled root is " + m_doc.describe(root, 1) + ", not a torch.distributed.checkpoint Metadata");
        const uint32_t sdm = m_doc.attribute(root, "state_dict_metadata");
        if (!m_doc.is(sdm, PickleKind::dict))
            bad("state_dict_metadata is missing or not a dict");
        const auto& kv = m_doc.at(sdm).items;
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            count();
            const std::string fqn(text(kv[i], [] { return std::string("a state_dict_metadata key"); }));
            const uint32_t md = kv[i + 1];
            const std::string kind = m_doc.class_name(md);
            if (kind.ends_with("BytesStorageMetadata")) {
                out.bytes.push_back({fqn, {}});
                continue;
            }
            if (!kind.ends_with("TensorStorageMetadata"))
                bad("'" + fqn + "' is described by " + m_doc.describe(md, 1) + ", not Tensor/BytesStorageMetadata");
            DcpTensor tensor;
            tensor.fqn = fqn;
            tensor.dtype = dtype(m_doc.attribute(md, "properties"), fqn);
            tensor.size = dims(m_doc.attribute(md, "size"), [&] { return "'" + fqn + "'.size"; });
            const auto chunks = m_doc.as_sequence(m_doc.attribute(md, "chunks"));
            if (!chunks)
                bad("'" + fqn + "'.chunks is not a list");
            tensor.chunks.reserve(chunks->size());
            for (const uint32_t c : *chunks) {
                count();
                DcpChunk chunk;
                chunk.offsets = dims(m_doc.attribute(c, "offsets"), [&] { return "a chunk of '" + fqn + "' offsets"; });
                chunk.sizes = dims(m_doc.attribute(c, "sizes"), [&] { return "a chunk of '" + fqn + "' sizes"; });
                tensor.chunks.push_back(std::move(chunk));
            }
            out.tensors.push_back(std::move(tensor));
        }

        // storage_data: {MetadataIndex(fqn, offset, index): _StorageInfo(relative_path, offset, length)},
        // matched to the chunks by (fqn, offsets) and to the bytes items by (fqn, no offsets); the
        // last entry of a key wins, as in the dict it was. Hashed, with the keys' text viewed in
        // the document and their offsets in one array, rather than a tree of copied keys.
        struct Entry {
            std::string_view fqn;
            bool has_offsets = false;
            uint32_t dims_at = 0, rank = 0;
            DcpStorage storage;
        };
        std::vector<Entry> entries;
        std::vector<uint64_t> entry_dims;
        const uint32_t sd = m_doc.attribute(root, "storage_data");
        if (m_doc.is(sd, PickleKind::dict)) {
            const auto& items = m_doc.at(sd).items;
            entries.reserve(items.size() / 2);
            for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
                count();
                const uint32_t index = items[i];
                Entry e;
                e.fqn = text(m_doc.attribute(index, "fqn"), [] { return std::string("a storage_data key's fqn"); });
                const auto where = [&] { return "storage_data['" + std::string(e.fqn) + "']"; };
                const uint32_t offset = m_doc.attribute(index, "offset");
                if (offset != kNoPickleValue && !m_doc.is(offset, PickleKind::none)) {
                    const std::vector<uint64_t> offsets = dims(offset, [&] { return where() + ".offset"; });
                    e.has_offsets = true;
                    e.dims_at = static_cast<uint32_t>(entry_dims.size());
                    e.rank = static_cast<uint32_t>(offsets.size());
                    entry_dims.insert(entry_dims.end(), offsets.begin(), offsets.end());
                }
                e.storage = storage_info(items[i + 1], where);
                entries.push_back(std::move(e));
            }
        } else if (sd != kNoPickleValue && !m_doc.is(sd, PickleKind::none)) {
            bad("storage_data is " + m_doc.describe(sd, 1) + ", not a dict");
        }
        struct Key {
            std::string_view fqn;
            std::span<const uint64_t> offsets;
            bool has_offsets = false;
            bool operator==(const Key& o) const
            {
                return fqn == o.fqn && has_offsets == o.has_offsets &&
                       std::equal(offsets.begin(), offsets.end(), o.offsets.begin(), o.offsets.end());
            }
        };
        struct KeyHash {
            std::size_t operator()(const Key& k) const
            {
                std::size_t h = std::hash<std::string_view>()(k.fqn) ^ (k.has_offsets ? 0x9e3779b97f4a7c15ull : 0);
                for (const uint64_t d : k.offsets)
                    h = (h ^ std::hash<uint64_t>()(d)) * 0x100000001b3ull;
                return h;
            }
        };
        std::unordered_map<Key, uint32_t, KeyHash> latest;
        latest.reserve(entries.size());
        for (uint32_t e = 0; e < entries.size(); ++e) {
            const Entry& entry = entries[e];
            latest[Key{entry.fqn, std::span<const uint64_t>(entry_dims).subspan(entry.dims_at, entry.rank),
                       entry.has_offsets}] = e;
        }
        std::set<std::string_view> files;
        for (const auto& [key, e] : latest)
            files.insert(entries[e].storage.file);
        out.files.assign(files.begin(), files.end());
        for (auto& tensor : out.tensors)
            for (auto& chunk : tensor.chunks)
                if (const auto it = latest.find(Key{tensor.fqn, chunk.offsets, true}); it != latest.end())
                    chunk.storage = entries[it->second].storage;
        for (auto& item : out.bytes)
            if (const auto it = latest.find(Key{item.fqn, {}, false}); it != latest.end())
                item.storage = entries[it->second].storage;

        if (const uint32_t v = m_doc.attribute(root, "version"); m_doc.is(v, PickleKind::string))
            out.info["version"] = std::string(m_doc.at(v).text);
        const uint32_t sm = m_doc.attribute(root, "storage_meta");
        for (const char* field : {"checkpoint_id", "save_id", "load_id"})
            if (const uint32_t f = m_doc.attribute(sm, field); f != kNoPickleValue && !m_doc.is(f, PickleKind::none))
                out.info[std::string("storage_meta.") + field] = m_doc.describe(f, 1);
        if (const uint32_t pd = m_doc.attribute(root, "planner_data"); pd != kNoPickleValue && !m_doc.is(pd, PickleKind::none))
            out.info["planner_data"] = m_doc.describe(pd, 1);
        return out;
    }

private:
    const PickleDocument& m_doc;
    std::string m_path;
    uint64_t m_items = 0;
};

} // namespace

DcpMetadata decode_dcp_metadata(std::string_view bytes, const std::string& display_path)
{
    if (bytes.size() > kMaxDcpMetadataBytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": " + std::to_string(bytes.size()) + " bytes exceed the " +
                        std::to_string(kMaxDcpMetadataBytes) + "-byte limit for DCP metadata",
                    display_path);
    const PickleDocument doc = parse_pickle(bytes, display_path);
    return Decoder(doc, display_path).run();
}

DcpMetadata decode_dcp_metadata(const PickleDocument& document, const std::string& display_path)
{
    return Decoder(document, display_path).run();
}

} // namespace shardscope
