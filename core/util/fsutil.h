#pragma once
// File-system primitives with the guarantees the checkpoint format promises: every file a
// manifest names is opened beneath the checkpoint directory without following any symlink, only
// regular files are read (a FIFO would hang a reader), and every write is tmp -> fsync -> rename
// followed by an fsync of the directory so the rename itself is durable (fsync(2)).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::fsutil {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : m_fd(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept;
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd();
    int get() const { return m_fd; }
    int release();
    explicit operator bool() const { return m_fd >= 0; }

private:
    int m_fd = -1;
};

// Why `name` may not be used as a path inside a checkpoint, or nullopt when it may: it must be a
// non-empty relative path whose components are neither empty, "." nor "..", without NUL bytes.
std::optional<std::string> unsafe_name_reason(std::string_view name);

// Opens a directory the user named (this one may be reached through symlinks: the user chose it).
// Throws Error(cannot_open) naming the path.
UniqueFd open_directory(const std::filesystem::path& dir);

// A directory opened and listed once. Readers take its names and open files beneath its
// descriptor instead of opening and listing the path again, so that one command reads one
// directory: a root whose `latest` moves on, or a folder renamed meanwhile, cannot show a reader
// something detection did not see.
struct ListedDirectory {
    std::filesystem::path path;
    UniqueFd fd;
    std::vector<std::string> names; // sorted
    bool has(std::string_view name) const;
};
// Throws Error(cannot_open) as open_directory does.
ListedDirectory open_listed(const std::filesystem::path& dir);

enum class OpenStatus { ok, missing, outside, not_regular, unreadable };
struct OpenedFile {
    UniqueFd fd;
    OpenStatus status = OpenStatus::unreadable;
    uint64_t size = 0;
    std::string reason; // for anything but ok: what is wrong, without the file name
};

// Opens `name` for reading beneath `dirfd`. Each component is opened with O_NOFOLLOW, so a symlink
// anywhere on the way is refused as `outside` rather than followed.
OpenedFile open_beneath_for_read(int dirfd, std::string_view name);

// Opens the small file `name` beneath `dirfd` for reading, refusing more than `max_bytes`;
// throws as read_small_file does. For a reader that streams it rather than holding it whole.
OpenedFile open_small_file(int dirfd, std::string_view name, uint64_t max_bytes, const std::string& display_path);

// Reads the whole small file `name` beneath `dirfd`, refusing more than `max_bytes`.
// Throws Error naming `display_path` (unreadable / invalid_manifest for oversize).
std::string read_small_file(int dirfd, std::string_view name, uint64_t max_bytes, const std::string& display_path);

// Full-length pread/write loops that retry on EINTR; they return false with errno set on error.
bool read_exact(int fd, void* buffer, std::size_t size, uint64_t offset);
bool write_all(int fd, const void* data, std::size_t size);
// Starts writeback of bytes just written that will be fsync'd, so that the disk works while the
// caller prepares the next ones and the final fsync has little left to flush. A hint only: the
// fsync is the guarantee.
void start_writeback(int fd, uint64_t offset, uint64_t size);
// Appends `size` bytes of `in_fd` from `in_offset` to `out_fd`, file to file in the kernel
// (copy_file_range) where it can, else through a buffer; false with errno set on error, 0 when
// `in_fd` ends early.
bool append_from_file(int out_fd, int in_fd, uint64_t in_offset, uint64_t size);

// fsync, throwing Error(io_error) that names `display_path` on failure.
void fsync_or_throw(int fd, const std::string& display_path);

// Writes `contents` to `name` in `dirfd` atomically: `name.tmp` (never through a symlink),
// fsync, rename over `name`, fsync of the directory.
void write_file_atomic(int dirfd, const std::string& name, std::string_view contents, const std::string& display_dir,
                       bool durable = true);

// renameat within one directory; false with errno set on failure.
bool rename_at(int dirfd, const std::string& from, const std::string& to);

// Creates `name` in `dirfd` for writing with O_EXCL | O_NOFOLLOW, so nothing is ever written
// through a symlink planted in its place; an invalid fd with errno set on failure.
UniqueFd create_exclusive(int dirfd, const std::string& name);

// unlinkat of a file; false with errno set on failure (ENOENT included).
bool unlink_at(int dirfd, const std::string& name);

// Removes `name` in `dirfd` and everything beneath it without following symlinks. A missing
// `name` is not an error; false with errno set on the first failure.
bool remove_tree_at(int dirfd, const std::string& name);

// Creates `dir` and its missing parents. With `durable`, the parent of each directory it creates
// is fsync'd, so the new name survives a power cut before anything is written beneath it.
// Throws Error(io_error) naming it.
void make_directories(const std::filesystem::path& dir, bool durable = true);

// True when `name` exists in `dirfd` (not following a final symlink).
bool exists_at(int dirfd, const std::string& name);

// Names in the directory (without "." and ".."), at most a million.
std::vector<std::string> list_directory(int dirfd);

} // namespace shardscope::fsutil
