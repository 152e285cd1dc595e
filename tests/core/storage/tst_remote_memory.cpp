// verify s3:// holds a few connections' buffers whatever the object's size: a rank object of
// 136 MiB in this run's bucket, read by `shardctl verify` in a child process, once straight from
// the gateway (one stream, hashed as it arrives: 20 MiB in docs/benchmarks.md) and once through a
// link of 16 MiB/s a connection, where past its first 64 MiB the read is widened to ranges on
// eight connections. The child's peak resident size (ru_maxrss of wait4) stays under 112 MiB
// either way, below the object's size. A process of its own: the child starts as a copy of this one, whose
// resident size at the fork is a floor of the figure, so the step is written by a child and sent
// as it is read, never held here.

#include "s3_server.h"
#include "testutil.h"

#include "core/storage/s3.h"
#include "core/util/md5_lanes.h"

#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

struct Measured {
    int exit_code = -1; // -1: it did not run or did not exit
    long peak_kib = 0;
};

// SHARDCTL_PATH with `arguments` in a child process, its output to /dev/null.
Measured run_measured(const std::vector<std::string>& arguments)
{
    std::vector<char*> argv{const_cast<char*>(SHARDCTL_PATH)};
    for (const std::string& a : arguments)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0)
        return {};
    if (pid == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDOUT_FILENO);
        ::execv(SHARDCTL_PATH, argv.data());
        ::_exit(127);
    }
    int status = 0;
    rusage usage{};
    pid_t waited;
    do
        waited = ::wait4(pid, &status, 0, &usage);
    while (waited < 0 && errno == EINTR);
    if (waited != pid || !WIFEXITED(status))
        return {};
    return {.exit_code = WEXITSTATUS(status), .peak_kib = usage.ru_maxrss};
}

long resident_kib()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmRSS:"))
            return std::stol(line.substr(6));
    return -1;
}

} // namespace

class TestRemoteMemory : public QObject {
    Q_OBJECT

private slots:
    void verifyHoldsAFewBuffersWhateverTheObjectSize()
    {
#ifdef __SANITIZE_ADDRESS__
        QSKIP("AddressSanitizer's shadow memory and quarantine are not the reader's");
#endif
        const auto env = s3test::server_env();
        QVERIFY2(env.contains("SHARDSCOPE_S3_ENDPOINT"), "the test S3 server is not running (SHARDSCOPE_S3_ENV)");
        for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"})
            qputenv(name, env.at(name).c_str());
        const storage::S3Client s3(s3test::server_config());
        const std::string bucket = s3test::fresh_bucket("memory");
        s3.create_bucket(bucket);
        const auto cleanup = qScopeGuard([&] {
            for (const auto& o : s3.list(bucket, "", 100))
                s3.remove(bucket, o.key);
        });

        QTemporaryDir tmp;
        const fs::path step = fs::path(tmp.path().toStdString()) / "step";
        // 14 bytes an element (BF16 params, F32 master and moments): 136 MiB, above the 128 MiB
        // from which a shard read alone may be widened.
        const testutil::Run saved = testutil::shardctl(
            {QStringLiteral("demo-save"), QStringLiteral("--out"), QString::fromStdString(step.string()),
             QStringLiteral("--world-size"), QStringLiteral("1"), QStringLiteral("--numel"), QStringLiteral("10200000"),
             QStringLiteral("--dtype"), QStringLiteral("bf16")});
        QVERIFY2(saved.exit_code == 0, saved.err.constData());
        QVERIFY(fs::file_size(step / "rank0.safetensors") > (uint64_t(128) << 20));
        for (const auto& entry : fs::directory_iterator(step)) { // sent as it is read, never held
            const std::string name = entry.path().filename().string();
            const uint64_t size = fs::file_size(entry.path());
            const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
            QVERIFY(fd >= 0);
            const auto closing = qScopeGuard([fd] { ::close(fd); });
            const auto read = [&](uint64_t at, std::span<std::byte> into) {
                if (::pread(fd, into.data(), into.size(), static_cast<off_t>(at)) != ssize_t(into.size()))
                    throw std::runtime_error("short read of " + name);
            };
            Md5Lanes md5;
            std::vector<std::byte> buffer(1 << 20);
            for (uint64_t at = 0; at < size; at += buffer.size()) {
                const std::span<std::byte> piece(buffer.data(), std::min<uint64_t>(buffer.size(), size - at));
                read(at, piece);
                const std::span<const std::byte> lane(piece);
                md5.update({&lane, 1});
            }
            s3.put(bucket, "step/" + name, size, read, md5.finish()[0]);
        }

        const std::string url = "s3://" + bucket + "/step";
        const long parent_kib = resident_kib();
        // Straight from the gateway: one stream, hashed as it arrives (unless the machine is so
        // loaded that the link looks slower than the hashing, and the read is widened).
        qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str());
        const Measured direct = run_measured({"verify", url});
        QCOMPARE(direct.exit_code, 0);
        // Through the fault proxy at 16 MiB/s a connection, which counts the rank object's GETs.
        s3test::FaultProxy proxy(env.at("SHARDSCOPE_S3_ENDPOINT"));
        QVERIFY(!proxy.endpoint().empty());
        qputenv("AWS_ENDPOINT_URL", proxy.endpoint().c_str());
        QVERIFY(proxy.fault("mode=narrow&rate=16777216&count=-1&method=GET&path=step/rank0"));
        const Measured narrow = run_measured({"verify", url});
        QCOMPARE(narrow.exit_code, 0);
        const int gets = proxy.injected();

        const std::string figures = "peak RSS " + std::to_string(direct.peak_kib / 1024) + " MiB straight, " +
            std::to_string(narrow.peak_kib / 1024) + " MiB in " + std::to_string(gets) +
            " GETs through the narrow link; forked at " + std::to_string(parent_kib / 1024) + " MiB";
        qInfo("%s", figures.c_str());
        QVERIFY2(gets > 8, figures.c_str()); // widened: the stream, then a range a chunk
        QVERIFY2(direct.peak_kib < 112 * 1024 && narrow.peak_kib < 112 * 1024, figures.c_str());
    }
};

QTEST_GUILESS_MAIN(TestRemoteMemory)
#include "tst_remote_memory.moc"
