// Prints how long a training loop stalls per checkpoint with a synchronous save and with
// save_async (which only copies the state before returning), for the same state and disk, and
// what counting the state's health (which every save records in its commit) costs against it.
// usage: bench_lifecycle [--mib N] [--dir DIR]    (defaults: 512 MiB in /var/tmp)

#include "benchutil.h"
#include "core/run/demo.h"
#include "core/checkpoint/save.h"
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
    // What counting the values' health costs a save: the same save_sharded with and without it,
    // alternating so that the disk's and the machine's noise falls on both alike, best of 4,
    // for both parameter dtypes (F16's rounding check is the dearer one).
    auto save_best = [&](const std::vector<RankState>& ranks, bool count) {
        double best = 1e9;
        static int n = 0;
        for (int i = 0; i < 4; ++i) {
            const fs::path dir = work / ("health-" + std::to_string(++n));
            SaveOptions options;
            options.count_health = count;
            const auto start = std::chrono::steady_clock::now();
            const Manifest m = save_sharded(ranks, dir, 1, options);
            best = std::min(best, seconds(start));
            if (count != m.health().has_value())
                std::printf("unexpected: count_health=%d but the manifest %s a health record\n", count,
                            count ? "lacks" : "has");
            fs::remove_all(dir);
        }
        return best;
    };
    const auto f16_states = make_demo_state(1, (mib << 20) / 14, 4, ParamDtype::F16);
    double with_bf16 = 1e9, without_bf16 = 1e9, with_f16 = 1e9, without_f16 = 1e9;
    for (int round = 0; round < 2; ++round) {
        without_bf16 = std::min(without_bf16, save_best(states, false));
        with_bf16 = std::min(with_bf16, save_best(states, true));
        without_f16 = std::min(without_f16, save_best(f16_states, false));
        with_f16 = std::min(with_f16, save_best(f16_states, true));
    }
    std::printf("checkpoint of %llu MiB, 4 ranks: training-loop stall per save (best of 3)\n",
                static_cast<unsigned long long>(mib));
    std::printf("  synchronous save  %8.1f ms\n  save_async        %8.1f ms   (%.1fx smaller; target >= 5x)\n"
                "  first save_async  %8.1f ms   (allocates and faults in the snapshot buffer once)\n",
                sync_best * 1e3, async_best * 1e3, sync_best / async_best, async_first * 1e3);
    std::printf("health counted while writing (save_sharded, best of 8, alternating):\n"
                "  BF16  with %8.1f ms  without %8.1f ms  overhead %+.1f%%\n"
                "  F16   with %8.1f ms  without %8.1f ms  overhead %+.1f%%   (target < 5%%)\n",
                with_bf16 * 1e3, without_bf16 * 1e3, 100 * (with_bf16 / without_bf16 - 1), with_f16 * 1e3,
                without_f16 * 1e3, 100 * (with_f16 / without_f16 - 1));
    fs::remove_all(work);
    return 0;
}
