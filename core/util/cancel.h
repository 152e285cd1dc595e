#pragma once
// The cancel flag of the operation a thread works for, where a wait deep below it needs it: a
// request to a server that does not answer would otherwise hold a cancelled verify (and an app
// being closed) for its stall timeout times its retries. An operation given a cancel flag sets
// it here for its thread (CancelScope); parallel_for and the read-ahead threads take their
// caller's. Only what blocks for long asks (storage's HTTP exchanges and their retries).

#include <atomic>

namespace shardscope {

inline thread_local const std::atomic<bool>* t_operation_cancel = nullptr;

inline bool operation_cancelled()
{
    return t_operation_cancel && t_operation_cancel->load(std::memory_order_relaxed);
}

// Sets the thread's flag while it lives (a null one keeps the flag the thread has).
class CancelScope {
public:
    explicit CancelScope(const std::atomic<bool>* cancel) : m_previous(t_operation_cancel)
    {
        if (cancel)
            t_operation_cancel = cancel;
    }
    ~CancelScope() { t_operation_cancel = m_previous; }
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

private:
    const std::atomic<bool>* m_previous;
};

} // namespace shardscope
