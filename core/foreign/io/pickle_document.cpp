// PickleDocument: reading the inert tree parse_pickle builds (pickle_reader.h).

#include "core/foreign/io/pickle_reader.h"
#include "core/util/error.h"
#include <bit>
#include <cstring>
#include <unordered_map>

namespace shardscope {

PickleValue PickleDocument::at(uint32_t id) const
{
    const Node& n = m_nodes.at(id);
    PickleValue v;
    v.kind = n.kind;
    switch (n.kind) {
    case PickleKind::none: break;
    case PickleKind::boolean: v.boolean = n.boolean; break;
    case PickleKind::integer: v.integer = static_cast<int64_t>(n.b); break;
    case PickleKind::floating: v.floating = std::bit_cast<double>(n.b); break;
    case PickleKind::big_integer:
    case PickleKind::string:
    case PickleKind::bytes: v.text = text_at(n.b, n.a); break;
    case PickleKind::global: {
        const Global& g = m_globals[n.a];
        v.text = text_at(g.module_offset, g.module_size);
        v.name = text_at(g.name_offset, g.name_size);
        break;
    }
    case PickleKind::reduce:
    case PickleKind::new_object:
        if (n.b != kNoPickleValue) {
            const Object& o = m_objects[n.b];
            v.state = o.state;
            v.dict_items = items_of(o.dict_items);
            v.list_items = items_of(o.list_items);
        }
        [[fallthrough]];
    case PickleKind::list:
    case PickleKind::tuple:
    case PickleKind::dict:
    case PickleKind::set:
    case PickleKind::frozenset:
    case PickleKind::persistent_id: v.items = items_of(m_ranges[n.a]); break;
    }
    return v;
}

std::string PickleDocument::class_name(uint32_t id) const
{
    if (id >= m_nodes.size())
        return {};
    const Node* n = &m_nodes[id];
    if (n->kind == PickleKind::reduce || n->kind == PickleKind::new_object) {
        const Range& r = m_ranges[n->a];
        if (r.size == 0 || m_pool[r.begin] >= m_nodes.size())
            return {};
        n = &m_nodes[m_pool[r.begin]];
    }
    if (n->kind != PickleKind::global)
        return {};
    const Global& g = m_globals[n->a];
    std::string out;
    out.reserve(g.module_size + 1 + g.name_size);
    out.append(text_at(g.module_offset, g.module_size)).append(".").append(text_at(g.name_offset, g.name_size));
    return out;
}

uint32_t PickleDocument::dict_get(uint32_t dict, std::string_view key) const
{
    if (dict >= m_nodes.size())
        return kNoPickleValue;
    const Node& d = m_nodes[dict];
    std::span<const uint32_t> kv;
    if (d.kind == PickleKind::dict)
        kv = items_of(m_ranges[d.a]);
    else if ((d.kind == PickleKind::reduce || d.kind == PickleKind::new_object) && d.b != kNoPickleValue)
        kv = items_of(m_objects[d.b].dict_items);
    else
        return kNoPickleValue;
    for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
        const Node& k = m_nodes[kv[i]];
        if (k.kind == PickleKind::string && text_at(k.b, k.a) == key)
            return kv[i + 1]; // the first wins; duplicates are unusual and reported elsewhere
    }
    return kNoPickleValue;
}

uint32_t PickleDocument::attribute(uint32_t object, std::string_view key) const
{
    if (object >= m_nodes.size())
        return kNoPickleValue;
    const Node& o = m_nodes[object];
    if ((o.kind != PickleKind::reduce && o.kind != PickleKind::new_object) || o.b == kNoPickleValue)
        return kNoPickleValue;
    const uint32_t state = m_objects[o.b].state;
    if (state == kNoPickleValue)
        return kNoPickleValue;
    const Node& s = m_nodes[state];
    if (s.kind == PickleKind::dict)
        return dict_get(state, key);
    if (s.kind == PickleKind::tuple && m_ranges[s.a].size == 2) { // (dict or None, slots dict)
        for (const uint32_t part : items_of(m_ranges[s.a])) {
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
    const Node& n = m_nodes[id];
    if (n.kind == PickleKind::integer)
        return static_cast<int64_t>(n.b);
    if (n.kind == PickleKind::boolean)
        return n.boolean ? 1 : 0;
    return std::nullopt;
}

std::optional<std::string_view> PickleDocument::as_string(uint32_t id) const
{
    if (!is(id, PickleKind::string))
        return std::nullopt;
    return text_at(m_nodes[id].b, m_nodes[id].a);
}

std::optional<std::span<const uint32_t>> PickleDocument::as_sequence(uint32_t id) const
{
    if (id >= m_nodes.size())
        return std::nullopt;
    const Node& n = m_nodes[id];
    if (n.kind == PickleKind::list || n.kind == PickleKind::tuple)
        return items_of(m_ranges[n.a]);
    if (n.kind == PickleKind::reduce && m_ranges[n.a].size == 2) { // torch.Size((a, b, ...))
        const Node& args = m_nodes[m_pool[m_ranges[n.a].begin + 1]];
        const Range& ar = m_ranges[args.a];
        if (args.kind == PickleKind::tuple && ar.size == 1) {
            const Node& inner = m_nodes[m_pool[ar.begin]];
            if (inner.kind == PickleKind::tuple || inner.kind == PickleKind::list)
                return items_of(m_ranges[inner.a]);
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
    const PickleValue v = doc.at(id);
    auto list = [&](std::span<const uint32_t> items, const char* open, const char* close) {
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
    case PickleKind::string:
        out.append("'").append(v.text.substr(0, 64)).append(v.text.size() > 64 ? "...'" : "'");
        break;
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
    case PickleKind::global: out.append(v.text).append(".").append(v.name); break;
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
