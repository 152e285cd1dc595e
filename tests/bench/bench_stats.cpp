// Prints measured `stats` figures (not a timed test: compare the ratios within one run), page
// cache warm, against two peers over the same files:
//   numpy computing the same statistics (NaN/Inf counts, min, max, mean, std) of every state
//     vector of every rank file (memory-mapped, float64 accumulation like ours);
//   `cat` reading the same bytes (the rate a full scan cannot beat);
// and the peak resident memory of inspect_content in a fresh child process.
// usage: bench_stats [--mib N] [--dir DIR]     (defaults: 1024 MiB in /var/tmp)

#include "benchutil.h"
#include "core/checkpoint/save.h"
#include "core/inspect/content.h"
#include "core/run/demo.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;
using bench::peak_rss_kib;
using bench::seconds_since;
using bench::time_shell;

namespace {

// numpy over the four tensors of every rank file, as a person would write it.
constexpr const char* kNumpy = R"(import json, struct, sys, time
import numpy as np
files = sys.argv[1:]
start = time.perf_counter()
for f in files:
    with open(f, "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        header = json.loads(h.read(n))
    data = np.memmap(f, dtype=np.uint8, mode="r", offset=8 + n)
    for name in ("param", "master", "exp_avg", "exp_avg_sq"):
        t = header[name]
        a, b = t["data_offsets"]
        raw = data[a:b]
        x = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32) if t["dtype"] == "BF16" else raw.view(np.float32)
        nan = int(np.isnan(x).sum()); inf = int(np.isinf(x).sum())
        finite = x[np.isfinite(x)].astype(np.float64)
        stats = (finite.min(), finite.max(), finite.mean(), finite.std())
print(time.perf_counter() - start)
)";

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--child-stats") == 0) {
        const auto start = std::chrono::steady_clock::now();
        const ContentReport report = inspect_content(argv[2]);
        std::printf("%ld %.6f %zu\n", peak_rss_kib(), seconds_since(start), report.tensors.size());
        return report.ok() ? 0 : 1;
    }
    const auto [mib, base] = bench::parse_args(argc, argv, 1024);
    const fs::path work = base / ("shardscope-bench-stats-" + std::to_string(::getpid()));
    fs::create_directories(work);
    const fs::path dir = work / "step";
    const uint64_t numel = (mib << 20) / 14;
    {
        SaveOptions options;
        options.durable = false;
        options.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(1, numel, 4, ParamDtype::BF16), dir, 1, options);
    }
    std::string files;
    for (int r = 0; r < 4; ++r)
        files += " '" + (dir / ("rank" + std::to_string(r) + ".safetensors")).string() + "'";
    const double bytes = double(mib) * 1048576.0;
    std::printf("checkpoint: %llu MiB, 4 ranks, %llu parameters, 4 states of %zu model tensors\n",
                static_cast<unsigned long long>(mib), static_cast<unsigned long long>(numel),
                demo_tensor_layout(numel).size());

    const fs::path script = work / "numpy_stats.py";
    std::ofstream(script) << kNumpy;
    double cat_best = 1e9, ours_best = 1e9, numpy_best = 1e9;
    long ours_kib = 0;
    time_shell("cat" + files + " > /dev/null"); // warm the page cache
    for (int round = 0; round < 3; ++round) {
        cat_best = std::min(cat_best, time_shell("cat" + files + " > /dev/null"));
        const std::string child = "'" + std::string(argv[0]) + "' --child-stats '" + dir.string() + "'";
        FILE* p = ::popen(child.c_str(), "r");
        long kib = 0;
        double seconds = 0;
        std::size_t tensors = 0;
        if (!p || std::fscanf(p, "%ld %lf %zu", &kib, &seconds, &tensors) != 3 || ::pclose(p) != 0) {
            std::fprintf(stderr, "bench: the stats child failed\n");
            return 2;
        }
        ours_best = std::min(ours_best, seconds);
        ours_kib = std::max(ours_kib, kib);
        FILE* py = ::popen(("/usr/bin/python3 '" + script.string() + "'" + files).c_str(), "r");
        double numpy_seconds = 0;
        if (!py || std::fscanf(py, "%lf", &numpy_seconds) != 1 || ::pclose(py) != 0) {
            std::fprintf(stderr, "bench: numpy failed (apt-get install python3-numpy)\n");
            return 2;
        }
        numpy_best = std::min(numpy_best, numpy_seconds);
    }
    std::printf("stats (inspect_content, all cores): %.3f s, %.0f MiB/s\n", ours_best, bytes / ours_best / 1048576.0);
    std::printf("numpy, same statistics:             %.3f s, %.0f MiB/s  -> stats is %.2fx numpy\n", numpy_best,
                bytes / numpy_best / 1048576.0, numpy_best / ours_best);
    std::printf("cat, same bytes:                    %.3f s, %.0f MiB/s  -> stats runs at %.0f %% of cat\n", cat_best,
                bytes / cat_best / 1048576.0, 100.0 * cat_best / ours_best);
    std::printf("peak RSS of stats (fresh process):  %.1f MiB\n", double(ours_kib) / 1024.0);
    fs::remove_all(work);
    return 0;
}
