#include "widgets/jobs/jobrunner.h"

#include <cerrno>
#include <sys/resource.h>
#include <unistd.h>

namespace shardwidgets {

void runBelowTheGuiThread()
{
#ifdef __linux__
    // On Linux the nice value is per thread (setpriority with a thread id), and threads inherit
    // it from the one that starts them. Raising it needs no privilege; failing changes nothing.
    constexpr int kWorkerNice = 10;
    const pid_t self = gettid();
    errno = 0;
    const int current = getpriority(PRIO_PROCESS, id_t(self));
    if (errno == 0 && current < kWorkerNice)
        setpriority(PRIO_PROCESS, id_t(self), kWorkerNice);
#endif
}

} // namespace shardwidgets
