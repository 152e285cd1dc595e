#include "core/storage/internal/http.h"

#include "core/util/cancel.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

namespace shardscope::storage {

namespace {

constexpr std::size_t kMaxErrorBody = 64 * 1024; // an S3 error document is a few hundred bytes
constexpr long kReceiveBuffer = 512 * 1024; // a connection's; eight of them are 4 MiB
constexpr long kSendBuffer = 64 * 1024; // curl's default

struct CurlDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};

CURL* thread_handle()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    thread_local std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
    if (handle)
        curl_easy_reset(handle.get()); // options of the previous request must not leak into this one
    return handle.get();
}

struct Exchange {
    const HttpRequest* request = nullptr;
    HttpResponse* response = nullptr;
    uint64_t sent = 0;
    bool checked = false; // the sink_check has accepted this response
    // What the sink or the source threw: held until curl returns, never thrown through its C frames.
    std::exception_ptr error;
};

// A successful response's body piece to the request's sink, within the request's limit; false
// stops the transfer. The sink_check sees the response before its first byte is taken.
bool to_sink(Exchange& x, const char* data, std::size_t n)
{
    HttpResponse& r = *x.response;
    try {
        if (!x.checked && x.request->sink_check) {
            r.refused = x.request->sink_check(r);
            if (!r.refused.empty())
                return false;
        }
        x.checked = true;
        if (r.received + n > x.request->max_body) {
            r.body_overflow = true;
            return false;
        }
        r.received += n;
        r.streamed += n;
        r.stopped = !x.request->sink(data, n);
        return !r.stopped;
    } catch (...) {
        x.error = std::current_exception();
        return false;
    }
}

std::size_t on_body(char* data, std::size_t, std::size_t n, void* user)
{
    auto& x = *static_cast<Exchange*>(user);
    HttpResponse& r = *x.response;
    // Only a successful answer goes into the caller's buffer; an error's body is kept as text.
    const bool success = r.status >= 200 && r.status < 300;
    if (x.request->sink && success)
        return to_sink(x, data, n) ? n : 0;
    const bool into = !x.request->into.empty() && success;
    const std::size_t limit = into ? x.request->into.size() : success ? x.request->max_body : kMaxErrorBody;
    if (r.received + n > limit) {
        r.body_overflow = true;
        return 0; // aborts the transfer: an endless or overlong body is not read further
    }
    if (into)
        std::memcpy(x.request->into.data() + r.received, data, n);
    else
        r.text.append(data, n);
    r.received += n;
    return n;
}

std::size_t on_header(char* data, std::size_t, std::size_t n, void* user)
{
    auto& x = *static_cast<Exchange*>(user);
    std::string_view line(data, n);
    if (line.starts_with("HTTP/")) { // a new response (after a 100 Continue): start over
        x.response->headers.clear();
        x.checked = false; // the sink_check looks at this one
        long status = 0;
        if (const auto space = line.find(' '); space != std::string_view::npos)
            status = std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
        x.response->status = status;
        return n;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos)
        return n;
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
        value.remove_suffix(1);
    value = value.substr(0, 4096);
    // Two lengths for one body: which one frames it is anyone's guess (curl takes the last and
    // would wait for bytes that never come), so the answer is refused as it is; also past the
    // cap below, which a server could otherwise fill first.
    const bool framing = name == "content-length" || name == "content-range";
    if (const auto seen = x.response->headers.find(name);
        framing && seen != x.response->headers.end() && seen->second != value) {
        x.response->malformed =
            "two different " + std::string(name == "content-length" ? "Content-Length" : "Content-Range") + " headers";
        return 0; // stops the transfer
    }
    if (x.response->headers.size() > 200 && !framing)
        return n;
    x.response->headers[std::move(name)] = std::string(value);
    return n;
}

uint64_t body_size(const HttpRequest& request)
{
    return request.source ? request.source_size : request.body.size();
}

std::size_t on_send(char* buffer, std::size_t size, std::size_t n, void* user)
{
    auto& x = *static_cast<Exchange*>(user);
    const HttpRequest& request = *x.request;
    const std::size_t count = static_cast<std::size_t>(std::min<uint64_t>(size * n, body_size(request) - x.sent));
    if (!request.source) {
        std::memcpy(buffer, request.body.data() + x.sent, count);
    } else if (count > 0) {
        try {
            request.source(x.sent, {reinterpret_cast<std::byte*>(buffer), count});
        } catch (...) {
            x.error = std::current_exception();
            return CURL_READFUNC_ABORT;
        }
    }
    x.sent += count;
    return count;
}

// Called by curl at least once a second, also while it waits: a transfer of an operation that
// was cancelled stops here instead of waiting out its stall timeout.
int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t)
{
    return operation_cancelled() ? 1 : 0;
}

int on_seek(void* user, curl_off_t offset, int origin)
{
    auto& x = *static_cast<Exchange*>(user);
    if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > body_size(*x.request))
        return CURL_SEEKFUNC_FAIL;
    x.sent = static_cast<uint64_t>(offset);
    return CURL_SEEKFUNC_OK;
}

} // namespace

HttpResponse http_exchange(const HttpRequest& request)
{
    HttpResponse response;
    Exchange x{.request = &request, .response = &response};
    CURL* curl = thread_handle();
    if (!curl) {
        response.transport_error = "cannot create an HTTP client";
        return response;
    }
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    // The path is sent exactly as it was signed: curl would otherwise squash "/./" and "/../".
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(request.connect_timeout_s));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L); // a trickle is a stall too
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(request.stall_timeout_s));
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, request.verify_tls ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, request.verify_tls ? 2L : 0L);
    // Fewer, larger receives than curl's 16 KiB default: verifying 1 GiB from a loopback gateway
    // took 0.22 system CPU seconds instead of 0.33 at 256 KiB, CPU its hashing shares; 512 KiB
    // took 0.79–0.88 CPU s in all where 256 KiB took 0.88–0.98.
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, kReceiveBuffer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
    if (request.method == "HEAD") {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (request.method == "PUT" || request.method == "POST") {
        if (request.method == "PUT")
            curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        else
            curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_send);
        curl_easy_setopt(curl, CURLOPT_READDATA, &x);
        curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek); // a retried send after a 401/redirect
        curl_easy_setopt(curl, CURLOPT_SEEKDATA, &x);
        curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, kSendBuffer);
        const auto size = static_cast<curl_off_t>(body_size(request));
        if (request.method == "PUT")
            curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, size);
        else
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, size);
    } else if (request.method != "GET") {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : request.headers)
        headers = curl_slist_append(headers, (name + ": " + value).c_str());
    // curl would add "Expect: 100-continue" to large bodies and wait a second for the answer.
    headers = curl_slist_append(headers, "Expect:");
    headers = curl_slist_append(headers, "Accept:");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    const CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (x.error)
        std::rethrow_exception(x.error);
    const bool we_stopped = response.body_overflow || response.stopped || !response.refused.empty();
    if (code == CURLE_WEIRD_SERVER_REPLY && response.malformed.empty()) {
        // curl's sentence for a negative or non-numeric length is "Invalid Content-Length: value".
        const std::string said = error[0] ? error : curl_easy_strerror(code);
        response.malformed =
            said.find("Content-Length") != std::string::npos ? "an invalid Content-Length header" : said;
    }
    if (!response.malformed.empty()) {
        response.status = 0;
        return response;
    }
    if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && we_stopped)) {
        response.transport_error = error[0] ? error : curl_easy_strerror(code);
        response.untrusted = code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_ISSUER_ERROR ||
            code == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
        response.silent = code == CURLE_OPERATION_TIMEDOUT && response.status == 0; // not even a status line
        response.status = 0; // a half-received answer is no answer
    }
    return response;
}

} // namespace shardscope::storage
