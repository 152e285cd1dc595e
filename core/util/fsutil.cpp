#include "core/util/fsutil.h"
#include "core/util/internal/fault_injection.h"
#include "core/util/internal/io_trace.h"

#include "core/util/error.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

namespace shardscope::fsutil {

namespace {

struct FaultPlan {
    std::atomic<int> count{0};
    std::atomic<int> fail_at{0};
    std::atomic<int> error{0};
};
FaultPlan g_faults[3];
std::atomic<IoObserver*> g_observer{nullptr};

// Returns the errno to simulate for this operation, or 0 to perform it.
int injected(IoOp op)
{
    FaultPlan& plan = g_faults[static_cast<int>(op)];
    const int n = ++plan.count;
    return n == plan.fail_at.load() ? plan.error.load() : 0;
}

} // namespace

void inject_fault(IoOp op, int k, int error)
{
    FaultPlan& plan = g_faults[static_cast<int>(op)];
    plan.count = 0;
    plan.error = error;
    plan.fail_at = k;
}

int io_operations(IoOp op)
{
    return g_faults[static_cast<int>(op)].count.load();
}

void set_io_observer(IoObserver* observer)
{
    g_observer = observer;
}

void reset_io_counts()
{
    for (auto& plan : g_faults) {
        plan.count = 0;
        plan.fail_at = 0;
    }
}

bool rename_at(int dirfd, const std::string& from, const std::string& to)
{
    if (const int err = injected(IoOp::rename)) {
        errno = err;
        return false;
    }
    if (::renameat(dirfd, from.c_str(), dirfd, to.c_str()) != 0)
        return false;
    if (IoObserver* o = g_observer.load())
        o->renamed(dirfd, from, to);
    return true;
}

UniqueFd create_exclusive(int dirfd, const std::string& name)
{
    UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd)
        if (IoObserver* o = g_observer.load())
            o->created(dirfd, name, fd.get());
    return fd;
}

bool unlink_at(int dirfd, const std::string& name)
{
    if (::unlinkat(dirfd, name.c_str(), 0) != 0)
        return false;
    if (IoObserver* o = g_observer.load())
        o->unlinked(dirfd, name);
    return true;
}

bool remove_tree_at(int dirfd, const std::string& name)
{
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT;
    if (S_ISDIR(st.st_mode)) {
        UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub)
            return false;
        for (const std::string& entry : list_directory(sub.get()))
            if (!remove_tree_at(sub.get(), entry))
                return false;
        if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0)
            return false;
    } else if (::unlinkat(dirfd, name.c_str(), 0) != 0) {
        return false;
    }
    if (IoObserver* o = g_observer.load())
        o->unlinked(dirfd, name);
    return true;
}

void make_directories(const std::filesystem::path& dir, bool durable)
{
    std::filesystem::path path = dir;
    if (!path.has_filename() && path.has_relative_path())
        path = path.parent_path(); // "a/b/" names the directory "a/b"
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return;
    int err = errno;
    if (path.has_filename() && path.has_relative_path()) {
        const std::filesystem::path parent = path.parent_path();
        if (!parent.empty())
            make_directories(parent, durable);
        // mkdirat beneath an open parent, so the observer learns which directory changed
        UniqueFd parent_fd(::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        const std::string name = path.filename().string();
        if (parent_fd && ::mkdirat(parent_fd.get(), name.c_str(), 0755) == 0) {
            if (IoObserver* o = g_observer.load())
                o->made_directory(parent_fd.get(), name);
            if (durable)
                fsync_or_throw(parent_fd.get(), parent.empty() ? "." : parent.string());
            return;
        }
        err = errno;
    }
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return; // created meanwhile by someone else
    const bool exists = ::stat(path.c_str(), &st) == 0;
    throw Error(ProblemKind::io_error,
                dir.string() + ": cannot create the directory: " +
                    (exists ? std::string("it exists and is not a directory") : std::strerror(err)),
                dir.string());
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept
{
    if (this != &other) {
        if (m_fd >= 0)
            ::close(m_fd);
        m_fd = other.release();
    }
    return *this;
}

UniqueFd::~UniqueFd()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

int UniqueFd::release()
{
    const int fd = m_fd;
    m_fd = -1;
    return fd;
}

std::optional<std::string> unsafe_name_reason(std::string_view name)
{
    if (name.empty())
        return "the path is empty";
    if (name.find('\0') != std::string_view::npos)
        return "the path contains a NUL byte";
    if (name.front() == '/')
        return "the path is absolute";
    if (name.size() > 4096)
        return "the path is longer than 4096 bytes";
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t end = std::min(name.find('/', start), name.size());
        const std::string_view part = name.substr(start, end - start);
        if (part.empty())
            return "the path has an empty component";
        if (part == "." || part == "..")
            return "the path has a '" + std::string(part) + "' component";
        start = end + 1;
    }
    return std::nullopt;
}

UniqueFd open_directory(const std::filesystem::path& dir)
{
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd)
        throw Error(ProblemKind::cannot_open, dir.string() + ": cannot open the directory: " + std::strerror(errno),
                    dir.string());
    return fd;
}

OpenedFile open_beneath_for_read(int dirfd, std::string_view name)
{
    OpenedFile result;
    if (auto why = unsafe_name_reason(name)) {
        result.status = OpenStatus::outside;
        result.reason = *why;
        return result;
    }
    UniqueFd current; // owns every intermediate directory; dirfd itself stays the caller's
    int parent = dirfd;
    std::size_t start = 0;
    while (true) {
        const std::size_t slash = name.find('/', start);
        const bool last = slash == std::string_view::npos;
        const std::string part(name.substr(start, last ? std::string_view::npos : slash - start));
        // O_NONBLOCK so that opening a FIFO returns at once instead of waiting for a writer.
        const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
        const int fd = ::openat(parent, part.c_str(), flags);
        if (fd < 0) {
            const int err = errno;
            struct stat st {};
            const bool is_link = ::fstatat(parent, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            if (is_link) {
                result.status = OpenStatus::outside;
                result.reason = "'" + part + "' is a symlink, which a checkpoint may not contain";
            } else if (err == ENOENT) {
                result.status = OpenStatus::missing;
                result.reason = "the file does not exist";
            } else if (err == ENOTDIR) {
                result.status = OpenStatus::not_regular;
                result.reason = "'" + part + "' is not a directory";
            } else {
                result.status = OpenStatus::unreadable;
                result.reason = std::string("cannot open it: ") + std::strerror(err);
            }
            return result;
        }
        current = UniqueFd(fd);
        if (last)
            break;
        parent = current.get();
        start = slash + 1;
    }
    struct stat st {};
    if (::fstat(current.get(), &st) != 0) {
        result.status = OpenStatus::unreadable;
        result.reason = std::string("cannot stat it: ") + std::strerror(errno);
        return result;
    }
    if (!S_ISREG(st.st_mode)) {
        result.status = OpenStatus::not_regular;
        result.reason = S_ISDIR(st.st_mode) ? "it is a directory, not a file"
            : S_ISFIFO(st.st_mode)          ? "it is a FIFO, not a file"
                                            : "it is not a regular file";
        return result;
    }
    const int fl = ::fcntl(current.get(), F_GETFL);
    if (fl >= 0)
        ::fcntl(current.get(), F_SETFL, fl & ~O_NONBLOCK);
    result.fd = std::move(current);
    result.status = OpenStatus::ok;
    result.size = static_cast<uint64_t>(st.st_size);
    return result;
}

bool read_exact(int fd, void* buffer, std::size_t size, uint64_t offset)
{
    auto* out = static_cast<char*>(buffer);
    while (size > 0) {
        const ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (n == 0) {
            errno = 0; // end of file before `size` bytes: the caller reports truncation
            return false;
        }
        out += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<uint64_t>(n);
    }
    return true;
}

bool write_all(int fd, const void* data, std::size_t size)
{
    if (const int err = injected(IoOp::write)) {
        errno = err;
        return false;
    }
    const auto* in = static_cast<const char*>(data);
    IoObserver* observer = g_observer.load();
    while (size > 0) {
        const off_t at = observer ? ::lseek(fd, 0, SEEK_CUR) : 0;
        const ssize_t n = ::write(fd, in, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (observer)
            observer->wrote(fd, static_cast<uint64_t>(at), in, static_cast<std::size_t>(n));
        in += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

void start_writeback(int fd, uint64_t offset, uint64_t size)
{
    ::sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(size), SYNC_FILE_RANGE_WRITE);
}

bool append_from_file(int out_fd, int in_fd, uint64_t in_offset, uint64_t size)
{
    if (const int err = injected(IoOp::write)) {
        errno = err;
        return false;
    }
    // An observer sees every byte written (crash tests replay them): those go through write_all.
    bool kernel = g_observer.load() == nullptr;
    std::vector<char> buffer;
    while (size > 0) {
        if (kernel) {
            auto from = static_cast<off64_t>(in_offset);
            const ssize_t n = ::copy_file_range(in_fd, &from, out_fd, nullptr, size, 0);
            if (n > 0) {
                in_offset += static_cast<uint64_t>(n);
                size -= static_cast<uint64_t>(n);
                continue;
            }
            if (n == 0) {
                errno = 0;
                return false;
            }
            if (errno == EINTR)
                continue;
            if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
                return false;
            kernel = false; // a file system or kernel that cannot: copy through memory
        }
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(size, 4u << 20));
        buffer.resize(n);
        if (!read_exact(in_fd, buffer.data(), n, in_offset) || !write_all(out_fd, buffer.data(), n))
            return false;
        in_offset += n;
        size -= n;
    }
    return true;
}

OpenedFile open_small_file(int dirfd, std::string_view name, uint64_t max_bytes, const std::string& display_path)
{
    OpenedFile file = open_beneath_for_read(dirfd, name);
    if (file.status == OpenStatus::missing)
        throw Error(ProblemKind::cannot_open, display_path + ": " + file.reason, display_path);
    if (file.status == OpenStatus::outside)
        throw Error(ProblemKind::path_outside_checkpoint, display_path + ": " + file.reason, display_path);
    if (file.status != OpenStatus::ok)
        throw Error(ProblemKind::unreadable, display_path + ": " + file.reason, display_path);
    if (file.size > max_bytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": the file is " + std::to_string(file.size) + " bytes, more than the limit of " +
                        std::to_string(max_bytes),
                    display_path);
    return file;
}

std::string read_small_file(int dirfd, std::string_view name, uint64_t max_bytes, const std::string& display_path)
{
    const OpenedFile file = open_small_file(dirfd, name, max_bytes, display_path);
    std::string contents(file.size, '\0');
    if (!read_exact(file.fd.get(), contents.data(), contents.size(), 0))
        throw Error(ProblemKind::unreadable,
                    display_path + ": cannot read it: " + (errno ? std::strerror(errno) : "it shrank while being read"),
                    display_path);
    return contents;
}

void fsync_or_throw(int fd, const std::string& display_path)
{
    if (const int err = injected(IoOp::fsync)) {
        errno = err;
        throw Error(ProblemKind::io_error, display_path + ": fsync failed: " + std::strerror(errno), display_path);
    }
    // Told before the call: what the observer heard of before it certainly happened before the
    // fsync began, so it is covered; a change another thread makes meanwhile is then (rightly)
    // taken as still pending.
    if (IoObserver* o = g_observer.load())
        o->synced(fd);
    if (::fsync(fd) != 0)
        throw Error(ProblemKind::io_error, display_path + ": fsync failed: " + std::strerror(errno), display_path);
}

void write_file_atomic(int dirfd, const std::string& name, std::string_view contents, const std::string& display_dir,
                       bool durable)
{
    const std::string tmp = name + ".tmp";
    const std::string display = display_dir + "/" + name;
    // O_EXCL after unlinking a stale tmp: never write through a symlink someone planted there.
    unlink_at(dirfd, tmp);
    UniqueFd fd = create_exclusive(dirfd, tmp);
    if (!fd)
        throw Error(ProblemKind::io_error, display + ".tmp: cannot create it: " + std::strerror(errno), display);
    try {
        if (!write_all(fd.get(), contents.data(), contents.size()))
            throw Error(ProblemKind::io_error, display + ".tmp: write failed: " + std::strerror(errno), display);
        if (durable)
            fsync_or_throw(fd.get(), display + ".tmp");
        fd = UniqueFd();
        if (!rename_at(dirfd, tmp, name))
            throw Error(ProblemKind::io_error,
                        display + ": cannot rename the .tmp file into place: " + std::strerror(errno), display);
    } catch (...) {
        fd = UniqueFd();
        unlink_at(dirfd, tmp); // the old `name`, if any, is untouched
        throw;
    }
    if (durable)
        fsync_or_throw(dirfd, display_dir);
}

bool exists_at(int dirfd, const std::string& name)
{
    struct stat st {};
    return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool ListedDirectory::has(std::string_view name) const
{
    return std::binary_search(names.begin(), names.end(), name);
}

ListedDirectory open_listed(const std::filesystem::path& dir)
{
    ListedDirectory listed{.path = dir, .fd = open_directory(dir)};
    listed.names = list_directory(listed.fd.get());
    std::sort(listed.names.begin(), listed.names.end());
    return listed;
}

std::vector<std::string> list_directory(int dirfd)
{
    std::vector<std::string> names;
    const int copy = ::dup(dirfd); // fdopendir takes ownership of its descriptor
    if (copy < 0)
        return names;
    DIR* dir = ::fdopendir(copy);
    if (!dir) {
        ::close(copy);
        return names;
    }
    ::rewinddir(dir);
    while (const dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..")
            names.push_back(std::move(name));
        if (names.size() >= 1'000'000)
            break; // enough to judge by; a directory this big is not a checkpoint anyway
    }
    ::closedir(dir);
    return names;
}

} // namespace shardscope::fsutil
