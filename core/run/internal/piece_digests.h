#pragma once
// The MD5 of every piece of an upload (a PUT's body or a multipart part), worked out by a thread
// of its own ahead of the threads that send them, sixteen pieces at a time (Md5Lanes): one piece
// after another, just before each was sent, OpenSSL's MD5 took 0.7 CPU s for 512 MiB, as much as
// the test gateway's own work on two cores (docs/benchmarks.md, bench_s3). The thread reads the
// pieces itself, and the senders read them again: it keeps at most kLead pieces ahead of them, so
// that a step larger than memory is read from the disk once and from the page cache the second
// time. Used by the mirror tier (core/run only).

#include "core/util/hashing.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace shardscope {

class PieceDigests {
public:
    static constexpr std::size_t kLead = 32;
    // Reads `into.size()` bytes of a piece from `at` (relative to the piece), or throws.
    using Read = std::function<void(uint64_t at, std::span<std::byte> into)>;
    // Opens piece j for reading (once for all its reads), or throws.
    using Open = std::function<Read(std::size_t j)>;

    // `sizes`: each piece's size in bytes. The thread starts at once.
    PieceDigests(std::vector<uint64_t> sizes, Open open);
    ~PieceDigests(); // stops the thread, even in the middle of a piece, and joins it
    PieceDigests(const PieceDigests&) = delete;
    PieceDigests& operator=(const PieceDigests&) = delete;

    // Piece j's MD5, waited for. What the thread met instead (a piece it could not open or read)
    // is thrown, here and from then on by every call for a piece it did not finish.
    Md5Digest get(std::size_t j);
    // Throws what the thread met, if it has failed: a sender about to begin a transfer asks.
    void check();

private:
    void run();

    const std::vector<uint64_t> m_sizes;
    const Open m_open;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<Md5Digest> m_digests;
    std::size_t m_done = 0; // pieces [0, m_done) have their digests
    std::size_t m_wanted = 0; // a sender has asked for piece m_wanted - 1
    std::atomic<bool> m_stop = false; // set under m_mutex; read without it between reads too
    std::exception_ptr m_error;
    std::thread m_thread; // last: it starts once the rest is there
};

} // namespace shardscope
