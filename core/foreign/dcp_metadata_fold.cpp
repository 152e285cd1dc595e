// What DCP's objects fold into when BUILD completes them (DcpStore::fold), read through their
// attributes, and the short renderings of values that messages give (internal/dcp_store.h).

#include "core/foreign/internal/dcp_store.h"

#include <bit>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::foreign::dcp {

uint32_t DcpStore::attribute_of_text(uint32_t object, uint32_t key) const
{
    if (key == kNoPickleValue) // no str with that text was read: no dict has the key
        return kNoPickleValue;
    const uint32_t state = field(object, state_field);
    auto in_dict = [&](uint32_t dict) {
        const Value d = value(dict);
        if (d.kind != PickleKind::dict || !is_scratch(dict) || range_of(d).size > 2 * kMaxFields)
            return kNoPickleValue;
        const Range r = range_of(d);
        const uint32_t* kv = m_pool.data() + r.begin;
        uint32_t found = kNoPickleValue;
        for (std::size_t i = 0; i + 1 < r.size; i += 2) // the last of a repeated key, as a dict keeps
            if (kv[i] == key)
                found = kv[i + 1];
        return found;
    };
    if (kind(state) == PickleKind::tuple && items(state).size() == 2)
        for (const uint32_t part : items(state))
            if (const uint32_t found = in_dict(part); found != kNoPickleValue)
                return found;
    return in_dict(state);
}

// A dims handle for a torch.Size, a tuple or a list of non-negative ints, or kNoPickleValue.
inline uint32_t DcpStore::dims_of(uint32_t h)
{
    h = resolve(h);
    const Value v = value(h);
    if (v.fold == Fold::dims) {
        if (v.a > kMaxDcpDims)
            return kNoPickleValue;
        for (uint32_t i = 0; i < v.a; ++i)
            if (m_numbers[v.b + i] < 0)
                return kNoPickleValue;
        return h;
    }
    if (v.kind != PickleKind::list || !is_scratch(h) || items(h).size() > kMaxDcpDims)
        return kNoPickleValue;
    const std::vector<uint32_t> list(items(h).begin(), items(h).end()); // container() may move the pool
    for (const uint32_t item : list)
        if (uint64_t n = 0; !number_of(item, n))
            return kNoPickleValue;
    return container(PickleKind::tuple, list); // all ints: kept as dims
}

// Why `h` is not what was wanted: "'x' is <rendering>, not a str".
std::string DcpStore::is_not(std::string_view what, uint32_t h, std::string_view wanted) const
{
    if (h == kNoPickleValue)
        return std::string(what) + " is absent, " + std::string(wanted);
    std::string shown;
    describe(h, 3, shown);
    if (value(resolve(h)).fold == Fold::dims && wanted.find("torch.Size") != std::string_view::npos)
        return std::string(what) + " is " + shown + ", which has a negative or more than " +
            std::to_string(kMaxDcpDims) + " dimensions";
    return std::string(what) + " is " + shown + ", " + std::string(wanted);
}

// The record a DCP object folds into, or Fold::none (with the reason when `explain`).
Folded DcpStore::fold(uint32_t object, bool explain)
{
    Folded out;
    const uint32_t cls = class_name_text(object);
    auto is = [&](Name name) { return is_name(cls, name); };
    auto no = [&](std::string why) {
        if (explain)
            out.problem = std::move(why);
        out.value = {};
        return out;
    };
    if (is(Name::ChunkStorageMetadata)) {
        const uint32_t offsets = dims_of(attribute(object, Name::offsets));
        if (offsets == kNoPickleValue)
            return no(is_not(".offsets", attribute(object, Name::offsets), "not a torch.Size or tuple"));
        const uint32_t sizes = dims_of(attribute(object, Name::sizes));
        if (sizes == kNoPickleValue)
            return no(is_not(".sizes", attribute(object, Name::sizes), "not a torch.Size or tuple"));
        out.value = {.kind = PickleKind::new_object, .fold = Fold::chunk, .a = offsets, .b = sizes};
    } else if (is(Name::MetadataIndex)) {
        std::string_view fqn;
        if (!string_of(attribute(object, Name::fqn), fqn))
            return no(is_not(".fqn", attribute(object, Name::fqn), "not a str"));
        const uint32_t offset = attribute(object, Name::offset);
        uint32_t offsets = kNoPickleValue;
        if (offset != kNoPickleValue && kind(offset) != PickleKind::none) {
            offsets = dims_of(offset);
            if (offsets == kNoPickleValue)
                return no(is_not(".offset", offset, "not a torch.Size or tuple"));
        }
        out.value = {.kind = PickleKind::new_object,
                     .fold = Fold::index,
                     .a = resolve(attribute(object, Name::fqn)),
                     .b = offsets};
    } else if (is(Name::StorageInfo)) {
        StorageRecord s;
        std::string_view file;
        if (!string_of(attribute(object, Name::relative_path), file))
            return no(is_not(".relative_path", attribute(object, Name::relative_path), "not a str"));
        s.file = resolve(attribute(object, Name::relative_path));
        if (!number_of(attribute(object, Name::offset), s.offset))
            return no(is_not(".offset", attribute(object, Name::offset), "not a non-negative int"));
        if (!number_of(attribute(object, Name::length), s.length))
            return no(is_not(".length", attribute(object, Name::length), "not a non-negative int"));
        if (const uint32_t d = resolve(attribute(object, Name::transform_descriptors)); d != kNoPickleValue) {
            const Value dv = value(d);
            s.transformed = dv.kind == PickleKind::list || dv.kind == PickleKind::tuple
                ? (dv.fold == Fold::dims ? dv.a : range_of(dv).size) > 0
                : false;
            if (s.transformed) {
                // The descriptors, outermost last, as the reader must undo them: "stream.zstd/1".
                std::string joined;
                const auto list = dv.fold == Fold::dims ? std::span<const uint32_t>() : items(d);
                for (const uint32_t item : list) {
                    std::string_view text;
                    if (!string_of(item, text))
                        return no(is_not(".transform_descriptors", d, "not a list of str"));
                    joined += (joined.empty() ? "" : ",") + std::string(text.substr(0, 200));
                }
                if (joined.empty())
                    joined = "?"; // descriptors that are not strs: no reader knows them
                auto at = std::find(m_transforms.begin(), m_transforms.end(), joined);
                if (at == m_transforms.end() && m_transforms.size() < 1000)
                    at = m_transforms.insert(m_transforms.end(), std::move(joined));
                s.transform = at == m_transforms.end() ? 0 : uint16_t(at - m_transforms.begin());
            }
        }
        m_storages.push_back(s);
        out.value = {
            .kind = PickleKind::new_object, .fold = Fold::storage, .a = static_cast<uint32_t>(m_storages.size() - 1)};
    } else if (is(Name::TensorProperties)) {
        // TensorProperties.__getstate__: (dtype, layout, ...); older ones: a dict with 'dtype'.
        uint32_t dtype = kNoPickleValue;
        const uint32_t state = field(object, state_field);
        if (kind(state) == PickleKind::tuple && !items(state).empty() && value(state).fold != Fold::dims)
            dtype = items(state)[0];
        else
            dtype = attribute(object, Name::dtype);
        if (kind(dtype) != PickleKind::global)
            return no(" has no dtype");
        out.value = {.kind = PickleKind::new_object, .fold = Fold::properties, .a = dtype};
    } else if (is(Name::TensorStorageMetadata)) {
        TensorRecord t;
        t.properties = resolve(attribute(object, Name::properties));
        if (value(t.properties).fold != Fold::properties) {
            const uint32_t p = attribute(object, Name::properties);
            const bool foldable = p != kNoPickleValue && is_class(p, Name::TensorProperties);
            return no(".properties" + (foldable ? fold(p, true).problem : std::string(" has no dtype")));
        }
        t.size = dims_of(attribute(object, Name::size));
        if (t.size == kNoPickleValue)
            return no(is_not(".size", attribute(object, Name::size), "not a torch.Size or tuple"));
        const uint32_t list = resolve(attribute(object, Name::chunks));
        if (kind(list) != PickleKind::list && kind(list) != PickleKind::tuple)
            return no(".chunks is not a list");
        const auto chunks = items(list);
        // Each BUILD copies its list: bounded in all, or a shared list built again and again
        // would grow without end.
        if (m_tensor_chunks.size() + chunks.size() > kMaxDcpItems)
            fail("more than " + std::to_string(kMaxDcpItems) + " chunks in the tensors built (limit)",
                 ProblemKind::invalid_manifest);
        t.chunks_begin = static_cast<uint32_t>(m_tensor_chunks.size());
        for (std::size_t i = 0; i < chunks.size(); ++i) {
            const uint32_t c = chunks[i], chunk = resolve(c);
            if (value(chunk).fold != Fold::chunk) {
                m_tensor_chunks.resize(t.chunks_begin);
                // (`chunks` is not used again: explaining may move the pool it views)
                const std::string where = ".chunks[" + std::to_string(i) + "]";
                const bool foldable = is_class(c, Name::ChunkStorageMetadata);
                return no(where + (foldable ? fold(c, true).problem : is_not("", c, "not a ChunkStorageMetadata")));
            }
            m_tensor_chunks.push_back(chunk);
        }
        t.chunks_count = static_cast<uint32_t>(chunks.size());
        m_tensors.push_back(t);
        out.value = {
            .kind = PickleKind::new_object, .fold = Fold::tensor, .a = static_cast<uint32_t>(m_tensors.size() - 1)};
    } else if (is(Name::BytesStorageMetadata)) {
        out.value = {.kind = PickleKind::new_object, .fold = Fold::bytes_item};
    } else {
        return no(" is " + describe(object, 1) + ", not a DCP storage record");
    }
    return out;
}

// A short, bounded rendering for messages, like PickleDocument::describe.
void DcpStore::describe(uint32_t h, int depth, std::string& out) const
{
    constexpr std::size_t kMaxLength = 512;
    if (out.size() > kMaxLength)
        return;
    if (h == kNoPickleValue) {
        out += "?";
        return;
    }
    h = resolve(h);
    const Value v = value(h);
    auto list = [&](std::span<const uint32_t> xs, const char* open, const char* close) {
        out += open;
        if (depth <= 0 && !xs.empty())
            out += "...";
        else
            for (std::size_t i = 0; i < xs.size() && out.size() <= kMaxLength; ++i) {
                if (i)
                    out += ", ";
                describe(xs[i], depth - 1, out);
            }
        out += close;
    };
    auto numbers = [&](const Value& d) {
        out += "(";
        for (uint32_t i = 0; i < d.a && out.size() <= kMaxLength; ++i)
            out += (i ? ", " : "") + std::to_string(m_numbers[d.b + i]);
        out += d.a == 1 ? ",)" : ")";
    };
    switch (v.fold) {
    case Fold::dims: return numbers(v);
    case Fold::chunk:
        out += "ChunkStorageMetadata(";
        numbers(value(v.a));
        out += ", ";
        numbers(value(static_cast<uint32_t>(v.b)));
        out += ")";
        return;
    case Fold::tensor: out += "TensorStorageMetadata"; return;
    case Fold::bytes_item: out += "BytesStorageMetadata"; return;
    case Fold::properties: out += "TensorProperties"; return;
    case Fold::index: out += "MetadataIndex"; return;
    case Fold::storage: out += "_StorageInfo"; return;
    case Fold::none: break;
    }
    switch (v.kind) {
    case PickleKind::none: out += "None"; break;
    case PickleKind::boolean: out += v.boolean ? "True" : "False"; break;
    case PickleKind::integer: out += std::to_string(static_cast<int64_t>(v.b)); break;
    case PickleKind::big_integer: out += "<" + std::to_string(v.a) + "-byte int>"; break;
    case PickleKind::floating: out += std::to_string(std::bit_cast<double>(v.b)); break;
    case PickleKind::string: {
        const std::string_view t = text_of(v);
        out.append("'").append(t.substr(0, 64)).append(t.size() > 64 ? "...'" : "'");
        break;
    }
    case PickleKind::bytes: out += "<" + std::to_string(v.a) + " bytes>"; break;
    case PickleKind::list: list(items(h), "[", "]"); break;
    case PickleKind::tuple: list(items(h), "(", items(h).size() == 1 ? ",)" : ")"); break;
    case PickleKind::set:
    case PickleKind::frozenset: list(items(h), "{", "}"); break;
    case PickleKind::dict: {
        const auto kv = items(h);
        out += "{";
        if (depth <= 0 && !kv.empty())
            out += "...";
        else
            for (std::size_t i = 0; i + 1 < kv.size() && out.size() <= kMaxLength; i += 2) {
                if (i)
                    out += ", ";
                describe(kv[i], depth - 1, out);
                out += ": ";
                describe(kv[i + 1], depth - 1, out);
            }
        out += "}";
        break;
    }
    case PickleKind::global: out.append(global_module(h)).append(".").append(global_name(h)); break;
    case PickleKind::reduce:
    case PickleKind::new_object: {
        const uint32_t cls = field(h, cls_field);
        if (kind(cls) == PickleKind::global)
            out.append(global_module(cls)).append(".").append(global_name(cls));
        else
            out += "<object>";
        if (const uint32_t args = field(h, args_field); args != kNoPickleValue)
            describe(args, depth - 1, out);
        break;
    }
    case PickleKind::persistent_id: out += "persistent_id"; break;
    }
}

} // namespace shardscope::foreign::dcp
