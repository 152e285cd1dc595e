// MD5 (RFC 1321) sixteen strings at a time. The sixteen lanes are one GCC vector; the kernel is
// compiled twice, for AVX2 (two 8-lane halves, whose chains interleave) and for the SSE2 every
// x86-64 has (four quarters), and chosen at run time as the value kernels are (internal/lanes.h).

#include "core/util/md5_lanes.h"

#include "core/util/internal/lanes.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace shardscope {

namespace {

using Lanes16 = uint32_t __attribute__((vector_size(64)));
static_assert(sizeof(Lanes16) == 4 * Md5Lanes::kLanes);

// floor(|sin(i + 1)| * 2^32), the additive constant of step i.
constexpr uint32_t kSine[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

constexpr int kRotate[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

constexpr std::byte kNoBlock[64] = {}; // what an idle lane reads; its result is thrown away

[[gnu::always_inline]] inline uint32_t little_endian_word(const std::byte* p)
{
    uint32_t w;
    std::memcpy(&w, p, 4);
    if constexpr (std::endian::native == std::endian::big)
        w = __builtin_bswap32(w);
    return w;
}

// Round r of block after block: lane i hashes count[i] blocks from blocks[i], an idle lane keeps
// its state. The 64 steps unroll, so each step's function, word and rotation are constants.
[[gnu::always_inline]] inline void md5_blocks(uint32_t (&state)[4][Md5Lanes::kLanes],
                                              const std::array<const std::byte*, Md5Lanes::kLanes>& blocks,
                                              const std::array<std::size_t, Md5Lanes::kLanes>& count)
{
    constexpr std::size_t L = Md5Lanes::kLanes;
    const std::size_t rounds = *std::max_element(count.begin(), count.end());
    Lanes16 a, b, c, d;
    std::memcpy(&a, state[0], sizeof a);
    std::memcpy(&b, state[1], sizeof b);
    std::memcpy(&c, state[2], sizeof c);
    std::memcpy(&d, state[3], sizeof d);
    for (std::size_t r = 0; r < rounds; ++r) {
        // The block's sixteen words, lane by lane: word w of every lane is one vector.
        alignas(64) uint32_t words[16][L];
        alignas(64) uint32_t live[L];
        for (std::size_t lane = 0; lane < L; ++lane) {
            const bool on = r < count[lane];
            const std::byte* p = on ? blocks[lane] + 64 * r : kNoBlock;
            live[lane] = on ? ~0u : 0u;
            for (int w = 0; w < 16; ++w)
                words[w][lane] = little_endian_word(p + 4 * w);
        }
        Lanes16 m[16], keep;
        std::memcpy(m, words, sizeof m);
        std::memcpy(&keep, live, sizeof keep);
        const Lanes16 a0 = a, b0 = b, c0 = c, d0 = d;
#pragma GCC unroll 64
        for (int i = 0; i < 64; ++i) {
            Lanes16 f;
            int g;
            if (i < 16) {
                f = d ^ (b & (c ^ d));
                g = i;
            } else if (i < 32) {
                f = c ^ (d & (b ^ c));
                g = (5 * i + 1) % 16;
            } else if (i < 48) {
                f = b ^ c ^ d;
                g = (3 * i + 5) % 16;
            } else {
                f = c ^ (b | ~d);
                g = (7 * i) % 16;
            }
            f += a + kSine[i] + m[g];
            const int s = kRotate[i / 16][i % 4];
            a = d;
            d = c;
            c = b;
            b += (f << s) | (f >> (32 - s));
        }
        a = ((a0 + a) & keep) | (a0 & ~keep);
        b = ((b0 + b) & keep) | (b0 & ~keep);
        c = ((c0 + c) & keep) | (c0 & ~keep);
        d = ((d0 + d) & keep) | (d0 & ~keep);
    }
    std::memcpy(state[0], &a, sizeof a);
    std::memcpy(state[1], &b, sizeof b);
    std::memcpy(state[2], &c, sizeof c);
    std::memcpy(state[3], &d, sizeof d);
}

void md5_blocks_sse2(uint32_t (&state)[4][Md5Lanes::kLanes],
                     const std::array<const std::byte*, Md5Lanes::kLanes>& blocks,
                     const std::array<std::size_t, Md5Lanes::kLanes>& count)
{
    md5_blocks(state, blocks, count);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void md5_blocks_avx2(uint32_t (&state)[4][Md5Lanes::kLanes],
                                                 const std::array<const std::byte*, Md5Lanes::kLanes>& blocks,
                                                 const std::array<std::size_t, Md5Lanes::kLanes>& count)
{
    md5_blocks(state, blocks, count);
}
#endif

} // namespace

Md5Lanes::Md5Lanes()
{
    start();
}

void Md5Lanes::start()
{
    constexpr uint32_t kInitial[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    for (int j = 0; j < 4; ++j)
        std::fill(std::begin(m_state[j]), std::end(m_state[j]), kInitial[j]);
    std::fill(std::begin(m_carried), std::end(m_carried), 0);
    std::fill(std::begin(m_bytes), std::end(m_bytes), 0);
}

void Md5Lanes::compress(const std::array<const std::byte*, kLanes>& blocks,
                        const std::array<std::size_t, kLanes>& count)
{
#if defined(__x86_64__)
    if (has_avx2_fma())
        return md5_blocks_avx2(m_state, blocks, count);
#endif
    md5_blocks_sse2(m_state, blocks, count);
}

void Md5Lanes::update(std::span<const std::span<const std::byte>> pieces)
{
    if (pieces.size() > kLanes)
        throw std::invalid_argument("Md5Lanes::update: more pieces than lanes");
    std::array<const std::byte*, kLanes> blocks{};
    std::array<std::size_t, kLanes> count{}, used{};
    // First the blocks that a lane's carried bytes and the start of its piece make whole.
    bool whole = false;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        m_bytes[i] += pieces[i].size();
        if (m_carried[i] && m_carried[i] + pieces[i].size() >= 64) {
            used[i] = 64 - m_carried[i];
            std::memcpy(m_carry[i] + m_carried[i], pieces[i].data(), used[i]);
            m_carried[i] = 0;
            blocks[i] = m_carry[i];
            count[i] = 1;
            whole = true;
        }
    }
    if (whole)
        compress(blocks, count);
    // Then every whole block of the pieces in place; what is left over is carried.
    count.fill(0);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const std::span<const std::byte> rest = pieces[i].subspan(used[i]);
        if (rest.empty())
            continue;
        if (m_carried[i]) { // still short of a block
            std::memcpy(m_carry[i] + m_carried[i], rest.data(), rest.size());
            m_carried[i] += rest.size();
            continue;
        }
        blocks[i] = rest.data();
        count[i] = rest.size() / 64;
        m_carried[i] = rest.size() % 64;
        std::memcpy(m_carry[i], rest.data() + 64 * count[i], m_carried[i]);
    }
    compress(blocks, count);
}

std::array<Md5Digest, Md5Lanes::kLanes> Md5Lanes::finish()
{
    // The padding: 0x80, zeros to 56 bytes past a block boundary, the length in bits (little-endian).
    alignas(64) std::byte padded[kLanes][128] = {};
    std::array<const std::byte*, kLanes> blocks{};
    std::array<std::size_t, kLanes> count{};
    for (std::size_t i = 0; i < kLanes; ++i) {
        const std::size_t n = m_carried[i];
        std::memcpy(padded[i], m_carry[i], n);
        padded[i][n] = std::byte{0x80};
        count[i] = n < 56 ? 1 : 2;
        const uint64_t bits = m_bytes[i] * 8;
        for (int k = 0; k < 8; ++k)
            padded[i][64 * count[i] - 8 + k] = static_cast<std::byte>(bits >> (8 * k));
        blocks[i] = padded[i];
    }
    compress(blocks, count);
    std::array<Md5Digest, kLanes> out;
    for (std::size_t i = 0; i < kLanes; ++i)
        for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 4; ++k)
                out[i][4 * j + k] = static_cast<std::byte>(m_state[j][i] >> (8 * k));
    start();
    return out;
}

} // namespace shardscope
