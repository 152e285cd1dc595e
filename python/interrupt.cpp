#include "python/interrupt.h"

namespace py = pybind11;

namespace shardscope::python {

namespace {

// One handler for the process: only the main thread takes SIGINT, one call at a time.
std::atomic<bool> g_sigint{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_sigint(int)
{
    g_sigint.store(true, std::memory_order_relaxed);
}

bool on_main_thread()
{
    const py::module_ threading = py::module_::import("threading");
    return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

} // namespace

SigintCancel::SigintCancel()
{
    if (!on_main_thread())
        return;
    struct sigaction current {};
    if (sigaction(SIGINT, nullptr, &current) != 0 || current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL)
        return;
    struct sigaction ours {};
    ours.sa_handler = on_sigint;
    sigemptyset(&ours.sa_mask);
    g_sigint.store(false);
    m_installed = sigaction(SIGINT, &ours, &m_previous) == 0;
}

const std::atomic<bool>* SigintCancel::flag() const
{
    return m_installed ? &g_sigint : &m_never;
}

void SigintCancel::restore()
{
    if (!std::exchange(m_installed, false))
        return;
    sigaction(SIGINT, &m_previous, nullptr);
}

void SigintCancel::hand_over()
{
    const bool interrupted = m_installed && g_sigint.load();
    restore();
    if (!interrupted)
        return;
    PyErr_SetInterruptEx(SIGINT); // as if it arrived now, for whatever handler the script has
    if (PyErr_CheckSignals() != 0)
        throw py::error_already_set();
}

} // namespace shardscope::python
