#pragma once
// One writer per checkpoint root. Two jobs saving into the same root delete each other's `.tmp`
// files and fail at commit; the lock turns that into a refusal, at once and naming the holder.
//
// The lock is flock(LOCK_EX | LOCK_NB) on `writer.lock` in the root, which holds who took it
// (pid, host, start time) for the refusal's sentence and for `shardctl status`. The kernel
// releases a flock when its holder dies, however it dies, so a lock file whose flock is free is
// a leftover: it is taken over with a warning. Readers (verify, info, stats, status, the app)
// never take it; they see only committed steps anyway (format.md, section 6).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "core/util/fsutil.h"

namespace shardscope {

inline constexpr const char* kLockFile = "writer.lock";

struct LockHolder {
    int64_t pid = 0;
    std::string host;
    int64_t started_at = 0; // unix seconds
    // Same host only: whether that pid is a running process (nullopt for another host, whose
    // processes this one cannot see).
    std::optional<bool> running;
};

// "pid 123 on host h since 2026-12-01 18:00:00 UTC", for sentences.
std::string describe(const LockHolder& holder);

// The holder `writer.lock` names, without taking or probing the lock; nullopt when the root has
// no lock file or its record is unreadable (a crash while it was written).
std::optional<LockHolder> read_lock_holder(const std::filesystem::path& root);

class RootLock {
public:
    RootLock() = default;
    // Takes the lock of `root`, or throws Error(root_locked) naming the holder. `warn` hears of a
    // leftover lock taken over.
    static RootLock acquire(const std::filesystem::path& root, const std::function<void(const std::string&)>& warn);
    RootLock(RootLock&&) noexcept = default;
    RootLock& operator=(RootLock&& other) noexcept;
    ~RootLock(); // removes the lock file, then releases the lock
    explicit operator bool() const { return static_cast<bool>(m_fd); }

private:
    void release();
    fsutil::UniqueFd m_root;
    fsutil::UniqueFd m_fd;
};

} // namespace shardscope
