#pragma once
// The pickle virtual machine of the restricted reader: opcodes in, values out through a Store. It
// checks the wire format (protocols 2-5, bounded lengths, forbidden and unknown opcodes) and keeps
// the stack, marks and limits; what a value *is* belongs to the Store:
//   - PickleStore (pickle_store.h) builds the inert PickleDocument tree (parse_pickle);
//   - the DCP metadata reader (core/foreign/internal/dcp_store.h) folds DCP's classes as they complete
//     and reclaims each folded object's subtree, so a .metadata of 10^5 chunks is read in memory
//     proportional to what it describes rather than to its opcodes.
// Values are uint32 handles the Store gives out. A Store provides (all may call fail()):
//   a constructor (display path, limits), reserve_for(input bytes), none(), boolean(b), integer(v),
//   long_bytes(le), floating(bits), text(kind, view),
//   empty_tuple(), container(kind, items), global(module, name), global_of(module, name),
//   reduce(callable, args), new_object(cls, args, kwargs or kNoPickleValue), persistent_id(pid),
//   kind(handle), build(target, state, under) -> the handle that replaces target on the stack
//     (under: the value below the target above the last mark, kNoPickleValue when none: a dict's
//     key when the object is about to be its value),
//   add_dict_items / add_list_items / add_set_items(target, items, opname),
//   dup(handle) -> the handle DUP pushes (a second reference to the same value),
//   memo_store(index, handle), memo_find(index), memo_count(),
//   set_protocol(p), finish(root) -> the result; and members m_limits, m_op_pos and fail().
// Nothing is imported or called: a global is a name, REDUCE / NEWOBJ / BUILD are records.

#include "core/foreign/io/pickle_input.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/util/error.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

// Appends `add` to the items `into` has in `pool`, moving them to the end of the pool (with room to
// double) when they do not fit where they are; `fail(sentence)` (which does not return) past the
// limits. Both stores keep their containers' items this way.
template <class Fail>
void grow_pickle_items(std::vector<uint32_t>& pool, PickleItems& into, std::span<const uint32_t> add,
                       const PickleLimits& limits, const char* opname, Fail&& fail)
{
    if (uint64_t(into.size) + add.size() > limits.max_container_items)
        fail(std::string(opname) + ": a container grows past " + std::to_string(limits.max_container_items) +
             " items (limit)");
    const auto needed = static_cast<uint32_t>(into.size + add.size());
    if (needed > into.capacity) {
        const uint64_t capacity = std::max<uint64_t>(needed, uint64_t(into.capacity) * 2);
        if (pool.size() + capacity > limits.max_total_items)
            fail("more than " + std::to_string(limits.max_total_items) + " container items in all (limit)");
        const auto begin = static_cast<uint32_t>(pool.size());
        pool.resize(pool.size() + capacity);
        std::copy_n(pool.begin() + into.begin, into.size, pool.begin() + begin);
        into.begin = begin;
        into.capacity = static_cast<uint32_t>(capacity);
    }
    std::copy(add.begin(), add.end(), pool.begin() + into.begin + into.size);
    into.size = needed;
}

namespace pickle_detail {

inline const char* forbidden_reason(uint8_t op)
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

} // namespace pickle_detail

template <class Store>
class PickleMachine : protected Store {
public:
    PickleMachine(PickleInput input, const std::string& path, const PickleLimits& limits)
        : Store(path, limits), m_in(std::move(input))
    {
        this->reserve_for(m_in.size());
    }

    auto run();

private:
    using Store::fail;

    uint32_t make_text(PickleKind kind, uint64_t length)
    {
        if (length > this->m_limits.max_string_bytes)
            fail("a " + std::string(to_string(kind)) + " of " + std::to_string(length) + " bytes exceeds the " +
                 std::to_string(this->m_limits.max_string_bytes) + "-byte limit");
        m_string_bytes += length;
        if (m_string_bytes > this->m_limits.max_total_string_bytes)
            fail("strings total more than the " + std::to_string(this->m_limits.max_total_string_bytes) +
                 "-byte limit");
        return this->text(kind, take(length));
    }

    // The next n bytes: valid until the next take (see PickleInput). Every opcode takes: the
    // common case (the bytes at hand) is kept small enough to inline.
    std::string_view take(uint64_t n)
    {
        if (const std::string_view hand = m_in.at_hand(); n <= hand.size()) [[likely]] {
            m_in.skip(n);
            return hand.substr(0, static_cast<std::size_t>(n));
        }
        return take_more(n);
    }
    [[gnu::noinline]] std::string_view take_more(uint64_t n)
    {
        if (n > m_in.left()) [[unlikely]]
            fail("the data ends inside an opcode's argument (needs " + std::to_string(n) + " bytes, " +
                 std::to_string(m_in.left()) + " left)");
        const auto out = m_in.take(n);
        if (!out) [[unlikely]]
            fail("cannot read " + std::to_string(n) + " bytes at byte " + std::to_string(m_in.pos()) +
                     " (an I/O error, or the file shrank while being read)",
                 ProblemKind::unreadable);
        return *out;
    }
    uint64_t le(std::size_t n)
    {
        const std::string_view b = take(n);
        uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v |= uint64_t(uint8_t(b[i])) << (8 * i);
        return v;
    }
    // A text line (GLOBAL's module or name), without its newline.
    std::string line()
    {
        const auto ahead = m_in.peek(std::min<uint64_t>(m_in.left(), 4097));
        const auto end = ahead ? ahead->find('\n') : std::string_view::npos;
        if (end == std::string_view::npos)
            fail("a GLOBAL line is unterminated or longer than 4096 bytes");
        std::string out(ahead->substr(0, end));
        take(end + 1);
        return out;
    }

    void push(uint32_t id)
    {
        if (m_stack.size() + m_marks.size() >= this->m_limits.max_stack) [[unlikely]]
            stack_full();
        m_stack.push_back(id);
    }
    [[noreturn, gnu::noinline]] void stack_full() const
    {
        fail("the stack grows past " + std::to_string(this->m_limits.max_stack) + " entries (limit)");
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
        if (m_stack.size() - start > this->m_limits.max_container_items)
            fail(std::string(opname) + ": more than " + std::to_string(this->m_limits.max_container_items) +
                 " items (limit)");
        return {m_stack.data() + start, m_stack.size() - start};
    }
    void drop_mark()
    {
        m_stack.resize(m_marks.back());
        m_marks.pop_back();
    }
    // The target of APPENDS / SETITEMS / ADDITEMS: the value just below the last mark.
    uint32_t below_mark(const char* opname)
    {
        if (m_marks.back() <= frame_start_below())
            fail(std::string(opname) + " needs a value but the stack (above the last mark) is empty");
        return m_stack[m_marks.back() - 1];
    }

    PickleInput m_in;
    uint64_t m_string_bytes = 0;
    std::vector<uint32_t> m_stack;
    std::vector<std::size_t> m_marks;
};

template <class Store>
auto PickleMachine<Store>::run()
{
    if (m_in.size() > this->m_limits.max_input_bytes)
        fail("the pickle is " + std::to_string(m_in.size()) + " bytes, more than the " +
             std::to_string(this->m_limits.max_input_bytes) + "-byte limit");
    while (true) {
        this->m_op_pos = m_in.pos();
        if (m_in.left() == 0)
            fail("the data ends before the STOP opcode (truncated)");
        const uint8_t op = static_cast<uint8_t>(take(1)[0]);
        switch (op) {
        case 0x80: { // PROTO
            const auto version = le(1);
            if (version > 5)
                fail("protocol " + std::to_string(version) + " is newer than 5");
            this->set_protocol(static_cast<int>(version));
            break;
        }
        case 0x95: { // FRAME: a length hint; the opcodes inside are read as usual
            const uint64_t length = le(8);
            if (length > m_in.left())
                fail("a FRAME of " + std::to_string(length) + " bytes runs past the end of the data");
            break;
        }
        case '.': { // STOP
            if (m_stack.size() != 1 || !m_marks.empty())
                fail("STOP with " + std::to_string(m_stack.size()) + " values and " + std::to_string(m_marks.size()) +
                     " marks on the stack (expected exactly one value)");
            return this->finish(m_stack.back());
        }
        case '(': // MARK
            if (m_stack.size() + m_marks.size() >= this->m_limits.max_stack) [[unlikely]]
                stack_full();
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
        case '2': push(this->dup(top("DUP"))); break;
        case 'N': push(this->none()); break;
        case 0x88: push(this->boolean(true)); break;
        case 0x89: push(this->boolean(false)); break;
        case 'J': push(this->integer(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); break;
        case 'K': push(this->integer(static_cast<int64_t>(le(1)))); break;
        case 'M': push(this->integer(static_cast<int64_t>(le(2)))); break;
        case 0x8a: push(this->long_bytes(take(le(1)))); break; // LONG1
        case 0x8b: { // LONG4
            const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
            if (n < 0)
                fail("LONG4 with a negative length");
            if (static_cast<uint64_t>(n) > this->m_limits.max_string_bytes)
                fail("LONG4 of " + std::to_string(n) + " bytes exceeds the limit");
            push(this->long_bytes(take(static_cast<uint64_t>(n))));
            break;
        }
        case 'G': { // BINFLOAT: big-endian IEEE 754 double
            const std::string_view b = take(8);
            uint64_t bits = 0;
            for (int i = 0; i < 8; ++i)
                bits = (bits << 8) | uint8_t(b[static_cast<std::size_t>(i)]);
            push(this->floating(bits));
            break;
        }
        case 'X': push(make_text(PickleKind::string, le(4))); break; // BINUNICODE
        case 0x8c: push(make_text(PickleKind::string, le(1))); break; // SHORT_BINUNICODE
        case 0x8d: push(make_text(PickleKind::string, le(8))); break; // BINUNICODE8
        case 'B': push(make_text(PickleKind::bytes, le(4))); break; // BINBYTES
        case 'C': push(make_text(PickleKind::bytes, le(1))); break; // SHORT_BINBYTES
        case 0x8e: push(make_text(PickleKind::bytes, le(8))); break; // BINBYTES8
        case 0x96: push(make_text(PickleKind::bytes, le(8))); break; // BYTEARRAY8
        case 'U': push(make_text(PickleKind::bytes, le(1))); break; // SHORT_BINSTRING
        case 'T': { // BINSTRING: signed 4-byte length
            const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
            if (n < 0)
                fail("BINSTRING with a negative length");
            push(make_text(PickleKind::bytes, static_cast<uint64_t>(n)));
            break;
        }
        case ']': push(this->container(PickleKind::list, {})); break;
        case ')': push(this->empty_tuple()); break;
        case '}': push(this->container(PickleKind::dict, {})); break;
        case 0x8f: push(this->container(PickleKind::set, {})); break;
        case 'l':
        case 't':
        case 0x91: {
            const char* opname = op == 'l' ? "LIST" : op == 't' ? "TUPLE" : "FROZENSET";
            const uint32_t id = this->container(op == 'l'       ? PickleKind::list
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
            push(this->container(PickleKind::tuple, std::span<const uint32_t>(items, n)));
            break;
        }
        case 'd': {
            const auto kv = mark_items("DICT");
            if (kv.size() % 2)
                fail("DICT with an odd number of items (a key without a value)");
            const uint32_t id = this->container(PickleKind::dict, kv);
            drop_mark();
            push(id);
            break;
        }
        case 'a': { // APPEND
            const uint32_t value = pop("APPEND");
            this->add_list_items(top("APPEND"), {&value, 1}, "APPEND");
            break;
        }
        case 'e': { // APPENDS: the items stay on the stack until the target (below the mark) has them
            const auto items = mark_items("APPENDS");
            this->add_list_items(below_mark("APPENDS"), items, "APPENDS");
            drop_mark();
            break;
        }
        case 's': { // SETITEM
            const uint32_t value = pop("SETITEM");
            const uint32_t key = pop("SETITEM");
            const uint32_t pair[2] = {key, value};
            this->add_dict_items(top("SETITEM"), pair, "SETITEM");
            break;
        }
        case 'u': { // SETITEMS
            const auto kv = mark_items("SETITEMS");
            this->add_dict_items(below_mark("SETITEMS"), kv, "SETITEMS");
            drop_mark();
            break;
        }
        case 0x90: { // ADDITEMS
            const auto items = mark_items("ADDITEMS");
            this->add_set_items(below_mark("ADDITEMS"), items);
            drop_mark();
            break;
        }
        case 'q': this->memo_store(le(1), top("PUT")); break; // BINPUT
        case 'r': this->memo_store(le(4), top("PUT")); break; // LONG_BINPUT
        case 0x94: this->memo_store(this->memo_count(), top("MEMOIZE")); break; // the next index is the entry count
        case 'h': push(this->memo_find(le(1))); break; // BINGET
        case 'j': push(this->memo_find(le(4))); break; // LONG_BINGET
        case 'c': { // GLOBAL: module and name as text lines; recorded, never resolved
            const std::string module = line();
            const std::string name = line();
            push(this->global(module, name));
            break;
        }
        case 0x93: { // STACK_GLOBAL
            const uint32_t name = pop("STACK_GLOBAL");
            const uint32_t module = pop("STACK_GLOBAL");
            push(this->global_of(module, name));
            break;
        }
        case 'R': { // REDUCE: record (callable, args); never call
            const uint32_t args = pop("REDUCE");
            const uint32_t callable = pop("REDUCE");
            if (this->kind(args) != PickleKind::tuple)
                fail("REDUCE arguments are a " + std::string(to_string(this->kind(args))) + ", not a tuple");
            push(this->reduce(callable, args));
            break;
        }
        case 0x81: { // NEWOBJ
            const uint32_t args = pop("NEWOBJ");
            const uint32_t cls = pop("NEWOBJ");
            if (this->kind(args) != PickleKind::tuple)
                fail("NEWOBJ arguments are a " + std::string(to_string(this->kind(args))) + ", not a tuple");
            push(this->new_object(cls, args, kNoPickleValue));
            break;
        }
        case 0x92: { // NEWOBJ_EX
            const uint32_t kwargs = pop("NEWOBJ_EX");
            const uint32_t args = pop("NEWOBJ_EX");
            const uint32_t cls = pop("NEWOBJ_EX");
            if (this->kind(args) != PickleKind::tuple || this->kind(kwargs) != PickleKind::dict)
                fail("NEWOBJ_EX needs a tuple of arguments and a dict of keyword arguments");
            push(this->new_object(cls, args, kwargs));
            break;
        }
        case 'b': { // BUILD: attach the state to the object, as __setstate__ would (inertly)
            const uint32_t state = pop("BUILD");
            uint32_t& target = top("BUILD");
            if (this->kind(target) != PickleKind::reduce && this->kind(target) != PickleKind::new_object)
                fail("BUILD on a " + std::string(to_string(this->kind(target))) + ", which is not an object");
            const uint32_t under = m_stack.size() >= 2 && m_stack.size() - 2 >= frame_start()
                ? m_stack[m_stack.size() - 2]
                : kNoPickleValue;
            target = this->build(target, state, under);
            break;
        }
        case 'Q': { // BINPERSID: a reference the loader resolves (torch: a tensor storage)
            const uint32_t pid = pop("BINPERSID");
            push(this->persistent_id(pid));
            break;
        }
        default:
            if (const char* reason = pickle_detail::forbidden_reason(op))
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

} // namespace shardscope
