// S3 against curl on the same files and the same server, same run. Run by hand against the test
// server:
//   eval "$(scripts/s3-test-server.sh start)"; build/bin/bench_s3 --mib 512; scripts/s3-test-server.sh stop
//
// Default: the mirror tier's upload. MirrorTier::upload (multipart, MD5 of every part, then every
// object read back and hashed) against four parallel `curl -T` uploads followed by four parallel
// `curl | openssl dgst -sha256` reads of the same files (the same work: ours hashes what it reads
// back); each phase apart too, ours from the upload record's `seconds`; best of three each,
// alternating.
//
// Where each side runs is said first: the test gateway (radosgw, its OSD and monitor, from the
// pid files of scripts/s3-test-server.sh) and this process with what it starts. On two shared
// cores every CPU second a client spends on checking what it moves (verify's SHA-256, each
// part's MD5) is taken from the gateway; SHARDSCOPE_S3_CPUS=0 for the server and `taskset -c 1`
// for the benchmark keep them apart. The gateway's CPU seconds are given for each side.
//
// --mode verify --ranks N [--shardctl PATH]: `shardctl verify s3://…` of a step of N rank files
// (uploaded with curl -T) against `curl | openssl dgst -sha256` and `curl | sha256sum` of the
// same objects, as many at once as verify reads objects (storage::kRemoteReadsAtOnce, at most
// one per object), and the same GETs into /dev/null, the transfer alone; best of three each,
// alternating; the peak RSS of the shardctl process from wait4. The peers' SHA-256 digests are
// compared with the manifest's, so they did the same work.
//   build/bin/bench_s3 --mode verify --mib 1024 --ranks 1

#include "benchutil.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "core/run/mirror_tier.h"
#include "core/storage/s3.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// The pid of one of the test gateway's daemons ("client.rgw", "osd.0", "mon.a"), 0 if unknown.
long gateway_pid(const char* name)
{
    const char* state = std::getenv("SHARDSCOPE_S3_STATE");
    long pid = 0;
    if (state) {
        std::ifstream in(fs::path(state) / "run" / (std::string(name) + ".pid"));
        in >> pid;
    }
    return pid;
}

constexpr const char* kGatewayDaemons[] = {"client.rgw", "osd.0", "mon.a"};

// The CPU seconds the gateway's daemons have used so far (user + system, /proc/PID/stat); NaN
// when they cannot be read, which a difference of two keeps.
double gateway_cpu_seconds()
{
    double total = 0;
    for (const char* name : kGatewayDaemons) {
        const long pid = gateway_pid(name);
        std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
        std::string text((std::istreambuf_iterator<char>(in)), {});
        const auto end_of_name = text.rfind(')'); // the command name may hold spaces
        if (pid <= 0 || end_of_name == std::string::npos)
            return std::nan("");
        std::istringstream fields(text.substr(end_of_name + 2));
        std::string field;
        unsigned long long user = 0, system = 0;
        for (int i = 3; i <= 15 && fields >> field; ++i) { // fields 14 and 15: utime, stime
            if (i == 14)
                user = std::stoull(field);
            if (i == 15)
                system = std::stoull(field);
        }
        total += double(user + system) / double(::sysconf(_SC_CLK_TCK));
    }
    return total;
}

std::string cpu_seconds_text(double seconds)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", seconds);
    return std::isnan(seconds) ? "unknown" : text;
}

std::string cpu_list(const cpu_set_t& set)
{
    std::string list;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
            list += (list.empty() ? "" : ",") + std::to_string(c);
    return list;
}

// Where the gateway runs and where this benchmark (with what it starts) runs, as a line.
void say_cores()
{
    cpu_set_t ours, gateway;
    const long pid = gateway_pid("client.rgw");
    if (pid <= 0 || ::sched_getaffinity(0, sizeof ours, &ours) != 0 ||
        ::sched_getaffinity(pid_t(pid), sizeof gateway, &gateway) != 0) {
        std::printf("cores: unknown (the gateway's pid files are not at $SHARDSCOPE_S3_STATE/run)\n");
        return;
    }
    cpu_set_t both;
    CPU_AND(&both, &ours, &gateway);
    std::printf("cores: the gateway on CPU %s, this benchmark and what it starts on CPU %s%s\n",
                cpu_list(gateway).c_str(), cpu_list(ours).c_str(),
                CPU_COUNT(&both) ? " (shared: the checks' CPU is the gateway's)" : " (apart)");
}

// A command in a child (no shell): wall seconds and its peak RSS in KiB (ru_maxrss of wait4).
// The child starts as a copy of this process, whose resident size at the fork is therefore a
// floor of the figure: the caller keeps it small.
double run_child(const std::vector<std::string>& command, long& kib)
{
    std::vector<char*> argv;
    for (const std::string& a : command)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(::open("/dev/null", O_WRONLY), STDOUT_FILENO); // its report; the exit status says ok
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    rusage usage{};
    ::wait4(pid, &status, 0, &usage);
    const double seconds = bench::seconds_since(start);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "bench: %s failed (status %d)\n", command[0].c_str(), status);
        std::exit(2);
    }
    kib = usage.ru_maxrss;
    return seconds;
}

double children_cpu_seconds()
{
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
        double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The current resident size of this process, KiB.
long rss_kib()
{
    FILE* status = std::fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && std::fgets(line, sizeof line, status))
        if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (status)
        std::fclose(status);
    return kib;
}

int bench_verify(const bench::Args& args, int ranks, const std::string& shardctl, const std::string& endpoint,
                 const std::string& sign, const storage::S3Client& s3)
{
    const std::string bucket = "bench-verify";
    s3.create_bucket(bucket);
    const fs::path dir = args.base / "bench-s3-verify-step";
    fs::remove_all(dir);
    Manifest m;
    { // the state is freed before shardctl is forked, whose peak RSS starts from ours
        const uint64_t numel = args.mib * 1024 * 1024 / 14;
        m = save_sharded(make_demo_state(1, numel, ranks, ParamDtype::BF16), dir, 1);
    }
    const double mib = double(m.total_bytes()) / (1 << 20);
    std::printf("step: %d rank file(s), %.1f MiB\n", m.world_size, mib);

    std::vector<std::string> names{"manifest.json"};
    for (const ShardRecord& r : m.shards)
        names.push_back(r.path);
    std::string put;
    for (const std::string& name : names)
        put += "curl " + sign + " -T '" + (dir / name).string() + "' " + endpoint + "/" + bucket + "/step/" + name +
            " >/dev/null &\n";
    const fs::path put_script = args.base / "bench-s3-put.sh";
    std::ofstream(put_script) << put << "wait\n";
    bench::time_shell("bash '" + put_script.string() + "'");

    // The peers: one `curl | HASHER` per object, as many at once as verify reads objects.
    // `bash get.sh raw` makes the same transfers into /dev/null: what server and loopback carry.
    const int parallel = std::min<int>(storage::kRemoteReadsAtOnce, m.world_size);
    const fs::path sums = args.base / "bench-s3-sums";
    fs::remove_all(sums);
    fs::create_directories(sums);
    const fs::path get_script = args.base / "bench-s3-get.sh";
    {
        std::ofstream script(get_script);
        const std::string get = "curl " + sign + " " + endpoint + "/" + bucket + "/step/$1";
        script << "get() { if [ \"$HASHER\" = raw ]; then " << get << " -o /dev/null; else " << get << " | $HASHER > \""
               << sums.string() << "/$1\"; fi; }\nexport -f get\nexport HASHER=\"$1\"\n"
               << "printf '%s\\n'";
        for (const ShardRecord& r : m.shards)
            script << " " << r.path;
        script << " | xargs -P " << parallel << " -I{} bash -c 'get {}'\n";
    }
    // The digest each peer computed is the manifest's: the peers did the work verify does.
    auto same_digests = [&] {
        for (const ShardRecord& r : m.shards) {
            std::ifstream in(sums / r.path);
            std::string digest;
            in >> digest;
            if (digest != r.sha256) {
                std::fprintf(stderr, "bench: curl read %s with sha256 %s, the manifest says %s\n", r.path.c_str(),
                             digest.c_str(), r.sha256.c_str());
                return false;
            }
        }
        return true;
    };

    struct Peer {
        std::string hasher, label;
        double seconds = 1e9, cpu = 0, gateway_cpu = 0;
    };
    // coreutils' sha256sum (Debian 12) does not use the CPU's SHA instructions and is slower than
    // one connection; OpenSSL's digest, like verify's, does: the peer a reader has to match.
    std::vector<Peer> peers = {{.hasher = "openssl dgst -sha256 -r", .label = "curl | openssl dgst -sha256"},
                               {.hasher = "sha256sum", .label = "curl | sha256sum"},
                               {.hasher = "raw", .label = "curl -o /dev/null (no digest)"}};
    const std::string url = "s3://" + bucket + "/step";
    double ours = 1e9, ours_cpu = 0, ours_gateway_cpu = 0;
    long kib = 0, peak_kib = 0;
    const long parent_kib = rss_kib();
    for (int round = 0; round < 3; ++round) {
        // CPU seconds of every process of each, from the waited-for children's totals.
        for (Peer& peer : peers) {
            const double cpu = children_cpu_seconds(), gateway = gateway_cpu_seconds();
            peer.seconds =
                std::min(peer.seconds, bench::time_shell("bash '" + get_script.string() + "' '" + peer.hasher + "'"));
            peer.cpu += children_cpu_seconds() - cpu;
            peer.gateway_cpu += gateway_cpu_seconds() - gateway;
            if (peer.hasher != "raw" && !same_digests())
                return 1;
        }
        const double cpu = children_cpu_seconds(), gateway = gateway_cpu_seconds();
        ours = std::min(ours, run_child({shardctl, "verify", url}, kib));
        ours_cpu += children_cpu_seconds() - cpu;
        ours_gateway_cpu += gateway_cpu_seconds() - gateway;
        peak_kib = std::max(peak_kib, kib);
    }
    std::printf("shardctl verify: %.2f s (%.0f MiB/s; %.2f CPU s a run, the gateway's %s), peak RSS %.1f MiB (forked "
                "at %.1f MiB)\n",
                ours, mib / ours, ours_cpu / 3, cpu_seconds_text(ours_gateway_cpu / 3).c_str(), double(peak_kib) / 1024,
                double(parent_kib) / 1024);
    for (const Peer& peer : peers)
        std::printf("%d x %s at once: %.2f s (%.0f MiB/s; %.2f CPU s a run, the gateway's %s); ratio (its time / ours) "
                    "%.2f\n",
                    parallel, peer.label.c_str(), peer.seconds, mib / peer.seconds, peer.cpu / 3,
                    cpu_seconds_text(peer.gateway_cpu / 3).c_str(), peer.seconds / ours);
    std::printf("goal: ratio >= 0.8 against the bare GETs (curl -o /dev/null, the last line), which hash nothing\n");
    for (const auto& o : s3.list(bucket, "", 100000))
        s3.remove(bucket, o.key);
    fs::remove_all(dir);
    fs::remove_all(sums);
    fs::remove(put_script);
    if (!std::getenv("BENCH_KEEP_SCRIPTS"))
        fs::remove(get_script);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const bench::Args args = bench::parse_args(argc, argv, 512);
    std::string mode = "upload";
    int ranks = 4;
    std::string shardctl = (fs::path(argv[0]).parent_path() / "shardctl").string(); // or another build's
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--mode") == 0)
            mode = argv[i + 1];
        else if (std::strcmp(argv[i], "--ranks") == 0)
            ranks = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--shardctl") == 0)
            shardctl = argv[i + 1];
    }
    const char* endpoint = std::getenv("SHARDSCOPE_S3_ENDPOINT");
    if (!endpoint || !std::getenv("AWS_ACCESS_KEY_ID")) {
        std::fprintf(stderr, "bench_s3: start the server first: eval \"$(scripts/s3-test-server.sh start)\"\n");
        return 2;
    }
    say_cores();
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    const std::string region = std::getenv("AWS_DEFAULT_REGION") ? std::getenv("AWS_DEFAULT_REGION") : "default";
    setenv("AWS_REGION", region.c_str(), 1);
    const storage::S3Client s3(storage::s3_config_from_environment());
    const std::string sign = "--aws-sigv4 'aws:amz:" + region +
        ":s3' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
        "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -sf";
    if (mode == "verify")
        return bench_verify(args, ranks, shardctl, endpoint, sign, s3);
    const std::string bucket = "bench-s3";
    // Three rounds of ours and curl's copies, each step's objects kept by the gateway's memory
    // store after their deletion until its garbage collection, hours later: a store too small
    // for them fills, and the gateway then holds every request.
    const char* store_mib = std::getenv("SHARDSCOPE_S3_MEMSTORE_MIB");
    if (store_mib && std::strtoull(store_mib, nullptr, 10) < 6 * args.mib + 512) {
        std::fprintf(stderr,
                     "bench_s3: %llu MiB in three rounds need a server started with SHARDSCOPE_S3_MEMSTORE_MIB=%llu "
                     "or more (it has %s)\n",
                     static_cast<unsigned long long>(6 * args.mib), static_cast<unsigned long long>(6 * args.mib + 512),
                     store_mib);
        return 2;
    }
    s3.create_bucket(bucket);

    // 4 ranks; BF16 params + F32 master and moments: 14 bytes an element.
    const uint64_t numel = args.mib * 1024 * 1024 / 14;
    const fs::path dir = args.base / "bench-s3-step";
    fs::remove_all(dir);
    const Manifest m = save_sharded(make_demo_state(1, numel, 4, ParamDtype::BF16), dir, 1);
    std::printf("step: %d rank files, %.1f MiB\n", m.world_size, double(m.total_bytes()) / (1 << 20));

    const MirrorTier tier(storage::parse_location("s3://" + bucket + "/ours"));
    std::ifstream in(dir / "manifest.json", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    std::string put, get;
    for (const ShardRecord& r : m.shards) {
        const std::string url = std::string(endpoint) + "/" + bucket + "/curl/" + r.path;
        put += "curl " + sign + " -T " + (dir / r.path).string() + " " + url + " >/dev/null & ";
        get += "(curl " + sign + " " + url + " | openssl dgst -sha256 >/dev/null) & ";
    }
    // Best of three rounds each, alternating, the objects removed after each round. The first
    // round is a fresh gateway's, slower for whichever goes first: its first multipart uploads
    // took 90 ms to begin, later ones 5. Each side's phases are those of its best round.
    struct Round {
        double whole = 1e9, send = 0, read = 0;
    };
    Round ours, curl;
    double ours_gateway_cpu = 0, put_gateway_cpu = 0, get_gateway_cpu = 0; // the three rounds'
    long before_kib = 0, upload_kib = 0;
    for (int round = 0; round < 3; ++round) {
        // The peak resident size of the first round is the upload's: the generated state is
        // freed, and writing 5 to clear_refs resets VmHWM to what is resident now (Linux 4.0 and
        // later). Later rounds start with what the allocator kept of the first.
        std::ofstream("/proc/self/clear_refs") << "5";
        if (round == 0)
            before_kib = bench::peak_rss_kib();
        double gateway = gateway_cpu_seconds();
        auto start = std::chrono::steady_clock::now();
        tier.upload(dir, "step-00000001", m, text, false);
        const double whole = bench::seconds_since(start);
        ours_gateway_cpu += gateway_cpu_seconds() - gateway;
        if (round == 0)
            upload_kib = bench::peak_rss_kib();
        const auto record = nlohmann::json::parse(s3.get(bucket, "ours/step-00000001/upload.json", 1 << 20).value());
        if (whole < ours.whole)
            ours = {.whole = whole,
                    .send = record["seconds"]["copy"].get<double>(),
                    .read = record["seconds"]["read_back"].get<double>()};
        gateway = gateway_cpu_seconds();
        const double put_s = bench::time_shell("bash -c \"" + put + " wait\"");
        put_gateway_cpu += gateway_cpu_seconds() - gateway;
        gateway = gateway_cpu_seconds();
        const double get_s = bench::time_shell("bash -c \"" + get + " wait\"");
        get_gateway_cpu += gateway_cpu_seconds() - gateway;
        if (put_s + get_s < curl.whole)
            curl = {.whole = put_s + get_s, .send = put_s, .read = get_s};
        for (const auto& o : s3.list(bucket, "", 100000))
            s3.remove(bucket, o.key);
    }
    const double mib = double(m.total_bytes()) / (1 << 20);
    std::printf("upload + read-back, ShardScope MirrorTier::upload: %.2f s (%.0f MiB/s; sent in %.2f s, read back in "
                "%.2f s)\n",
                ours.whole, mib / ours.whole, ours.send, ours.read);
    std::printf(
        "upload + read-back, 4 x curl -T then 4 x curl | openssl dgst -sha256: %.2f s (%.2f + %.2f; %.0f MiB/s)\n",
        curl.whole, curl.send, curl.read, mib / curl.whole);
    std::printf("ratio (curl time / ours, best round of three each): whole %.2f, the sending %.2f, the read-back %.2f "
                " (>= 0.8 is the goal)\n",
                curl.whole / ours.whole, curl.send / ours.send, curl.read / ours.read);
    std::printf("the gateway's CPU s a round (average of three): ours %s (upload and read-back), curl's %s + %s "
                "(the PUTs, the GETs)\n",
                cpu_seconds_text(ours_gateway_cpu / 3).c_str(), cpu_seconds_text(put_gateway_cpu / 3).c_str(),
                cpu_seconds_text(get_gateway_cpu / 3).c_str());
    std::printf("peak RSS during the first upload: %.1f MiB (%.1f MiB resident before it)\n", double(upload_kib) / 1024,
                double(before_kib) / 1024);
    fs::remove_all(dir);
    return 0;
}
