// core/util/mapped.h: a mapped window reads what pread reads; a file truncated under its mapping
// makes guarded_access return false instead of killing the process; and stats, which scans
// through such windows, reports a checkpoint truncated mid-scan as a sentence naming the file.

#include "core/checkpoint/save.h"
#include "core/inspect/content.h"
#include "core/run/demo.h"
#include "core/util/mapped.h"

#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>
#include <vector>

using namespace shardscope;
namespace fs = std::filesystem;

class TestMapped : public QObject {
    Q_OBJECT

private slots:
    void windowReadsTheFileAndSurvivesTruncation()
    {
        QTemporaryDir tmp;
        const std::string path = tmp.filePath(QStringLiteral("f")).toStdString();
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
        QVERIFY(fd >= 0);
        std::vector<unsigned char> bytes(3 * 65536 + 123);
        for (std::size_t i = 0; i < bytes.size(); ++i)
            bytes[i] = static_cast<unsigned char>(i * 7 + 3);
        QCOMPARE(::pwrite(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
        fsutil::MappedWindow window;
        const uint64_t offset = 70001; // not page-aligned
        QVERIFY(window.map(fd, offset, bytes.size() - offset));
        unsigned sum = 0, expected = 0;
        for (std::size_t i = offset; i < bytes.size(); ++i)
            expected += bytes[i];
        QVERIFY(fsutil::guarded_access([&] {
            for (std::size_t i = 0; i < bytes.size() - offset; ++i)
                sum += static_cast<unsigned>(window.data()[i]);
        }));
        QCOMPARE(sum, expected);
        // Truncated to 4 KiB: the window's pages are past the end now; touching one is SIGBUS.
        QCOMPARE(::ftruncate(fd, 4096), 0);
        volatile unsigned touched = 0;
        QVERIFY(!fsutil::guarded_access([&] { touched = touched + static_cast<unsigned>(window.data()[100000]); }));
        // The guard is left behind when it fired: a later access runs normally.
        QVERIFY(fsutil::guarded_access([&] { touched = 1; }));
        QCOMPARE(unsigned(touched), 1u);
        ::close(fd);
    }

    void statsOfAFileTruncatedMidScanIsAProblem()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        const uint64_t numel = 1'200'000; // 300k per rank: many blocks per part, one window each
        save_sharded(make_demo_state(7, numel, 4, ParamDtype::BF16), dir, 1, {});
        std::atomic<bool> truncated{false};
        ContentOptions options;
        options.threads = 1; // the truncation lands between two blocks of one part
        options.progress = [&](uint64_t, uint64_t) {
            if (truncated.exchange(true))
                return;
            for (int r = 0; r < 4; ++r)
                fs::resize_file(dir / ("rank" + std::to_string(r) + ".safetensors"), 4096);
        };
        const ContentReport report = inspect_content(dir, options);
        QVERIFY(truncated.load());
        QVERIFY(!report.ok());
        bool named = false;
        for (const Problem& p : report.problems)
            named = named ||
                (p.kind == ProblemKind::unreadable && p.rank >= 0 &&
                 p.message.find(".safetensors") != std::string::npos &&
                 p.message.find("truncated while it was being read") != std::string::npos);
        QVERIFY2(named, report.problems.empty() ? "no problem" : report.problems.front().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestMapped)
#include "tst_mapped.moc"
