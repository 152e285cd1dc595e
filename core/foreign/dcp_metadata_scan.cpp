// Pass one of the DCP .metadata decoder (dcp_metadata.cpp): which memo entries a GET ever reads,
// so that the store keeps only those (internal/dcp_metadata.h).

#include "core/foreign/internal/dcp_metadata.h"
#include "core/foreign/io/pickle_input.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

namespace shardscope::foreign::dcp {

namespace {

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

} // namespace

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

} // namespace shardscope::foreign::dcp
