#pragma once
// Reading a file through a memory mapping, safely: stats reads each byte of a checkpoint once and
// a pread would copy every one of them out of the page cache first (a fifth of a warm scan's
// time). A mapping has one hazard a read does not: a file that shrinks under it (another process
// truncating it) turns the next access into SIGBUS. guarded_access turns that into a false
// return, so a hostile or changing folder is still a sentence, never a crash.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace shardscope::fsutil {

// Bytes [offset, offset + length) of an open file, mapped read-only (private to this process).
class MappedWindow {
public:
    MappedWindow() = default;
    MappedWindow(const MappedWindow&) = delete;
    MappedWindow& operator=(const MappedWindow&) = delete;
    MappedWindow(MappedWindow&& other) noexcept;
    MappedWindow& operator=(MappedWindow&& other) noexcept;
    ~MappedWindow();

    // Maps the range (length > 0); false with errno set when the kernel refuses.
    bool map(int fd, uint64_t offset, std::size_t length);
    const std::byte* data() const { return data_; }

private:
    void unmap();
    void* base_ = nullptr; // page-aligned start of the mapping
    std::size_t mapped_ = 0; // its length
    const std::byte* data_ = nullptr;
};

// Runs `access`, which reads mapped memory; false when a read hit a page the file no longer has
// (SIGBUS), with `access` abandoned where it was: it must hold no resources of its own (locals
// with destructors) below this call. SIGBUS outside such a call keeps its previous meaning.
bool guarded_access(const std::function<void()>& access);

} // namespace shardscope::fsutil
