// Prints measured `stats` figures (not a timed test: compare the ratios within one run), page
// cache warm, against two peers over the same files:
//   numpy computing the same statistics (NaN/Inf counts, min, max, mean, std) of every tensor
//     (memory-mapped, float64 accumulation like ours);
//   `cat` reading the same bytes (the rate a full scan cannot beat);
// and the peak resident memory of inspect_content in a fresh child process. Two checkpoints of
// the same size: a native one (4 ranks, BF16 params and F32 master/Adam states), and a torch.save
// archive of F32 tensors written by PyTorch itself (skipped when python3-torch is missing).
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
#include <optional>
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

// The same figures over a torch.save archive: the storages are the zip's stored "*/data/N" entries
// (each tensor owns its storage here), found from the local headers and memory-mapped.
constexpr const char* kNumpyTorch = R"(import struct, sys, time, zipfile
import numpy as np
path = sys.argv[1]
start = time.perf_counter()
with zipfile.ZipFile(path) as z, open(path, "rb") as h:
    for info in z.infolist():
        if "/data/" not in info.filename:
            continue
        h.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", h.read(30)[26:30])
        offset = info.header_offset + 30 + name_len + extra_len
        x = np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(info.file_size // 4,))
        nan = int(np.isnan(x).sum()); inf = int(np.isinf(x).sum())
        finite = x[np.isfinite(x)].astype(np.float64)
        stats = (finite.min(), finite.max(), finite.mean(), finite.std())
print(time.perf_counter() - start)
)";

// Writes `mib` MiB of F32 tensors with torch.save, 16 Mi elements each at most (a 4096 x 4096
// matrix): each tensor is one work item, so there are enough for every thread.
constexpr const char* kTorchSave = R"(import sys, torch
path, mib = sys.argv[1], int(sys.argv[2])
torch.manual_seed(1)
state, left, i = {}, mib << 18, 0
while left > 0:
    n = min(left, 16 << 20)
    state[f"layer{i}.weight"] = torch.randn(n) * 0.02
    left -= n
    i += 1
torch.save(state, path)
)";

struct Figures {
    double ours = 1e9, numpy = 1e9, cat = 1e9;
    long kib = 0;
};

// Best of three rounds of inspect_content (a fresh child: its own peak RSS), numpy and cat.
std::optional<Figures> measure(const char* self, const std::string& target, const std::string& cat_files,
                               const std::string& numpy_command)
{
    Figures f;
    time_shell("cat" + cat_files + " > /dev/null"); // warm the page cache
    for (int round = 0; round < 3; ++round) {
        f.cat = std::min(f.cat, time_shell("cat" + cat_files + " > /dev/null"));
        const std::string child = "'" + std::string(self) + "' --child-stats '" + target + "'";
        FILE* p = ::popen(child.c_str(), "r");
        long kib = 0;
        double seconds = 0;
        std::size_t tensors = 0;
        if (!p || std::fscanf(p, "%ld %lf %zu", &kib, &seconds, &tensors) != 3 || ::pclose(p) != 0) {
            std::fprintf(stderr, "bench: the stats child failed\n");
            return std::nullopt;
        }
        f.ours = std::min(f.ours, seconds);
        f.kib = std::max(f.kib, kib);
        FILE* py = ::popen(numpy_command.c_str(), "r");
        double numpy_seconds = 0;
        if (!py || std::fscanf(py, "%lf", &numpy_seconds) != 1 || ::pclose(py) != 0) {
            std::fprintf(stderr, "bench: numpy failed (apt-get install python3-numpy)\n");
            return std::nullopt;
        }
        f.numpy = std::min(f.numpy, numpy_seconds);
    }
    return f;
}

void print(const Figures& f, double bytes)
{
    std::printf("stats (inspect_content, all cores): %.3f s, %.0f MiB/s\n", f.ours, bytes / f.ours / 1048576.0);
    std::printf("numpy, same statistics:             %.3f s, %.0f MiB/s  -> stats is %.2fx numpy\n", f.numpy,
                bytes / f.numpy / 1048576.0, f.numpy / f.ours);
    std::printf("cat, same bytes:                    %.3f s, %.0f MiB/s  -> stats runs at %.0f %% of cat\n", f.cat,
                bytes / f.cat / 1048576.0, 100.0 * f.cat / f.ours);
    std::printf("peak RSS of stats (fresh process):  %.1f MiB\n", double(f.kib) / 1024.0);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--child-stats") == 0) {
        const auto start = std::chrono::steady_clock::now();
        const ContentReport report = inspect_content(fs::path(argv[2]));
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
    const auto native = measure(argv[0], dir.string(), files, "/usr/bin/python3 '" + script.string() + "'" + files);
    if (!native) {
        fs::remove_all(work);
        return 2;
    }
    print(*native, bytes);
    fs::remove_all(dir); // room for the next one

    const fs::path archive = work / "model.pt";
    const fs::path save = work / "torch_save.py", numpy_torch = work / "numpy_torch.py";
    std::ofstream(save) << kTorchSave;
    std::ofstream(numpy_torch) << kNumpyTorch;
    std::printf("\ntorch.save archive: %llu MiB of F32 tensors, written by PyTorch\n",
                static_cast<unsigned long long>(mib));
    if (std::system(("/usr/bin/python3 '" + save.string() + "' '" + archive.string() + "' " + std::to_string(mib) +
                     " 2> /dev/null")
                        .c_str()) != 0) {
        std::printf("skipped: PyTorch did not run (apt-get install python3-torch)\n");
    } else {
        const std::string quoted = " '" + archive.string() + "'";
        const auto torch =
            measure(argv[0], archive.string(), quoted, "/usr/bin/python3 '" + numpy_torch.string() + "'" + quoted);
        if (!torch) {
            fs::remove_all(work);
            return 2;
        }
        print(*torch, double(fs::file_size(archive)));
    }
    fs::remove_all(work);
    return 0;
}
