#pragma once
// A restricted pickle reader for checkpoint metadata (PyTorch DCP's .metadata, torch.save's
// data.pkl). It understands the binary opcodes of protocols 2-5 and builds an inert tree: a
// global reference (GLOBAL / STACK_GLOBAL) becomes a named placeholder, and REDUCE / NEWOBJ /
// NEWOBJ_EX / BUILD become records of (callable placeholder, arguments, state). Nothing is ever
// imported or called, so a hostile file cannot run code. Text-mode protocol 0/1 opcodes, the
// class-instantiating INST/OBJ, the extension registry (EXT1/2/4) and out-of-band buffers are
// refused with Error(forbidden_pickle_opcode); malformed input gives Error(invalid_pickle). Every
// size is bounded (input, stack, memo, node count, string length).
//
// Values live in an arena owned by PickleDocument and refer to each other by index, so shared
// and even cyclic references (a list that contains itself) cost nothing and leak nothing. Values
// that cannot change once made (None, bools, small ints, short strs, globals, the empty tuple) are
// made once and shared: the metadata of a large DCP checkpoint repeats the same few keys, class
// names and ints hundreds of thousands of times, and nothing can tell two equal ones apart.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

struct PickleLimits {
    uint64_t max_input_bytes = 1ull << 30; // 1 GiB of pickle
    uint64_t max_nodes = 8u << 20; // values created (bounds memory: ~16-40 B each)
    uint64_t max_stack = 1u << 20; // stack depth, marks included
    uint64_t max_memo = 4u << 20; // memo slots
    uint64_t max_string_bytes = 256u << 20; // one str/bytes value
    uint64_t max_total_string_bytes = 1ull << 30;
    uint64_t max_container_items = 1u << 26; // items in one list/tuple/dict/set
    uint64_t max_total_items = 1u << 26; // container item slots in all (4 bytes each)
};

enum class PickleKind : uint8_t {
    none,
    boolean,
    integer, // fits in int64
    big_integer, // LONG1/LONG4 wider than 64 bits: `text` holds the little-endian two's complement
    floating,
    string, // str (UTF-8 as written)
    bytes, // bytes, bytearray, protocol 2 BINSTRING
    list,
    tuple,
    dict, // items = k0, v0, k1, v1, ... in insertion order (no hashing, duplicates kept)
    set,
    frozenset,
    global, // `text` = module, `name` = qualified name; never resolved
    reduce, // REDUCE: items = [callable, args]
    new_object, // NEWOBJ / NEWOBJ_EX: items = [class, args] or [class, args, kwargs]
    persistent_id, // BINPERSID: items = [pid]
};

std::string_view to_string(PickleKind kind);

inline constexpr uint32_t kNoPickleValue = 0xffffffffu;

// Where a container's items are in a store's pool of value ids: [begin, begin + size), with room
// for `capacity` before they must move to the end of the pool (containers grow by APPENDS /
// SETITEMS batches). See grow_pickle_items (pickle_machine.h).
struct PickleItems {
    uint32_t begin = 0, size = 0, capacity = 0;
};

// One value, as read from the document: a view whose strings and item lists point into the
// document (valid while it lives). The document stores far less than this per value (16 bytes a
// node, items in one pool, text in one arena): a DCP .metadata of 10^5 chunks is ~5 * 10^6 values.
struct PickleValue {
    PickleKind kind = PickleKind::none;
    bool boolean = false;
    int64_t integer = 0;
    double floating = 0;
    std::string_view text; // str / bytes / big_integer content; a global's module
    std::string_view name; // a global's qualified name
    std::span<const uint32_t> items;
    // What pickle adds to an object built by reduce / new_object (an OrderedDict's items arrive
    // through SETITEMS, a list subclass's through APPENDS) and its BUILD state.
    std::span<const uint32_t> dict_items; // k0, v0, k1, v1, ...
    std::span<const uint32_t> list_items;
    uint32_t state = kNoPickleValue;
};

class PickleDocument {
public:
    uint32_t root() const { return m_root; }
    // Throws std::out_of_range for an id outside the document, like vector::at.
    PickleValue at(uint32_t id) const;
    std::size_t size() const { return m_nodes.size(); }
    int protocol() const { return m_protocol; }

    bool is(uint32_t id, PickleKind kind) const { return id < m_nodes.size() && m_nodes[id].kind == kind; }
    // "module.name" of a global, of the callable of a reduce / new_object, or "" otherwise.
    std::string class_name(uint32_t id) const;
    // The value under string key `key` of a dict (or of a dict-like object's SETITEMS), or
    // kNoPickleValue.
    uint32_t dict_get(uint32_t dict, std::string_view key) const;
    // An object's attribute: `key` in its BUILD state dict (or the dict half of a (None, slots)
    // state tuple), or kNoPickleValue.
    uint32_t attribute(uint32_t object, std::string_view key) const;
    // Integer value of an int node; nullopt for anything else.
    std::optional<int64_t> as_int(uint32_t id) const;
    // Elements of a list/tuple; or of torch.Size(tuple) (a reduce whose args hold one tuple).
    std::optional<std::span<const uint32_t>> as_sequence(uint32_t id) const;
    // A str node's text, or nullopt.
    std::optional<std::string_view> as_string(uint32_t id) const;
    // A short, bounded, human-readable rendering (for messages and the GUI).
    std::string describe(uint32_t id, int max_depth = 3) const;

private:
    friend class PickleStore;
    using Range = PickleItems;
    // 16 bytes. Scalars keep their value in `b`; str/bytes/big_integer: text at offset `b`,
    // length `a`; global: m_globals[a]; containers: m_ranges[a]; reduce / new_object also
    // m_objects[b] (or kNoPickleValue) for what SETITEMS / APPENDS / BUILD added.
    struct Node {
        PickleKind kind = PickleKind::none;
        bool boolean = false;
        uint32_t a = 0;
        uint64_t b = 0;
    };
    struct Global {
        uint32_t module_offset = 0, module_size = 0, name_offset = 0, name_size = 0;
    };
    struct Object {
        uint32_t state = kNoPickleValue;
        Range dict_items, list_items;
    };
    std::span<const uint32_t> items_of(const Range& r) const { return {m_pool.data() + r.begin, r.size}; }
    std::string_view text_at(uint64_t offset, uint64_t size) const
    {
        return std::string_view(m_text).substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
    }

    std::vector<Node> m_nodes;
    std::vector<Range> m_ranges;
    std::vector<uint32_t> m_pool;
    std::vector<Global> m_globals;
    std::vector<Object> m_objects;
    std::string m_text;
    uint32_t m_root = kNoPickleValue;
    int m_protocol = 0;
};

// Parses one pickle (up to its STOP opcode; trailing bytes are ignored, as pickle.load does).
// Throws shardscope::Error (invalid_pickle, forbidden_pickle_opcode) naming `display_path` and
// the byte offset of the problem.
PickleDocument parse_pickle(std::string_view data, const std::string& display_path = "<pickle>",
                            const PickleLimits& limits = {});
inline PickleDocument parse_pickle(const uint8_t* data, std::size_t size, const std::string& display_path = "<pickle>",
                                   const PickleLimits& limits = {})
{
    return parse_pickle(std::string_view(reinterpret_cast<const char*>(data), size), display_path, limits);
}

} // namespace shardscope
