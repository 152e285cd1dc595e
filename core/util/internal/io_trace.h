#pragma once
// The record of every change the core makes to a file system, for the crash tests only (apps
// never include core/*/internal/). fsutil performs each create, write, fsync, rename, unlink and
// mkdir itself and tells the observer of each, so a test can rebuild what a
// power cut at any point could have left on disk (tests/core/crash).

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardscope::fsutil {

class IoObserver {
public:
    virtual ~IoObserver() = default;
    virtual void created(int dirfd, const std::string& name, int fd) = 0; // a new, empty file
    virtual void made_directory(int dirfd, const std::string& name) = 0;
    virtual void wrote(int fd, uint64_t offset, const void* data, std::size_t size) = 0;
    // fsync of a file or of a directory; told just before the call, the others just after theirs
    virtual void synced(int fd) = 0;
    virtual void renamed(int dirfd, const std::string& from, const std::string& to) = 0;
    virtual void unlinked(int dirfd, const std::string& name) = 0; // a file or an empty directory
};

// Installs `observer` (nullptr: none). Called from any thread; the observer serialises itself.
void set_io_observer(IoObserver* observer);

} // namespace shardscope::fsutil
