#pragma once
// Where a checkpoint lives: a local path, an S3 bucket and prefix, or an HTTP(S) URL. Every text
// a user gives goes through parse_location (or is refused by is_url where only a path will do), so
// that `s3://ckpt/run` can never be taken for the relative folder `s3:/ckpt/run` (which a plain
// std::filesystem::path would happily create). Code that already holds a path converts it with
// the Location(path) constructor.

#include <filesystem>
#include <string>
#include <string_view>

namespace shardscope::storage {

enum class Scheme { local, s3, http, https };

struct Location {
    Location() = default;
    // A local path, as every API that took a std::filesystem::path before S3 did.
    Location(std::filesystem::path local) : text(local.string()), path(std::move(local)) {}

    Scheme scheme = Scheme::local;
    std::string text; // as the user wrote it, for messages
    std::filesystem::path path; // local
    std::string bucket; // s3
    std::string prefix; // s3: the key prefix, without leading or trailing '/'; http(s): the path, decoded
    std::string authority; // http(s): host[:port]
    // Whether a server's TLS certificate is checked (https, and s3 over an https endpoint). Off
    // only when the user said so (shardctl --no-verify-tls, verify_tls=False in Python): it
    // travels with the location so that every reader of it, and of the locations beneath it,
    // connects the same way.
    bool verify_tls = true;
    // s3: the endpoint URL the user gave for this location (shardctl --endpoint); empty: the
    // environment's, as the AWS tools read it (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS).
    std::string endpoint;

    bool is_local() const { return scheme == Scheme::local; }
    // The location of `name` beneath this one ("run" + "step-1" -> "run/step-1").
    Location child(std::string_view name) const;
    // The folder `levels` above this one: a local path's parent, a URL's prefix shortened (never
    // above a bucket or a server's root).
    Location above(int levels = 1) const;
};

// True when `text` starts with a URL scheme ("s3://", "https://", "gs://", ...), or is what a
// user meant as a URL of an object store or the web but mistyped ("s3:/ckpt/run", "s3:ckpt",
// "file:run", " s3://ckpt/run"): such a text is never a local path, whether or not ShardScope
// can open it. A local folder whose name starts like one is written "./s3:ckpt".
bool is_url(std::string_view text);

// Throws Error(invalid_argument) naming the text for an unknown scheme, a mistyped URL, an
// invalid bucket name, or a key prefix with an empty, "." or ".." component or a control
// character.
Location parse_location(std::string_view text);

// Whether `authority` is host[:port] as a URL gives it: a host name or IPv4 address of letters,
// digits, '.', '-', '_' and '~', or an IPv6 address in brackets, and a port of 1..65535.
bool valid_authority(std::string_view authority);

// The text a user would type for `location` ("s3://bucket/prefix").
std::string to_string(const Location& location);

} // namespace shardscope::storage
