// Prints measured `convert` figures: a generated torch DCP of N MiB (float32 tensors of 4096 rows,
// each split by rows into two boxes in two rank files, stored as raw chunk bytes) converted to a
// Hugging Face folder in a fresh child process — seconds and peak resident memory — against
// `cp -r` + `sync` of the same folder in the same run (its peak RSS from wait4), and the ratios.
// The conversion verifies the source, writes with fsync and verifies its output; cp only copies.
// usage: bench_convert [--mib N] [--dir DIR]     (default 1536 MiB in /var/tmp)

#include "benchutil.h"
#include "core/convert/convert.h"
#include "foreign_fixtures.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kRows = 4096, kCols = 4096; // 64 MiB a tensor

void generate_dcp(const fs::path& dir, uint64_t tensors)
{
    fs::create_directories(dir);
    std::ofstream rank0(dir / "__0_0.distcp", std::ios::binary), rank1(dir / "__1_0.distcp", std::ios::binary);
    std::vector<fixtures::DcpTensorSpec> specs;
    std::vector<float> rows((kRows / 2) * kCols);
    uint64_t at0 = 0, at1 = 0;
    for (uint64_t t = 0; t < tensors; ++t) {
        const uint64_t half = rows.size() * 4;
        specs.push_back({.fqn = "layers." + std::to_string(t) + ".weight",
                         .size = {kRows, kCols},
                         .chunks = {{.offsets = {0, 0},
                                     .sizes = {kRows / 2, kCols},
                                     .file = "__0_0.distcp",
                                     .offset = at0,
                                     .length = half},
                                    {.offsets = {kRows / 2, 0},
                                     .sizes = {kRows / 2, kCols},
                                     .file = "__1_0.distcp",
                                     .offset = at1,
                                     .length = half}}});
        for (int side = 0; side < 2; ++side) {
            for (std::size_t i = 0; i < rows.size(); ++i)
                rows[i] = static_cast<float>((i * 2654435761u + t * 97 + side) % 100003) * 1e-5f - 0.5f;
            (side ? rank1 : rank0)
                .write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(half));
        }
        at0 += half;
        at1 += half;
    }
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(specs));
}

// A shell command in a child: wall seconds and that child's peak RSS (KiB, ru_maxrss of wait4).
double run_peer(const std::string& command, long& kib)
{
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    rusage usage{};
    ::wait4(pid, &status, 0, &usage);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "bench: command failed: %s\n", command.c_str());
        std::exit(2);
    }
    kib = usage.ru_maxrss;
    return bench::seconds_since(start);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 4 && std::strcmp(argv[1], "--child-convert") == 0) {
        const auto start = std::chrono::steady_clock::now();
        ConvertOptions options; // durable: fsync'd like the sync after cp
        const ConvertResult result = convert_checkpoint(fs::path(argv[2]), argv[3], options);
        std::printf("%ld %.6f %llu\n", bench::peak_rss_kib(), bench::seconds_since(start),
                    static_cast<unsigned long long>(result.tensor_bytes));
        return 0;
    }
    const auto [mib, base] = bench::parse_args(argc, argv, 1536);
    const uint64_t tensors = std::max<uint64_t>(1, mib / 64);
    const fs::path work = base / ("shardscope-bench-convert-" + std::to_string(::getpid()));
    const fs::path dcp = work / "dcp", hf = work / "hf", copy = work / "copy";
    generate_dcp(dcp, tensors);
    bench::time_shell("sync");
    std::printf("source: torch DCP, %llu tensors of %llux%llu float32 (%llu MiB), two boxes each in two rank files\n",
                static_cast<unsigned long long>(tensors), static_cast<unsigned long long>(kRows),
                static_cast<unsigned long long>(kCols), static_cast<unsigned long long>(tensors * 64));

    long cp_kib = 0;
    const double cp_seconds = run_peer("cp -r '" + dcp.string() + "' '" + copy.string() + "' && sync", cp_kib);
    fs::remove_all(copy);
    bench::time_shell("sync");

    const std::string child =
        "'" + std::string(argv[0]) + "' --child-convert '" + dcp.string() + "' '" + hf.string() + "'";
    FILE* p = ::popen(child.c_str(), "r");
    long kib = 0;
    double seconds = 0;
    unsigned long long bytes = 0;
    if (!p || std::fscanf(p, "%ld %lf %llu", &kib, &seconds, &bytes) != 3) {
        std::fprintf(stderr, "bench: the convert child failed\n");
        return 2;
    }
    ::pclose(p);
    const double gib = static_cast<double>(bytes) / double(1ull << 30);
    std::printf(
        "convert --to hf (verify source, copy in pieces, fsync, verify output): %.2f s, %.0f MiB/s, peak RSS %ld MiB\n",
        seconds, gib * 1024 / seconds, kib / 1024);
    std::printf(
        "cp -r + sync of the same folder:                                      %.2f s, %.0f MiB/s, peak RSS %ld MiB\n",
        cp_seconds, gib * 1024 / cp_seconds, cp_kib / 1024);
    std::printf("ratio convert / cp: time %.2f, peak RSS %.2f; peak RSS / model size %.3f\n", seconds / cp_seconds,
                double(kib) / double(std::max(cp_kib, 1L)), double(kib) / 1024.0 / (gib * 1024));
    fs::remove_all(work);
    return 0;
}
