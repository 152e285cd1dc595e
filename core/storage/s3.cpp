#include "core/storage/s3.h"

#include "core/util/cancel.h"

#include "core/storage/internal/http.h"
#include "core/storage/location.h"
#include "core/storage/internal/s3_answers.h"
#include "core/storage/internal/xml.h"
#include "core/util/error.h"
#include "core/util/hashing.h"
#include "core/util/printable.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <random>
#include <set>
#include <thread>

namespace shardscope::storage {

struct S3Client::Call {
    std::string what; // how errors name the request ("LIST s3://b/run/"); "" for METHOD and object
    std::string object; // the object or prefix its errors' path names ("s3://b/run/"); "" for the object
    std::string method;
    std::string bucket;
    std::string key;
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::pair<std::string, std::string>> headers;
    std::span<const std::byte> body;
    BodyRead source; // instead of `body`: HttpRequest::source
    uint64_t source_size = 0;
    std::span<std::byte> into;
    std::size_t max_body = 1 << 20;
    std::function<bool(const char*, std::size_t)> sink; // HttpRequest::sink and sink_check
    std::function<std::string(const HttpResponse&)> sink_check;
};

struct S3Client::Answer {
    long status = 0;
    std::map<std::string, std::string> headers;
    std::string text;
    std::size_t received = 0;
    // A streamed read: the body bytes handed to the sink, whether it asked to stop, and why the
    // connection was lost part-way (status 0; the caller resumes, not send(): those bytes are used).
    uint64_t streamed = 0;
    bool stopped = false;
    std::string lost;
};

namespace {

constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr std::size_t kMaxListingPage = 16 << 20; // 1000 keys of 1 KiB each, with room to spare
// A whole object where part of it was asked for: the server does not do range requests, which
// reading in place needs (the object would have to be downloaded whole for every read).
constexpr const char* kIgnoresRange =
    "the server ignores the Range header (it answers 200 with the whole object, not 206 with the part "
    "asked for), and a checkpoint is read in place only from a server that answers range requests";
// HTTP 412 to a read asked If-Match: the object was replaced since it was listed or first read.
constexpr const char* kChanged =
    "the object changed while it was read (its ETag is no longer the one it was listed or first read with)";
// Open uploads followed under one prefix: 10^5 (100 pages) is far more than any checkpoint's.
constexpr std::size_t kMaxOpenUploads = 100'000;
constexpr std::size_t kSignedBodyLimit = 1 << 20;
// A stream lost part-way after at least this much of it counts as a first loss again.
constexpr uint64_t kResumeProgress = 1 << 20;
constexpr int kSilentAttempts = 2; // a server that said nothing to this many attempts in a row is not asked again

std::string amz_now()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[17];
    std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &tm);
    return text;
}

// The Content-MD5 header's value: `md5` if given, else the body's worked out here.
std::string base64_md5(std::span<const std::byte> body, const std::optional<Md5Digest>& md5)
{
    Md5Digest digest{};
    if (md5) {
        digest = *md5;
    } else {
        unsigned int length = 0;
        EVP_Digest(body.data(), body.size(), reinterpret_cast<unsigned char*>(digest.data()), &length, EVP_md5(),
                   nullptr);
    }
    unsigned char out[32] = {};
    EVP_EncodeBlock(out, reinterpret_cast<const unsigned char*>(digest.data()), static_cast<int>(digest.size()));
    return reinterpret_cast<const char*>(out);
}

std::string getenv_or(const char* name, std::string fallback = {})
{
    const char* value = std::getenv(name);
    return value && *value ? std::string(value) : fallback;
}

// key = value lines of one [section] of an AWS-style INI file; empty when the file or the
// section is missing.
std::map<std::string, std::string> ini_section(const std::string& file, const std::string& section)
{
    std::map<std::string, std::string> out;
    FILE* f = std::fopen(file.c_str(), "re");
    if (!f)
        return out;
    char line[4096];
    bool in_section = false;
    const auto trim = [](std::string_view s) {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
            s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
            s.remove_suffix(1);
        return s;
    };
    for (int lines = 0; lines < 10000 && std::fgets(line, sizeof line, f); ++lines) {
        const std::string_view text = trim(line);
        if (text.empty() || text[0] == '#' || text[0] == ';')
            continue;
        if (text.front() == '[') {
            in_section = text.back() == ']' && trim(text.substr(1, text.size() - 2)) == section;
            continue;
        }
        const std::size_t eq = text.find('=');
        if (in_section && eq != std::string_view::npos)
            out[std::string(trim(text.substr(0, eq)))] = std::string(trim(text.substr(eq + 1)));
    }
    std::fclose(f);
    return out;
}

std::string home_file(const char* env, const char* relative)
{
    if (std::string path = getenv_or(env); !path.empty())
        return path;
    return getenv_or("HOME", "/root") + "/" + relative;
}

// "http://host:port" -> scheme and authority; refuses a path, credentials or another scheme.
std::pair<std::string, std::string> split_endpoint(const std::string& endpoint)
{
    std::string scheme, rest;
    if (endpoint.starts_with("https://"))
        scheme = "https", rest = endpoint.substr(8);
    else if (endpoint.starts_with("http://"))
        scheme = "http", rest = endpoint.substr(7);
    else
        throw Error(ProblemKind::invalid_argument, "the S3 endpoint is not an http:// or https:// URL");
    while (!rest.empty() && rest.back() == '/')
        rest.pop_back();
    // Never echoed: an endpoint with user:password@ in it would put a secret on the terminal.
    if (rest.empty() || rest.find_first_of("/@?# ") != std::string::npos || !valid_authority(rest))
        throw Error(ProblemKind::invalid_argument,
                    "the S3 endpoint must be scheme://host[:port], without a path or credentials");
    // curl leaves a default port out of the Host header it sends; the signed host must match.
    const std::string default_port = scheme == "https" ? ":443" : ":80";
    if (rest.ends_with(default_port))
        rest.resize(rest.size() - default_port.size());
    return {scheme, rest};
}

bool retryable(long status)
{
    return status == 0 || status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
        status == 504;
}

uint64_t parse_u64(std::string_view text, bool& ok)
{
    uint64_t value = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    ok = ec == std::errc() && p == text.data() + text.size() && !text.empty();
    return value;
}

// A key whose part below the prefix has an empty, "." or ".." component: a name no reader may
// join to a path, and one that HTTP clients would rewrite.
bool escapes(std::string_view rest)
{
    std::size_t start = 0;
    while (start <= rest.size()) {
        std::size_t end = rest.find('/', start);
        if (end == std::string_view::npos)
            end = rest.size();
        const std::string_view part = rest.substr(start, end - start);
        if (part == "." || part == ".." || (part.empty() && end != rest.size()))
            return true;
        start = end + 1;
    }
    return false;
}

// "bytes FIRST-LAST/TOTAL": FIRST, LAST and TOTAL (0 for "*"), or false.
bool parse_content_range(std::string_view text, uint64_t& first, uint64_t& last, uint64_t& total)
{
    if (!text.starts_with("bytes "))
        return false;
    text.remove_prefix(6);
    const std::size_t dash = text.find('-'), slash = text.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash)
        return false;
    bool ok_first = false, ok_last = false, ok_total = true;
    first = parse_u64(text.substr(0, dash), ok_first);
    last = parse_u64(text.substr(dash + 1, slash - dash - 1), ok_last);
    total = text.substr(slash + 1) == "*" ? 0 : parse_u64(text.substr(slash + 1), ok_total);
    return ok_first && ok_last && ok_total && first <= last && (total == 0 || last < total);
}

// Why an answer's bytes are not those of the range asked.
std::string wrong_range(long status, const std::string& content_range, const std::string& range)
{
    return "the server answered HTTP " + std::to_string(status) + " with the bytes \"" + printable(content_range, 80) +
        "\" to a request for " + range;
}

// Why an object is not the one listed, by its size.
std::string resized(uint64_t listed, uint64_t now)
{
    return "the object changed since it was listed (listed with " + std::to_string(listed) + " bytes, now " +
        std::to_string(now) + ")";
}

std::string unquoted(std::string etag)
{
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
        etag = etag.substr(1, etag.size() - 2);
    return etag;
}

// Whether a read may ask for the object of this ETag (If-Match): not a weak one (a compressing
// proxy's), which matches nothing, nor one that is not RFC 9110's entity-tag text in ASCII (a
// hostile listing's, which would otherwise put its control characters into a request header).
bool pinnable(const std::string& etag)
{
    return !etag.empty() && etag.size() <= 256 && !etag.starts_with("W/") &&
        std::all_of(etag.begin(), etag.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return u >= 0x21 && u < 0x7f && u != '"';
        });
}

} // namespace

std::string server_said(long status, const std::string& body)
{
    std::string out = "HTTP " + std::to_string(status);
    if (xml_acceptable(body)) {
        if (auto code = xml_text(body, "Code"))
            out += " " + printable(*code, 64);
        if (auto message = xml_text(body, "Message"); message && !message->empty())
            out += " (" + printable(*message, 160) + ")";
    }
    return out;
}

ListingPage read_listing_page(std::string_view body, std::string_view prefix, const std::string& what,
                              const std::string& object)
{
    if (!xml_acceptable(body))
        throw Error(ProblemKind::remote_error, what + ": the listing declares a document type, which is refused",
                    object);
    // An answer that is no listing at all (a proxy's page, garbage) is the server's fault, not
    // a prefix with nothing beneath it.
    if (xml_elements(body, "ListBucketResult").empty())
        throw Error(ProblemKind::remote_error, what + ": the answer is not a listing (no ListBucketResult)", object);
    ListingPage page;
    for (const std::string_view entry : xml_elements(body, "Contents")) {
        const auto key = xml_text(entry, "Key");
        const auto size = xml_text(entry, "Size");
        bool ok = false;
        const uint64_t bytes = size ? parse_u64(*size, ok) : 0;
        if (!key || !ok)
            throw Error(ProblemKind::remote_error, what + ": a listed object has no valid key or size", object);
        if (!key->starts_with(prefix) || escapes(std::string_view(*key).substr(prefix.size())))
            throw Error(ProblemKind::remote_error,
                        what + ": the listing names " + printable(*key) +
                            ", which is not a plain name under the prefix",
                        object);
        page.objects.push_back({.key = *key, .size = bytes, .etag = unquoted(xml_text(entry, "ETag").value_or(""))});
    }
    for (const std::string_view entry : xml_elements(body, "CommonPrefixes")) {
        const auto common = xml_text(entry, "Prefix");
        if (!common || !common->starts_with(prefix) || common->size() <= prefix.size() + 1 || !common->ends_with('/') ||
            common->ends_with("//") ||
            escapes(std::string_view(*common).substr(prefix.size(), common->size() - prefix.size() - 1)))
            throw Error(ProblemKind::remote_error,
                        what + ": the listing names the folder " + printable(common.value_or("")) +
                            ", which is not a plain name under the prefix",
                        object);
        page.prefixes.push_back(*common);
    }
    page.truncated = xml_text(body, "IsTruncated").value_or("false") == "true";
    if (page.truncated) {
        page.next_token = xml_text(body, "NextContinuationToken").value_or("");
        if (page.next_token.empty() || page.next_token.size() > 4096)
            throw Error(ProblemKind::remote_error, what + ": a truncated listing without a usable continuation token",
                        object);
    }
    return page;
}

UploadsPage read_uploads_page(std::string_view body, std::string_view prefix, const std::string& what,
                              const std::string& object)
{
    if (!xml_acceptable(body))
        throw Error(ProblemKind::remote_error, what + ": the listing declares a document type, which is refused",
                    object);
    if (xml_elements(body, "ListMultipartUploadsResult").empty())
        throw Error(ProblemKind::remote_error, what + ": the answer is not a listing (no ListMultipartUploadsResult)",
                    object);
    UploadsPage page;
    for (const std::string_view entry : xml_elements(body, "Upload")) {
        auto key = xml_text(entry, "Key");
        auto id = xml_text(entry, "UploadId");
        // Only uploads beneath the prefix, named as a listing's keys must be, are ever aborted:
        // another run's are not this one's.
        if (key && id && !id->empty() && id->size() <= 1024 && key->starts_with(prefix) &&
            !escapes(std::string_view(*key).substr(prefix.size())))
            page.uploads.push_back({.key = std::move(*key), .upload_id = std::move(*id)});
    }
    page.truncated = xml_text(body, "IsTruncated").value_or("false") == "true";
    if (page.truncated) {
        page.next_key_marker = xml_text(body, "NextKeyMarker").value_or("");
        page.next_upload_id_marker = xml_text(body, "NextUploadIdMarker").value_or("");
        if (page.next_key_marker.size() > 4096 || page.next_upload_id_marker.size() > 4096)
            throw Error(ProblemKind::remote_error, what + ": a truncated listing with markers past 4 KiB", object);
    }
    return page;
}

std::string object_url(const std::string& bucket, const std::string& key)
{
    return "s3://" + bucket + "/" + printable(key);
}

S3Config s3_config_from_environment(const std::string& endpoint)
{
    S3Config config;
    const std::string profile = getenv_or("AWS_PROFILE", "default");
    const auto settings = ini_section(home_file("AWS_CONFIG_FILE", ".aws/config"),
                                      profile == "default" ? "default" : "profile " + profile);
    config.region = getenv_or("AWS_REGION", getenv_or("AWS_DEFAULT_REGION", ""));
    if (config.region.empty())
        config.region = settings.contains("region") ? settings.at("region") : "us-east-1";
    config.endpoint = endpoint.empty() ? getenv_or("AWS_ENDPOINT_URL_S3", getenv_or("AWS_ENDPOINT_URL")) : endpoint;
    if (config.endpoint.empty()) {
        config.endpoint = "https://s3." + config.region + ".amazonaws.com";
        config.path_style = false;
    }
    (void)split_endpoint(config.endpoint);
    if (const std::string style = getenv_or("SHARDSCOPE_S3_ADDRESSING"); style == "virtual")
        config.path_style = false;
    else if (style == "path")
        config.path_style = true;
    config.credentials.access_key_id = getenv_or("AWS_ACCESS_KEY_ID");
    config.credentials.secret_access_key = getenv_or("AWS_SECRET_ACCESS_KEY");
    config.credentials.session_token = getenv_or("AWS_SESSION_TOKEN");
    if (config.credentials.access_key_id.empty() || config.credentials.secret_access_key.empty()) {
        const auto file = ini_section(home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"), profile);
        const auto value = [&](const char* k) { return file.contains(k) ? file.at(k) : std::string(); };
        config.credentials = {.access_key_id = value("aws_access_key_id"),
                              .secret_access_key = value("aws_secret_access_key"),
                              .session_token = value("aws_session_token")};
    }
    if (config.credentials.access_key_id.empty() || config.credentials.secret_access_key.empty())
        throw Error(ProblemKind::invalid_argument,
                    "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a "
                    "profile in ~/.aws/credentials (profile \"" +
                        printable(profile, 64) + "\" has none)");
    return config;
}

S3Client::S3Client(S3Config config) : m_config(std::move(config))
{
    RetryPolicy& r = m_config.retry;
    if (r.attempts < 1 || r.first_delay_ms < 1 || r.max_delay_ms < r.first_delay_ms || r.max_delay_ms > 600'000)
        throw Error(ProblemKind::invalid_argument,
                    "an S3 retry policy needs at least 1 attempt and delays of 1 ms "
                    "to 10 minutes, the first no longer than the last");
    std::tie(m_scheme, m_host) = split_endpoint(m_config.endpoint);
}

namespace {

// A retry's backoff, cut short when the operation is cancelled (send then says so).
void wait_unless_cancelled(std::chrono::milliseconds total)
{
    const auto until = std::chrono::steady_clock::now() + total;
    while (!operation_cancelled() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
}

} // namespace

std::string S3Client::object_name(const std::string& bucket, const std::string& key) const
{
    return bucket.empty() ? m_scheme + "://" + m_host + "/" + printable(key) : object_url(bucket, key);
}

S3Client::Answer S3Client::send(const Call& call) const
{
    const std::string host = m_config.path_style || call.bucket.empty() ? m_host : call.bucket + "." + m_host;
    std::string path = "/";
    if (m_config.path_style && !call.bucket.empty())
        path += call.bucket + (call.key.empty() ? "" : "/");
    path += uri_encode(call.key, true);
    const std::string query = encoded_query(call.query);
    const std::string url = m_scheme + "://" + host + path + (query.empty() ? "" : "?" + query);
    // A small body's SHA-256 is signed (and checked by the server). A large one's is not: on a
    // loaded host the server hashing every byte again costs more than the transfer; its MD5
    // (Content-MD5) is checked instead, and the mirror reads every object back by SHA-256. A body
    // read as it is sent (`source`) cannot be hashed before it is signed: never signed.
    const std::string payload_hash = call.source ? "UNSIGNED-PAYLOAD"
        : call.body.empty()                      ? kEmptySha256
        : call.body.size() > kSignedBodyLimit    ? "UNSIGNED-PAYLOAD"
                                                 : sha256_hex(std::as_bytes(call.body));
    const std::string object = call.object.empty() ? object_name(call.bucket, call.key) : call.object;
    const std::string what = call.what.empty() ? call.method + " " + object : call.what;

    std::minstd_rand jitter(static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
    int delay = m_config.retry.first_delay_ms;
    int silent = 0; // attempts in a row to which the server said nothing at all
    for (int attempt = 1;; ++attempt) {
        if (operation_cancelled()) // the request stopped, or the next not sent
            throw Error(ProblemKind::cancelled, what + ": cancelled");
        SigningRequest signing{.method = call.method,
                               .path = path,
                               .query = call.query,
                               .headers = call.headers,
                               .payload_sha256 = payload_hash};
        const std::string date = amz_now();
        signing.headers.emplace_back("host", host);
        signing.headers.emplace_back("x-amz-date", date);
        signing.headers.emplace_back("x-amz-content-sha256", payload_hash);
        if (!m_config.credentials.session_token.empty())
            signing.headers.emplace_back("x-amz-security-token", m_config.credentials.session_token);
        HttpRequest request{.method = call.method,
                            .url = url,
                            .headers = signing.headers,
                            .body = call.body,
                            .source = call.source,
                            .source_size = call.source_size,
                            .verify_tls = m_config.verify_tls,
                            .connect_timeout_s = m_config.connect_timeout_s,
                            .stall_timeout_s = m_config.stall_timeout_s,
                            .into = call.into,
                            .max_body = call.max_body,
                            .sink = call.sink,
                            .sink_check = call.sink_check};
        std::erase_if(request.headers, [](const auto& h) { return h.first == "host"; }); // curl sets it from the URL
        if (m_config.anonymous)
            request.headers = call.headers;
        else
            request.headers.emplace_back("Authorization",
                                         authorization(signing, m_config.credentials, date, m_config.region));
        HttpResponse response = http_exchange(request);
        if (response.untrusted) // asking again would meet the same certificate
            throw Error(ProblemKind::remote_error,
                        what + ": the server's TLS certificate is not trusted (" +
                            printable(response.transport_error, 200) +
                            "); for a server you trust, --no-verify-tls (verify_tls=False in Python) reads "
                            "it without the check",
                        object);
        if (!response.refused.empty())
            throw Error(ProblemKind::remote_error, what + ": " + response.refused, object);
        if (!response.malformed.empty())
            throw Error(ProblemKind::remote_error,
                        what + ": the answer from " + m_scheme + "://" + host + " is not valid HTTP (" +
                            printable(response.malformed, 200) + ")",
                        object);
        const bool got = response.status >= 200 && response.status < 300;
        const bool ranged =
            std::any_of(call.headers.begin(), call.headers.end(), [](const auto& h) { return h.first == "range"; });
        if (!ranged && response.status == 206) {
            const auto range = response.headers.find("content-range");
            throw Error(ProblemKind::remote_error,
                        what + ": the server answered HTTP 206 (part of an object, " +
                            (range == response.headers.end() ? std::string("no Content-Range")
                                                             : "\"" + printable(range->second, 80) + "\"") +
                            ") to a request that asked for no range",
                        object);
        }
        if (ranged && response.status == 200 && response.body_overflow)
            throw Error(ProblemKind::remote_error, what + ": " + kIgnoresRange, object);
        if (response.body_overflow)
            throw Error(ProblemKind::remote_error,
                        what + ": the server sent more than the " +
                            std::to_string(!got                    ? 65536
                                               : call.into.empty() ? call.max_body
                                                                   : call.into.size()) +
                            (got ? " bytes expected" : " bytes an error message may have"),
                        object);
        if (response.stopped || (response.status == 0 && response.streamed > 0))
            return Answer{.streamed = response.streamed, .stopped = response.stopped, .lost = response.transport_error};
        const std::size_t expected = call.sink ? call.max_body : call.into.size();
        if (got && (!call.into.empty() || call.sink) && response.received != expected && call.method != "HEAD") {
            // A body shorter than asked for with the transfer itself complete: the object is
            // shorter than the caller believes (a retry would get the same).
            throw Error(ProblemKind::remote_error,
                        what + ": the server sent " + std::to_string(response.received) + " bytes where " +
                            std::to_string(expected) + " were asked for",
                        object);
        }
        // A server that said nothing twice in a row (hung, or behind a firewall that drops the
        // packets) is not waited on for every attempt: each costs the whole stall timeout, and
        // six of them held a command for three minutes.
        silent = response.silent ? silent + 1 : 0;
        if (!retryable(response.status) || attempt >= m_config.retry.attempts || silent >= kSilentAttempts) {
            if (response.status == 0)
                throw Error(ProblemKind::remote_error,
                            what + ": no answer from " + m_scheme + "://" + host + " after " + std::to_string(attempt) +
                                " attempts" +
                                (silent >= kSilentAttempts
                                     ? " (nothing at all to the last " + std::to_string(silent) + ")"
                                     : std::string()) +
                                ": " + printable(response.transport_error, 200),
                            object);
            if (retryable(response.status))
                throw Error(ProblemKind::remote_error,
                            what + ": the server still answers " + server_said(response.status, response.text) +
                                " after " + std::to_string(attempt) + " attempts",
                            object);
            return Answer{.status = response.status,
                          .headers = std::move(response.headers),
                          .text = std::move(response.text),
                          .received = response.received,
                          .streamed = response.streamed};
        }
        wait_unless_cancelled(std::chrono::milliseconds(delay / 2 + static_cast<int>(jitter() % (delay / 2 + 1))));
        delay = std::min(delay * 2, m_config.retry.max_delay_ms);
    }
}

namespace {

[[noreturn]] void refused(const std::string& what, const std::string& object, long status, const std::string& body)
{
    // A body whose MD5 is not its Content-MD5: the bytes sent are not those that were hashed.
    if (status == 400 && xml_acceptable(body) && xml_text(body, "Code").value_or("") == "BadDigest")
        throw Error(ProblemKind::hash_mismatch,
                    what + ": HTTP 400 BadDigest: the server's MD5 of the bytes is not the one sent with them", object);
    std::string why = server_said(status, body);
    if (status >= 300 && status < 400)
        why += ": a redirect, which is not followed (check the endpoint and the bucket's region)";
    else if (status == 403)
        why += ": the credentials were refused or lack the permission";
    throw Error(ProblemKind::remote_error, what + ": " + why, object);
}

} // namespace

// Whether If-Match `etag` went into the headers.
bool S3Client::pin_to(const std::string& etag, std::vector<std::pair<std::string, std::string>>& headers) const
{
    if (!pinnable(etag) || *m_conditions_misfire)
        return false;
    headers.emplace_back("if-match", "\"" + etag + "\"");
    return true;
}

// A read was refused with 412. Asked without a condition, the server names the object it holds
// now: another ETag (or none there), and the object changed; the same one, and it is the server's
// conditional reads that misfire (a store that refuses its own ETag), which this client then stops
// asking for, the read to be asked again. A 412 to a request that carried no condition is the
// server's error; one to a request sent before another thread found the conditions misfire is
// asked again at once.
void S3Client::after_refused_precondition(const std::string& bucket, const std::string& key, const std::string& etag,
                                          bool conditional, const std::string& what) const
{
    const std::string object = object_name(bucket, key);
    if (!conditional)
        throw Error(ProblemKind::remote_error, what + ": HTTP 412 to a request without a precondition", object);
    if (*m_conditions_misfire)
        return;
    std::optional<ObjectInfo> now;
    try {
        now = head(bucket, key);
    } catch (const Error& e) {
        throw Error(e.kind(), what + ": HTTP 412 to If-Match its ETag, and then: " + e.what(), object);
    }
    if (!now)
        throw Error(ProblemKind::remote_error, what + ": " + kChanged + " (it is no longer there)", object);
    if (now->etag != etag)
        throw Error(ProblemKind::remote_error,
                    what + ": " + kChanged + " (listed as \"" + printable(etag, 80) + "\", now \"" +
                        printable(now->etag, 80) + "\")",
                    object);
    *m_conditions_misfire = true;
}

std::optional<ObjectInfo> S3Client::head(const std::string& bucket, const std::string& key) const
{
    const Answer a = send({.method = "HEAD", .bucket = bucket, .key = key});
    const std::string object = object_name(bucket, key);
    if (a.status == 404)
        return std::nullopt;
    if (a.status != 200)
        refused("HEAD " + object, object, a.status, a.text);
    bool ok = false;
    const auto length = a.headers.find("content-length");
    ObjectInfo info{.key = key, .size = length == a.headers.end() ? 0 : parse_u64(length->second, ok)};
    if (!ok)
        throw Error(ProblemKind::remote_error, "HEAD " + object + ": the answer has no valid Content-Length", object);
    if (const auto etag = a.headers.find("etag"); etag != a.headers.end())
        info.etag = unquoted(etag->second);
    return info;
}

void S3Client::read(const std::string& bucket, const std::string& key, uint64_t offset, std::span<std::byte> out,
                    const std::string& etag, std::optional<uint64_t> listed_size) const
{
    if (out.empty())
        return;
    const std::string range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + out.size() - 1);
    const std::string object = object_name(bucket, key);
    const std::string what = "GET " + object + " (" + range + ")";
    bool conditional = false;
    const auto get = [&] {
        std::vector<std::pair<std::string, std::string>> headers = {{"range", range}};
        conditional = pin_to(etag, headers);
        return send({.method = "GET", .bucket = bucket, .key = key, .headers = std::move(headers), .into = out});
    };
    Answer a = get();
    if (a.status == 412) {
        after_refused_precondition(bucket, key, etag, conditional, what);
        a = get();
    }
    if (a.status == 404)
        throw Error(ProblemKind::missing_file, object + ": no such object", object);
    if (a.status == 416)
        throw Error(ProblemKind::range_outside_file, what + ": the range runs past the object's end", object);
    if (a.status == 412)
        throw Error(ProblemKind::remote_error, what + ": HTTP 412 to a request without a precondition", object);
    if (a.status == 200 && (offset != 0 || (listed_size && out.size() != *listed_size)))
        throw Error(ProblemKind::remote_error, what + ": " + kIgnoresRange, object);
    if (a.status != 206 && a.status != 200)
        refused(what, object, a.status, a.text);
    // The bytes are taken only for the range they say they are: a server (or a proxy) that
    // answers with another part of the object would otherwise be read as the part asked for.
    if (a.status == 206) {
        const auto header = a.headers.find("content-range");
        const std::string content_range = header == a.headers.end() ? std::string() : header->second;
        uint64_t first_byte = 0, last_byte = 0, size = 0;
        if (!parse_content_range(content_range, first_byte, last_byte, size) || first_byte != offset ||
            last_byte != offset + out.size() - 1)
            throw Error(ProblemKind::remote_error, what + ": " + wrong_range(a.status, content_range, range), object);
        if (listed_size && size != 0 && size != *listed_size)
            throw Error(ProblemKind::remote_error, what + ": " + resized(*listed_size, size), object);
    }
    // Read without the condition (a server whose conditions misfire) or from one that ignores it:
    // the answer's own ETag still says whether it is the listed object.
    if (const auto answered = a.headers.find("etag"); answered != a.headers.end() && pinnable(etag) &&
        pinnable(unquoted(answered->second)) && unquoted(answered->second) != etag)
        throw Error(ProblemKind::remote_error, what + ": " + kChanged, object);
}

uint64_t S3Client::stream(const std::string& bucket, const std::string& key, uint64_t offset, uint64_t size,
                          const std::function<bool(const char*, std::size_t)>& consume, const std::string& listed_etag,
                          std::optional<uint64_t> listed_size) const
{
    const uint64_t end = offset + size;
    uint64_t at = offset;
    // The first answer's ETag and object size: a resumed read asks for the same object (If-Match)
    // and must find the same size, so that a replaced object is said as such, not as bad bytes.
    bool first = true;
    std::string etag = listed_etag;
    uint64_t total = 0;
    int delay = m_config.retry.first_delay_ms;
    for (int lost = 0; at < end;) {
        const std::string range = "bytes=" + std::to_string(at) + "-" + std::to_string(end - 1);
        const std::string object = object_name(bucket, key);
        const std::string what = "GET " + object + " (" + range + ")";
        std::vector<std::pair<std::string, std::string>> headers = {{"range", range}};
        const bool conditional = pin_to(etag, headers);
        // Only the bytes asked for are handed on: a 206 whose Content-Range is the range asked,
        // or a 200 whose whole object is exactly that range.
        const auto check = [&](const HttpResponse& head) -> std::string {
            const auto header = [&](const char* name) {
                const auto it = head.headers.find(name);
                return it == head.headers.end() ? std::string() : it->second;
            };
            uint64_t first_byte = 0, last_byte = 0, size_now = 0;
            if (head.status == 200) {
                bool ok = false;
                size_now = parse_u64(header("content-length"), ok);
                if (at != 0 || !ok || size_now != end || (listed_size && size_now != *listed_size))
                    return kIgnoresRange;
            } else {
                const std::string content_range = header("content-range");
                if (head.status != 206 || !parse_content_range(content_range, first_byte, last_byte, size_now) ||
                    first_byte != at || last_byte != end - 1)
                    return wrong_range(head.status, content_range, range);
            }
            // Every answer's ETag is the listed one (or, without one, the first answer's): a server
            // that ignored the If-Match, or was not asked it, may answer for another object.
            const std::string answered = unquoted(header("etag"));
            if (pinnable(etag) && pinnable(answered) && answered != etag)
                return kChanged;
            if (first) {
                first = false;
                if (listed_size && size_now != 0 && size_now != *listed_size)
                    return resized(*listed_size, size_now);
                if (!pinnable(etag))
                    etag = answered;
                total = size_now;
            } else if (size_now != total && size_now != 0 && total != 0) {
                return "the object changed while it was read (" + std::to_string(total) + " bytes, now " +
                    std::to_string(size_now) + ")";
            }
            return {};
        };
        const Answer a = send({.method = "GET",
                               .bucket = bucket,
                               .key = key,
                               .headers = std::move(headers),
                               .max_body = static_cast<std::size_t>(end - at),
                               .sink = consume,
                               .sink_check = check});
        at += a.streamed;
        if (a.stopped)
            break;
        if (!a.lost.empty()) { // part of the range came: the rest is asked for on a new connection
            // Losses that each brought little count against the retries; one after a good part
            // of the object starts the count again (a long object over a flaky link).
            lost = a.streamed >= kResumeProgress ? 1 : lost + 1;
            if (lost == 1)
                delay = m_config.retry.first_delay_ms;
            if (lost >= m_config.retry.attempts)
                throw Error(ProblemKind::remote_error,
                            what + ": the connection was lost part-way " + std::to_string(lost) +
                                " times in a row, the last: " + printable(a.lost, 200),
                            object);
            wait_unless_cancelled(std::chrono::milliseconds(delay));
            delay = std::min(delay * 2, m_config.retry.max_delay_ms);
            continue;
        }
        if (a.status == 404)
            throw Error(ProblemKind::missing_file, object + ": no such object", object);
        if (a.status == 416)
            throw Error(ProblemKind::range_outside_file, what + ": the range runs past the object's end", object);
        if (a.status == 412) {
            after_refused_precondition(bucket, key, etag, conditional, what); // or asked again
            continue;
        }
        if (a.status != 206 && a.status != 200)
            refused(what, object, a.status, a.text);
    }
    return at - offset;
}

std::optional<std::string> S3Client::get(const std::string& bucket, const std::string& key, std::size_t max_bytes) const
{
    const Answer a = send({.method = "GET", .bucket = bucket, .key = key, .max_body = max_bytes});
    if (a.status == 404)
        return std::nullopt;
    if (a.status != 200)
        refused("GET " + object_name(bucket, key), object_name(bucket, key), a.status, a.text);
    return a.text;
}

std::vector<ObjectInfo> S3Client::list(const std::string& bucket, const std::string& prefix, std::size_t max_keys) const
{
    std::vector<ObjectInfo> out = list_pages(bucket, prefix, "", max_keys).objects;
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
}

S3Level S3Client::list_level(const std::string& bucket, const std::string& prefix, std::size_t max_keys) const
{
    return list_pages(bucket, prefix, "/", max_keys);
}

S3Level S3Client::list_pages(const std::string& bucket, const std::string& prefix, const std::string& delimiter,
                             std::size_t max_keys) const
{
    S3Level out;
    std::string token;
    const std::string object = object_name(bucket, prefix);
    const std::string what = "LIST " + object;
    // A page holds up to 1000 keys: a server that keeps answering "truncated" with fewer, or
    // with the same token again, is not followed for ever.
    for (std::size_t page = 0;; ++page) {
        if (page > max_keys / 100 + 10)
            throw Error(ProblemKind::remote_error,
                        what + ": the listing does not end (" + std::to_string(page) + " pages for " +
                            std::to_string(out.objects.size() + out.prefixes.size()) + " keys)",
                        object);
        Call call{.what = what,
                  .object = object,
                  .method = "GET",
                  .bucket = bucket,
                  .query = {{"list-type", "2"}, {"prefix", prefix}},
                  .max_body = kMaxListingPage};
        if (!delimiter.empty())
            call.query.emplace_back("delimiter", delimiter);
        if (!token.empty())
            call.query.emplace_back("continuation-token", token);
        const Answer a = send(call);
        if (a.status != 200)
            refused(what, object, a.status, a.text);
        ListingPage listed = read_listing_page(a.text, prefix, what, object);
        if (out.objects.size() + out.prefixes.size() + listed.objects.size() + listed.prefixes.size() > max_keys)
            throw Error(ProblemKind::remote_error,
                        what + ": more than " + std::to_string(max_keys) + " objects under the prefix", object);
        std::move(listed.objects.begin(), listed.objects.end(), std::back_inserter(out.objects));
        std::move(listed.prefixes.begin(), listed.prefixes.end(), std::back_inserter(out.prefixes));
        if (!listed.truncated)
            break;
        if (listed.next_token == token)
            throw Error(ProblemKind::remote_error, what + ": a truncated listing without a new continuation token",
                        object);
        token = std::move(listed.next_token);
    }
    return out;
}

void S3Client::put(const std::string& bucket, const std::string& key, std::span<const std::byte> body,
                   const std::optional<Md5Digest>& md5) const
{
    put({.method = "PUT",
         .bucket = bucket,
         .key = key,
         .headers = {{"content-md5", base64_md5(body, md5)}},
         .body = body});
}

void S3Client::put(const std::string& bucket, const std::string& key, uint64_t size, const BodyRead& read,
                   const Md5Digest& md5) const
{
    put({.method = "PUT",
         .bucket = bucket,
         .key = key,
         .headers = {{"content-md5", base64_md5({}, md5)}},
         .source = read,
         .source_size = size});
}

void S3Client::put(Call call) const
{
    const Answer a = send(call);
    if (a.status != 200)
        refused("PUT " + object_name(call.bucket, call.key), object_name(call.bucket, call.key), a.status, a.text);
}

std::string S3Client::create_multipart(const std::string& bucket, const std::string& key) const
{
    const Answer a = send({.method = "POST", .bucket = bucket, .key = key, .query = {{"uploads", ""}}});
    const std::string object = object_name(bucket, key);
    const std::string what = "POST " + object + "?uploads";
    if (a.status != 200)
        refused(what, object, a.status, a.text);
    auto id = xml_acceptable(a.text) ? xml_text(a.text, "UploadId") : std::nullopt;
    if (!id || id->empty() || id->size() > 1024)
        throw Error(ProblemKind::remote_error, what + ": the answer has no upload id", object);
    return *id;
}

std::string S3Client::upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                  int part, uint64_t size, const BodyRead& read, const Md5Digest& md5) const
{
    const Answer a = send({.method = "PUT",
                           .bucket = bucket,
                           .key = key,
                           .query = {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}},
                           .headers = {{"content-md5", base64_md5({}, md5)}},
                           .source = read,
                           .source_size = size});
    const std::string object = object_name(bucket, key);
    const std::string what = "PUT " + object + " part " + std::to_string(part);
    if (a.status != 200)
        refused(what, object, a.status, a.text);
    const auto etag = a.headers.find("etag");
    if (etag == a.headers.end() || unquoted(etag->second).empty())
        throw Error(ProblemKind::remote_error, what + ": the answer has no ETag", object);
    return etag->second;
}

void S3Client::complete_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                  const std::vector<std::string>& part_etags) const
{
    std::string xml = "<CompleteMultipartUpload>";
    for (std::size_t i = 0; i < part_etags.size(); ++i)
        xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + part_etags[i] + "</ETag></Part>";
    xml += "</CompleteMultipartUpload>";
    const Answer a = send({.method = "POST",
                           .bucket = bucket,
                           .key = key,
                           .query = {{"uploadId", upload_id}},
                           .body = std::as_bytes(std::span(xml.data(), xml.size()))});
    const std::string object = object_name(bucket, key);
    const std::string what = "POST " + object + "?uploadId";
    // A completion whose answer was lost is retried and then finds no such upload: the object
    // it made (an ETag "...-N" for N parts) says the first attempt succeeded.
    if (a.status == 404 && xml_text(a.text, "Code").value_or("") == "NoSuchUpload")
        if (const auto made = head(bucket, key); made && made->etag.ends_with("-" + std::to_string(part_etags.size())))
            return;
    // S3 may answer 200 and still report an error in the body of a long-running completion.
    if (a.status != 200 || (xml_acceptable(a.text) && !xml_elements(a.text, "Error").empty()))
        refused(what, object, a.status == 200 ? 500 : a.status, a.text);
}

void S3Client::abort_multipart(const std::string& bucket, const std::string& key, const std::string& upload_id) const
{
    const Answer a = send({.method = "DELETE", .bucket = bucket, .key = key, .query = {{"uploadId", upload_id}}});
    if (a.status != 204 && a.status != 200 && a.status != 404)
        refused("DELETE " + object_name(bucket, key) + "?uploadId", object_name(bucket, key), a.status, a.text);
}

std::vector<MultipartUpload> S3Client::list_multipart_uploads(const std::string& bucket,
                                                              const std::string& prefix) const
{
    return *list_uploads(bucket, prefix, false);
}

std::optional<std::vector<MultipartUpload>> S3Client::list_multipart_uploads_if_allowed(const std::string& bucket,
                                                                                        const std::string& prefix) const
{
    return list_uploads(bucket, prefix, true);
}

std::optional<std::vector<MultipartUpload>> S3Client::list_uploads(const std::string& bucket, const std::string& prefix,
                                                                   bool refusal_is_none) const
{
    const std::string object = object_name(bucket, prefix);
    const std::string what = "LIST uploads " + object;
    std::vector<MultipartUpload> out;
    std::set<std::pair<std::string, std::string>> seen;
    std::string key_marker, id_marker;
    // A page holds up to 1000 uploads, in (key, upload id) order: the markers must move forward,
    // and the pages and the count stay bounded, or a server could keep this going for ever.
    for (std::size_t page = 0;; ++page) {
        if (page >= kMaxOpenUploads / 1000 + 10)
            throw Error(ProblemKind::remote_error,
                        what + ": the listing does not end (" + std::to_string(page) + " pages)", object);
        Call call{.what = what,
                  .object = object,
                  .method = "GET",
                  .bucket = bucket,
                  .query = {{"uploads", ""}, {"prefix", prefix}},
                  .max_body = kMaxListingPage};
        if (!key_marker.empty()) {
            call.query.emplace_back("key-marker", key_marker);
            call.query.emplace_back("upload-id-marker", id_marker);
        }
        const Answer a = send(call);
        if (refusal_is_none && page == 0 && (a.status == 403 || a.status == 501))
            return std::nullopt;
        if (a.status != 200)
            refused(what, object, a.status, a.text);
        UploadsPage listed = read_uploads_page(a.text, prefix, what, object);
        for (MultipartUpload& upload : listed.uploads)
            if (seen.emplace(upload.key, upload.upload_id).second)
                out.push_back(std::move(upload));
        if (out.size() > kMaxOpenUploads)
            throw Error(ProblemKind::remote_error,
                        what + ": more than " + std::to_string(kMaxOpenUploads) + " open uploads under the prefix",
                        object);
        if (!listed.truncated)
            return out;
        if (listed.next_key_marker.empty() ||
            std::pair(listed.next_key_marker, listed.next_upload_id_marker) <= std::pair(key_marker, id_marker))
            throw Error(ProblemKind::remote_error, what + ": a truncated listing whose markers do not move forward",
                        object);
        key_marker = std::move(listed.next_key_marker);
        id_marker = std::move(listed.next_upload_id_marker);
    }
}

void S3Client::remove(const std::string& bucket, const std::string& key) const
{
    const Answer a = send({.method = "DELETE", .bucket = bucket, .key = key});
    if (a.status != 204 && a.status != 200 && a.status != 404)
        refused("DELETE " + object_name(bucket, key), object_name(bucket, key), a.status, a.text);
}

void S3Client::create_bucket(const std::string& bucket) const
{
    const Answer a = send({.method = "PUT", .bucket = bucket});
    if (a.status == 200)
        return;
    if (a.status == 409 && xml_text(a.text, "Code").value_or("") == "BucketAlreadyOwnedByYou")
        return;
    refused("PUT s3://" + bucket, "s3://" + bucket, a.status, a.text);
}

} // namespace shardscope::storage
