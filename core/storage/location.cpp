#include "core/storage/location.h"

#include "core/storage/sigv4.h"

#include "core/util/error.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cctype>

namespace shardscope::storage {

namespace {

std::string_view scheme_of(std::string_view text)
{
    if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0])))
        return {};
    for (std::size_t i = 1; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == ':')
            return text.substr(i + 1, 2) == "//" ? text.substr(0, i) : std::string_view{};
        if (!std::isalnum(c) && c != '+' && c != '-' && c != '.')
            return {};
    }
    return {};
}

// What a user meant as a URL but did not write as one: a scheme of object stores or the web
// followed by ':' without "//" ("s3:/ckpt/run", "s3:ckpt", "file:run"), or a URL with blanks
// before it. Taken as a path, it would be a folder named "s3:" in the working directory.
bool mistyped_url(std::string_view text)
{
    std::size_t start = 0;
    while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start])))
        ++start;
    if (start > 0 && !scheme_of(text.substr(start)).empty())
        return true;
    const std::size_t colon = text.find(':', start);
    if (colon == std::string_view::npos || colon - start > 8)
        return false;
    std::string scheme(text.substr(start, colon - start));
    for (char& c : scheme)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static constexpr std::string_view kKnown[] = {"s3",   "s3a", "s3n",  "gs",    "gcs",  "http",  "https",
                                                  "file", "az",  "abfs", "abfss", "wasb", "wasbs", "hdfs"};
    return std::find(std::begin(kKnown), std::end(kKnown), scheme) != std::end(kKnown);
}

// The text with any user:password@ part replaced, so that an error never echoes a secret.
std::string redacted(std::string_view text)
{
    const std::size_t start = text.find("://");
    if (start == std::string_view::npos)
        return printable(text);
    const std::size_t end = text.find('/', start + 3);
    const std::size_t at = text.substr(0, end).rfind('@');
    if (at == std::string_view::npos || at < start)
        return printable(text);
    return printable(std::string(text.substr(0, start + 3)) + "***" + std::string(text.substr(at)));
}

[[noreturn]] void refuse(std::string_view text, const std::string& why)
{
    throw Error(ProblemKind::invalid_argument, redacted(text) + ": " + why);
}

// S3's bucket naming rules: 3 to 63 lower-case letters, digits, '.' and '-', starting and ending
// with a letter or digit.
bool valid_bucket(std::string_view b)
{
    if (b.size() < 3 || b.size() > 63)
        return false;
    for (const char ch : b) {
        const auto c = static_cast<unsigned char>(ch);
        if (!(std::islower(c) || std::isdigit(c) || c == '.' || c == '-'))
            return false;
    }
    return std::isalnum(static_cast<unsigned char>(b.front())) && std::isalnum(static_cast<unsigned char>(b.back()));
}

// A key prefix is joined to names a manifest gives: each component must be a plain name, so
// that nothing read or written can leave the prefix the user named.
std::string checked_prefix(std::string_view text, std::string_view prefix)
{
    while (!prefix.empty() && prefix.back() == '/')
        prefix.remove_suffix(1);
    std::size_t start = 0;
    while (start < prefix.size()) {
        std::size_t end = prefix.find('/', start);
        if (end == std::string_view::npos)
            end = prefix.size();
        const std::string_view part = prefix.substr(start, end - start);
        if (part.empty() || part == "." || part == "..")
            refuse(text, "the key prefix has an empty, \".\" or \"..\" component");
        for (const char c : part)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                refuse(text, "the key prefix has a control character");
        start = end + 1;
    }
    return std::string(prefix);
}

// An HTTP URL's path as the server names it: %XX escapes decoded (the request encodes every byte
// again, once), so that "my%20model" is the folder "my model" and an escaped ".." is seen as one.
std::string percent_decoded(std::string_view text, std::string_view path)
{
    std::string out;
    for (std::size_t i = 0; i < path.size(); ++i) {
        if (path[i] != '%') {
            out += path[i];
            continue;
        }
        const auto hex = [](char c) {
            return c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f'  ? c - 'a' + 10
                : c >= 'A' && c <= 'F'  ? c - 'A' + 10
                                        : -1;
        };
        const int hi = i + 2 < path.size() ? hex(path[i + 1]) : -1, lo = hi >= 0 ? hex(path[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            refuse(text, "a '%' in the path is not followed by two hexadecimal digits");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

} // namespace

bool valid_authority(std::string_view authority)
{
    std::string_view host = authority, port;
    if (authority.starts_with('[')) { // an IPv6 literal: [hex:hex...], perhaps a port after it
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos || close < 3)
            return false;
        host = authority.substr(1, close - 1);
        if (host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos)
            return false;
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty() && !after.starts_with(':'))
            return false;
        port = after.empty() ? after : after.substr(1);
        if (!after.empty() && port.empty())
            return false;
    } else {
        const std::size_t colon = authority.find(':');
        host = authority.substr(0, colon);
        if (colon != std::string_view::npos) {
            port = authority.substr(colon + 1);
            if (port.empty())
                return false;
        }
        if (host.empty() || host.size() > 253 ||
            host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_~") !=
                std::string_view::npos)
            return false;
    }
    if (port.empty())
        return true;
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
        return false;
    const int number = std::stoi(std::string(port));
    return number >= 1 && number <= 65535;
}

bool is_url(std::string_view text)
{
    return !scheme_of(text).empty() || mistyped_url(text);
}

Location parse_location(std::string_view text)
{
    const std::string_view scheme = scheme_of(text);
    if (scheme.empty() && !text.empty() && std::isspace(static_cast<unsigned char>(text[0])) && mistyped_url(text))
        refuse(text,
               "begins with blanks before what looks like a URL; neither a URL nor a local path is taken "
               "from it (write the URL without them, or ./ before a local folder's name)");
    if (scheme.empty() && mistyped_url(text))
        refuse(text,
               "not a URL (s3://bucket/prefix, http(s)://host/path) and not taken for a local path "
               "either; a local folder of that name is written ./" +
                   printable(text));
    if (scheme.empty())
        return Location(std::filesystem::path(text));
    Location out;
    out.text = std::string(text);
    const std::string_view rest = text.substr(scheme.size() + 3);
    // A scheme is case-insensitive (RFC 3986, 3.1): S3:// and HTTPS:// are the same URLs.
    std::string lower(scheme);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::size_t slash = rest.find('/');
    const std::string_view host = rest.substr(0, slash);
    const std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (lower == "s3") {
        if (!valid_bucket(host))
            refuse(text, "not a valid S3 bucket name (3 to 63 lower-case letters, digits, '.' and '-')");
        out.scheme = Scheme::s3;
        out.bucket = std::string(host);
        out.prefix = checked_prefix(text, path);
        return out;
    }
    if (lower == "https" || lower == "http") {
        if (host.empty() || host.find_first_of("@ \t") != std::string_view::npos)
            refuse(text, "the URL has no host, or has credentials in it (pass them in the environment)");
        if (!valid_authority(host))
            refuse(text, "the URL's host is not a host name or address with an optional :port");
        if (path.find_first_of("?#") != std::string_view::npos)
            refuse(text, "a query or fragment is not part of a checkpoint's location");
        out.scheme = lower == "https" ? Scheme::https : Scheme::http;
        out.authority = std::string(host);
        out.prefix = checked_prefix(text, percent_decoded(text, path));
        return out;
    }
    refuse(text,
           "unknown URL scheme \"" + printable(scheme) +
               "\": ShardScope knows local paths, s3://bucket/prefix and http(s):// URLs");
}

Location Location::child(std::string_view name) const
{
    Location out = *this;
    if (scheme == Scheme::local) {
        out.path = path / name;
        out.text = out.path.string();
        return out;
    }
    out.prefix = prefix.empty() ? std::string(name) : prefix + '/' + std::string(name);
    out.text = to_string(out);
    return out;
}

Location Location::above(int levels) const
{
    Location out = *this;
    for (; levels > 0; --levels) {
        if (scheme == Scheme::local) {
            out.path = out.path.has_filename() ? out.path.parent_path() : out.path.parent_path().parent_path();
            continue;
        }
        const std::size_t slash = out.prefix.rfind('/');
        out.prefix = slash == std::string::npos ? std::string() : out.prefix.substr(0, slash);
    }
    out.text = scheme == Scheme::local ? out.path.string() : to_string(out);
    return out;
}

std::string to_string(const Location& location)
{
    switch (location.scheme) {
    case Scheme::local: return location.path.string();
    case Scheme::s3: return "s3://" + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix);
    case Scheme::http:
    case Scheme::https:
        return std::string(location.scheme == Scheme::https ? "https://" : "http://") + location.authority +
            (location.prefix.empty() ? "" : "/" + uri_encode(location.prefix, true));
    }
    return location.text;
}

} // namespace shardscope::storage
