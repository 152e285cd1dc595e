#pragma once
// What the benchmarks share: wall-clock timing, timing a peer command, the peak resident memory
// of this process, and the --mib N --dir DIR arguments.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace bench {

inline double seconds_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs a shell command (the peer: cat, dd, sha256sum, cp) and returns its wall time; exits on failure.
inline double time_shell(const std::string& command)
{
    const auto start = std::chrono::steady_clock::now();
    if (std::system(command.c_str()) != 0) {
        std::fprintf(stderr, "bench: command failed: %s\n", command.c_str());
        std::exit(2);
    }
    return seconds_since(start);
}

// Peak resident memory of this process in KiB (VmHWM belongs to the address space, so a fresh
// exec starts from zero, unlike ru_maxrss which a child inherits from its parent).
inline long peak_rss_kib()
{
    FILE* status = std::fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && std::fgets(line, sizeof line, status))
        if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (status)
        std::fclose(status);
    return kib;
}

struct Args {
    uint64_t mib;
    std::filesystem::path base = "/var/tmp";
};

// --mib N and --dir DIR, with the benchmark's own default size.
inline Args parse_args(int argc, char** argv, uint64_t default_mib)
{
    Args args{default_mib};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--mib") == 0)
            args.mib = std::strtoull(argv[i + 1], nullptr, 10);
        else if (std::strcmp(argv[i], "--dir") == 0)
            args.base = argv[i + 1];
    }
    return args;
}

} // namespace bench
