#include "core/util/hashing.h"

#include <openssl/evp.h>
#include <stdexcept>
#include <xxhash.h>

namespace shardscope {

namespace {
std::string to_hex(const unsigned char* bytes, std::size_t size)
{
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(size * 2, '0');
    for (std::size_t i = 0; i < size; ++i) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    return out;
}
} // namespace

struct Sha256::Impl {
    EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : m_impl(std::make_unique<Impl>())
{
    m_impl->ctx = EVP_MD_CTX_new();
    if (!m_impl->ctx || EVP_DigestInit_ex(m_impl->ctx, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("OpenSSL could not initialise SHA-256");
}

Sha256::~Sha256()
{
    EVP_MD_CTX_free(m_impl->ctx);
}

void Sha256::update(const void* data, std::size_t size)
{
    if (size)
        EVP_DigestUpdate(m_impl->ctx, data, size);
}

std::string Sha256::hex_digest()
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(m_impl->ctx, digest, &length);
    EVP_DigestInit_ex(m_impl->ctx, EVP_sha256(), nullptr);
    return to_hex(digest, length);
}

struct Xxh3::Impl {
    XXH3_state_t* state = nullptr;
};

Xxh3::Xxh3() : m_impl(std::make_unique<Impl>())
{
    m_impl->state = XXH3_createState();
    if (!m_impl->state)
        throw std::bad_alloc();
    XXH3_64bits_reset(m_impl->state);
}

Xxh3::~Xxh3()
{
    XXH3_freeState(m_impl->state);
}

void Xxh3::update(const void* data, std::size_t size)
{
    XXH3_64bits_update(m_impl->state, data, size);
}

std::string Xxh3::hex_digest() const
{
    XXH64_hash_t value = XXH3_64bits_digest(m_impl->state);
    XXH64_canonical_t canonical; // big-endian, so the hex reads like the number
    XXH64_canonicalFromHash(&canonical, value);
    return to_hex(canonical.digest, sizeof canonical.digest);
}

std::string sha256_hex(std::span<const std::byte> data)
{
    Sha256 sha;
    sha.update(data.data(), data.size());
    return sha.hex_digest();
}

bool is_hex_digest(const std::string& text, std::size_t length)
{
    if (text.size() != length)
        return false;
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    return true;
}

} // namespace shardscope
