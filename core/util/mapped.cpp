#include "core/util/mapped.h"

#include <csetjmp>
#include <csignal>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

namespace shardscope::fsutil {

MappedWindow::MappedWindow(MappedWindow&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), mapped_(std::exchange(other.mapped_, 0)),
      data_(std::exchange(other.data_, nullptr))
{}

MappedWindow& MappedWindow::operator=(MappedWindow&& other) noexcept
{
    if (this != &other) {
        unmap();
        base_ = std::exchange(other.base_, nullptr);
        mapped_ = std::exchange(other.mapped_, 0);
        data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
}

MappedWindow::~MappedWindow()
{
    unmap();
}

void MappedWindow::unmap()
{
    if (base_)
        ::munmap(base_, mapped_);
    base_ = nullptr;
    mapped_ = 0;
    data_ = nullptr;
}

bool MappedWindow::map(int fd, uint64_t offset, std::size_t length)
{
    unmap();
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset - offset % page;
    const std::size_t size = static_cast<std::size_t>(offset - start) + length;
    void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
    if (base == MAP_FAILED)
        return false;
    base_ = base;
    mapped_ = size;
    data_ = static_cast<const std::byte*>(base) + (offset - start);
    return true;
}

namespace {

thread_local sigjmp_buf* t_guard = nullptr; // set while this thread runs a guarded access
struct sigaction g_previous {};

void on_sigbus(int signal, siginfo_t* info, void* context)
{
    if (t_guard)
        siglongjmp(*t_guard, 1);
    // Not ours: whatever SIGBUS meant before (a handler, or the default: the process dies).
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction)
            return g_previous.sa_sigaction(signal, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        return g_previous.sa_handler(signal);
    }
    ::sigaction(SIGBUS, &g_previous, nullptr);
    ::raise(SIGBUS); // delivered when the handler returns, or at once for a fault re-executed
}

void install_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction action {};
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGBUS, &action, &g_previous);
    });
}

} // namespace

bool guarded_access(const std::function<void()>& access)
{
    install_handler();
    sigjmp_buf jump;
    sigjmp_buf* const outer = t_guard;
    if (sigsetjmp(jump, 1) != 0) {
        t_guard = outer;
        return false;
    }
    t_guard = &jump;
    access();
    t_guard = outer;
    return true;
}

} // namespace shardscope::fsutil
