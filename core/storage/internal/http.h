#pragma once
// One HTTP exchange over libcurl, with the limits a hostile or broken server needs: no redirect
// is followed, a body can neither exceed what the caller allows nor differ from its announced
// length, a stalled transfer times out, and only http and https are spoken. Each thread keeps one
// curl handle, so that consecutive requests reuse the connection (keep-alive).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::storage {

struct HttpResponse;

struct HttpRequest {
    std::string method = "GET";
    std::string url;
    std::vector<std::pair<std::string, std::string>> headers;
    std::span<const std::byte> body; // sent as is, with its Content-Length
    // Instead of `body`, when set: `source_size` bytes that `source(at, into)` writes straight into
    // curl's send buffer as they go out (a part read from its file, never held whole in memory),
    // asked again from the start when a send is retried. What it throws, http_exchange rethrows.
    std::function<void(uint64_t at, std::span<std::byte> into)> source;
    uint64_t source_size = 0;
    bool verify_tls = true;
    int connect_timeout_s = 10;
    int stall_timeout_s = 30; // below 1 KiB/s for this long: the transfer is abandoned
    // Where a successful response's body goes: `into` when given (exactly into.size() bytes
    // expected), otherwise `text`, refused past `max_body` bytes. An error's body always goes to
    // `text`, refused past 64 KiB.
    std::span<std::byte> into;
    std::size_t max_body = 1 << 20;
    // Instead of being kept, a successful response's body is handed here as it arrives (at most
    // `max_body` bytes): a large object read in one request, each piece used and forgotten. First
    // `sink_check`, when set, looks at the response's status and headers: a non-empty answer says
    // why the body is not taken, and the transfer stops (HttpResponse::refused). false from the
    // sink stops it too (HttpResponse::stopped); what either throws, http_exchange rethrows.
    std::function<bool(const char* bytes, std::size_t n)> sink;
    std::function<std::string(const HttpResponse& head)> sink_check;
};

struct HttpResponse {
    long status = 0; // 0: no response (the transport failed, see `transport_error`)
    std::string transport_error; // curl's sentence when the exchange itself failed
    bool untrusted = false; // it failed on the server's TLS certificate (which asking again would meet)
    // The server said nothing in the time allowed: no connection, or not a byte of an answer.
    bool silent = false;
    // Why the answer is not valid HTTP (an invalid or a second, different Content-Length, say):
    // the server's fault, which asking again would meet; the transfer stopped there.
    std::string malformed;
    bool body_overflow = false; // the server sent more than the request allowed
    bool stopped = false; // the request's sink wanted no more
    std::string refused; // why the request's sink_check did not take the body
    uint64_t streamed = 0; // body bytes handed to the request's sink
    std::map<std::string, std::string> headers; // lower-case names
    std::string text; // the body, unless it went `into` the caller's buffer
    std::size_t received = 0; // body bytes received
};

// Never throws for what the server does; throws std::bad_alloc and the like, and what the
// request's sink, sink_check or source threw.
HttpResponse http_exchange(const HttpRequest& request);

} // namespace shardscope::storage
