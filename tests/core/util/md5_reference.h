#pragma once
// The MD5 the lanes are checked against: OpenSSL's, one string at a time.

#include "core/util/hashing.h"

#include <openssl/evp.h>
#include <vector>

inline shardscope::Md5Digest openssl_md5(const std::vector<std::byte>& data)
{
    shardscope::Md5Digest out{};
    unsigned int length = 0;
    EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &length, EVP_md5(), nullptr);
    return out;
}
