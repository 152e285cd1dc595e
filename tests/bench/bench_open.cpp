// Prints measured figures for opening the biggest checkpoints (not a timed test:
// compare the ratios within one run), page cache warm, each command a fresh shardctl process:
//   a Hugging Face safetensors index of 100,000 tensors in 200 files (a mixture-of-experts
//     checkpoint's shape), against Python's json.load of the index plus reading every file's
//     header, as a loader does;
//   a DCP checkpoint whose .metadata lists 100,000 chunks over 64 ranks, against `cat` of the
//     metadata bytes (the reader never runs the pickle): pickled as CPython does (the memo,
//     batches of 1000: what torch writes), and without the memo (3x the bytes: a worst case);
//   a DeepSpeed ZeRO step of 1,000 torch.save archives, against Python's zipfile opening every
//     archive and reading its data.pkl (not unpickling it);
// timing `info`, `info --json` and `verify --fast`, with the peak resident memory of each above
// that of `shardctl --help` (the baseline: the binary and its libraries).
// usage: bench_open [--tensors N] [--dir DIR] [--shardctl PATH]   (default 100000 in /var/tmp, the
// shardctl beside this binary)

#include "benchutil.h"
#include "big_foreign.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using bench::time_shell;

namespace {

using bigforeign::write_dcp;
using bigforeign::write_index;

// Best of three wall times of `command`, and its peak RSS in KiB (GNU time's %M).
void measure(const std::string& command, double& seconds, long& kib)
{
    seconds = 1e9;
    kib = 0;
    for (int round = 0; round < 3; ++round) {
        seconds =
            std::min(seconds, time_shell("/usr/bin/time -f %M -o /tmp/bench_open.rss " + command + " > /dev/null"));
        std::ifstream rss("/tmp/bench_open.rss");
        long k = 0;
        rss >> k;
        kib = std::max(kib, k);
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::size_t tensors = 100'000;
    fs::path base = "/var/tmp";
    fs::path shardctl_path = fs::path(argv[0]).parent_path() / "shardctl"; // --shardctl: another build's, to compare
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--tensors") == 0)
            tensors = std::strtoull(argv[i + 1], nullptr, 10);
        else if (std::strcmp(argv[i], "--dir") == 0)
            base = argv[i + 1];
        else if (std::strcmp(argv[i], "--shardctl") == 0)
            shardctl_path = argv[i + 1];
    }
    const fs::path root = base / ("shardscope-bench-open-" + std::to_string(::getpid()));
    const std::string shardctl = "'" + shardctl_path.string() + "'";
    write_index(root / "hf", tensors, 200);
    write_dcp(root / "dcp", tensors, 64);
    write_dcp(root / "dcp-plain", tensors, 64, /*like_cpython=*/false);
    constexpr std::size_t kDeepSpeedFiles = 1000;
    bigforeign::write_deepspeed(root / "deepspeed", kDeepSpeedFiles);
    time_shell("cat " + (root / "hf").string() + "/* " + (root / "dcp").string() + "/* " +
               (root / "dcp/.metadata").string() + " " + (root / "dcp-plain/.metadata").string() + " " +
               (root / "deepspeed/global_step1").string() + "/* > /dev/null"); // warm the page cache

    double seconds = 0;
    long baseline = 0;
    measure(shardctl + " --help", seconds, baseline);
    std::printf("baseline RSS (shardctl --help): %.1f MiB\n\n", baseline / 1024.0);

    std::printf("HF safetensors index: %zu tensors in 200 files\n", tensors);
    const double python = bigforeign::python_index_peer(root / "hf", root / "peer.py");
    std::printf("  python json.load + every header: %.3f s\n", python);
    for (const char* command : {"info", "info --json", "verify --fast"}) {
        long kib = 0;
        measure(shardctl + " " + command + " '" + (root / "hf").string() + "'", seconds, kib);
        std::printf("  shardctl %-14s %.3f s (%.2fx python), %.1f MiB above baseline, %.0f bytes per tensor\n", command,
                    seconds, seconds / python, (kib - baseline) / 1024.0,
                    double(kib - baseline) * 1024.0 / double(tensors));
    }

    for (const char* dcp : {"dcp", "dcp-plain"}) {
        const fs::path meta = root / dcp / ".metadata";
        std::printf("\nDCP: %zu chunks over 64 ranks, .metadata %.1f MiB (%s)\n", tensors,
                    double(fs::file_size(meta)) / (1 << 20),
                    std::string(dcp) == "dcp" ? "pickled as CPython does" : "without the memo");
        double cat = 1e9;
        for (int round = 0; round < 3; ++round)
            cat = std::min(cat, time_shell("cat '" + meta.string() + "' > /dev/null"));
        std::printf("  cat .metadata: %.4f s\n", cat);
        for (const char* command : {"info", "info --json", "verify --fast"}) {
            long kib = 0;
            measure(shardctl + " " + command + " '" + (root / dcp).string() + "'", seconds, kib);
            std::printf("  shardctl %-14s %.3f s, %.1f MiB above baseline, %.0f bytes per chunk\n", command, seconds,
                        (kib - baseline) / 1024.0, double(kib - baseline) * 1024.0 / double(tensors));
        }
    }

    std::printf("\nDeepSpeed: %zu torch.save archives\n", kDeepSpeedFiles);
    const double zipfile =
        bigforeign::python_peer(bigforeign::kPythonDeepSpeedPeer, root / "deepspeed", root / "peer_deepspeed.py");
    std::printf("  python zipfile, every archive's directory and data.pkl: %.3f s\n", zipfile);
    for (const char* command : {"info", "info --json", "verify --fast"}) {
        long kib = 0;
        measure(shardctl + " " + command + " '" + (root / "deepspeed").string() + "'", seconds, kib);
        std::printf("  shardctl %-14s %.3f s (%.2fx python), %.1f MiB above baseline\n", command, seconds,
                    seconds / zipfile, (kib - baseline) / 1024.0);
    }
    if (!std::getenv("BENCH_KEEP"))
        fs::remove_all(root);
    else
        std::printf("\nkept %s (BENCH_KEEP)\n", root.string().c_str());
    return 0;
}
