// Prints measured checkpoint I/O figures (not a timed test: the machine is shared, so compare the
// ratios within one run):
//   verify throughput vs `sha256sum` over the same shard files (page cache warm),
//   durable save throughput vs `dd ... conv=fsync` of the same size on the same disk,
//   peak memory of verify and load, each in a fresh child process.
// usage: bench_checkpoint [--mib N] [--dir DIR]     (defaults: 1024 MiB in /var/tmp)

#include "benchutil.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/checkpoint/reshard.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;
using bench::peak_rss_kib;
using bench::seconds_since;
using bench::time_shell;

namespace {

// Runs this binary again in `mode` on `dir` and returns the child's peak RSS in MiB.
double child_peak_mib(const char* self, const char* mode, const fs::path& dir)
{
    const std::string command = "'" + std::string(self) + "' " + mode + " '" + dir.string() + "'";
    FILE* child = ::popen(command.c_str(), "r");
    long kib = -1;
    if (!child || std::fscanf(child, "%ld", &kib) != 1 || ::pclose(child) != 0 || kib < 0) {
        std::fprintf(stderr, "bench: child '%s' failed\n", mode);
        std::exit(2);
    }
    return static_cast<double>(kib) / 1024.0;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--child-verify") == 0) {
        const bool ok = verify_checkpoint(fs::path(argv[2])).ok();
        std::printf("%ld\n", peak_rss_kib());
        return ok ? 0 : 1;
    }
    if (argc == 4 && std::strcmp(argv[1], "--child-reshard") == 0) {
        const auto start = std::chrono::steady_clock::now();
        reshard(argv[2], 8, argv[3]);
        ::sync(); // the same durability point as `cp -r && sync`
        std::printf("%ld %.6f\n", peak_rss_kib(), seconds_since(start));
        return 0;
    }
    if (argc == 3 && std::strcmp(argv[1], "--child-load") == 0) {
        const bool ok = load_sharded(argv[2], 4).ranks.size() == 4;
        std::printf("%ld\n", peak_rss_kib());
        return ok ? 0 : 1;
    }

    const auto [mib, base] = bench::parse_args(argc, argv, 1024);
    const fs::path work = base / ("shardscope-bench-" + std::to_string(::getpid()));
    fs::create_directories(work);
    const fs::path dir = work / "step";
    const uint64_t numel = (mib << 20) / 14; // 2 + 3 * 4 bytes per parameter
    std::printf("checkpoint: %llu MiB, 4 ranks, %llu parameters, in %s\n", static_cast<unsigned long long>(mib),
                static_cast<unsigned long long>(numel), work.c_str());

    const auto states = make_demo_state(1, numel, 4, ParamDtype::BF16);
    // The disk is shared and its speed drifts, so dd and save alternate and the best of three of
    // each is compared.
    double dd_best = 1e9, save_best = 1e9;
    Manifest m;
    SaveOptions save_options;
    if (const char* threads = std::getenv("BENCH_SAVE_THREADS"))
        save_options.threads = std::atoi(threads);
    for (int round = 0; round < 3; ++round) {
        ::sync();
        dd_best = std::min(dd_best,
                           time_shell("dd if=/dev/zero of='" + (work / "dd.bin").string() +
                                      "' bs=1M count=" + std::to_string(mib) + " conv=fsync status=none"));
        fs::remove(work / "dd.bin");
        fs::remove_all(dir);
        ::sync();
        const auto start = std::chrono::steady_clock::now();
        m = save_sharded(states, dir, 1, save_options);
        save_best = std::min(save_best, seconds_since(start));
    }
    const double bytes_mib = static_cast<double>(m.total_bytes()) / (1 << 20);
    const double dd_rate = static_cast<double>(mib) / dd_best, save_rate = bytes_mib / save_best;
    std::printf("save (fsync'd, threads)    %8.1f MiB/s   dd conv=fsync %8.1f MiB/s   ratio %.2f (target >= 0.70)\n",
                save_rate, dd_rate, save_rate / dd_rate);

    std::string files;
    for (const auto& s : m.shards)
        files += " '" + (dir / s.path).string() + "'";
    time_shell("cat" + files + " > /dev/null"); // warm the page cache for both readers
    double sum_s = 1e9, verify_s = 1e9;
    for (int round = 0; round < 3; ++round) {
        sum_s = std::min(sum_s, time_shell("sha256sum" + files + " > /dev/null"));
        const auto start = std::chrono::steady_clock::now();
        const VerifyReport report = verify_checkpoint(dir);
        verify_s = std::min(verify_s, seconds_since(start));
        if (!report.ok()) {
            std::fprintf(stderr, "bench: verification failed\n");
            return 1;
        }
    }
    std::printf("verify (sha256, all cores) %8.1f MiB/s   sha256sum     %8.1f MiB/s   ratio %.2f (target >= 3)\n",
                bytes_mib / verify_s, bytes_mib / sum_s, sum_s / verify_s);
    const auto start = std::chrono::steady_clock::now();
    VerifyOptions fast;
    fast.fast = true;
    verify_checkpoint(dir, fast);
    std::printf("verify --fast (xxh3)       %8.1f MiB/s\n", bytes_mib / seconds_since(start));

    // Resharding 4 -> 8 against copying the folder, both to durable storage, best of three.
    double reshard_best = 1e9, copy_best = 1e9, reshard_rss = 0;
    for (int round = 0; round < 3; ++round) {
        fs::remove_all(work / "copy");
        ::sync();
        copy_best =
            std::min(copy_best, time_shell("cp -r '" + dir.string() + "' '" + (work / "copy").string() + "' && sync"));
        fs::remove_all(work / "copy");
        fs::remove_all(work / "resharded");
        ::sync();
        const std::string command = "'" + std::string(argv[0]) + "' --child-reshard '" + dir.string() + "' '" +
            (work / "resharded").string() + "'";
        FILE* child = ::popen(command.c_str(), "r");
        long kib = -1;
        double seconds = 0;
        if (!child || std::fscanf(child, "%ld %lf", &kib, &seconds) != 2 || ::pclose(child) != 0) {
            std::fprintf(stderr, "bench: reshard child failed\n");
            return 2;
        }
        reshard_best = std::min(reshard_best, seconds);
        reshard_rss = std::max(reshard_rss, static_cast<double>(kib) / 1024.0);
    }
    fs::remove_all(work / "resharded");
    std::printf(
        "reshard 4 -> 8 (verify + copy runs + fsync) %.2f s vs cp -r + sync %.2f s: ratio %.2f (target <= 1.5); "
        "peak RSS %.1f MiB (target < 128)\n",
        reshard_best, copy_best, reshard_best / copy_best, reshard_rss);

    const double verify_rss = child_peak_mib(argv[0], "--child-verify", dir);
    const double load_rss = child_peak_mib(argv[0], "--child-load", dir);
    std::printf("peak RSS: verify %.1f MiB (target < 64); load %.1f MiB = state %.1f MiB + %.1f MiB (target < 64)\n",
                verify_rss, load_rss, bytes_mib, load_rss - bytes_mib);
    fs::remove_all(work);
    return 0;
}
