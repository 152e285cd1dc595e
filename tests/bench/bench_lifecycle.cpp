// Prints how long a training loop stalls per checkpoint with a synchronous save and with
// save_async (which only copies the state before returning), for the same state and disk.
// usage: bench_lifecycle [--mib N] [--dir DIR]    (defaults: 512 MiB in /var/tmp)

#include "benchutil.h"
#include "core/run/demo.h"
#include "core/run/lifecycle.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

int main(int argc, char** argv)
{
    const auto [mib, base] = bench::parse_args(argc, argv, 512);
    const fs::path work = base / ("shardscope-bench-lifecycle-" + std::to_string(::getpid()));
    const auto states = make_demo_state(1, (mib << 20) / 14, 4, ParamDtype::BF16);
    auto seconds = [](auto start) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    double sync_best = 1e9, async_best = 1e9, async_first = 0;
    {
        ManagerOptions options;
        options.root = work / "sync";
        CheckpointManager manager(options);
        for (uint64_t step = 1; step <= 3; ++step) {
            const auto start = std::chrono::steady_clock::now();
            manager.save(states, step);
            sync_best = std::min(sync_best, seconds(start));
        }
    }
    {
        ManagerOptions options;
        options.root = work / "async";
        CheckpointManager manager(options);
        for (uint64_t step = 1; step <= 3; ++step) {
            manager.wait(); // the previous write is done: time the stall of this save alone
            const auto start = std::chrono::steady_clock::now();
            manager.save_async(states, step);
            const double stall = seconds(start);
            if (step == 1)
                async_first = stall; // pays the page faults of the snapshot buffer
            else
                async_best = std::min(async_best, stall);
        }
        manager.wait();
    }
    std::printf("checkpoint of %llu MiB, 4 ranks: training-loop stall per save (best of 3)\n",
                static_cast<unsigned long long>(mib));
    std::printf("  synchronous save  %8.1f ms\n  save_async        %8.1f ms   (%.1fx smaller; target >= 5x)\n"
                "  first save_async  %8.1f ms   (allocates and faults in the snapshot buffer once)\n",
                sync_best * 1e3, async_best * 1e3, sync_best / async_best, async_first * 1e3);
    fs::remove_all(work);
    return 0;
}
