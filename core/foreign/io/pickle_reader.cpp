#include "core/foreign/io/pickle_reader.h"
#include "core/foreign/io/pickle_store.h"

#include "core/util/error.h"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace shardscope {

std::string_view to_string(PickleKind kind)
{
    switch (kind) {
    case PickleKind::none: return "None";
    case PickleKind::boolean: return "bool";
    case PickleKind::integer: return "int";
    case PickleKind::big_integer: return "int";
    case PickleKind::floating: return "float";
    case PickleKind::string: return "str";
    case PickleKind::bytes: return "bytes";
    case PickleKind::list: return "list";
    case PickleKind::tuple: return "tuple";
    case PickleKind::dict: return "dict";
    case PickleKind::set: return "set";
    case PickleKind::frozenset: return "frozenset";
    case PickleKind::global: return "global";
    case PickleKind::reduce: return "reduce";
    case PickleKind::new_object: return "object";
    case PickleKind::persistent_id: return "persistent_id";
    }
    return "?";
}

// ---- the parser ------------------------------------------------------------------------------

// Opcodes in, values out through PickleStore (pickle_store.h), which owns the document being built.
class PickleParser : private PickleStore {
public:
    PickleParser(std::string_view data, const std::string& path, const PickleLimits& limits)
        : PickleStore(path, limits), m_data(data)
    {
        reserve_for(data.size());
    }

    PickleDocument run();

private:
    uint32_t make_text(PickleKind kind, uint64_t length)
    {
        if (length > m_limits.max_string_bytes)
            fail("a " + std::string(to_string(kind)) + " of " + std::to_string(length) + " bytes exceeds the " +
                 std::to_string(m_limits.max_string_bytes) + "-byte limit");
        m_string_bytes += length;
        if (m_string_bytes > m_limits.max_total_string_bytes)
            fail("strings total more than the " + std::to_string(m_limits.max_total_string_bytes) + "-byte limit");
        return make_text_value(kind, take(length)); // the view into the input outlives the parse
    }
    void memo_put(uint64_t index) { memo_store(index, top("PUT")); }
    void memo_get(uint64_t index) { push(memo_find(index)); }

    std::string_view take(uint64_t n)
    {
        if (n > m_data.size() - m_pos)
            fail("the data ends inside an opcode's argument (needs " + std::to_string(n) + " bytes, " +
                 std::to_string(m_data.size() - m_pos) + " left)");
        std::string_view out = m_data.substr(m_pos, static_cast<std::size_t>(n));
        m_pos += static_cast<std::size_t>(n);
        return out;
    }
    uint64_t le(std::size_t n)
    {
        const std::string_view b = take(n);
        uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v |= uint64_t(uint8_t(b[i])) << (8 * i);
        return v;
    }
    std::string_view line()
    {
        const auto end = m_data.find('\n', m_pos);
        if (end == std::string_view::npos || end - m_pos > 4096)
            fail("a GLOBAL line is unterminated or longer than 4096 bytes");
        std::string_view out = m_data.substr(m_pos, end - m_pos);
        m_pos = end + 1;
        return out;
    }

    void push(uint32_t id)
    {
        if (m_stack.size() + m_marks.size() >= m_limits.max_stack)
            fail("the stack grows past " + std::to_string(m_limits.max_stack) + " entries (limit)");
        m_stack.push_back(id);
    }
    std::size_t frame_start() const { return m_marks.empty() ? 0 : m_marks.back(); }
    // Where the frame below the last mark starts: APPENDS / SETITEMS / ADDITEMS take their target
    // from just below the mark, which must lie above this.
    std::size_t frame_start_below() const { return m_marks.size() < 2 ? 0 : m_marks[m_marks.size() - 2]; }
    uint32_t pop(const char* opname)
    {
        if (m_stack.size() <= frame_start())
            fail(std::string(opname) + " needs a value but the stack (above the last mark) is empty");
        const uint32_t id = m_stack.back();
        m_stack.pop_back();
        return id;
    }
    uint32_t& top(const char* opname)
    {
        if (m_stack.size() <= frame_start())
            fail(std::string(opname) + " needs a value but the stack (above the last mark) is empty");
        return m_stack.back();
    }
    // The values above the last mark, left on the stack until the caller is done with them (no
    // copy per container): the caller calls drop_mark().
    std::span<const uint32_t> mark_items(const char* opname)
    {
        if (m_marks.empty())
            fail(std::string(opname) + " needs a MARK but there is none");
        const std::size_t start = m_marks.back();
        if (m_stack.size() - start > m_limits.max_container_items)
            fail(std::string(opname) + ": more than " + std::to_string(m_limits.max_container_items) + " items (limit)");
        return {m_stack.data() + start, m_stack.size() - start};
    }
    void drop_mark()
    {
        m_stack.resize(m_marks.back());
        m_marks.pop_back();
    }
    std::string_view m_data;
    std::size_t m_pos = 0;
    uint64_t m_string_bytes = 0;
    std::vector<uint32_t> m_stack;
    std::vector<std::size_t> m_marks;
};

namespace {

const char* forbidden_reason(uint8_t op)
{
    switch (op) {
    case 'i': return "INST (protocol 0/1 class instantiation)";
    case 'o': return "OBJ (protocol 0/1 class instantiation)";
    case 0x82: return "EXT1 (extension registry lookup)";
    case 0x83: return "EXT2 (extension registry lookup)";
    case 0x84: return "EXT4 (extension registry lookup)";
    case 0x97: return "NEXT_BUFFER (out-of-band buffer)";
    case 0x98: return "READONLY_BUFFER (out-of-band buffer)";
    case 'I': return "INT (protocol 0 text opcode)";
    case 'L': return "LONG (protocol 0 text opcode)";
    case 'F': return "FLOAT (protocol 0 text opcode)";
    case 'S': return "STRING (protocol 0 text opcode)";
    case 'V': return "UNICODE (protocol 0 text opcode)";
    case 'P': return "PERSID (protocol 0 text opcode)";
    case 'p': return "PUT (protocol 0 text opcode)";
    case 'g': return "GET (protocol 0 text opcode)";
    default: return nullptr;
    }
}

} // namespace

PickleDocument PickleParser::run()
{
    if (m_data.size() > m_limits.max_input_bytes)
        fail("the pickle is " + std::to_string(m_data.size()) + " bytes, more than the " +
             std::to_string(m_limits.max_input_bytes) + "-byte limit");
    while (true) {
        m_op_pos = m_pos;
        if (m_pos >= m_data.size())
            fail("the data ends before the STOP opcode (truncated)");
        const uint8_t op = static_cast<uint8_t>(m_data[m_pos++]);
        switch (op) {
        case 0x80: { // PROTO
            const auto version = le(1);
            if (version > 5)
                fail("protocol " + std::to_string(version) + " is newer than 5");
            set_protocol(static_cast<int>(version));
            break;
        }
        case 0x95: { // FRAME: a length hint; the opcodes inside are read as usual
            const uint64_t length = le(8);
            if (length > m_data.size() - m_pos)
                fail("a FRAME of " + std::to_string(length) + " bytes runs past the end of the data");
            break;
        }
        case '.': { // STOP
            if (m_stack.size() != 1 || !m_marks.empty())
                fail("STOP with " + std::to_string(m_stack.size()) + " values and " + std::to_string(m_marks.size()) +
                     " marks on the stack (expected exactly one value)");
            return finish(m_stack.back());
        }
        case '(': // MARK
            if (m_stack.size() + m_marks.size() >= m_limits.max_stack)
                fail("the stack grows past " + std::to_string(m_limits.max_stack) + " entries (limit)");
            m_marks.push_back(m_stack.size());
            break;
        case '0': // POP: the top value, or the top mark when nothing is above it
            if (m_stack.size() > frame_start()) {
                m_stack.pop_back();
            } else {
                mark_items("POP");
                drop_mark();
            }
            break;
        case '1':
            mark_items("POP_MARK");
            drop_mark();
            break;
        case '2': push(top("DUP")); break;
        case 'N': push(shared(m_none, {})); break;
        case 0x88: push(shared(m_true, {.kind = PickleKind::boolean, .boolean = true})); break;
        case 0x89: push(shared(m_false, {.kind = PickleKind::boolean, .boolean = false})); break;
        case 'J': push(make_int(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); break;
        case 'K': push(make_int(static_cast<int64_t>(le(1)))); break;
        case 'M': push(make_int(static_cast<int64_t>(le(2)))); break;
        case 0x8a: push(make_long(take(le(1)))); break; // LONG1
        case 0x8b: { // LONG4
            const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
            if (n < 0)
                fail("LONG4 with a negative length");
            if (static_cast<uint64_t>(n) > m_limits.max_string_bytes)
                fail("LONG4 of " + std::to_string(n) + " bytes exceeds the limit");
            push(make_long(take(static_cast<uint64_t>(n))));
            break;
        }
        case 'G': { // BINFLOAT: big-endian IEEE 754 double
            const std::string_view b = take(8);
            uint64_t bits = 0;
            for (int i = 0; i < 8; ++i)
                bits = (bits << 8) | uint8_t(b[static_cast<std::size_t>(i)]);
            push(make({.kind = PickleKind::floating, .b = bits}));
            break;
        }
        case 'X': push(make_text(PickleKind::string, le(4))); break;    // BINUNICODE
        case 0x8c: push(make_text(PickleKind::string, le(1))); break;   // SHORT_BINUNICODE
        case 0x8d: push(make_text(PickleKind::string, le(8))); break;   // BINUNICODE8
        case 'B': push(make_text(PickleKind::bytes, le(4))); break;     // BINBYTES
        case 'C': push(make_text(PickleKind::bytes, le(1))); break;     // SHORT_BINBYTES
        case 0x8e: push(make_text(PickleKind::bytes, le(8))); break;    // BINBYTES8
        case 0x96: push(make_text(PickleKind::bytes, le(8))); break;    // BYTEARRAY8
        case 'U': push(make_text(PickleKind::bytes, le(1))); break;     // SHORT_BINSTRING
        case 'T': { // BINSTRING: signed 4-byte length
            const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
            if (n < 0)
                fail("BINSTRING with a negative length");
            push(make_text(PickleKind::bytes, static_cast<uint64_t>(n)));
            break;
        }
        case ']': push(make_container(PickleKind::list, {})); break;
        case ')': push(m_empty_tuple != kNoPickleValue ? m_empty_tuple : (m_empty_tuple = make_container(PickleKind::tuple, {})));
            break;
        case '}': push(make_container(PickleKind::dict, {})); break;
        case 0x8f: push(make_container(PickleKind::set, {})); break;
        case 'l':
        case 't':
        case 0x91: {
            const char* opname = op == 'l' ? "LIST" : op == 't' ? "TUPLE" : "FROZENSET";
            const uint32_t id = make_container(op == 'l'    ? PickleKind::list
                                               : op == 't' ? PickleKind::tuple
                                                           : PickleKind::frozenset,
                                               mark_items(opname));
            drop_mark();
            push(id);
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
            const std::size_t n = op - 0x84u;
            uint32_t items[3];
            for (std::size_t i = n; i-- > 0;)
                items[i] = pop("TUPLEn");
            push(make_container(PickleKind::tuple, std::span<const uint32_t>(items, n)));
            break;
        }
        case 'd': {
            const auto kv = mark_items("DICT");
            if (kv.size() % 2)
                fail("DICT with an odd number of items (a key without a value)");
            const uint32_t id = make_container(PickleKind::dict, kv);
            drop_mark();
            push(id);
            break;
        }
        case 'a': { // APPEND
            const uint32_t value = pop("APPEND");
            add_list_items(top("APPEND"), {&value, 1}, "APPEND");
            break;
        }
        case 'e': { // APPENDS: the items stay on the stack until the target (below the mark) has them
            const auto items = mark_items("APPENDS");
            if (m_marks.back() <= frame_start_below())
                fail("APPENDS needs a value but the stack (above the last mark) is empty");
            add_list_items(m_stack[m_marks.back() - 1], items, "APPENDS");
            drop_mark();
            break;
        }
        case 's': { // SETITEM
            const uint32_t value = pop("SETITEM");
            const uint32_t key = pop("SETITEM");
            const uint32_t pair[2] = {key, value};
            add_dict_items(top("SETITEM"), pair, "SETITEM");
            break;
        }
        case 'u': { // SETITEMS
            const auto kv = mark_items("SETITEMS");
            if (m_marks.back() <= frame_start_below())
                fail("SETITEMS needs a value but the stack (above the last mark) is empty");
            add_dict_items(m_stack[m_marks.back() - 1], kv, "SETITEMS");
            drop_mark();
            break;
        }
        case 0x90: { // ADDITEMS
            const auto items = mark_items("ADDITEMS");
            if (m_marks.back() <= frame_start_below())
                fail("ADDITEMS needs a value but the stack (above the last mark) is empty");
            add_set_items(m_stack[m_marks.back() - 1], items);
            drop_mark();
            break;
        }
        case 'q': memo_put(le(1)); break;  // BINPUT
        case 'r': memo_put(le(4)); break;  // LONG_BINPUT
        case 0x94: memo_put(memo_count()); break; // MEMOIZE: the next index is the entry count
        case 'h': memo_get(le(1)); break;  // BINGET
        case 'j': memo_get(le(4)); break;  // LONG_BINGET
        case 'c': { // GLOBAL: module and name as text lines; recorded, never resolved
            const std::string_view module = line();
            const std::string_view name = line();
            push(make_global(module, name));
            break;
        }
        case 0x93: { // STACK_GLOBAL
            const uint32_t name = pop("STACK_GLOBAL");
            const uint32_t module = pop("STACK_GLOBAL");
            push(make_global_of(module, name));
            break;
        }
        case 'R': { // REDUCE: record (callable, args); never call
            const uint32_t args = pop("REDUCE");
            const uint32_t callable = pop("REDUCE");
            if (node(args).kind != PickleKind::tuple)
                fail("REDUCE arguments are a " + std::string(to_string(node(args).kind)) + ", not a tuple");
            push(make_container(PickleKind::reduce, {callable, args}));
            break;
        }
        case 0x81: { // NEWOBJ
            const uint32_t args = pop("NEWOBJ");
            const uint32_t cls = pop("NEWOBJ");
            if (node(args).kind != PickleKind::tuple)
                fail("NEWOBJ arguments are a " + std::string(to_string(node(args).kind)) + ", not a tuple");
            push(make_container(PickleKind::new_object, {cls, args}));
            break;
        }
        case 0x92: { // NEWOBJ_EX
            const uint32_t kwargs = pop("NEWOBJ_EX");
            const uint32_t args = pop("NEWOBJ_EX");
            const uint32_t cls = pop("NEWOBJ_EX");
            if (node(args).kind != PickleKind::tuple || node(kwargs).kind != PickleKind::dict)
                fail("NEWOBJ_EX needs a tuple of arguments and a dict of keyword arguments");
            push(make_container(PickleKind::new_object, {cls, args, kwargs}));
            break;
        }
        case 'b': { // BUILD: attach the state to the object, as __setstate__ would (inertly)
            const uint32_t state = pop("BUILD");
            const uint32_t target = top("BUILD");
            if (node(target).kind != PickleKind::reduce && node(target).kind != PickleKind::new_object)
                fail("BUILD on a " + std::string(to_string(node(target).kind)) + ", which is not an object");
            object_of(target).state = state;
            break;
        }
        case 'Q': { // BINPERSID: a reference the loader resolves (torch: a tensor storage)
            const uint32_t pid = pop("BINPERSID");
            push(make_container(PickleKind::persistent_id, {pid}));
            break;
        }
        default:
            if (const char* reason = forbidden_reason(op))
                fail(std::string("opcode ") + reason + " is not allowed by the restricted reader",
                     ProblemKind::forbidden_pickle_opcode);
            {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", op);
                fail(std::string("unknown opcode ") + hex + " (not part of pickle protocols 2-5)",
                     ProblemKind::forbidden_pickle_opcode);
            }
        }
    }
}

PickleDocument parse_pickle(std::string_view data, const std::string& display_path, const PickleLimits& limits)
{
    return PickleParser(data, display_path, limits).run();
}

} // namespace shardscope
