// Prints measured figures for opening the biggest checkpoints (issue 20; not a timed test:
// compare the ratios within one run), page cache warm, each command a fresh shardctl process:
//   a Hugging Face safetensors index of 100,000 tensors in 200 files (a mixture-of-experts
//     checkpoint's shape), against Python's json.load of the index plus reading every file's
//     header, as a loader does;
//   a DCP checkpoint whose .metadata lists 100,000 chunks over 64 ranks, against `cat` of the
//     metadata bytes (the reader never runs the pickle);
// timing `info`, `info --json` and `verify --fast`, with the peak resident memory of each above
// that of `shardctl --help` (the baseline: the binary and its libraries).
// usage: bench_open [--tensors N] [--dir DIR] [--shardctl PATH]   (default 100000 in /var/tmp, the
// shardctl beside this binary)

#include "benchutil.h"
#include "foreign_fixtures.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using bench::time_shell;

namespace {

// A safetensors file of `count` small F16 tensors named after a mixture-of-experts layer.
std::string safetensors_file(std::size_t first, std::size_t count, nlohmann::json& weight_map, const std::string& file)
{
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (std::size_t i = first; i < first + count; ++i) {
        const std::string name = "model.layers." + std::to_string(i / 2048) + ".mlp.experts." +
                                 std::to_string(i / 8 % 256) + ".w" + std::to_string(i % 8) + ".weight";
        const std::size_t bytes = 2 * 4 * 8;
        header[name] = {{"dtype", "F16"}, {"shape", {4, 8}}, {"data_offsets", {data.size(), data.size() + bytes}}};
        data.append(bytes, '\0');
        weight_map[name] = file;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out;
    fixtures::put_le(out, text.size(), 8);
    return out + text + data;
}

void write_index(const fs::path& dir, std::size_t tensors, std::size_t files)
{
    fs::create_directories(dir);
    nlohmann::json weight_map = nlohmann::json::object();
    const std::size_t per_file = tensors / files;
    for (std::size_t f = 0; f < files; ++f) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, files);
        fixtures::write_file(dir / name, safetensors_file(f * per_file, per_file, weight_map, name));
    }
    const nlohmann::json index = {{"metadata", {{"total_size", tensors * 64}}}, {"weight_map", weight_map}};
    fixtures::write_file(dir / "model.safetensors.index.json", index.dump(2));
}

// `chunks` chunks over `ranks` ranks: every tensor row-split into one chunk per rank.
void write_dcp(const fs::path& dir, std::size_t chunks, int ranks)
{
    fs::create_directories(dir);
    std::vector<fixtures::DcpTensorSpec> tensors;
    for (std::size_t t = 0; t * ranks < chunks; ++t) {
        fixtures::DcpTensorSpec spec{.fqn = "model.layers." + std::to_string(t / 16) + ".experts." +
                                            std::to_string(t % 16) + ".weight",
                                     .size = {uint64_t(ranks) * 2, 4}};
        for (int r = 0; r < ranks; ++r)
            spec.chunks.push_back({.offsets = {uint64_t(r) * 2, 0}, .sizes = {2, 4}, .file = "__" + std::to_string(r) + "_0.distcp"});
        tensors.push_back(std::move(spec));
    }
    for (const auto& [file, bytes] : fixtures::dcp_layout(tensors))
        fixtures::write_file(dir / file, bytes);
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
}

// Best of three wall times of `command`, and its peak RSS in KiB (GNU time's %M).
void measure(const std::string& command, double& seconds, long& kib)
{
    seconds = 1e9;
    kib = 0;
    for (int round = 0; round < 3; ++round) {
        seconds = std::min(seconds, time_shell("/usr/bin/time -f %M -o /tmp/bench_open.rss " + command + " > /dev/null"));
        std::ifstream rss("/tmp/bench_open.rss");
        long k = 0;
        rss >> k;
        kib = std::max(kib, k);
    }
}

constexpr const char* kPythonIndex = R"(import json, struct, sys, time, os
d = sys.argv[1]
start = time.perf_counter()
index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
for f in sorted(set(index["weight_map"].values())):
    with open(os.path.join(d, f), "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        json.loads(h.read(n))
print(time.perf_counter() - start)
)";

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
    time_shell("cat " + (root / "hf").string() + "/* " + (root / "dcp").string() + "/* " +
               (root / "dcp/.metadata").string() + " > /dev/null"); // warm the page cache

    double seconds = 0;
    long baseline = 0;
    measure(shardctl + " --help", seconds, baseline);
    std::printf("baseline RSS (shardctl --help): %.1f MiB\n\n", baseline / 1024.0);

    std::printf("HF safetensors index: %zu tensors in 200 files\n", tensors);
    const fs::path script = root / "peer.py";
    fixtures::write_file(script, kPythonIndex);
    double python = 1e9;
    for (int round = 0; round < 3; ++round) {
        FILE* p = ::popen(("python3 '" + script.string() + "' '" + (root / "hf").string() + "'").c_str(), "r");
        double s = 0;
        if (p && std::fscanf(p, "%lf", &s) == 1)
            python = std::min(python, s);
        if (p)
            ::pclose(p);
    }
    std::printf("  python json.load + every header: %.3f s\n", python);
    for (const char* command : {"info", "info --json", "verify --fast"}) {
        long kib = 0;
        measure(shardctl + " " + command + " '" + (root / "hf").string() + "'", seconds, kib);
        std::printf("  shardctl %-14s %.3f s (%.2fx python), %.1f MiB above baseline, %.0f bytes per tensor\n",
                    command, seconds, seconds / python, (kib - baseline) / 1024.0,
                    double(kib - baseline) * 1024.0 / double(tensors));
    }

    std::printf("\nDCP: %zu chunks over 64 ranks, .metadata %.1f MiB\n", tensors,
                double(fs::file_size(root / "dcp/.metadata")) / (1 << 20));
    double cat = 1e9;
    for (int round = 0; round < 3; ++round)
        cat = std::min(cat, time_shell("cat '" + (root / "dcp/.metadata").string() + "' > /dev/null"));
    std::printf("  cat .metadata: %.4f s\n", cat);
    for (const char* command : {"info", "info --json", "verify --fast"}) {
        long kib = 0;
        measure(shardctl + " " + command + " '" + (root / "dcp").string() + "'", seconds, kib);
        std::printf("  shardctl %-14s %.3f s, %.1f MiB above baseline, %.0f bytes per chunk\n", command, seconds,
                    (kib - baseline) / 1024.0, double(kib - baseline) * 1024.0 / double(tensors));
    }
    if (!std::getenv("BENCH_KEEP"))
        fs::remove_all(root);
    else
        std::printf("\nkept %s (BENCH_KEEP)\n", root.string().c_str());
    return 0;
}
