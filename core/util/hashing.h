#pragma once
// Streaming digests: SHA-256 through OpenSSL's EVP (which uses the CPU's SHA extensions) for
// integrity, and XXH3-64 as the fast checksum `verify --fast` relies on. (MD5, which S3 uploads
// carry, is md5_lanes.h's.)

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace shardscope {

using Md5Digest = std::array<std::byte, 16>; // the raw digest (md5_lanes.h works them out)

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* data, std::size_t size);
    std::string hex_digest(); // finishes the digest; the object is then reset for reuse

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

class Xxh3 {
public:
    Xxh3();
    ~Xxh3();
    Xxh3(const Xxh3&) = delete;
    Xxh3& operator=(const Xxh3&) = delete;
    void update(const void* data, std::size_t size);
    std::string hex_digest() const; // 16 lowercase hex digits

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

std::string sha256_hex(std::span<const std::byte> data);
bool is_hex_digest(const std::string& text, std::size_t length);

} // namespace shardscope
