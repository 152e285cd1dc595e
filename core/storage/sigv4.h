#pragma once
// AWS Signature Version 4 for S3, computed here rather than by libcurl: curl's CURLOPT_AWS_SIGV4
// (7.88 in Debian 12) leaves x-amz-content-sha256 out of what it signs, signs a bare `?uploads`
// as `uploads` without its `=`, and does not sort the query, so multipart uploads and listings
// fail against a strict server. The rules followed are those of AWS's "Signature Calculations
// for the Authorization Header" (S3 API reference), checked against its worked examples.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::storage {

struct Credentials {
    std::string access_key_id;
    std::string secret_access_key; // never printed: no message of storage/ includes it
    std::string session_token; // empty unless temporary credentials
};

struct SigningRequest {
    std::string method; // GET, PUT, ...
    std::string path; // the request path as sent, already URI-encoded ("/bucket/key%20x")
    std::vector<std::pair<std::string, std::string>> query; // decoded names and values, any order
    std::vector<std::pair<std::string, std::string>> headers; // every header to sign, host included
    std::string payload_sha256; // hex digest of the body, or "UNSIGNED-PAYLOAD"
};

// RFC 3986 percent-encoding of everything but the unreserved characters, as SigV4 wants it;
// '/' is kept when `keep_slash` (object keys in a path), encoded otherwise (query values).
std::string uri_encode(std::string_view text, bool keep_slash);

// The canonical request: method, path, sorted encoded query, sorted lower-case headers with
// trimmed values, the signed header list and the payload hash, one per line.
std::string canonical_request(const SigningRequest& request);

// The Authorization header's value for `request` at `amz_date` (YYYYMMDDTHHMMSSZ).
std::string authorization(const SigningRequest& request, const Credentials& credentials, std::string_view amz_date,
                          std::string_view region, std::string_view service = "s3");

// The query string in the order and encoding the signature used, for the request line.
std::string encoded_query(const std::vector<std::pair<std::string, std::string>>& query);

} // namespace shardscope::storage
