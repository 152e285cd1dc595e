#include "core/run/root_lock.h"

#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

std::string this_host()
{
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0)
        return "unknown";
    return name;
}

// When process `pid` started (unix seconds), from /proc: field 22 of /proc/PID/stat (clock ticks
// since boot) and the boot time of /proc/stat. nullopt where /proc cannot say.
std::optional<int64_t> process_started_at(int64_t pid)
{
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line))
        return std::nullopt;
    const auto close = line.rfind(')'); // the command name may hold spaces and parentheses
    if (close == std::string::npos)
        return std::nullopt;
    std::istringstream fields(line.substr(close + 1));
    std::string field;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 22 && fields >> field; ++i) // fields 3.. follow the name
        if (i == 22)
            ticks = std::strtoull(field.c_str(), nullptr, 10);
    std::ifstream proc_stat("/proc/stat");
    long long boot = 0;
    for (std::string key; proc_stat >> key;)
        if (key == "btime") {
            proc_stat >> boot;
            break;
        }
    const long hz = ::sysconf(_SC_CLK_TCK);
    if (ticks == 0 || boot <= 0 || hz <= 0)
        return std::nullopt;
    return boot + static_cast<int64_t>(ticks / static_cast<unsigned long long>(hz));
}

std::optional<LockHolder> parse_holder(const std::string& text)
{
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() || !j.contains("host") ||
        !j["host"].is_string())
        return std::nullopt;
    LockHolder h;
    h.pid = j["pid"].get<int64_t>();
    h.host = j["host"].get<std::string>();
    h.started_at = j.value("started_at", int64_t(0));
    if (h.host == this_host() && h.pid > 0) {
        h.running = ::kill(static_cast<pid_t>(h.pid), 0) == 0 || errno == EPERM;
        // A pid is reused: a process that started after the lock was taken is not its holder
        // (the holder took the lock after it started). The slack covers /proc's rounding.
        if (*h.running && h.started_at > 0)
            if (const auto since = process_started_at(h.pid); since && *since > h.started_at + 2)
                h.running = false;
    }
    return h;
}

std::string read_all(int fd)
{
    std::string text;
    char buffer[1024];
    for (off_t at = 0; text.size() < 64 * 1024;) {
        const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
        if (n <= 0)
            break;
        text.append(buffer, static_cast<std::size_t>(n));
        at += n;
    }
    return text;
}

// Whether `fd` is still the file named `name` in `dirfd`: a lock taken on a file that another
// job has meanwhile replaced (taking over a leftover) locks nothing.
bool is_named(int dirfd, const char* name, int fd)
{
    struct stat a {
    }, b{};
    return ::fstat(fd, &a) == 0 && ::fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino;
}

} // namespace

std::string describe(const LockHolder& h)
{
    std::string when = "an unknown time";
    if (h.started_at > 0) {
        const std::time_t t = static_cast<std::time_t>(h.started_at);
        std::tm tm{};
        char text[64];
        if (::gmtime_r(&t, &tm) && std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm))
            when = text;
    }
    return "pid " + std::to_string(h.pid) + " on host " + h.host + " since " + when;
}

namespace {

// The record of the file named writer.lock now (not of an fd that may have been replaced).
std::optional<LockHolder> holder_at(int dirfd)
{
    fsutil::UniqueFd fd(::openat(dirfd, kLockFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd)
        return std::nullopt;
    return parse_holder(read_all(fd.get()));
}

} // namespace

std::optional<LockHolder> read_lock_holder(const fs::path& root)
{
    fsutil::UniqueFd fd(::open((root / kLockFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd)
        return std::nullopt;
    return parse_holder(read_all(fd.get()));
}

RootLock RootLock::acquire(const fs::path& root, const std::function<void(const std::string&)>& warn)
{
    RootLock lock;
    lock.m_root = fsutil::open_directory(root);
    const int dirfd = lock.m_root.get();
    const std::string display = (root / kLockFile).string();
    fsutil::UniqueFd leftover; // a leftover's file, kept locked until ours replaces it
    // How long a takeover by another job may take before this one gives up (see below).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (int attempt = 0; attempt < 200; ++attempt) {
        // Created through fsutil so that the crash tests' record sees it like every other file.
        fsutil::UniqueFd fd = fsutil::create_exclusive(dirfd, kLockFile);
        const bool created = static_cast<bool>(fd);
        if (!created) {
            if (errno != EEXIST)
                throw Error(ProblemKind::io_error, display + ": cannot create the lock file: " + std::strerror(errno),
                            display);
            fd = fsutil::UniqueFd(::openat(dirfd, kLockFile, O_RDWR | O_NOFOLLOW | O_CLOEXEC));
            if (!fd) {
                if (errno == ENOENT)
                    continue; // removed by the job that just released it
                throw Error(ProblemKind::io_error, display + ": cannot open the lock file: " + std::strerror(errno),
                            display);
            }
        }
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK)
                throw Error(ProblemKind::io_error,
                            display + ": cannot lock it (" + std::strerror(errno) +
                                "): the file system does not support flock (docs/format.md, 6.7)",
                            display);
            // Refused at once when the record names a live holder (or one on another host). A
            // record not written yet, a file already replaced, or a dead pid's record whose flock
            // is held (another job is taking that leftover over right now) is a moment of a
            // takeover: look again shortly, so that the sentence names the job that won.
            const auto holder = holder_at(dirfd);
            const bool settled =
                holder && holder->running != std::optional<bool>(false) && is_named(dirfd, kLockFile, fd.get());
            if (!settled && std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            if (holder && holder->running == std::optional<bool>(false)) // still, after the wait
                throw Error(ProblemKind::root_locked,
                            root.string() + " is locked, but its record names " + describe(*holder) +
                                ", which does not run here: a child it forked holds the lock on, or a job in "
                                "another PID namespace does; stop it or choose another --root",
                            root.string());
            throw Error(ProblemKind::root_locked,
                        root.string() + " is being written by another job (" +
                            (holder ? describe(*holder) : std::string("whose lock record is not written yet")) +
                            "); one writer per root: stop it or choose another --root",
                        root.string());
        }
        if (!is_named(dirfd, kLockFile, fd.get()))
            continue;
        if (!created) {
            // Nobody holds it, so whoever wrote it ended without removing it (killed, a power cut).
            const auto holder = parse_holder(read_all(fd.get()));
            if (warn) {
                const char* why = !holder || !holder->running ? ", which no longer holds it"
                    : *holder->running ? ", which no longer holds it (its pid is now another process's)"
                                       : ", which is no longer running";
                warn(holder ? "took over the lock of " + root.string() + " left by " + describe(*holder) + why
                            : "took over the lock file of " + root.string() +
                             ", which names no holder (a crash while it was written)");
            }
            // Replaced by a new file rather than rewritten, so that its record is written the one
            // way the crash model knows (create, write); the old one stays locked meanwhile.
            fsutil::unlink_at(dirfd, kLockFile);
            leftover = std::move(fd);
            continue;
        }
        const nlohmann::json record = {{"pid", static_cast<int64_t>(::getpid())},
                                       {"host", this_host()},
                                       {"started_at", static_cast<int64_t>(std::time(nullptr))}};
        const std::string text = record.dump() + "\n";
        // Not fsync'd: the lock is the kernel's; the record only names the holder, and a torn one
        // after a power cut is a leftover like any other.
        // A record that cannot be written (a full disk) leaves the holder unnamed, not the root unlocked.
        if (!fsutil::write_all(fd.get(), text.data(), text.size()) && warn)
            warn(display + ": cannot write who holds the lock (" + std::strerror(errno) + "); the lock holds");
        lock.m_fd = std::move(fd);
        return lock;
    }
    throw Error(ProblemKind::root_locked, root.string() + ": another job keeps replacing " + kLockFile, root.string());
}

RootLock& RootLock::operator=(RootLock&& other) noexcept
{
    if (this != &other) {
        release();
        m_root = std::move(other.m_root);
        m_fd = std::move(other.m_fd);
    }
    return *this;
}

RootLock::~RootLock()
{
    release();
}

void RootLock::release()
{
    // Removed while still locked: a job that opens it meanwhile finds, once it has the flock,
    // that the name no longer points at it and starts over.
    if (m_fd && is_named(m_root.get(), kLockFile, m_fd.get()))
        fsutil::unlink_at(m_root.get(), kLockFile);
    m_fd = fsutil::UniqueFd();
    m_root = fsutil::UniqueFd();
}

} // namespace shardscope
