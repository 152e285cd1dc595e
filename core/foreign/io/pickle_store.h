#pragma once
// Building a PickleDocument (pickle_reader.h) compactly: 16-byte nodes, every container's items in
// one pool, all text in one arena, immutable values shared, the memo in a vector. The Store of
// PickleMachine (pickle_machine.h) for parse_pickle; every growth is checked against PickleLimits.

#include "core/foreign/io/pickle_machine.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/util/error.h"

#include <algorithm>
#include <bit>
#include <initializer_list>
#include <string>
#include <unordered_map>

namespace shardscope {

class PickleStore {
protected:
    PickleStore(const std::string& path, const PickleLimits& limits) : m_path(path), m_limits(limits)
    {
        std::fill(std::begin(m_small_ints), std::end(m_small_ints), kNoPickleValue);
    }

    // Room for what an input of `bytes` typically makes (a value per ~8 bytes, an item per ~4), so
    // that the arrays are not copied as they grow; reserved pages cost nothing until written.
    void reserve_for(std::size_t bytes)
    {
        const std::size_t cap = std::min<std::size_t>(bytes, m_limits.max_input_bytes);
        m_doc.m_nodes.reserve(std::min<std::size_t>(cap / 8 + 16, m_limits.max_nodes));
        m_doc.m_ranges.reserve(std::min<std::size_t>(cap / 16 + 16, m_limits.max_nodes));
        m_doc.m_pool.reserve(std::min<std::size_t>(cap / 4 + 16, m_limits.max_total_items));
    }

    [[noreturn]] void fail(const std::string& what, ProblemKind kind = ProblemKind::invalid_pickle) const
    {
        throw Error(kind, m_path + ": pickle byte " + std::to_string(m_op_pos) + ": " + what, m_path);
    }

    using Node = PickleDocument::Node;
    using Range = PickleDocument::Range;

    uint32_t make(Node node)
    {
        if (m_doc.m_nodes.size() >= m_limits.max_nodes)
            fail("more than " + std::to_string(m_limits.max_nodes) + " values (limit)");
        m_doc.m_nodes.push_back(node);
        return static_cast<uint32_t>(m_doc.m_nodes.size() - 1);
    }
    // A value made once and shared (see the header): `slot` remembers it.
    uint32_t shared(uint32_t& slot, Node node)
    {
        if (slot == kNoPickleValue)
            slot = make(node);
        return slot;
    }
    // Appends to the text arena; offsets are 32-bit, so the arena stays below 4 GiB.
    uint32_t store_text(std::string_view text)
    {
        if (m_doc.m_text.size() + text.size() > 0xffffffffu)
            fail("strings total more than 4 GiB (limit)");
        const auto offset = static_cast<uint32_t>(m_doc.m_text.size());
        m_doc.m_text.append(text);
        return offset;
    }
    // A str / bytes value whose text `text` views the parser's input (which outlives the parse).
    uint32_t text(PickleKind kind, std::string_view bytes)
    {
        constexpr std::size_t kShareUpTo = 256; // keys, class and file names; not blobs
        const bool share = kind == PickleKind::string && bytes.size() <= kShareUpTo;
        if (share)
            if (const auto it = m_strings.find(bytes); it != m_strings.end())
                return it->second;
        const uint32_t id = make({.kind = kind, .a = static_cast<uint32_t>(bytes.size()), .b = store_text(bytes)});
        if (share)
            m_strings.emplace(bytes, id);
        return id;
    }
    uint32_t integer(int64_t value)
    {
        if (value >= 0 && value < int64_t(std::size(m_small_ints)))
            return shared(m_small_ints[value], {.kind = PickleKind::integer, .b = static_cast<uint64_t>(value)});
        return make({.kind = PickleKind::integer, .b = static_cast<uint64_t>(value)});
    }
    // GLOBAL: `module` and `name` view the parser's input (never the arena, which may move).
    uint32_t global(std::string_view module, std::string_view name)
    {
        std::string key = global_key(module, name);
        if (const auto it = m_globals.find(key); it != m_globals.end())
            return it->second;
        PickleDocument::Global g;
        g.module_offset = store_text(module);
        g.module_size = static_cast<uint32_t>(module.size());
        g.name_offset = store_text(name);
        g.name_size = static_cast<uint32_t>(name.size());
        return intern_global(std::move(key), g);
    }
    // The key a global is shared by: length-prefixed, since a STACK_GLOBAL's strs may hold any
    // byte ("a\nb"."c" and "a"."b\nc" are different globals). Empty for a global too long to
    // be worth sharing: keys stay small, however often long strs are combined.
    static std::string global_key(std::string_view module, std::string_view name)
    {
        if (module.size() + name.size() > 512)
            return {};
        std::string key = std::to_string(module.size()) + ':';
        key.append(module).append(name);
        return key;
    }
    uint32_t intern_global(std::string key, const PickleDocument::Global& g)
    {
        m_doc.m_globals.push_back(g);
        const uint32_t id = make({.kind = PickleKind::global, .a = static_cast<uint32_t>(m_doc.m_globals.size() - 1)});
        if (!key.empty())
            m_globals.emplace(std::move(key), id);
        return id;
    }

    Node& node(uint32_t id) { return m_doc.m_nodes[id]; }
    // Appends to a container's items, moving them to the end of the pool (with room to double)
    // when they do not fit where they are.
    void grow(Range& into, std::span<const uint32_t> items, const char* opname)
    {
        grow_pickle_items(m_doc.m_pool, into, items, m_limits, opname, [this](const std::string& w) { fail(w); });
    }
    uint32_t container(PickleKind kind, std::span<const uint32_t> items)
    {
        Range range;
        grow(range, items, "a container");
        m_doc.m_ranges.push_back(range);
        const uint32_t id = make({.kind = kind, .a = static_cast<uint32_t>(m_doc.m_ranges.size() - 1)});
        if (kind == PickleKind::reduce || kind == PickleKind::new_object)
            node(id).b = kNoPickleValue; // no SETITEMS / APPENDS / BUILD yet
        return id;
    }
    uint32_t container(PickleKind kind, std::initializer_list<uint32_t> items)
    {
        return container(kind, std::span<const uint32_t>(items.begin(), items.size()));
    }
    uint32_t none() { return shared(m_none, {}); }
    uint32_t boolean(bool value)
    {
        return value ? shared(m_true, {.kind = PickleKind::boolean, .boolean = true})
                     : shared(m_false, {.kind = PickleKind::boolean, .boolean = false});
    }
    uint32_t floating(uint64_t bits) { return make({.kind = PickleKind::floating, .b = bits}); }
    uint32_t empty_tuple()
    {
        return m_empty_tuple != kNoPickleValue ? m_empty_tuple : (m_empty_tuple = container(PickleKind::tuple, {}));
    }
    PickleKind kind(uint32_t id) { return node(id).kind; }
    uint32_t reduce(uint32_t callable, uint32_t args) { return container(PickleKind::reduce, {callable, args}); }
    uint32_t new_object(uint32_t cls, uint32_t args, uint32_t kwargs)
    {
        return kwargs == kNoPickleValue ? container(PickleKind::new_object, {cls, args})
                                        : container(PickleKind::new_object, {cls, args, kwargs});
    }
    uint32_t persistent_id(uint32_t pid) { return container(PickleKind::persistent_id, {pid}); }
    uint32_t build(uint32_t target, uint32_t state, uint32_t /*under*/)
    {
        object_of(target).state = state;
        return target;
    }
    uint32_t dup(uint32_t id) { return id; }
    PickleDocument::Object& object_of(uint32_t id)
    {
        Node& n = node(id);
        if (n.b == kNoPickleValue) {
            m_doc.m_objects.emplace_back();
            n.b = m_doc.m_objects.size() - 1;
        }
        return m_doc.m_objects[n.b];
    }
    void add_dict_items(uint32_t target, std::span<const uint32_t> kv, const char* opname)
    {
        if (kv.size() % 2)
            fail(std::string(opname) + " with an odd number of items (a key without a value)");
        const Node& t = node(target);
        if (t.kind == PickleKind::dict)
            grow(m_doc.m_ranges[t.a], kv, opname);
        else if (t.kind == PickleKind::reduce || t.kind == PickleKind::new_object)
            grow(object_of(target).dict_items, kv, opname);
        else
            fail(std::string(opname) + " on a " + std::string(to_string(t.kind)) + ", which is not a dict");
    }
    void add_list_items(uint32_t target, std::span<const uint32_t> items, const char* opname)
    {
        const Node& t = node(target);
        if (t.kind == PickleKind::list)
            grow(m_doc.m_ranges[t.a], items, opname);
        else if (t.kind == PickleKind::reduce || t.kind == PickleKind::new_object)
            grow(object_of(target).list_items, items, opname);
        else
            fail(std::string(opname) + " on a " + std::string(to_string(t.kind)) + ", which is not a list");
    }
    uint32_t long_bytes(std::string_view bytes)
    {
        if (bytes.empty())
            return integer(0);
        if (bytes.size() <= 8) {
            uint64_t v = 0;
            for (std::size_t i = 0; i < bytes.size(); ++i)
                v |= uint64_t(uint8_t(bytes[i])) << (8 * i);
            if (bytes.size() < 8 && (uint8_t(bytes.back()) & 0x80))
                v |= ~uint64_t(0) << (8 * bytes.size()); // sign-extend
            return integer(std::bit_cast<int64_t>(v));
        }
        return make(
            {.kind = PickleKind::big_integer, .a = static_cast<uint32_t>(bytes.size()), .b = store_text(bytes)});
    }
    // The memo: dense indices (MEMOIZE, and BINPUT as CPython numbers them) in a vector, others in
    // a map; `m_memo_count` is how many distinct entries there are.
    void memo_store(uint64_t index, uint32_t value)
    {
        const bool dense = index < m_memo_dense.size() || index < 2 * m_memo_count + 4096;
        bool exists = false;
        if (dense && index < m_memo_dense.size() && m_memo_dense[index] != kNoPickleValue)
            exists = true;
        else if (const auto it = m_memo_sparse.find(index); it != m_memo_sparse.end()) {
            exists = true;
            if (dense) // moves to the vector, so the entry is in one place only
                m_memo_sparse.erase(it);
        }
        if (!exists && m_memo_count >= m_limits.max_memo)
            fail("more than " + std::to_string(m_limits.max_memo) + " memo entries (limit)");
        if (!exists)
            ++m_memo_count;
        if (dense) {
            if (index >= m_memo_dense.size())
                m_memo_dense.resize(static_cast<std::size_t>(index) + 1, kNoPickleValue);
            m_memo_dense[index] = value;
        } else {
            m_memo_sparse[index] = value;
        }
    }
    void set_protocol(int protocol) { m_doc.m_protocol = protocol; }
    PickleDocument finish(uint32_t root)
    {
        m_doc.m_root = root;
        return std::move(m_doc);
    }
    void add_set_items(uint32_t target, std::span<const uint32_t> items)
    {
        if (node(target).kind != PickleKind::set)
            fail("ADDITEMS on a " + std::string(to_string(node(target).kind)) + ", which is not a set");
        grow(m_doc.m_ranges[node(target).a], items, "ADDITEMS");
    }
    // STACK_GLOBAL: module and name are str values already made.
    uint32_t global_of(uint32_t module, uint32_t name)
    {
        if (node(name).kind != PickleKind::string || node(module).kind != PickleKind::string)
            fail("STACK_GLOBAL needs two str values (module and name)");
        const Node m = node(module), n = node(name);
        // The two names are in the arena already: the global points at their text, copying
        // nothing (so combining long strs costs no memory, and no view outlives an append).
        std::string key = global_key(m_doc.text_at(m.b, m.a), m_doc.text_at(n.b, n.a));
        if (!key.empty())
            if (const auto it = m_globals.find(key); it != m_globals.end())
                return it->second;
        PickleDocument::Global g;
        g.module_offset = static_cast<uint32_t>(m.b);
        g.module_size = m.a;
        g.name_offset = static_cast<uint32_t>(n.b);
        g.name_size = n.a;
        return intern_global(std::move(key), g);
    }
    uint64_t memo_count() const { return m_memo_count; }
    uint32_t memo_find(uint64_t index) const
    {
        if (index < m_memo_dense.size() && m_memo_dense[index] != kNoPickleValue)
            return m_memo_dense[index];
        const auto it = m_memo_sparse.find(index);
        if (it == m_memo_sparse.end())
            fail("GET of memo entry " + std::to_string(index) + ", which was never stored");
        return it->second;
    }

    std::string m_path;
    PickleLimits m_limits;
    std::size_t m_op_pos = 0; // where the opcode being run starts, for messages

private:
    PickleDocument m_doc;
    uint32_t m_none = kNoPickleValue, m_true = kNoPickleValue, m_false = kNoPickleValue;
    uint32_t m_empty_tuple = kNoPickleValue;
    std::vector<uint32_t> m_memo_dense;
    std::unordered_map<uint64_t, uint32_t> m_memo_sparse;
    uint64_t m_memo_count = 0;
    std::unordered_map<std::string_view, uint32_t> m_strings; // views into the input (in memory: parse_pickle)
    std::unordered_map<std::string, uint32_t> m_globals; // "module\nname"
    uint32_t m_small_ints[256];
};

} // namespace shardscope
