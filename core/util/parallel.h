#pragma once
// A minimal fork-join: enough for "one task per shard on a few threads". Shard work is coarse
// (megabytes to gigabytes each), so a shared counter is all the scheduling it needs.

#include "core/util/cancel.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope {

inline int resolve_thread_count(int requested, std::size_t tasks)
{
    int threads = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, threads);
    return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), std::max<std::size_t>(tasks, 1)));
}

// Runs fn(i) for every i in [0, count) on `threads` threads. If a call throws, no further task
// starts, those running are cancelled where they wait on a server (operation_cancelled), and the
// first exception is rethrown once they have returned: a failure that ends the operation is
// said at once, not after every other task has met it too (a server down costs its retries once,
// not once a shard). Callers that want every task run whatever fails catch inside fn.
template <typename Fn>
void parallel_for(std::size_t count, int threads, Fn&& fn)
{
    std::atomic<std::size_t> next{0};
    std::exception_ptr first_error;
    std::mutex error_mutex;
    std::atomic<bool> failed{false};
    const CancelFlags* const caller = t_operation_cancel; // the workers work for the caller's operation
    const CancelFlags flags{.flag = &failed, .outer = caller};
    auto worker = [&] {
        const CancelScope scope(&flags);
        for (std::size_t i = next++; i < count && !failed; i = next++) {
            try {
                fn(i);
            } catch (...) {
                std::lock_guard lock(error_mutex);
                if (!first_error)
                    first_error = std::current_exception();
                failed = true;
            }
        }
    };
    const int n = resolve_thread_count(threads, count);
    std::vector<std::thread> pool;
    for (int t = 1; t < n; ++t)
        pool.emplace_back(worker);
    worker();
    for (auto& thread : pool)
        thread.join();
    if (first_error)
        std::rethrow_exception(first_error);
}

} // namespace shardscope
