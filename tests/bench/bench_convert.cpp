// Prints measured `convert` figures on a torch DCP of N MiB written by Debian's PyTorch itself
// (FileSystemWriter, float32 tensors of 4096 x 4096, one file for the rank): `convert --to hf` in a
// fresh child process (seconds, peak resident memory) against two peers on the same folder in the
// same run: `cp -r` + `sync`, and the torch route a user would write (load_state_dict, then
// torch.save of the state dict, fsync'd; tests/bench/convert_torch_route.py). The three alternate
// over --rounds rounds and the best time of each is printed, with the ratios. The conversion
// verifies the source, writes with fsync and verifies its output; cp only copies.
// --source deepspeed: a DeepSpeed ZeRO stage 3 checkpoint of N MiB of float32 weights over 4 ranks
// with its Adam moments instead (tests/bench/zero_torch_route.py), the torch route being what
// zero_to_fp32 does with torch 1.13 (load every rank's file, gather each parameter, torch.save).
// usage: bench_convert [--mib N] [--dir DIR] [--rounds R] [--source dcp|deepspeed]
//        (default 2048 MiB of a DCP in /var/tmp, 3 rounds)

#include "benchutil.h"
#include "core/convert/convert.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

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
    const auto [mib, base] = bench::parse_args(argc, argv, 2048);
    int rounds = 3;
    bool deepspeed = false;
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--rounds") == 0)
            rounds = std::max(1, std::atoi(argv[i + 1]));
        if (std::strcmp(argv[i], "--source") == 0)
            deepspeed = std::strcmp(argv[i + 1], "deepspeed") == 0;
    }
    const fs::path work = base / ("shardscope-bench-convert-" + std::to_string(::getpid()));
    const fs::path dcp = work / "dcp", hf = work / "hf", copy = work / "copy", torch_out = work / "torch";
    const std::string script = deepspeed ? SHARDSCOPE_SOURCE_DIR "/tests/bench/zero_torch_route.py"
                                         : SHARDSCOPE_SOURCE_DIR "/tests/bench/convert_torch_route.py";
    fs::create_directories(work);
    if (std::system(("/usr/bin/python3 '" + script + "' make '" + dcp.string() + "' " + std::to_string(mib) +
                     (deepspeed ? " 4" : ""))
                        .c_str()) != 0) {
        std::fprintf(stderr, "bench: PyTorch could not write the source (apt-get install python3-torch)\n");
        fs::remove_all(work);
        return 2;
    }
    bench::time_shell("sync");
    uint64_t source_bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dcp))
        if (entry.is_regular_file())
            source_bytes += entry.file_size();
    std::printf("source: %s, %llu float32 tensors of 4096x4096 (%llu MiB of weights), %llu MiB of files\n",
                deepspeed ? "DeepSpeed ZeRO stage 3 over 4 ranks with Adam moments"
                          : "torch DCP written by PyTorch's FileSystemWriter in one file",
                static_cast<unsigned long long>(std::max<uint64_t>(1, mib / 64)),
                static_cast<unsigned long long>(std::max<uint64_t>(1, mib / 64) * 64),
                static_cast<unsigned long long>(source_bytes >> 20));

    struct Best {
        double seconds = 1e300;
        long kib = 0;
        void take(double s, long k)
        {
            seconds = std::min(seconds, s);
            kib = std::max(kib, k);
        }
    } cp, convert, torch;
    unsigned long long bytes = 0;
    for (int round = 0; round < rounds; ++round) {
        long kib = 0;
        double seconds = run_peer("cp -r '" + dcp.string() + "' '" + copy.string() + "' && sync", kib);
        cp.take(seconds, kib);
        fs::remove_all(copy);
        bench::time_shell("sync");

        const std::string child =
            "'" + std::string(argv[0]) + "' --child-convert '" + dcp.string() + "' '" + hf.string() + "'";
        // Timed from the fork to the exit, as the peers are (their process start and imports count).
        const auto started = std::chrono::steady_clock::now();
        FILE* p = ::popen(child.c_str(), "r");
        if (!p || std::fscanf(p, "%ld %lf %llu", &kib, &seconds, &bytes) != 3) {
            std::fprintf(stderr, "bench: the convert child failed\n");
            fs::remove_all(work);
            return 2;
        }
        ::pclose(p);
        convert.take(bench::seconds_since(started), kib);
        fs::remove_all(hf);
        bench::time_shell("sync");

        seconds = run_peer(
            "/usr/bin/python3 '" + script + "' route '" + dcp.string() + "' '" + torch_out.string() + "'", kib);
        torch.take(seconds, kib);
        fs::remove_all(torch_out);
        bench::time_shell("sync");
    }
    const double mb = static_cast<double>(bytes) / double(1ull << 20);
    const auto line = [&](const char* what, const Best& b) {
        std::printf("%-68s %6.2f s, %5.0f MiB/s, peak RSS %5ld MiB\n", what, b.seconds, mb / b.seconds, b.kib / 1024);
    };
    std::printf("best of %d rounds; peak RSS the largest of the rounds\n", rounds);
    line("convert --to hf (verify source, copy in pieces, fsync, verify output):", convert);
    line("cp -r + sync of the same folder:", cp);
    line(deepspeed ? "torch route (zero_to_fp32's gathering, torch.save, fsync):"
                   : "torch route (load_state_dict, torch.save, fsync):",
         torch);
    std::printf("ratio convert / cp: time %.2f, peak RSS %.2f; convert / torch: time %.2f, peak RSS %.3f; "
                "convert's peak RSS / model size %.3f\n",
                convert.seconds / cp.seconds, double(convert.kib) / double(std::max(cp.kib, 1L)),
                convert.seconds / torch.seconds, double(convert.kib) / double(std::max(torch.kib, 1L)),
                double(convert.kib) / 1024.0 / mb);
    fs::remove_all(work);
    return 0;
}
