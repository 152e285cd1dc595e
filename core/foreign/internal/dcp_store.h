#pragma once
// The Store the pickle machine (io/pickle_machine.h) runs with over a DCP .metadata: it makes the
// machine's values compactly and folds DCP's objects into records as BUILD completes them, giving
// back what nothing can reach any more (dcp_metadata.cpp says how). Its members are defined here,
// where they are small or the machine calls them for every opcode; BUILD's side in
// dcp_metadata.cpp, beside the machine's loop; what each object folds into, and the messages, in
// dcp_metadata_fold.cpp. Private to core/foreign.

#include "core/foreign/dcp.h"
#include "core/foreign/internal/dcp_metadata.h"
#include "core/foreign/io/pickle_machine.h"
#include "core/util/error.h"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace shardscope::foreign::dcp {

class DcpStore {
protected:
    DcpStore(const std::string& path, const PickleLimits& limits) : m_path(path), m_limits(limits) {}

    [[noreturn]] void fail(const std::string& what, ProblemKind kind = ProblemKind::invalid_pickle) const
    {
        throw Error(kind, m_path + ": pickle byte " + std::to_string(m_op_pos) + ": " + what, m_path);
    }
    // A DCP .metadata keeps about a value and a number per 20 bytes (a CPython pickle of 10^5
    // chunks: 12 MiB, 0.6 M of each): reserved, not touched, so the arrays are not copied as they grow.
    void reserve_for(std::size_t bytes)
    {
        m_kept.reserve(std::min<std::size_t>(bytes / 20 + 64, m_limits.max_nodes));
        m_numbers.reserve(std::min<std::size_t>(bytes / 20 + 64, m_limits.max_total_items));
        m_storages.reserve(bytes / 120 + 16);
        m_pool.reserve(std::min<std::size_t>(bytes / 16 + 64, m_limits.max_total_items));
    }

    // ---- values
    static bool is_scratch(uint32_t h) { return h < kInline; }
    static bool is_inline(uint32_t h) { return h >= kInline && h < kKept; }
    void count_value()
    {
        if (m_scratch.size() + m_kept.size() >= m_limits.max_nodes)
            fail("more than " + std::to_string(m_limits.max_nodes) + " values (limit)");
    }
    uint32_t keep(Value v)
    {
        count_value();
        if (m_kept.size() >= kNoPickleValue - kKept)
            fail("too many values");
        m_kept.push_back(v);
        return kKept + static_cast<uint32_t>(m_kept.size() - 1);
    }
    uint32_t scratch(Value v)
    {
        count_value();
        if (m_scratch.size() >= kInline)
            fail("too many values");
        ++m_made;
        m_scratch.push_back(v);
        return static_cast<uint32_t>(m_scratch.size() - 1);
    }
    Value value(uint32_t h) const
    {
        if (h == kNoPickleValue)
            return {}; // an absent attribute reads as None
        if (is_scratch(h)) {
            if (h >= m_scratch.size()) [[unlikely]] // given back while still reachable: a bug here, refused
                given_back();
            return m_scratch[h];
        }
        if (is_inline(h))
            return {.kind = PickleKind::integer, .b = h - kInline};
        return m_kept[h - kKept];
    }
    [[noreturn, gnu::noinline]] void given_back() const
    {
        fail("internal error: a value was given back while still in use");
    }
    PickleKind kind(uint32_t h) const { return value(h).kind; }

    uint32_t shared(uint32_t& slot, Value v)
    {
        if (slot == kNoPickleValue)
            slot = keep(v);
        return slot;
    }
    uint32_t none() { return shared(m_none, {}); }
    uint32_t boolean(bool b)
    {
        return b ? shared(m_true, {.kind = PickleKind::boolean, .boolean = true})
                 : shared(m_false, {.kind = PickleKind::boolean});
    }
    uint32_t empty_tuple() { return shared(m_empty_tuple, {.kind = PickleKind::tuple, .fold = Fold::dims}); }
    uint32_t integer(int64_t v)
    {
        if (v >= 0 && v < int64_t(kInline))
            return kInline + static_cast<uint32_t>(v);
        return keep({.kind = PickleKind::integer, .b = static_cast<uint64_t>(v)});
    }
    uint32_t long_bytes(std::string_view bytes)
    {
        if (bytes.size() <= 8) {
            uint64_t v = 0;
            for (std::size_t i = 0; i < bytes.size(); ++i)
                v |= uint64_t(uint8_t(bytes[i])) << (8 * i);
            if (!bytes.empty() && bytes.size() < 8 && (uint8_t(bytes.back()) & 0x80))
                v |= ~uint64_t(0) << (8 * bytes.size()); // sign-extend
            return integer(std::bit_cast<int64_t>(v));
        }
        return keep({.kind = PickleKind::big_integer, .a = static_cast<uint32_t>(bytes.size())});
    }
    uint32_t floating(uint64_t bits) { return keep({.kind = PickleKind::floating, .b = bits}); }
    uint32_t store_text(std::string_view text)
    {
        if (m_text.size() + text.size() > 0xffffffffu)
            fail("strings total more than 4 GiB (limit)");
        const auto offset = static_cast<uint32_t>(m_text.size());
        m_text.append(text);
        return offset;
    }
    std::string_view text_of(const Value& v) const { return std::string_view(m_text).substr(v.b, v.a); }
    // str values are kept (keys, names, paths; shared up to 256 bytes); bytes only by length.
    uint32_t text(PickleKind kind, std::string_view bytes)
    {
        if (kind != PickleKind::string)
            return keep({.kind = kind, .a = static_cast<uint32_t>(std::min<std::size_t>(bytes.size(), 0xffffffffu))});
        const bool share = bytes.size() <= 256;
        if (share)
            if (const auto it = m_strings.find(bytes); it != m_strings.end())
                return *it;
        const uint32_t h =
            keep({.kind = PickleKind::string, .a = static_cast<uint32_t>(bytes.size()), .b = store_text(bytes)});
        if (share)
            m_strings.insert(h);
        return h;
    }
    uint32_t global_of_texts(uint32_t module, uint32_t name)
    {
        const uint64_t key = (uint64_t(module) << 32) | name;
        if (const auto it = m_globals.find(key); it != m_globals.end())
            return it->second;
        const uint32_t h = keep({.kind = PickleKind::global, .a = module, .b = name});
        m_globals.emplace(key, h);
        return h;
    }
    uint32_t global(std::string_view module, std::string_view name)
    {
        return global_of_texts(text(PickleKind::string, module), text(PickleKind::string, name));
    }
    uint32_t global_of(uint32_t module, uint32_t name)
    {
        if (kind(name) != PickleKind::string || kind(module) != PickleKind::string)
            fail("STACK_GLOBAL needs two str values (module and name)");
        return global_of_texts(module, name);
    }
    std::string_view global_name(uint32_t h) const
    {
        const Value v = value(h);
        return v.kind == PickleKind::global ? text_of(value(static_cast<uint32_t>(v.b))) : std::string_view();
    }
    std::string_view global_module(uint32_t h) const
    {
        const Value v = value(h);
        return v.kind == PickleKind::global ? text_of(value(v.a)) : std::string_view();
    }

    // ---- containers: items in the scratch pool (PickleItems), kept in the Value's a / b
    using Range = PickleItems;
    static Range range_of(const Value& v)
    {
        return {static_cast<uint32_t>(v.b), v.a, static_cast<uint32_t>(v.b >> 32)};
    }
    static void set_range(Value& v, const Range& r)
    {
        v.a = r.size;
        v.b = r.begin | (uint64_t(r.capacity) << 32);
    }
    std::span<const uint32_t> items(uint32_t h) const
    {
        const Value v = value(h);
        const bool container = v.kind == PickleKind::list || v.kind == PickleKind::tuple ||
            v.kind == PickleKind::dict || v.kind == PickleKind::set || v.kind == PickleKind::frozenset;
        if (!is_scratch(h) || !container) // kept tuples are numbers (dims); objects keep fields
            return {};
        const Range r = range_of(v);
        return {m_pool.data() + r.begin, r.size};
    }
    void grow(Range& into, std::span<const uint32_t> add, const char* opname)
    {
        grow_pickle_items(m_pool, into, add, m_limits, opname, [this](const std::string& w) { fail(w); });
    }
    // A tuple of ints is kept as numbers (torch.Size's content, chunk offsets); others are scratch.
    uint32_t container(PickleKind kind, std::span<const uint32_t> add)
    {
        if (kind == PickleKind::tuple &&
            std::all_of(add.begin(), add.end(), [&](uint32_t h) { return value(h).kind == PickleKind::integer; })) {
            const auto at = m_numbers.size();
            if (at + add.size() > m_limits.max_total_items)
                fail("more than " + std::to_string(m_limits.max_total_items) + " tuple items in all (limit)");
            for (const uint32_t h : add)
                m_numbers.push_back(static_cast<int64_t>(value(h).b));
            return keep(
                {.kind = PickleKind::tuple, .fold = Fold::dims, .a = static_cast<uint32_t>(add.size()), .b = at});
        }
        Value v{.kind = kind};
        Range r;
        grow(r, add, "a container");
        set_range(v, r);
        return scratch(v);
    }
    void touch(uint32_t h)
    {
        // Keeps, for every age, the lowest slot changed since: slots increase along the list.
        while (!m_touches.empty() && m_touches.back().slot >= h)
            m_touches.pop_back();
        m_touches.push_back({m_made, h});
    }
    void add_items(uint32_t target, std::span<const uint32_t> add, const char* opname)
    {
        Range r = range_of(m_scratch[target]);
        grow(r, add, opname);
        set_range(m_scratch[target], r);
        touch(target);
    }
    // ---- objects: REDUCE / NEWOBJ records, their fields in the pool
    uint32_t object(PickleKind kind, uint32_t cls, uint32_t args, uint32_t kwargs)
    {
        if (m_pool.size() + kObjectFields > m_limits.max_total_items)
            fail("more than " + std::to_string(m_limits.max_total_items) + " container items in all (limit)");
        const auto at = static_cast<uint32_t>(m_pool.size());
        m_pool.resize(at + kObjectFields, kNoPickleValue);
        m_pool[at + cls_field] = cls;
        m_pool[at + args_field] = args;
        m_pool[at + kwargs_field] = kwargs;
        const uint32_t h = scratch({.kind = kind, .a = at});
        m_scratch[h].b = m_made; // counts the object itself: a change made before it has a smaller count
        return h;
    }
    uint32_t field(uint32_t object, ObjectField f) const
    {
        const Value v = value(object);
        if (!is_scratch(object) || (v.kind != PickleKind::reduce && v.kind != PickleKind::new_object))
            return kNoPickleValue;
        return m_pool[v.a + f];
    }
    uint32_t reduce(uint32_t callable, uint32_t args)
    {
        // torch.Size((a, b, ...)) is its tuple of ints.
        const auto arg = items(args);
        if (global_module(callable) == "torch" && global_name(callable) == "Size" &&
            (args == m_empty_tuple || (arg.size() == 1 && value(arg[0]).fold == Fold::dims)))
            return args == m_empty_tuple ? empty_tuple() : arg[0];
        return object(PickleKind::reduce, callable, args, kNoPickleValue);
    }
    uint32_t new_object(uint32_t cls, uint32_t args, uint32_t kwargs)
    {
        return object(PickleKind::new_object, cls, args, kwargs);
    }
    uint32_t persistent_id(uint32_t pid)
    {
        return object(PickleKind::persistent_id, kNoPickleValue, pid, kNoPickleValue);
    }
    uint32_t dup(uint32_t h)
    {
        pin(h);
        return h;
    }
    void pin(uint32_t h)
    {
        if (is_scratch(h))
            m_pinned = std::max<uint64_t>(m_pinned, uint64_t(h) + 1);
    }
    uint32_t& object_field(uint32_t target, ObjectField f) { return m_pool[m_scratch[target].a + f]; }
    // SETITEMS / APPENDS on an object (an OrderedDict, a list subclass) go to a dict / list of its own.
    uint32_t object_items(uint32_t target, ObjectField f)
    {
        if (object_field(target, f) == kNoPickleValue) {
            const uint32_t c = container(f == dict_field ? PickleKind::dict : PickleKind::list, {});
            object_field(target, f) = c;
        }
        touch(target);
        return object_field(target, f);
    }
    void add_dict_items(uint32_t target, std::span<const uint32_t> kv, const char* opname)
    {
        if (kv.size() % 2)
            fail(std::string(opname) + " with an odd number of items (a key without a value)");
        const PickleKind k = kind(target);
        if (!is_scratch(target))
            fail(std::string(opname) + " on a " + std::string(to_string(k)) + " that cannot change");
        if (k == PickleKind::dict)
            add_items(target, kv, opname);
        else if (k == PickleKind::reduce || k == PickleKind::new_object)
            add_items(object_items(target, dict_field), kv, opname);
        else
            fail(std::string(opname) + " on a " + std::string(to_string(k)) + ", which is not a dict");
    }
    void add_list_items(uint32_t target, std::span<const uint32_t> add, const char* opname)
    {
        const PickleKind k = kind(target);
        if (!is_scratch(target))
            fail(std::string(opname) + " on a " + std::string(to_string(k)) + " that cannot change");
        if (k == PickleKind::list)
            add_items(target, add, opname);
        else if (k == PickleKind::reduce || k == PickleKind::new_object)
            add_items(object_items(target, list_field), add, opname);
        else
            fail(std::string(opname) + " on a " + std::string(to_string(k)) + ", which is not a list");
    }
    void add_set_items(uint32_t target, std::span<const uint32_t> add)
    {
        if (kind(target) != PickleKind::set || !is_scratch(target))
            fail("ADDITEMS on a " + std::string(to_string(kind(target))) + ", which is not a set");
        add_items(target, add, "ADDITEMS");
    }

    // ---- the memo: only entries a GET reads (MemoUse) are kept
    void memo_store(uint64_t index, uint32_t h)
    {
        const uint8_t entry = m_use.entries.get(index);
        if (!(entry & kStoredAgain)) {
            if (++m_use.stored_again > m_limits.max_memo)
                fail("more than " + std::to_string(m_limits.max_memo) + " memo entries (limit)");
            m_use.entries.set(index, entry | kStoredAgain);
        }
        if (entry & kFetched) {
            m_memo.set(index, h);
            pin(h);
        }
    }
    uint32_t memo_find(uint64_t index)
    {
        const uint32_t h = m_memo.get(index);
        if (h == kNoPickleValue)
            fail("GET of memo entry " + std::to_string(index) + ", which was never stored");
        return h;
    }
    uint64_t memo_count() const { return m_use.stored_again; }
    void set_protocol(int p) { m_protocol = p; }

    // ---- folding: BUILD completes an object; DCP's become records
    // (BUILD's side, called for every BUILD: dcp_metadata.cpp, beside the machine's loop)
    inline uint32_t build(uint32_t target, uint32_t state, uint32_t under);
    template <class EachChunk>
    bool append_tensor(DcpMetadata& out, std::string_view fqn, const TensorRecord& t, EachChunk&& each_chunk) const;
    inline void note_first_tensor(uint32_t under, uint32_t record);
    inline void reclaim(uint32_t object);

    // An attribute: `key` in a BUILD state dict, or in either dict of a (dict or None, slots dict)
    // state. DCP's classes have a handful of fields: a state dict of more than kMaxFields keys is
    // not one of theirs, and is not scanned (a shared one, built again and again, would let a
    // small file cost as much as the product of the two).
    static constexpr std::size_t kMaxFields = 64;
    uint32_t attribute(uint32_t object, std::string_view key) const
    {
        return attribute_of_text(object, shared_text(key));
    }
    // The same for the names of DCP's fields, whose str handles are looked up once (10^5 objects
    // each ask for several).
    uint32_t attribute(uint32_t object, Name key) const { return attribute_of_text(object, name_text(key)); }
    uint32_t attribute_of_text(uint32_t object, uint32_t key) const; // (dcp_metadata_fold.cpp, with fold)

    // The shared str with this text, or kNoPickleValue when none was read. Every str of up to 256
    // bytes is shared (text()), so for the short names looked up here equal text is an equal handle.
    uint32_t shared_text(std::string_view text) const
    {
        const auto it = m_strings.find(text);
        return it == m_strings.end() ? kNoPickleValue : *it;
    }
    uint32_t name_text(Name name) const
    {
        uint32_t& h = m_name_texts[static_cast<std::size_t>(name)];
        if (h == kNoPickleValue) // (not cached while absent: it may be read later)
            h = shared_text(kNameTexts[static_cast<std::size_t>(name)]);
        return h;
    }
    // The str handle of an object's class name, kNoPickleValue when its class is not a global.
    uint32_t class_name_text(uint32_t object) const
    {
        const Value cls = value(field(object, cls_field));
        return cls.kind == PickleKind::global ? static_cast<uint32_t>(cls.b) : kNoPickleValue;
    }
    bool is_class(uint32_t object, Name name) const { return is_name(class_name_text(object), name); }
    bool is_name(uint32_t text, Name name) const { return text != kNoPickleValue && text == name_text(name); }
    std::string_view class_name_of(uint32_t object) const { return global_name(field(object, cls_field)); }
    uint32_t resolve(uint32_t h) const
    {
        const uint32_t folded = field(h, folded_field);
        return folded != kNoPickleValue ? folded : h;
    }

    bool string_of(uint32_t h, std::string_view& out) const
    {
        const Value v = value(resolve(h));
        if (v.kind != PickleKind::string)
            return false;
        out = text_of(v);
        return true;
    }
    bool number_of(uint32_t h, uint64_t& out) const
    {
        const Value v = value(resolve(h));
        if (v.kind != PickleKind::integer || static_cast<int64_t>(v.b) < 0)
            return false;
        out = v.b;
        return true;
    }
    inline uint32_t dims_of(uint32_t h); // (dcp_metadata_fold.cpp, its one caller's file)

    std::vector<uint64_t> dims(uint32_t dims_handle) const
    {
        const Value v = value(dims_handle);
        std::vector<uint64_t> out(v.a);
        for (uint32_t i = 0; i < v.a; ++i)
            out[i] = static_cast<uint64_t>(m_numbers[v.b + i]);
        return out;
    }

    // (dcp_metadata_fold.cpp)
    std::string is_not(std::string_view what, uint32_t h, std::string_view wanted) const;
    Folded fold(uint32_t object, bool explain);
    void describe(uint32_t h, int depth, std::string& out) const;

    std::string describe(uint32_t h, int depth) const
    {
        std::string out;
        describe(h, depth, out);
        return out;
    }

    Decoded finish(uint32_t root) { return {m_protocol, root}; }

    std::string m_path;
    PickleLimits m_limits;
    std::size_t m_op_pos = 0;
    MemoUse m_use; // set before the run

    std::vector<Value> m_kept;
    std::vector<StorageRecord> m_storages;
    std::vector<std::string> m_transforms{std::string()}; // distinct descriptor lists, joined by ','
    std::vector<TensorRecord> m_tensors;
    std::vector<uint32_t> m_tensor_chunks;
    std::vector<int64_t> m_numbers;
    std::string m_text;
    DcpFirstTensors m_first_tensors; // set before the run, when someone lists them early
    std::vector<std::pair<uint32_t, uint32_t>> m_first_named; // (str under it, tensor record)

private:
    struct Touch {
        uint64_t made = 0; // how many scratch values had been made when it changed
        uint32_t slot = 0;
    };
    std::vector<Value> m_scratch;
    std::vector<uint32_t> m_pool;
    std::vector<Touch> m_touches;
    uint64_t m_made = 0;
    uint64_t m_pinned = 0; // scratch slots below this stay
    MemoHandles m_memo;
    // The shared strs, by their text in m_text (the input may be a window that moves on).
    struct TextHash {
        using is_transparent = void;
        const DcpStore* store;
        std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
        std::size_t operator()(uint32_t h) const { return (*this)(store->text_of(store->value(h))); }
    };
    struct TextEqual {
        using is_transparent = void;
        const DcpStore* store;
        std::string_view text(std::string_view t) const { return t; }
        std::string_view text(uint32_t h) const { return store->text_of(store->value(h)); }
        bool operator()(auto a, auto b) const { return text(a) == text(b); }
    };
    std::unordered_set<uint32_t, TextHash, TextEqual> m_strings{64, TextHash{this}, TextEqual{this}};
    std::unordered_map<uint64_t, uint32_t> m_globals; // (module, name) str handles
    uint32_t m_none = kNoPickleValue, m_true = kNoPickleValue, m_false = kNoPickleValue;
    uint32_t m_empty_tuple = kNoPickleValue;
    mutable std::array<uint32_t, static_cast<std::size_t>(Name::kCount)> m_name_texts = filled_names();
    static constexpr std::array<uint32_t, static_cast<std::size_t>(Name::kCount)> filled_names()
    {
        std::array<uint32_t, static_cast<std::size_t>(Name::kCount)> a{};
        a.fill(kNoPickleValue);
        return a;
    }
    int m_protocol = 0;
};

} // namespace shardscope::foreign::dcp
