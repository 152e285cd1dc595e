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

// Whether Ctrl+C means KeyboardInterrupt here: Python's own handler, on the main thread (where
// Python runs its handlers). A script's own handler (a "finish the step, then save" one, asyncio's)
// may not raise at all: its SIGINT is left to it.
bool python_raises_keyboard_interrupt()
{
    const py::module_ threading = py::module_::import("threading");
    if (!threading.attr("current_thread")().is(threading.attr("main_thread")()))
        return false;
    const py::module_ signal = py::module_::import("signal");
    return signal.attr("getsignal")(SIGINT).is(signal.attr("default_int_handler"));
}

} // namespace

SigintCancel::SigintCancel()
{
    if (!python_raises_keyboard_interrupt())
        return;
    struct sigaction ours {};
    ours.sa_handler = on_sigint;
    ours.sa_flags = SA_ONSTACK; // as Python installs its own
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
    PyErr_SetInterrupt(); // as if it arrived now: Python's handler raises KeyboardInterrupt
    if (PyErr_CheckSignals() != 0)
        throw py::error_already_set();
}

} // namespace shardscope::python
