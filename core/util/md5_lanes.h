#pragma once
// MD5 of up to sixteen byte strings at once, each in its own SIMD lane: the Content-MD5 every
// part of an S3 upload carries. MD5 is one chain of dependent steps a string, so OpenSSL's runs
// at about 740 MB/s on a core whatever the vector units could do; sixteen chains side by side
// keep them busy (docs/benchmarks.md, bench_s3). Checked against OpenSSL's MD5 in its test.

#include "core/util/hashing.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace shardscope {

class Md5Lanes {
public:
    static constexpr std::size_t kLanes = 16;

    Md5Lanes();
    // Appends pieces[i] to lane i, for as many lanes as there are pieces (at most kLanes).
    void update(std::span<const std::span<const std::byte>> pieces);
    // Every lane's digest of what it was given; the lanes are then empty again.
    std::array<Md5Digest, kLanes> finish();

private:
    void start();
    // Lane i's next count[i] blocks of 64 bytes from blocks[i]; a lane with none is left as it is.
    void compress(const std::array<const std::byte*, kLanes>& blocks, const std::array<std::size_t, kLanes>& count);

    alignas(64) uint32_t m_state[4][kLanes];
    std::byte m_carry[kLanes][64]; // the part of a block a lane was given and could not hash yet
    std::size_t m_carried[kLanes];
    uint64_t m_bytes[kLanes];
};

} // namespace shardscope
