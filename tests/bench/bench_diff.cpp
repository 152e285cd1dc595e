// Prints measured `diff` figures (not a timed test: compare the ratios within one run), page
// cache warm, against `cmp` comparing the same pairs of files byte for byte (the rate a bitwise
// comparison cannot beat), for
//   two identical native checkpoints (B a copy of A: cmp can compare them file by file),
//   A against the same state saved at another world size (cmp cannot: the files differ),
//   A against a checkpoint of other values (every element changed: the full arithmetic path),
// and the peak resident memory of diff_checkpoints in a fresh child process.
// usage: bench_diff [--mib N] [--dir DIR]     (each checkpoint N MiB; default 1024 in /var/tmp)

#include "benchutil.h"
#include "core/checkpoint/save.h"
#include "core/inspect/diff.h"
#include "core/run/demo.h"

#include <cstdio>
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

void save(const fs::path& dir, uint64_t numel, int world, uint64_t seed)
{
    SaveOptions options;
    options.durable = false;
    options.tensors = demo_tensor_layout(numel);
    save_sharded(make_demo_state(seed, numel, world, ParamDtype::BF16), dir, 1, options);
}

// Best of three runs of diff in a fresh child: seconds and peak RSS.
bool measure(const char* self, const fs::path& a, const fs::path& b, double& seconds, long& kib)
{
    seconds = 1e9;
    kib = 0;
    for (int round = 0; round < 3; ++round) {
        const std::string child = "'" + std::string(self) + "' --child-diff '" + a.string() + "' '" + b.string() + "'";
        FILE* p = ::popen(child.c_str(), "r");
        long k = 0;
        double s = 0;
        if (!p || std::fscanf(p, "%ld %lf", &k, &s) != 2) {
            std::fprintf(stderr, "bench: the diff child failed\n");
            if (p)
                ::pclose(p);
            return false;
        }
        ::pclose(p);
        seconds = std::min(seconds, s);
        kib = std::max(kib, k);
    }
    return true;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 4 && std::strcmp(argv[1], "--child-diff") == 0) {
        const auto start = std::chrono::steady_clock::now();
        const DiffReport report = diff_checkpoints(fs::path(argv[2]), fs::path(argv[3]));
        std::printf("%ld %.6f\n", peak_rss_kib(), seconds_since(start));
        return report.problems.empty() ? 0 : 1;
    }
    const auto [mib, base] = bench::parse_args(argc, argv, 1024);
    const fs::path work = base / ("shardscope-bench-diff-" + std::to_string(::getpid()));
    fs::create_directories(work);
    const uint64_t numel = (mib << 20) / 14; // bf16 param + three f32 states: 14 bytes a parameter
    const fs::path a = work / "a", copy = work / "copy", resharded = work / "w8", other = work / "other";
    save(a, numel, 4, 1);
    time_shell("cp -r '" + a.string() + "' '" + copy.string() + "'");
    save(resharded, numel, 8, 1);
    save(other, numel, 4, 2);
    std::printf("checkpoints: %llu MiB each, %llu parameters, 4 states of %zu model tensors\n",
                static_cast<unsigned long long>(mib), static_cast<unsigned long long>(numel),
                demo_tensor_layout(numel).size());

    std::string cmp;
    for (int r = 0; r < 4; ++r) {
        const std::string file = "rank" + std::to_string(r) + ".safetensors";
        cmp += (r ? " && " : "") + std::string("cmp '") + (a / file).string() + "' '" + (copy / file).string() + "'";
    }
    time_shell("cat '" + a.string() + "'/* '" + copy.string() + "'/* '" + resharded.string() + "'/* '" +
               other.string() + "'/* > /dev/null"); // warm the page cache
    double cmp_seconds = 1e9;
    for (int round = 0; round < 3; ++round)
        cmp_seconds = std::min(cmp_seconds, time_shell(cmp));
    const double bytes = 2.0 * double(mib) * 1048576.0; // both sides are read
    double identical = 0, reshard = 0, changed = 0;
    long kib = 0, k = 0;
    if (!measure(argv[0], a, copy, identical, kib) || !measure(argv[0], a, resharded, reshard, k) ||
        !measure(argv[0], a, other, changed, k)) {
        fs::remove_all(work);
        return 2;
    }
    auto rate = [&](double seconds) { return bytes / seconds / 1048576.0; };
    std::printf("cmp, A against its copy:             %.3f s, %.0f MiB/s (both files)\n", cmp_seconds,
                rate(cmp_seconds));
    std::printf("diff, A against its copy:            %.3f s, %.0f MiB/s  -> %.0f %% of cmp's rate\n", identical,
                rate(identical), 100.0 * cmp_seconds / identical);
    std::printf("diff, A against world size 8:        %.3f s, %.0f MiB/s  (identical; cmp cannot say so)\n", reshard,
                rate(reshard));
    std::printf("diff, A against other values:        %.3f s, %.0f MiB/s  (every element changed)\n", changed,
                rate(changed));
    std::printf("peak RSS of diff (fresh process):    %.1f MiB\n", double(std::max(kib, k)) / 1024.0);
    fs::remove_all(work);
    return 0;
}
