#pragma once
// An S3 client for what checkpoints need: ranged reads, listings, single and multipart uploads
// and deletes, against AWS S3 or an S3-compatible store (Ceph RGW, MinIO). Requests are signed
// here (sigv4.h) and sent with libcurl (internal/http.h). Failures a store is known for (503
// SlowDown, 500, a timeout, a reset connection) are retried with bounded exponential backoff;
// what is still failing after that becomes one Error(remote_error) naming the URL and the
// server's answer, never a credential.

#include "core/storage/location.h"
#include "core/storage/sigv4.h"
#include "core/util/hashing.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace shardscope::storage {

struct RetryPolicy {
    int attempts = 6; // in all, the first included
    int first_delay_ms = 100; // doubled after each failure, with jitter
    int max_delay_ms = 4000;
};

struct S3Config {
    std::string endpoint; // "https://s3.us-east-1.amazonaws.com", "http://127.0.0.1:7480"
    std::string region = "us-east-1";
    bool path_style = true; // https://host/bucket/key; otherwise https://bucket.host/key
    bool verify_tls = true;
    // Requests are sent unsigned: a public bucket, or a plain HTTP(S) server answering range
    // requests (bucket "" and the URL's path as the key).
    bool anonymous = false;
    Credentials credentials;
    RetryPolicy retry;
    int connect_timeout_s = 10;
    int stall_timeout_s = 30;
};

// The configuration the AWS tools would use: the endpoint `endpoint` if not empty, else
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (path-style addressing), else AWS's regional endpoint
// (virtual-hosted); the region from AWS_REGION, AWS_DEFAULT_REGION or the profile's config;
// credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
// profile (AWS_PROFILE, default "default") of AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials.
// SHARDSCOPE_S3_ADDRESSING=path|virtual overrides the addressing style. Throws
// Error(invalid_argument) for a malformed endpoint or when no credentials are found.
S3Config s3_config_from_environment(const std::string& endpoint = {});

struct ObjectInfo {
    std::string key;
    uint64_t size = 0;
    std::string etag;
};

// One folder level of a bucket (a listing with the "/" delimiter): the objects directly beneath
// the prefix and the common prefixes of those deeper ("run/step-1/").
struct S3Level {
    std::vector<ObjectInfo> objects;
    std::vector<std::string> prefixes;
};

struct MultipartUpload {
    std::string key;
    std::string upload_id;
};

class S3Client {
public:
    explicit S3Client(S3Config config);
    const S3Config& config() const { return m_config; }

    // nullopt when there is no such object.
    std::optional<ObjectInfo> head(const std::string& bucket, const std::string& key) const;
    // Exactly out.size() bytes from `offset`; a shorter or longer answer is an error. `etag`: the
    // one the object was listed with, if known: asked for (If-Match), so that an object replaced
    // since is said as such (remote_error), not read as other bytes. `listed_size`, if known: an
    // answer whose Content-Range gives the object another size is refused the same way (a store
    // without ETags, or one that ignores If-Match).
    void read(const std::string& bucket, const std::string& key, uint64_t offset, std::span<std::byte> out,
              const std::string& etag = {}, std::optional<uint64_t> listed_size = std::nullopt) const;
    // Bytes [offset, offset + size) handed to `consume` in order as they arrive, in one request
    // (nothing is buffered beyond the connection's own): a connection lost part-way is resumed
    // from the byte reached, as often as the retry policy allows, If-Match the first answer's ETag
    // (or `etag`, as read's, from the first request on). Returns the bytes handed over: `size`, or
    // fewer when `consume` returned false. Errors as read(), `listed_size` too.
    uint64_t stream(const std::string& bucket, const std::string& key, uint64_t offset, uint64_t size,
                    const std::function<bool(const char* bytes, std::size_t n)>& consume, const std::string& etag = {},
                    std::optional<uint64_t> listed_size = std::nullopt) const;
    // The whole object, refused past `max_bytes`; nullopt when there is no such object.
    std::optional<std::string> get(const std::string& bucket, const std::string& key, std::size_t max_bytes) const;
    // Every object under `prefix` (a "dir/" prefix lists what is beneath it), at most
    // `max_keys` of them (more is an error naming the prefix), sorted by key.
    std::vector<ObjectInfo> list(const std::string& bucket, const std::string& prefix, std::size_t max_keys) const;
    // One level beneath `prefix` (which ends in "/" or is ""): at most `max_keys` objects and
    // folders together, in the server's order.
    S3Level list_level(const std::string& bucket, const std::string& prefix, std::size_t max_keys) const;

    // A single PUT with the body's MD5, which the server checks; up to 1 MiB its SHA-256 is signed
    // (and checked) too. `md5`: the body's, where the caller worked it out already (Md5Lanes).
    void put(const std::string& bucket, const std::string& key, std::span<const std::byte> body,
             const std::optional<Md5Digest>& md5 = std::nullopt) const;
    // Writes bytes [at, at + into.size()) of a body that is not in memory into `into`, or throws;
    // asked again from 0 when a send is retried.
    using BodyRead = std::function<void(uint64_t at, std::span<std::byte> into)>;
    // A PUT of `size` bytes that `read` gives as they go out (a rank file read into the
    // connection's own buffer, never held whole), with their MD5 worked out beforehand, which the
    // server checks; their SHA-256 is not signed (UNSIGNED-PAYLOAD).
    void put(const std::string& bucket, const std::string& key, uint64_t size, const BodyRead& read,
             const Md5Digest& md5) const;
    std::string create_multipart(const std::string& bucket, const std::string& key) const;
    // The part's ETag. Parts are numbered from 1; all but the last at least 5 MiB (S3's rule). The
    // part's bytes and MD5 go as put's do.
    std::string upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id, int part,
                            uint64_t size, const BodyRead& read, const Md5Digest& md5) const;
    void complete_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                            const std::vector<std::string>& part_etags) const;
    void abort_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id) const;
    std::vector<MultipartUpload> list_multipart_uploads(const std::string& bucket, const std::string& prefix) const;
    // The same, but nullopt when the server refuses the listing itself (403: credentials that may
    // read objects but not list uploads; 501: a store without the call); any other failure throws.
    std::optional<std::vector<MultipartUpload>> list_multipart_uploads_if_allowed(const std::string& bucket,
                                                                                  const std::string& prefix) const;
    // Deleting a missing object is not an error (S3's own rule).
    void remove(const std::string& bucket, const std::string& key) const;
    // Creating a bucket this account already owns is not an error.
    void create_bucket(const std::string& bucket) const;

    // How messages name an object: "s3://bucket/key", or the URL when the bucket is "".
    std::string object_name(const std::string& bucket, const std::string& key) const;

private:
    struct Call;
    struct Answer;
    Answer send(const Call& call) const;
    void put(Call call) const;
    bool pin_to(const std::string& etag, std::vector<std::pair<std::string, std::string>>& headers) const;
    void after_refused_precondition(const std::string& bucket, const std::string& key, const std::string& etag,
                                    bool conditional, const std::string& what) const;
    S3Level list_pages(const std::string& bucket, const std::string& prefix, const std::string& delimiter,
                       std::size_t max_keys) const;
    std::optional<std::vector<MultipartUpload>> list_uploads(const std::string& bucket, const std::string& prefix,
                                                             bool refusal_is_none) const;
    S3Config m_config;
    std::string m_scheme; // "http" or "https"
    std::string m_host; // host[:port] of the endpoint
    // Set once the server refused an If-Match of the very ETag its HEAD gives (conditional reads
    // that misfire): from then on this client's reads are not conditional. Shared by copies.
    std::shared_ptr<std::atomic<bool>> m_conditions_misfire = std::make_shared<std::atomic<bool>>(false);
};

// The "s3://bucket/key" a message names an object by.
std::string object_url(const std::string& bucket, const std::string& key);

} // namespace shardscope::storage
