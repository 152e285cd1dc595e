#pragma once
// The cancel flags of the operation a thread works for, where a wait deep below it needs them: a
// request to a server that does not answer would otherwise hold a cancelled verify (and an app
// being closed) for its stall timeout times its retries. An operation given a cancel flag sets
// it here for its thread (CancelScope); parallel_for adds one of its own, set when one of its
// tasks fails, so that the others stop waiting on a server too; parallel_for's workers and the
// read-ahead threads take their caller's flags. Only what blocks for long asks (storage's HTTP
// exchanges and their retries).

#include <atomic>

namespace shardscope {

// A flag and the flags of the scopes around it: any of them set cancels.
struct CancelFlags {
    const std::atomic<bool>* flag = nullptr;
    const CancelFlags* outer = nullptr;
};

inline thread_local const CancelFlags* t_operation_cancel = nullptr;

inline bool operation_cancelled()
{
    for (const CancelFlags* f = t_operation_cancel; f; f = f->outer)
        if (f->flag && f->flag->load(std::memory_order_relaxed))
            return true;
    return false;
}

// Adds a flag to the thread's while it lives (a null one adds nothing), or, for a thread working
// for another's operation, gives it that thread's flags (which must outlive the scope).
class CancelScope {
public:
    explicit CancelScope(const std::atomic<bool>* cancel)
        : m_added{.flag = cancel, .outer = t_operation_cancel}, m_previous(t_operation_cancel)
    {
        if (cancel)
            t_operation_cancel = &m_added;
    }
    explicit CancelScope(const CancelFlags* flags) : m_previous(t_operation_cancel) { t_operation_cancel = flags; }
    ~CancelScope() { t_operation_cancel = m_previous; }
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

private:
    CancelFlags m_added;
    const CancelFlags* m_previous;
};

} // namespace shardscope
