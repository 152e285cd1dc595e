// Decoding DCP's .metadata (a pickled Metadata object) into plain DcpMetadata, through the
// restricted pickle machine (io/pickle_machine.h): nothing is imported or called.
//
// A large FSDP job's .metadata describes 10^5 chunks in millions of opcodes, most of them the
// wrappers around a few numbers (a ChunkStorageMetadata object, its state dict, two torch.Size
// reductions, their argument tuples). Building the whole tree first (PickleDocument) costs ~50 bytes
// per opcode. So this Store folds each DCP object into a compact record when BUILD completes it,
// and gives the object's subtree back at once when nothing else can reach it: memory follows what
// the metadata describes. "Nothing else can reach it" is exact, not a guess:
//   - a memo entry: a first, stackless scan of the opcodes (scan_memo_use) finds which memo
//     entries are ever fetched; only those are kept, and a kept one pins what it holds;
//   - the stack: only the object itself is above the values older than it (DUP pins);
//   - an older container or object changed since the object was made (tracked as "touches").
// Kept values (strings, globals, ints, floats, tuples of ints, the records) are never given back;
// scratch values (containers, objects) are, from the object being folded to the end.

#include "core/foreign/dcp.h"

#include "core/foreign/io/pickle_machine.h"
#include "core/util/error.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace shardscope {

uint64_t torch_dtype_size(std::string_view dtype)
{
    static const std::map<std::string_view, uint64_t> sizes = {
        {"float32", 4},     {"float", 4},           {"float64", 8},         {"double", 8},    {"float16", 2},
        {"half", 2},        {"bfloat16", 2},        {"int64", 8},           {"long", 8},      {"int32", 4},
        {"int", 4},         {"int16", 2},           {"short", 2},           {"int8", 1},      {"uint8", 1},
        {"bool", 1},        {"uint16", 2},          {"uint32", 4},          {"uint64", 8},    {"complex64", 8},
        {"cfloat", 8},      {"complex128", 16},     {"cdouble", 16},        {"complex32", 4}, {"float8_e4m3fn", 1},
        {"float8_e5m2", 1}, {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1},
    };
    const auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

namespace {

// The memo indices stored so far, with a byte for each (never 0): distinct ones count (MEMOIZE's
// index is that count, as in CPython); dense indices in a vector, others in a map.
class MemoBytes {
public:
    // Sets `index`'s byte; true when the index is new.
    bool set(uint64_t index, uint8_t byte)
    {
        if (index == m_dense.size() && m_sparse.empty()) { // the next index (MEMOIZE's): appended
            m_dense.push_back(byte);
            ++m_count;
            return true;
        }
        const bool fresh = get(index) == 0;
        if (index < m_dense.size() || index < 2 * m_count + 4096) {
            if (index >= m_dense.size())
                m_dense.resize(static_cast<std::size_t>(index) + 1, 0);
            m_dense[index] = byte;
            if (!fresh && !m_sparse.empty())
                m_sparse.erase(index); // now dense: in one place only
        } else {
            m_sparse[index] = byte;
        }
        m_count += fresh;
        return fresh;
    }
    // ORs `bits` into the index's byte (a new index gets them).
    void mark(uint64_t index, uint8_t bits)
    {
        if (index < m_dense.size() && m_dense[index]) [[likely]]
            m_dense[index] |= bits;
        else
            set(index, get(index) | bits);
    }
    uint8_t get(uint64_t index) const
    {
        if (index < m_dense.size() && m_dense[index])
            return m_dense[index];
        if (m_sparse.empty()) // (the dense vector may have grown past an index stored sparse)
            return 0;
        const auto it = m_sparse.find(index);
        return it == m_sparse.end() ? 0 : it->second;
    }
    uint64_t count() const { return m_count; }

private:
    std::vector<uint8_t> m_dense;
    std::unordered_map<uint64_t, uint8_t> m_sparse;
    uint64_t m_count = 0;
};

// The memo entries a GET reads (a few thousand of a DCP .metadata's millions): open addressing,
// since every GET of pass two looks one up.
class MemoHandles {
public:
    void set(uint64_t index, uint32_t handle)
    {
        if (2 * (m_size + 1) > m_slots.size())
            rehash(std::max<std::size_t>(64, 2 * m_slots.size()));
        Slot& s = find(index);
        m_size += s.index == kEmpty;
        s = {index, handle};
    }
    uint32_t get(uint64_t index) const
    {
        if (m_slots.empty())
            return kNoPickleValue;
        const Slot& s = const_cast<MemoHandles*>(this)->find(index);
        return s.index == index ? s.handle : kNoPickleValue;
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    struct Slot {
        uint64_t index = kEmpty;
        uint32_t handle = kNoPickleValue;
    };
    Slot& find(uint64_t index)
    {
        const std::size_t mask = m_slots.size() - 1;
        for (std::size_t i = (index * 0x9e3779b97f4a7c15ull) >> 20 & mask;; i = (i + 1) & mask)
            if (m_slots[i].index == index || m_slots[i].index == kEmpty)
                return m_slots[i];
    }
    void rehash(std::size_t capacity)
    {
        std::vector<Slot> old(capacity);
        old.swap(m_slots);
        for (const Slot& s : old)
            if (s.index != kEmpty)
                find(s.index) = s;
    }
    std::vector<Slot> m_slots;
    std::size_t m_size = 0;
};

// What the first pass finds: the memo indices stored (kStored) and those a GET reads (kFetched).
// The second pass marks the indices it has stored (kStoredAgain), to count them as the first did:
// MEMOIZE's index is that count.
constexpr uint8_t kStored = 0x01;
constexpr uint8_t kFetched = 0x80;
constexpr uint8_t kStoredAgain = 0x40;
struct MemoUse {
    MemoBytes entries;
    uint64_t stored_again = 0;
};

// How pass one steps over an opcode: its fixed argument's bytes, and what it does.
enum class ScanAs : uint8_t { unknown, plain, text, signed_text, memoize, put, get, global, stop };
struct OpShape {
    ScanAs as = ScanAs::unknown;
    uint8_t head = 0; // bytes of its fixed argument (a text's length, for a text)
};
constexpr std::array<OpShape, 256> scan_shapes()
{
    std::array<OpShape, 256> t{};
    constexpr uint8_t kNoArgument[] = {'(',  '0', '1',  '2',  'N',  0x88, 0x89, ']', ')', '}',
                                       0x8f, 'l', 't',  0x91, 0x85, 0x86, 0x87, 'd', 'a', 'e',
                                       's',  'u', 0x90, 0x93, 'R',  0x81, 0x92, 'b', 'Q'};
    for (const uint8_t op : kNoArgument)
        t[op] = {ScanAs::plain, 0};
    t[0x80] = t['K'] = {ScanAs::plain, 1}; // PROTO, BININT1
    t['M'] = {ScanAs::plain, 2};
    t['J'] = {ScanAs::plain, 4};
    t[0x95] = t['G'] = {ScanAs::plain, 8}; // FRAME (its opcodes are read as usual), BINFLOAT
    t[0x8a] = t[0x8c] = t['C'] = t['U'] = {ScanAs::text, 1};
    t['X'] = t['B'] = {ScanAs::text, 4};
    t[0x8b] = t['T'] = {ScanAs::signed_text, 4};
    t[0x8d] = t[0x8e] = t[0x96] = {ScanAs::text, 8};
    t[0x94] = {ScanAs::memoize, 0};
    t['q'] = {ScanAs::put, 1};
    t['r'] = {ScanAs::put, 4};
    t['h'] = {ScanAs::get, 1};
    t['j'] = {ScanAs::get, 4};
    t['c'] = {ScanAs::global, 0};
    t['.'] = {ScanAs::stop, 0};
    return t;
}
constexpr std::array<OpShape, 256> kScanShapes = scan_shapes();

// The first pass: which memo entries are ever read. The memo's indices follow from the opcodes
// alone (MEMOIZE, BINPUT, LONG_BINPUT, the GETs), so this skips each opcode's argument and keeps
// no stack. It stops quietly at anything it does not know: the second pass, which runs the
// machine and its checks over the same bytes, reports that very opcode before it could need
// what came after. Opcodes are read straight from the bytes at hand (this pass sees every one of
// a 10^5-chunk file's millions of opcodes); a str's text is skipped, not read.
MemoUse scan_memo_use(PickleInput in, const PickleLimits& limits)
{
    MemoUse use;
    while (in.left() > 0) {
        // At least one whole opcode head (an opcode and an 8-byte argument) at hand, unless the
        // input ends first.
        if (in.at_hand().size() < 9 && !in.peek(std::min<uint64_t>(in.left(), 9)))
            return use; // unreadable: the second pass says so
        const std::string_view b = in.at_hand();
        const bool to_the_end = b.size() >= in.left();
        const auto* bytes = reinterpret_cast<const uint8_t*>(b.data());
        std::size_t i = 0; // the next opcode; may pass the end of b (a text skipped)
        while (i < b.size()) {
            const OpShape shape = kScanShapes[bytes[i]];
            if (shape.as == ScanAs::global)
                break; // two lines: read from the input itself, below
            if (i + 1 + shape.head > b.size()) {
                if (to_the_end)
                    return use; // truncated inside an argument
                break; // read on from this opcode
            }
            uint64_t n = 0; // the argument, little-endian
            for (std::size_t k = 0; k < shape.head; ++k)
                n |= uint64_t(bytes[i + 1 + k]) << (8 * k);
            i += 1 + shape.head;
            switch (shape.as) {
            case ScanAs::plain: break;
            case ScanAs::signed_text:
                if (n >= 0x80000000u)
                    return use;
                [[fallthrough]];
            case ScanAs::text:
                if (n > in.left() - i)
                    return use; // a text past the end
                i += n;
                break;
            case ScanAs::memoize: n = use.entries.count(); [[fallthrough]];
            case ScanAs::put:
                use.entries.mark(n, kStored);
                if (use.entries.count() > limits.max_memo)
                    return use;
                break;
            case ScanAs::get:
                if (use.entries.get(n))
                    use.entries.mark(n, kFetched);
                break;
            case ScanAs::stop:
            case ScanAs::unknown:
            case ScanAs::global: return use;
            }
        }
        if (i > 0) {
            in.skip(i); // (i <= in.left(): checked for every text)
            continue;
        }
        // Nothing stepped over: the opcode at hand is a GLOBAL (any other returned or moved on).
        if (bytes[0] != 'c')
            return use;
        in.skip(1); // GLOBAL: two lines
        for (int line = 0; line < 2; ++line) {
            const auto ahead = in.peek(std::min<uint64_t>(in.left(), 4097));
            const auto end = ahead ? ahead->find('\n') : std::string_view::npos;
            if (end == std::string_view::npos)
                return use;
            in.skip(end + 1);
        }
    }
    return use;
}

// What a folded value is. Records are permanent values with kind new_object.
enum class Fold : uint8_t { none, dims, chunk, tensor, bytes_item, properties, index, storage };

// Handles: scratch slots below kInline; non-negative ints below 2^30 inline; permanent values above.
constexpr uint32_t kInline = 1u << 30;
constexpr uint32_t kKept = 1u << 31;

struct Value {
    PickleKind kind = PickleKind::none;
    Fold fold = Fold::none;
    bool boolean = false;
    uint32_t a = 0;
    uint64_t b = 0;
};
// An object's fields in the scratch pool, from its Value's `a`.
enum ObjectField : uint32_t {
    cls_field,
    args_field,
    kwargs_field,
    state_field,
    dict_field,
    list_field,
    folded_field,
    kObjectFields
};

struct StorageRecord {
    uint32_t file = kNoPickleValue; // a str handle
    bool transformed = false;
    uint64_t offset = 0, length = 0;
};
struct TensorRecord {
    uint32_t properties = kNoPickleValue, size = kNoPickleValue;
    uint32_t chunks_begin = 0, chunks_count = 0; // in m_tensor_chunks
};

struct Folded {
    Value value;
    std::string problem; // why it does not fold, when asked
};

struct Decoded {
    int protocol = 0;
    uint32_t root = kNoPickleValue;
};

// The field and class names of DCP's objects, looked up by str handle (DcpStore::name_text).
enum class Name : uint8_t {
    offsets,
    sizes,
    fqn,
    offset,
    relative_path,
    length,
    transform_descriptors,
    dtype,
    properties,
    size,
    chunks,
    ChunkStorageMetadata,
    MetadataIndex,
    StorageInfo,
    TensorProperties,
    TensorStorageMetadata,
    BytesStorageMetadata,
    kCount
};
constexpr std::string_view kNameTexts[] = {
    "offsets",
    "sizes",
    "fqn",
    "offset",
    "relative_path",
    "length",
    "transform_descriptors",
    "dtype",
    "properties",
    "size",
    "chunks",
    "ChunkStorageMetadata",
    "MetadataIndex",
    "_StorageInfo",
    "TensorProperties",
    "TensorStorageMetadata",
    "BytesStorageMetadata",
};
static_assert(std::size(kNameTexts) == static_cast<std::size_t>(Name::kCount));

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
    uint32_t build(uint32_t target, uint32_t state, uint32_t under)
    {
        if (!is_scratch(target))
            fail("BUILD on an object already built and read (a second BUILD)");
        touch(target); // an older object, built now, may hold newer values
        object_field(target, state_field) = state;
        Folded f = fold(target, false);
        if (f.value.fold == Fold::none)
            return target;
        if (f.value.fold == Fold::tensor && m_first_tensors)
            note_first_tensor(under, f.value.a);
        const uint32_t record = keep(f.value);
        object_field(target, folded_field) = record;
        reclaim(target);
        return record;
    }
    // Appends a tensor record's tensor and its chunks' offsets and sizes to `out`, calling
    // `each_chunk(chunk, its offsets)` for every chunk before it is added (where its storage is
    // filled in). False, with the tensor not added, past kMaxDcpDimensionValues in all.
    template <class EachChunk>
    bool append_tensor(DcpMetadata& out, std::string_view fqn, const TensorRecord& t, EachChunk&& each_chunk) const
    {
        DcpTensor tensor;
        tensor.fqn = fqn;
        tensor.dtype = std::string(global_name(value(t.properties).a));
        tensor.size = dims(t.size);
        tensor.first_chunk = static_cast<uint32_t>(out.chunks.size());
        tensor.chunk_count = t.chunks_count;
        const std::size_t numbers_at = out.numbers.size();
        for (uint32_t c = 0; c < t.chunks_count; ++c) {
            const Value record = value(m_tensor_chunks[t.chunks_begin + c]);
            const Value offsets = value(record.a), sizes = value(static_cast<uint32_t>(record.b));
            if (out.numbers.size() + offsets.a + sizes.a > kMaxDcpDimensionValues) {
                out.chunks.resize(tensor.first_chunk);
                out.numbers.resize(numbers_at);
                return false;
            }
            DcpChunk chunk;
            chunk.offsets_at = static_cast<uint32_t>(out.numbers.size());
            chunk.offsets_rank = static_cast<uint16_t>(offsets.a);
            out.numbers.insert(out.numbers.end(), m_numbers.begin() + offsets.b,
                               m_numbers.begin() + offsets.b + offsets.a);
            chunk.sizes_at = static_cast<uint32_t>(out.numbers.size());
            chunk.sizes_rank = static_cast<uint16_t>(sizes.a);
            out.numbers.insert(out.numbers.end(), m_numbers.begin() + sizes.b, m_numbers.begin() + sizes.b + sizes.a);
            each_chunk(chunk, std::span<const int64_t>(m_numbers).subspan(offsets.b, offsets.a));
            out.chunks.push_back(chunk);
        }
        out.tensors.push_back(std::move(tensor));
        return true;
    }
    // The first tensors read, named by the str under each on the stack (a dict is pickled key,
    // then value: state_dict_metadata's key), handed to m_first_tensors once kDcpFirstTensors of
    // them are, so that a viewer lists them while the rest of a long .metadata is read. Only a
    // preview: the decode itself names the tensors by the dict they end up in.
    void note_first_tensor(uint32_t under, uint32_t record)
    {
        if (under == kNoPickleValue || value(under).kind != PickleKind::string)
            return;
        m_first_named.emplace_back(under, record);
        if (m_first_named.size() < kDcpFirstTensors)
            return;
        DcpMetadata first;
        first.pickle_protocol = m_protocol;
        for (const auto& [key, t] : m_first_named)
            if (first.chunks.size() + m_tensors[t].chunks_count > kDcpFirstChunks ||
                !append_tensor(first, text_of(value(key)), m_tensors[t], [](DcpChunk&, std::span<const int64_t>) {}))
                break; // (a crafted file can give 256 tensors millions of chunks)
        const auto call = std::move(m_first_tensors);
        m_first_tensors = nullptr; // once
        m_first_named = {};
        if (!first.tensors.empty())
            call(first);
    }

    // Gives back `object` and everything made after it, if nothing can reach them any more.
    void reclaim(uint32_t object)
    {
        if (m_pinned > object)
            return;
        const uint64_t made = m_scratch[object].b;
        const auto first = std::lower_bound(m_touches.begin(), m_touches.end(), made,
                                            [](const Touch& t, uint64_t m) { return t.made < m; });
        if (first != m_touches.end() && first->slot < object)
            return; // an older container or object was changed since: it may hold something newer
        m_pool.resize(m_scratch[object].a);
        m_scratch.resize(object);
        while (!m_touches.empty() && m_touches.back().slot >= object)
            m_touches.pop_back();
    }

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
    uint32_t attribute_of_text(uint32_t object, uint32_t key) const
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
    // A dims handle for a torch.Size, a tuple or a list of non-negative ints, or kNoPickleValue.
    uint32_t dims_of(uint32_t h)
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
    std::vector<uint64_t> dims(uint32_t dims_handle) const
    {
        const Value v = value(dims_handle);
        std::vector<uint64_t> out(v.a);
        for (uint32_t i = 0; i < v.a; ++i)
            out[i] = static_cast<uint64_t>(m_numbers[v.b + i]);
        return out;
    }

    // Why `h` is not what was wanted: "'x' is <rendering>, not a str".
    std::string is_not(std::string_view what, uint32_t h, std::string_view wanted) const
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
    Folded fold(uint32_t object, bool explain)
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
            }
            m_storages.push_back(s);
            out.value = {.kind = PickleKind::new_object,
                         .fold = Fold::storage,
                         .a = static_cast<uint32_t>(m_storages.size() - 1)};
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
    void describe(uint32_t h, int depth, std::string& out) const
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

// Runs the machine over the bytes with the DcpStore, then reads the Metadata it left.
class Decoder : public PickleMachine<DcpStore> {
public:
    Decoder(PickleInput input, const std::string& path, const PickleLimits& limits, MemoUse use,
            DcpFirstTensors first_tensors)
        : PickleMachine<DcpStore>(std::move(input), path, limits), m_shown(path)
    {
        m_use = std::move(use);
        m_first_tensors = std::move(first_tensors);
    }

    [[noreturn]] void bad(const std::string& what) const
    {
        throw Error(ProblemKind::invalid_manifest, m_shown + ": unexpected DCP metadata: " + what, m_shown);
    }
    void count()
    {
        if (++m_items > kMaxDcpItems)
            bad("more than " + std::to_string(kMaxDcpItems) + " tensors, chunks and storage entries (limit)");
    }
    std::string str(uint32_t h, const std::string& what) const
    {
        std::string_view s;
        if (!string_of(h, s))
            bad(is_not(what, h, "not a str"));
        return std::string(s);
    }

    DcpMetadata decode()
    {
        const Decoded decoded = run();
        m_use = {}; // pass one's marks are done with too
        DcpMetadata out;
        out.pickle_protocol = decoded.protocol;
        const uint32_t root = decoded.root;
        const std::string_view cls = class_name_of(root);
        if (!cls.ends_with("Metadata"))
            bad("the pickled root is " + describe(root, 1) + ", not a torch.distributed.checkpoint Metadata");
        const uint32_t sdm = attribute(root, "state_dict_metadata");
        if (kind(sdm) != PickleKind::dict)
            bad("state_dict_metadata is missing or not a dict");
        // storage_data: {MetadataIndex(fqn, offset, index): _StorageInfo(relative_path, offset, length)},
        // matched to the chunks by (fqn, offsets) and to the bytes items by (fqn, no offsets); the
        // last entry of a key wins, as in the dict it was. Sorted by the key's hash (16 bytes an
        // entry) rather than hashed into nodes.
        struct Entry {
            uint64_t hash = 0;
            uint32_t index = 0; // the MetadataIndex record
            uint32_t storage = 0; // in m_storages
        };
        std::vector<Entry> entries;
        const uint32_t sd = attribute(root, "storage_data");
        if (sd != kNoPickleValue && kind(sd) == PickleKind::dict) {
            const auto kv = items(sd);
            entries.reserve(kv.size() / 2);
            for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
                count();
                const uint32_t index = resolve(kv[i]), info = resolve(kv[i + 1]);
                if (value(index).fold != Fold::index) {
                    std::string_view fqn;
                    if (!string_of(attribute(index, Name::fqn), fqn))
                        bad(is_not("a storage_data key's fqn", attribute(index, Name::fqn), "not a str"));
                    bad("storage_data['" + std::string(fqn) + "']" + why_not(index));
                }
                if (value(info).fold != Fold::storage)
                    bad("storage_data['" + std::string(text_of(value(value(index).a))) + "']" + why_not(info));
                entries.push_back({key_hash(std::hash<std::string_view>()(index_fqn(index)), index_offsets(index),
                                            has_offsets(index)),
                                   index, value(info).a});
            }
        } else if (sd != kNoPickleValue && kind(sd) != PickleKind::none) {
            bad("storage_data is " + describe(sd, 1) + ", not a dict");
        }
        std::stable_sort(entries.begin(), entries.end(),
                         [](const Entry& a, const Entry& b) { return a.hash < b.hash; });
        // The storage record of a key, or -1: the last entry written of those equal to it.
        auto find = [&](std::string_view fqn, uint64_t fqn_hash, std::span<const int64_t> offsets,
                        bool with_offsets) -> int64_t {
            const uint64_t h = key_hash(fqn_hash, offsets, with_offsets);
            auto it = std::upper_bound(entries.begin(), entries.end(), h,
                                       [](uint64_t x, const Entry& e) { return x < e.hash; });
            while (it != entries.begin() && (it - 1)->hash == h) {
                --it;
                const auto o = index_offsets(it->index);
                if (index_fqn(it->index) == fqn && has_offsets(it->index) == with_offsets &&
                    std::equal(o.begin(), o.end(), offsets.begin(), offsets.end()))
                    return it->storage;
            }
            return -1;
        };
        // Files: those of the surviving entries (the last of each key: of equal keys, which have
        // equal hashes, the last in a run of the stable sort), sorted.
        auto same_key = [&](const Entry& a, const Entry& b) {
            const auto x = index_offsets(a.index), y = index_offsets(b.index);
            return index_fqn(a.index) == index_fqn(b.index) && has_offsets(a.index) == has_offsets(b.index) &&
                std::equal(x.begin(), x.end(), y.begin(), y.end());
        };
        std::vector<uint32_t> file_handles;
        for (std::size_t i = 0; i < entries.size(); ++i) {
            bool survives = true;
            for (std::size_t j = i + 1; survives && j < entries.size() && entries[j].hash == entries[i].hash; ++j)
                survives = !same_key(entries[i], entries[j]);
            if (survives)
                file_handles.push_back(m_storages[entries[i].storage].file);
        }
        std::sort(file_handles.begin(), file_handles.end()); // most share a handle: few distinct texts
        file_handles.erase(std::unique(file_handles.begin(), file_handles.end()), file_handles.end());
        std::sort(file_handles.begin(), file_handles.end(),
                  [&](uint32_t a, uint32_t b) { return text_of(value(a)) < text_of(value(b)); });
        file_handles.erase(std::unique(file_handles.begin(), file_handles.end(),
                                       [&](uint32_t a, uint32_t b) { return text_of(value(a)) == text_of(value(b)); }),
                           file_handles.end());
        std::unordered_map<uint32_t, int32_t> file_index; // str handle -> index in out.files
        for (const uint32_t h : file_handles) {
            file_index.emplace(h, int32_t(out.files.size()));
            out.files.emplace_back(text_of(value(h)));
        }
        // A long file name is not shared: equal text may have another handle.
        auto file_of = [&](uint32_t h) -> int32_t {
            if (const auto it = file_index.find(h); it != file_index.end())
                return it->second;
            const auto it = std::lower_bound(out.files.begin(), out.files.end(), text_of(value(h)));
            return int32_t(it - out.files.begin());
        };

        const auto kv = items(sdm);
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            count();
            const std::string fqn = str(kv[i], "a state_dict_metadata key");
            const uint32_t md = resolve(kv[i + 1]);
            const Fold fold_kind = value(md).fold;
            // A BytesStorageMetadata has no fields: Python 3.11+ pickles it without a BUILD.
            if (fold_kind == Fold::bytes_item || is_class(md, Name::BytesStorageMetadata)) {
                DcpBytesItem item{fqn, {}};
                if (const int64_t s = find(fqn, std::hash<std::string_view>()(fqn), {}, false); s >= 0) {
                    const StorageRecord& r = m_storages[s];
                    item.storage = {.present = true,
                                    .file = std::string(text_of(value(r.file))),
                                    .offset = r.offset,
                                    .length = r.length,
                                    .transformed = r.transformed};
                }
                out.bytes.push_back(std::move(item));
                continue;
            }
            if (fold_kind != Fold::tensor) {
                if (is_class(md, Name::TensorStorageMetadata))
                    bad("'" + fqn + "'" + why_not(md));
                bad("'" + fqn + "' is described by " + describe(md, 1) + ", not Tensor/BytesStorageMetadata");
            }
            const TensorRecord& t = m_tensors[value(md).a];
            if (out.chunks.empty()) { // all chunks of all tensors, and their numbers (no regrowth)
                std::size_t numbers = 0;
                for (const uint32_t c : m_tensor_chunks)
                    numbers += value(value(c).a).a + value(static_cast<uint32_t>(value(c).b)).a;
                out.chunks.reserve(m_tensor_chunks.size());
                out.numbers.reserve(numbers);
            }
            const uint64_t fqn_hash = std::hash<std::string_view>()(fqn);
            // (a tensor shared by many keys is copied for each: its chunks count, and so do their
            // dimensions)
            const bool added = append_tensor(out, fqn, t, [&](DcpChunk& chunk, std::span<const int64_t> offsets) {
                count();
                if (const int64_t s = find(fqn, fqn_hash, offsets, true); s >= 0) {
                    const StorageRecord& r = m_storages[s];
                    chunk.file = file_of(r.file);
                    chunk.offset = r.offset;
                    chunk.length = r.length;
                    chunk.transformed = r.transformed;
                }
            });
            if (!added)
                bad("more than " + std::to_string(kMaxDcpDimensionValues) + " chunk offsets and sizes in all (limit)");
        }

        if (std::string_view v; string_of(attribute(root, "version"), v))
            out.info["version"] = std::string(v);
        const uint32_t sm = attribute(root, "storage_meta");
        for (const char* f : {"checkpoint_id", "save_id", "load_id"})
            if (const uint32_t x = attribute(sm, f); x != kNoPickleValue && kind(x) != PickleKind::none)
                out.info[std::string("storage_meta.") + f] = describe(x, 1);
        if (const uint32_t pd = attribute(root, "planner_data"); pd != kNoPickleValue && kind(pd) != PickleKind::none)
            out.info["planner_data"] = describe(pd, 1);
        return out;
    }

private:
    // Why an object is not the record it should be: its fields' fault, or none left when they
    // changed after it was built (a later SETITEMS on its state).
    std::string why_not(uint32_t object)
    {
        std::string problem = fold(object, true).problem;
        return problem.empty() ? " is " + describe(object, 1) + ", whose fields changed after it was built" : problem;
    }

    std::string_view index_fqn(uint32_t index) const { return text_of(value(value(index).a)); }
    bool has_offsets(uint32_t index) const { return static_cast<uint32_t>(value(index).b) != kNoPickleValue; }
    std::span<const int64_t> index_offsets(uint32_t index) const
    {
        if (!has_offsets(index))
            return {};
        const Value d = value(static_cast<uint32_t>(value(index).b));
        return std::span<const int64_t>(m_numbers).subspan(d.b, d.a);
    }
    static uint64_t key_hash(uint64_t fqn_hash, std::span<const int64_t> offsets, bool with_offsets)
    {
        uint64_t h = fqn_hash ^ (with_offsets ? 0x9e3779b97f4a7c15ull : 0);
        for (const int64_t d : offsets)
            h = (h ^ static_cast<uint64_t>(d)) * 0x100000001b3ull;
        return h;
    }

    std::string m_shown;
    uint64_t m_items = 0;
};

} // namespace

namespace {

void check_size(std::size_t bytes, const std::string& display_path)
{
    if (bytes > kMaxDcpMetadataBytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": " + std::to_string(bytes) + " bytes exceed the " +
                        std::to_string(kMaxDcpMetadataBytes) + "-byte limit for DCP metadata",
                    display_path);
}

} // namespace

DcpMetadata decode_dcp_metadata(std::string_view bytes, const std::string& display_path, const PickleLimits& limits,
                                DcpFirstTensors first_tensors)
{
    check_size(bytes.size(), display_path);
    MemoUse use = scan_memo_use(PickleInput(bytes), limits);
    return Decoder(PickleInput(bytes), display_path, limits, std::move(use), std::move(first_tensors)).decode();
}

DcpMetadata decode_dcp_metadata_file(int dirfd, const std::string& name, const std::string& display_path,
                                     DcpFirstTensors first_tensors)
{
    fsutil::OpenedFile file = fsutil::open_small_file(dirfd, name, kMaxDcpMetadataBytes, display_path);
    const int fd = file.fd.get();
    const PickleInput::ReadAt read = [fd](void* buffer, std::size_t size, uint64_t offset) {
        return fsutil::read_exact(fd, buffer, size, offset);
    };
    // Read twice through a window (pass one, then the fold): the file's bytes are never all resident.
    MemoUse use = scan_memo_use(PickleInput(read, file.size), PickleLimits{});
    return Decoder(PickleInput(read, file.size), display_path, PickleLimits{}, std::move(use), std::move(first_tensors))
        .decode();
}

} // namespace shardscope
