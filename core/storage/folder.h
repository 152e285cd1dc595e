#pragma once
// A checkpoint folder wherever it lives: a local directory, an S3 prefix or an HTTP(S) URL. The
// readers of every format ask a Folder for its names and for byte ranges of named objects, and
// never learn which it is; so `info s3://…` reads a header with one ranged GET, as `info DIR`
// reads it with one pread. A folder is listed once, when it is opened (in a bucket, a sub-folder
// when it is first looked into, one level at a time): a reader sees the names detection saw, even
// if the folder changes meanwhile.
//
// Reads of a local file fail as pread does (false, errno set). Reads of a remote object throw
// Error(remote_error) when the server cannot be read after the client's retries: an outage is
// not reported as a broken checkpoint.

#include "core/storage/location.h"
#include "core/util/fsutil.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::storage {

// One object opened for reading.
class Reader {
public:
    virtual ~Reader() = default;
    // Exactly `size` bytes from `offset`: false (errno set for a local file, 0 for an object
    // shorter than the read) when they cannot all be read.
    virtual bool read(void* buffer, std::size_t size, uint64_t offset) const = 0;
    // A remote object's bytes [offset, offset + size) handed to `consume` as they arrive over one
    // connection (S3Client::stream), the first from memory where a block read already holds them
    // (in a bucket, where both reads are held to the listing's ETag): the bytes handed over, fewer
    // when `consume` returned false.
    // nullopt for a local file, which is read() a chunk at a time, the kernel reading ahead.
    virtual std::optional<uint64_t> stream(uint64_t, uint64_t,
                                           const std::function<bool(const char*, std::size_t)>&) const
    {
        return std::nullopt;
    }
    // A local file's descriptor, for a mapping or read-ahead advice; -1 for a remote object.
    virtual int fd() const { return -1; }
};

// A local file: its descriptor owned, or borrowed from a caller that keeps it open.
class FileReader final : public Reader {
public:
    explicit FileReader(int fd) : m_fd(fd) {}
    explicit FileReader(fsutil::UniqueFd fd) : m_owned(std::move(fd)), m_fd(m_owned.get()) {}
    bool read(void* buffer, std::size_t size, uint64_t offset) const override
    {
        return fsutil::read_exact(m_fd, buffer, size, offset);
    }
    int fd() const override { return m_fd; }

private:
    fsutil::UniqueFd m_owned;
    int m_fd;
};

// What Folder::open found: a reader when status is ok, otherwise why not (fsutil's statuses).
struct OpenedObject {
    std::unique_ptr<Reader> reader;
    fsutil::OpenStatus status = fsutil::OpenStatus::unreadable;
    uint64_t size = 0;
    std::string reason; // for anything but ok: what is wrong, without the object's name

    bool read(void* buffer, std::size_t n, uint64_t offset) const { return reader->read(buffer, n, offset); }
    int fd() const { return reader ? reader->fd() : -1; }
};

class Folder {
public:
    Folder() = default;
    // A local directory already opened and listed.
    explicit Folder(fsutil::ListedDirectory listed);
    Folder(Folder&&) noexcept;
    Folder& operator=(Folder&&) noexcept;
    ~Folder();

    // Lists `location`. A local path: the directory. An S3 prefix: the objects and folders directly
    // beneath it (a "/"-delimited listing; each folder beneath is listed when first opened); a key
    // that is one object is read with the rest of its folder. An HTTP(S) URL, which
    // has no listing: a URL whose last part answers a HEAD is its folder holding that file (and
    // whatever the file names, asked for when opened); any other names a folder holding those of
    // the files checkpoint formats are recognised by that answer a HEAD. Throws
    // Error(cannot_open) when there is nothing there, Error(remote_error) when the server fails.
    static Folder open(const Location& location);

    std::filesystem::path path; // for messages: the local path or the URL
    std::vector<std::string> names; // the entries directly beneath, sorted (files and folders)

    bool has(std::string_view name) const;
    bool is_local() const { return !m_remote; }
    bool valid() const { return m_remote || m_local.fd; }
    // The local directory's descriptor; -1 for a remote folder.
    int fd() const { return m_local.fd.get(); }
    const Location& location() const { return m_location; }

    // Opens `name` (a relative path, confined beneath this folder: a symlink, "..", an absolute
    // path is `outside`). Never throws for the local disk; throws Error(remote_error) when a
    // server fails.
    OpenedObject open(std::string_view name) const;
    // Opens `name`, refusing more than `max_bytes`; throws as fsutil::open_small_file does.
    OpenedObject open_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const;
    // The whole small object; throws as fsutil::read_small_file does.
    std::string read_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const;
    bool exists(std::string_view name) const;
    // True when `name` is a file directly beneath this folder: a regular file on a local disk
    // (never through a symlink), an object in a bucket or on a web server.
    bool is_file(std::string_view name) const;
    // True when `name` is a folder beneath this one (never through a symlink).
    bool is_folder(std::string_view name) const;
    // The folder `name` (one component) beneath this one, listed; never reached through a
    // symlink. Throws Error naming it: cannot_open, path_outside_checkpoint, invalid_manifest
    // when it is not a folder.
    Folder subfolder(std::string_view name) const;

    struct Remote; // a server and what its listing said (folder.cpp)

private:
    fsutil::ListedDirectory m_local;
    std::shared_ptr<const Remote> m_remote; // shared by a folder and its subfolders
    std::string m_prefix; // remote: this folder's key prefix within the remote's ("" or "a/b/")
    Location m_location;
};

// How many remote reads a command has in flight by default: each holds at most 8 MiB (verify) or
// 12 MiB (stats: a window and its master's), so eight stay below the 128 MiB a command may use.
inline constexpr int kRemoteReadsAtOnce = 8;

// How many objects a command reads at once by default: the cores for a local folder (0: the
// hardware's), more for a remote one, whose reads wait on the network rather than on a core.
inline int default_threads(const Folder& folder, int requested)
{
    return requested > 0 || folder.is_local() ? requested : kRemoteReadsAtOnce;
}

// A reader's bytes as a function, for parsers that take one (zip, pickle).
std::function<bool(void*, std::size_t, uint64_t)> read_function(const Reader& reader);

} // namespace shardscope::storage
