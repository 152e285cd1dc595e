#include "core/storage/sigv4.h"

#include "core/util/hashing.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <span>

namespace shardscope::storage {

namespace {

std::string sha256_of(std::string_view text)
{
    return sha256_hex(std::as_bytes(std::span(text.data(), text.size())));
}

std::string hmac(std::string_view key, std::string_view data)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
         data.size(), out, &length);
    return std::string(reinterpret_cast<const char*>(out), length);
}

std::string hex(std::string_view bytes)
{
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        out += digits[(static_cast<unsigned char>(c) >> 4) & 0xf];
        out += digits[static_cast<unsigned char>(c) & 0xf];
    }
    return out;
}

std::string lower(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return out;
}

// Leading and trailing blanks dropped, inner runs of blanks collapsed to one space.
std::string trimmed(std::string_view value)
{
    std::string out;
    bool blank = false;
    for (const char c : value) {
        if (c == ' ' || c == '\t') {
            blank = !out.empty();
            continue;
        }
        if (blank)
            out += ' ';
        blank = false;
        out += c;
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> sorted_headers(const SigningRequest& request)
{
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& [name, value] : request.headers)
        headers.emplace_back(lower(name), trimmed(value));
    std::sort(headers.begin(), headers.end());
    return headers;
}

std::string signed_header_list(const std::vector<std::pair<std::string, std::string>>& headers)
{
    std::string out;
    for (const auto& [name, value] : headers) {
        if (!out.empty())
            out += ';';
        out += name;
    }
    return out;
}

} // namespace

std::string uri_encode(std::string_view text, bool keep_slash)
{
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out += ch;
        } else {
            out += '%';
            out += digits[c >> 4];
            out += digits[c & 0xf];
        }
    }
    return out;
}

std::string encoded_query(const std::vector<std::pair<std::string, std::string>>& query)
{
    // Sorted by encoded name, then value; a parameter without a value still gets its '='.
    std::vector<std::pair<std::string, std::string>> encoded;
    for (const auto& [name, value] : query)
        encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
    std::sort(encoded.begin(), encoded.end());
    std::string out;
    for (const auto& [name, value] : encoded) {
        if (!out.empty())
            out += '&';
        out += name + '=' + value;
    }
    return out;
}

std::string canonical_request(const SigningRequest& request)
{
    const auto headers = sorted_headers(request);
    std::string out = request.method + '\n' + request.path + '\n' + encoded_query(request.query) + '\n';
    for (const auto& [name, value] : headers)
        out += name + ':' + value + '\n';
    out += '\n' + signed_header_list(headers) + '\n' + request.payload_sha256;
    return out;
}

std::string authorization(const SigningRequest& request, const Credentials& credentials, std::string_view amz_date,
                          std::string_view region, std::string_view service)
{
    const std::string date(amz_date.substr(0, 8));
    const std::string scope = date + '/' + std::string(region) + '/' + std::string(service) + "/aws4_request";
    const std::string to_sign =
        "AWS4-HMAC-SHA256\n" + std::string(amz_date) + '\n' + scope + '\n' + sha256_of(canonical_request(request));
    std::string key = hmac("AWS4" + credentials.secret_access_key, date);
    key = hmac(key, region);
    key = hmac(key, service);
    key = hmac(key, "aws4_request");
    return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + '/' + scope +
        ", SignedHeaders=" + signed_header_list(sorted_headers(request)) + ", Signature=" + hex(hmac(key, to_sign));
}

} // namespace shardscope::storage
