#pragma once
// Ctrl+C during a call that waits on a server. Python runs its SIGINT handler only between
// bytecodes, so a call that holds the thread in C++ (a request to a server that does not answer,
// retried with backoff) would keep a user's Ctrl+C waiting for minutes. While such a call runs on
// the main thread with Python's own SIGINT handler in place, SIGINT sets the operation's cancel
// flag instead (core/util/cancel.h), which stops the requests and the hashing below; once the
// call is back, the interrupt is handed to Python as if it had just arrived, so KeyboardInterrupt
// follows. A script with a handler of its own keeps SIGINT to itself.

#include "core/util/cancel.h"

#include <pybind11/pybind11.h>

#include <atomic>
#include <csignal>
#include <optional>
#include <type_traits>
#include <utility>

namespace shardscope::python {

class SigintCancel {
public:
    // Takes SIGINT for the call when Python's default handler (KeyboardInterrupt) has it and this
    // is the main thread; leaves it alone otherwise (ignored, the default action, a script's own
    // handler, a call from another thread).
    SigintCancel();
    ~SigintCancel() { restore(); }
    SigintCancel(const SigintCancel&) = delete;
    SigintCancel& operator=(const SigintCancel&) = delete;

    // Set when Ctrl+C arrived during the call.
    const std::atomic<bool>* flag() const;
    // Gives SIGINT back to Python and, when it arrived, runs Python's handler now: throws
    // pybind11::error_already_set (KeyboardInterrupt) when the handler raises. Holds the GIL.
    void hand_over();

private:
    void restore();

    bool m_installed = false;
    struct sigaction m_previous {};
    std::atomic<bool> m_never{false};
};

// Runs `work` without the GIL under a SigintCancel: Ctrl+C stops it and raises KeyboardInterrupt
// in place of whatever it returned or threw (a cancelled request's error included).
template <class Work>
auto interruptible(Work&& work) -> std::invoke_result_t<Work&, const std::atomic<bool>*>
{
    using Result = std::invoke_result_t<Work&, const std::atomic<bool>*>;
    SigintCancel interrupt;
    std::optional<Result> result;
    try {
        pybind11::gil_scoped_release unlocked;
        const CancelScope scope(interrupt.flag());
        result.emplace(work(interrupt.flag()));
    } catch (...) {
        interrupt.hand_over();
        throw;
    }
    interrupt.hand_over();
    return std::move(*result);
}

} // namespace shardscope::python
