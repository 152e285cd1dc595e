// PickleDocument: reading the inert tree parse_pickle builds (pickle_reader.h).

#include "core/foreign/io/pickle_reader.h"
#include "core/util/error.h"
#include <bit>
#include <cstring>
#include <unordered_map>

namespace shardscope {

std::string PickleDocument::class_name(uint32_t id) const
{
    if (id >= m_nodes.size())
        return {};
    const PickleValue* v = &m_nodes[id];
    if ((v->kind == PickleKind::reduce || v->kind == PickleKind::new_object) && !v->items.empty()) {
        if (v->items[0] >= m_nodes.size())
            return {};
        v = &m_nodes[v->items[0]];
    }
    if (v->kind != PickleKind::global)
        return {};
    return v->text + "." + v->name;
}

uint32_t PickleDocument::dict_get(uint32_t dict, std::string_view key) const
{
    if (dict >= m_nodes.size())
        return kNoPickleValue;
    const PickleValue& d = m_nodes[dict];
    const std::vector<uint32_t>* kv = nullptr;
    if (d.kind == PickleKind::dict)
        kv = &d.items;
    else if (d.kind == PickleKind::reduce || d.kind == PickleKind::new_object)
        kv = &d.dict_items;
    else
        return kNoPickleValue;
    for (std::size_t i = 0; i + 1 < kv->size(); i += 2) {
        const PickleValue& k = m_nodes[(*kv)[i]];
        if (k.kind == PickleKind::string && k.text == key)
            return (*kv)[i + 1]; // the first wins; duplicates are unusual and reported elsewhere
    }
    return kNoPickleValue;
}

uint32_t PickleDocument::attribute(uint32_t object, std::string_view key) const
{
    if (object >= m_nodes.size())
        return kNoPickleValue;
    const uint32_t state = m_nodes[object].state;
    if (state == kNoPickleValue)
        return kNoPickleValue;
    const PickleValue& s = m_nodes[state];
    if (s.kind == PickleKind::dict)
        return dict_get(state, key);
    if (s.kind == PickleKind::tuple && s.items.size() == 2) { // (dict or None, slots dict)
        for (const uint32_t part : s.items) {
            const uint32_t found = dict_get(part, key);
            if (found != kNoPickleValue)
                return found;
        }
    }
    return kNoPickleValue;
}

std::optional<int64_t> PickleDocument::as_int(uint32_t id) const
{
    if (id >= m_nodes.size())
        return std::nullopt;
    const PickleValue& v = m_nodes[id];
    if (v.kind == PickleKind::integer)
        return v.integer;
    if (v.kind == PickleKind::boolean)
        return v.boolean ? 1 : 0;
    return std::nullopt;
}

std::optional<std::vector<uint32_t>> PickleDocument::as_sequence(uint32_t id) const
{
    if (id >= m_nodes.size())
        return std::nullopt;
    const PickleValue& v = m_nodes[id];
    if (v.kind == PickleKind::list || v.kind == PickleKind::tuple)
        return v.items;
    if (v.kind == PickleKind::reduce && v.items.size() == 2) { // torch.Size((a, b, ...))
        const PickleValue& args = m_nodes[v.items[1]];
        if (args.items.size() == 1) {
            const PickleValue& inner = m_nodes[args.items[0]];
            if (inner.kind == PickleKind::tuple || inner.kind == PickleKind::list)
                return inner.items;
        }
    }
    return std::nullopt;
}

namespace {

void render(const PickleDocument& doc, uint32_t id, int depth, std::string& out)
{
    constexpr std::size_t kMaxLength = 512;
    if (out.size() > kMaxLength)
        return;
    if (id >= doc.size()) {
        out += "?";
        return;
    }
    const PickleValue& v = doc.at(id);
    auto list = [&](const std::vector<uint32_t>& items, const char* open, const char* close) {
        out += open;
        if (depth <= 0 && !items.empty()) {
            out += "...";
        } else {
            for (std::size_t i = 0; i < items.size() && out.size() <= kMaxLength; ++i) {
                if (i)
                    out += ", ";
                render(doc, items[i], depth - 1, out);
            }
        }
        out += close;
    };
    switch (v.kind) {
    case PickleKind::none: out += "None"; break;
    case PickleKind::boolean: out += v.boolean ? "True" : "False"; break;
    case PickleKind::integer: out += std::to_string(v.integer); break;
    case PickleKind::big_integer: out += "<" + std::to_string(v.text.size()) + "-byte int>"; break;
    case PickleKind::floating: out += std::to_string(v.floating); break;
    case PickleKind::string: out += "'" + v.text.substr(0, 64) + (v.text.size() > 64 ? "...'" : "'"); break;
    case PickleKind::bytes: out += "<" + std::to_string(v.text.size()) + " bytes>"; break;
    case PickleKind::list: list(v.items, "[", "]"); break;
    case PickleKind::tuple: list(v.items, "(", v.items.size() == 1 ? ",)" : ")"); break;
    case PickleKind::set:
    case PickleKind::frozenset: list(v.items, "{", "}"); break;
    case PickleKind::dict: {
        out += "{";
        if (depth <= 0 && !v.items.empty())
            out += "...";
        else
            for (std::size_t i = 0; i + 1 < v.items.size() && out.size() <= kMaxLength; i += 2) {
                if (i)
                    out += ", ";
                render(doc, v.items[i], depth - 1, out);
                out += ": ";
                render(doc, v.items[i + 1], depth - 1, out);
            }
        out += "}";
        break;
    }
    case PickleKind::global: out += v.text + "." + v.name; break;
    case PickleKind::reduce:
    case PickleKind::new_object:
        out += doc.class_name(id).empty() ? std::string("<object>") : doc.class_name(id);
        if (v.items.size() > 1)
            render(doc, v.items[1], depth - 1, out);
        break;
    case PickleKind::persistent_id:
        out += "persistent_id";
        if (!v.items.empty())
            render(doc, v.items[0], depth - 1, out);
        break;
    }
}

} // namespace

std::string PickleDocument::describe(uint32_t id, int max_depth) const
{
    std::string out;
    render(*this, id, max_depth, out);
    return out;
}

} // namespace shardscope
