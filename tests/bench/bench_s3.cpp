// The mirror tier's upload to S3 against curl on the same files and the same server, same run:
// MirrorTier::upload (multipart, SHA-256 and MD5 of every part, then every object read back)
// against four parallel `curl -T` uploads followed by four parallel `curl | sha256sum` reads of
// the same files (the same work: ours hashes what it reads back). Run by hand against the test
// server:
//   eval "$(scripts/s3-test-server.sh start)"; build/bin/bench_s3 --mib 512; scripts/s3-test-server.sh stop

#include "benchutil.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "core/run/mirror_tier.h"
#include "core/storage/s3.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

int main(int argc, char** argv)
{
    const bench::Args args = bench::parse_args(argc, argv, 512);
    const char* endpoint = std::getenv("SHARDSCOPE_S3_ENDPOINT");
    if (!endpoint || !std::getenv("AWS_ACCESS_KEY_ID")) {
        std::fprintf(stderr, "bench_s3: start the server first: eval \"$(scripts/s3-test-server.sh start)\"\n");
        return 2;
    }
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    const std::string region = std::getenv("AWS_DEFAULT_REGION") ? std::getenv("AWS_DEFAULT_REGION") : "default";
    setenv("AWS_REGION", region.c_str(), 1);
    const storage::S3Client s3(storage::s3_config_from_environment());
    const std::string bucket = "bench-s3";
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
    auto start = std::chrono::steady_clock::now();
    tier.upload(dir, "step-00000001", m, text, false);
    const double ours = bench::seconds_since(start);

    const std::string sign = "--aws-sigv4 'aws:amz:" + region +
        ":s3' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
        "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -sf";
    std::string put, get;
    for (const ShardRecord& r : m.shards) {
        const std::string url = std::string(endpoint) + "/" + bucket + "/curl/" + r.path;
        put += "curl " + sign + " -T " + (dir / r.path).string() + " " + url + " >/dev/null & ";
        get += "(curl " + sign + " " + url + " | sha256sum >/dev/null) & ";
    }
    const double curl_put = bench::time_shell("bash -c \"" + put + " wait\"");
    const double curl_get = bench::time_shell("bash -c \"" + get + " wait\"");
    const double mib = double(m.total_bytes()) / (1 << 20);
    std::printf("upload + read-back, ShardScope MirrorTier::upload: %.2f s (%.0f MiB/s)\n", ours, mib / ours);
    std::printf("upload + read-back, 4 x curl -T then 4 x curl | sha256sum: %.2f s (%.2f + %.2f; %.0f MiB/s)\n",
                curl_put + curl_get, curl_put, curl_get, mib / (curl_put + curl_get));
    std::printf("ratio (curl time / ours): %.2f  (>= 0.8 is the goal)\n", (curl_put + curl_get) / ours);
    std::printf("peak RSS: %.1f MiB\n", double(bench::peak_rss_kib()) / 1024);
    for (const auto& o : s3.list(bucket, "", 100000))
        s3.remove(bucket, o.key);
    fs::remove_all(dir);
    return 0;
}
