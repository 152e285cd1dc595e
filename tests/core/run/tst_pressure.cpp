// Under pressure a training job keeps going: a failing mirror (ENOSPC, EACCES, EIO at
// every write, fsync and rename of an upload, a vanished mirror, a real full tmpfs) never fails a
// save; a failing local tier fails the save and nothing else; a second writer is refused; a
// leftover lock is taken over. Every case asserts that `latest` names a step that verifies, that
// no step a policy promised to keep is lost, and that the next save after the fault clears works.

#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/util/fsutil.h"
#include "core/util/internal/fault_injection.h"
#include "core/run/lifecycle.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cerrno>
#include <fstream>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

std::vector<RankState> state(uint64_t seed)
{
    return make_demo_state(seed, 20'000, 2, ParamDtype::F16); // about 280 KB a step
}

struct Warnings {
    std::mutex mutex;
    std::vector<std::string> lines;
    std::function<void(const std::string&)> sink()
    {
        return [this](const std::string& m) {
            std::lock_guard lock(mutex);
            lines.push_back(m);
        };
    }
    bool any(const char* text)
    {
        std::lock_guard lock(mutex);
        for (const auto& l : lines)
            if (l.find(text) != std::string::npos)
                return true;
        return false;
    }
};

ManagerOptions options(const fs::path& root, int keep, std::optional<fs::path> mirror, int mirror_keep,
                       Warnings* warnings = nullptr)
{
    ManagerOptions o;
    o.root = root;
    o.keep_last = keep;
    o.mirror = std::move(mirror);
    o.mirror_keep_last = mirror_keep;
    o.threads = 1; // one order of operations, so the k-th one is the same in every run
    if (warnings)
        o.on_warning = warnings->sink();
    return o;
}

bool complete_in(const fs::path& root, uint64_t step, StepTier tier)
{
    for (const auto& s : list_steps(root))
        if (s.step == step && s.complete)
            return tier == StepTier::local || fs::exists(root / s.name / kUploadManifest);
    return false;
}

// `latest` names a step that verifies and loads as what was saved under that step.
QString latest_problem(const fs::path& root)
{
    const auto latest = read_latest(root);
    if (!latest)
        return QStringLiteral("no `latest`");
    const VerifyReport report = verify_checkpoint(root);
    if (!report.ok())
        return QString::fromStdString(*latest + " does not verify: " + report.problems.front().message);
    const LoadedCheckpoint loaded = load_sharded(root, 2);
    if (flat_state_digests(loaded.ranks) != flat_state_digests(state(loaded.manifest.step)))
        return QString::fromStdString(*latest + " does not hold what was saved as it");
    return {};
}

// Mounts a tmpfs of `size` at `dir`, or says why not (then the test is skipped).
std::string mount_tmpfs(const fs::path& dir, const char* size)
{
    if (::geteuid() != 0)
        return "not running as root: a real tmpfs cannot be mounted";
    fs::create_directories(dir);
    const std::string data = std::string("size=") + size;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, data.c_str()) != 0)
        return std::string("mount -t tmpfs failed: ") + std::strerror(errno);
    return {};
}

int mappings()
{
    std::ifstream maps("/proc/self/maps");
    int n = 0;
    for (std::string line; std::getline(maps, line);)
        ++n;
    return n;
}

} // namespace

class TestPressure : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    int m_counter = 0;
    std::vector<fs::path> m_mounts;
    fs::path fresh(const char* name)
    {
        return fs::path(m_tmp.path().toStdString()) / (std::string(name) + "-" + std::to_string(++m_counter));
    }

private slots:
    void cleanup()
    {
        fsutil::reset_io_counts();
        for (const auto& m : m_mounts)
            ::umount2(m.c_str(), MNT_DETACH);
        m_mounts.clear();
    }

    void faultAtEveryOperationOfBothTiers_data()
    {
        QTest::addColumn<int>("op");
        QTest::addColumn<int>("error");
        QTest::addColumn<bool>("async"); // the write on its thread, beside the upload worker
        QTest::newRow("write ENOSPC") << int(fsutil::IoOp::write) << ENOSPC << false;
        QTest::newRow("write EACCES") << int(fsutil::IoOp::write) << EACCES << false;
        QTest::newRow("write EIO") << int(fsutil::IoOp::write) << EIO << false;
        QTest::newRow("fsync EIO") << int(fsutil::IoOp::fsync) << EIO << false;
        QTest::newRow("rename EIO") << int(fsutil::IoOp::rename) << EIO << false;
        QTest::newRow("async write ENOSPC") << int(fsutil::IoOp::write) << ENOSPC << true;
        QTest::newRow("async rename EIO") << int(fsutil::IoOp::rename) << EIO << true;
    }

    void faultAtEveryOperationOfBothTiers()
    {
        QFETCH(int, op);
        QFETCH(int, error);
        QFETCH(bool, async);
        const auto io = static_cast<fsutil::IoOp>(op);
        // The operations of one save with its upload: the local tier's first, then the mirror's.
        int count = 0;
        {
            const fs::path root = fresh("count"), mirror = fresh("count-mirror");
            CheckpointManager manager(options(root, 1, mirror, 3));
            manager.save(state(1), 1);
            manager.wait();
            fsutil::reset_io_counts();
            manager.save(state(2), 2);
            manager.wait();
            count = fsutil::io_operations(io);
        }
        QVERIFY(count >= 3);
        int local_failures = 0, mirror_failures = 0;
        for (int k = 1; k <= count; ++k) {
            const QString at = QStringLiteral("operation %1 of %2: ").arg(k).arg(count);
            const fs::path root = fresh("fault"), mirror = fresh("fault-mirror");
            Warnings warnings;
            CheckpointManager manager(options(root, 1, mirror, 3, &warnings));
            manager.save(state(1), 1);
            manager.wait();
            fsutil::inject_fault(io, k, error);
            bool saved = true;
            try {
                if (async) {
                    manager.save_async(state(2), 2);
                    manager.wait(); // rethrows the background write's error, never an upload's
                } else {
                    manager.save(state(2), 2);
                }
            } catch (const Error& e) { // the local tier failed: one sentence, the save only
                saved = false;
                QCOMPARE(e.kind(), ProblemKind::io_error);
                QVERIFY2(std::string(e.what()).find('\n') == std::string::npos, e.what());
            }
            manager.wait(); // an upload's failure is never thrown
            fsutil::reset_io_counts();
            const QString latest = latest_problem(root);
            QVERIFY2(latest.isEmpty(), qPrintable(at + latest));
            QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(saved ? 2 : 1)));
            const auto status = manager.upload_status();
            const bool upload_failed = saved && !complete_in(mirror, 2, StepTier::mirror);
            local_failures += !saved;
            mirror_failures += upload_failed;
            if (upload_failed) {
                // Kept locally although keep_last is 1 and it is the mirror's to hold; said.
                QVERIFY2(complete_in(root, 2, StepTier::local),
                         qPrintable(at + QStringLiteral("the only copy is gone")));
                QVERIFY2(!status.empty() && status.back().state == UploadState::failed, qPrintable(at));
                QCOMPARE(status.back().retry_in_saves, 1);
                QVERIFY2(warnings.any("mirror upload of step-00000002 failed"), qPrintable(at));
            }
            // Every committed step is in one tier or the other.
            QVERIFY2(complete_in(root, 1, StepTier::local) || complete_in(mirror, 1, StepTier::mirror), qPrintable(at));
            // The fault has cleared: the next save works and the failed upload is retried with it.
            manager.save(state(3), 3);
            manager.wait();
            QVERIFY2(latest_problem(root).isEmpty(), qPrintable(at));
            QCOMPARE(read_latest(mirror), std::optional<std::string>(step_dir_name(3)));
            if (saved)
                QVERIFY2(complete_in(mirror, 2, StepTier::mirror),
                         qPrintable(at + QStringLiteral("the retry did not upload step 2")));
            for (const UploadStatus& u : manager.upload_status())
                QVERIFY2(u.state == UploadState::uploaded, qPrintable(at + QString::fromStdString(u.name)));
        }
        qInfo("%d local and %d mirror failures out of %d injected", local_failures, mirror_failures, count);
        QVERIFY(local_failures > 0); // the faults reached both tiers
        QVERIFY(mirror_failures > 0);
    }

    void retentionWaitsForTheMirrorWithinABound()
    {
        // The mirror is gone for good (a vanished mount): local retention holds the steps the
        // mirror is meant to have, mirror_keep_last of them at most, and says so.
        const fs::path root = fresh("lag"), mirror = fresh("lag-mirror");
        Warnings warnings;
        CheckpointManager manager(options(root, 1, mirror, 3, &warnings));
        manager.save(state(1), 1);
        manager.wait();
        fs::remove_all(mirror);
        for (uint64_t step = 2; step <= 8; ++step) {
            manager.save(state(step), step); // never throws for the mirror
            manager.wait();
            QVERIFY(latest_problem(root).isEmpty());
        }
        std::vector<uint64_t> local;
        for (const auto& s : list_steps(root))
            if (s.complete)
                local.push_back(s.step);
        QCOMPARE(local, (std::vector<uint64_t>{6, 7, 8})); // newest mirror_keep_last, not all of them
        QVERIFY(warnings.any("beyond keep_last 1 because the mirror lacks them"));
        QVERIFY(warnings.any("mirror upload of step-00000008 failed"));
        const auto status = manager.upload_status();
        QCOMPARE(status.size(), std::size_t(3));
        for (const auto& u : status)
            QCOMPARE(u.state, UploadState::failed);
        // The mount comes back: retried uploads bring the mirror up to date, then local rotation
        // goes back to keep_last.
        fs::create_directories(mirror);
        manager.retry_uploads();
        manager.wait();
        for (const auto& u : manager.upload_status())
            QCOMPARE(u.state, UploadState::uploaded);
        manager.save(state(9), 9);
        manager.wait();
        for (uint64_t step : {7, 8, 9})
            QVERIFY(complete_in(mirror, step, StepTier::mirror));
        std::size_t kept = 0;
        for (const auto& s : list_steps(root))
            kept += s.complete;
        QCOMPARE(kept, std::size_t(1));
    }

    void secondWriterIsRefused()
    {
        const fs::path root = fresh("two");
        CheckpointManager first(options(root, 2, std::nullopt, 3));
        first.save(state(1), 1);
        QVERIFY(fs::exists(root / kLockFile));
        const auto holder = read_lock_holder(root);
        QVERIFY(holder && holder->pid == ::getpid() && holder->running == std::optional<bool>(true));
        // flock locks belong to an open file description: a second manager conflicts even here.
        CheckpointManager second(options(root, 2, std::nullopt, 3));
        try {
            second.save(state(2), 2);
            QFAIL("a second writer must be refused");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::root_locked);
            QVERIFY2(std::string(e.what()).find("pid " + std::to_string(::getpid())) != std::string::npos, e.what());
        }
        QCOMPARE(second.load_resume_point({.expected_world_size = 2}).checkpoint.manifest.step,
                 uint64_t(1)); // readers need no lock
        first.save(state(2), 2); // the holder is unaffected
        QVERIFY(latest_problem(root).isEmpty());
    }

    void lockIsReleasedAndStaleLocksAreTakenOver()
    {
        const fs::path root = fresh("stale");
        {
            CheckpointManager manager(options(root, 2, std::nullopt, 3));
            manager.save(state(1), 1);
        }
        QVERIFY(!fs::exists(root / kLockFile)); // released: no leftover of a clean exit
        // A job killed while it held the lock: its pid is gone, its lock file stays.
        const pid_t child = ::fork();
        if (child == 0)
            ::_exit(0);
        ::waitpid(child, nullptr, 0);
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        std::ofstream(root / kLockFile) << nlohmann::json{{"pid", child}, {"host", host}, {"started_at", 1}}.dump();
        QCOMPARE(read_lock_holder(root)->running, std::optional<bool>(false));
        Warnings warnings;
        {
            CheckpointManager manager(options(root, 2, std::nullopt, 3, &warnings));
            manager.save(state(2), 2);
            QVERIFY(warnings.any(("left by pid " + std::to_string(child)).c_str()));
            QVERIFY(warnings.any("which is no longer running"));
            QCOMPARE(read_lock_holder(root)->pid, int64_t(::getpid()));
        }
        // A torn record (a power cut while it was written) is a leftover too.
        std::ofstream(root / kLockFile) << "{\"pi";
        {
            CheckpointManager manager(options(root, 2, std::nullopt, 3, &warnings));
            manager.save(state(3), 3);
            QVERIFY(warnings.any("names no holder"));
        }
        QVERIFY(latest_problem(root).isEmpty());
    }

    void finishedUploadThreadsAreReaped()
    {
        // One upload thread a save: a run of many saves must not keep each one (and its stack
        // mapping) until wait(), or a long run ends in "cannot create a thread".
        const fs::path root = fresh("reap"), mirror = fresh("reap-mirror");
        ManagerOptions o = options(root, 1, mirror, 1);
        o.durable = false;
        CheckpointManager manager(o);
        const auto tiny = make_demo_state(1, 64, 1, ParamDtype::F16);
        manager.save(tiny, 1);
        manager.wait();
        const int before = mappings();
        for (uint64_t step = 2; step <= 200; ++step)
            manager.save(tiny, step);
        const int during = mappings();
        manager.wait();
        QVERIFY2(during - before < 60, qPrintable(QStringLiteral("%1 -> %2 mappings").arg(before).arg(during)));
        QCOMPARE(read_latest(mirror), std::optional<std::string>(step_dir_name(200)));
    }

    void realFullTmpfsForEachTier()
    {
        // The mirror: a tmpfs with room for two steps; the mirror is meant to hold five.
        const fs::path root = fresh("tmpfs-local"), mirror = fresh("tmpfs-mirror");
        if (const auto why = mount_tmpfs(mirror, "700k"); !why.empty())
            QSKIP(why.c_str());
        m_mounts.push_back(mirror);
        Warnings warnings;
        {
            CheckpointManager manager(options(root, 2, mirror, 5, &warnings));
            for (uint64_t step = 1; step <= 6; ++step) {
                manager.save(state(step), step);
                manager.wait();
                QVERIFY(latest_problem(root).isEmpty());
            }
            QVERIFY(warnings.any("are free on the mirror"));
            // Every step of the newest five is in one tier or the other, verified.
            for (uint64_t step = 2; step <= 6; ++step)
                QVERIFY2(complete_in(root, step, StepTier::local) || complete_in(mirror, step, StepTier::mirror),
                         qPrintable(QString::number(step)));
        }
        // The local tier: a tmpfs with room for three steps (and not a fourth's estimate) while
        // keep_last is 3. Space is checked before writing: the oldest step goes first, said.
        const fs::path small = fresh("tmpfs-small");
        if (const auto why = mount_tmpfs(small, "1m"); !why.empty())
            QSKIP(why.c_str());
        m_mounts.push_back(small);
        {
            Warnings room;
            CheckpointManager manager(options(small / "ckpt", 3, std::nullopt, 3, &room));
            for (uint64_t step = 1; step <= 5; ++step) {
                manager.save(state(step), step); // never fails: the oldest makes room
                QVERIFY(latest_problem(small / "ckpt").isEmpty());
            }
            QVERIFY(room.any("removed the oldest step(s) first, ahead of rotation: step-00000001"));
            for (uint64_t step = 4; step <= 5; ++step) // the newest two of keep 3 at least
                QVERIFY(complete_in(small / "ckpt", step, StepTier::local));
        }
        fs::remove_all(small / "ckpt");
        // Nothing may go (only `latest` is there) and the step does not fit: refused before a
        // byte is written, naming the sizes; once space is freed, the next save works.
        {
            CheckpointManager manager(options(small / "ckpt", 1, std::nullopt, 3));
            manager.save(state(1), 1);
            std::ofstream(small / "filler", std::ios::binary) << std::string(600 * 1024, 'x');
            try {
                manager.save(state(2), 2);
                QFAIL("a save that does not fit must be refused");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ProblemKind::io_error);
                QVERIFY2(std::string(e.what()).find("the step needs about 0.4 MiB but only 0.1 MiB are free") !=
                             std::string::npos,
                         e.what());
                QVERIFY2(std::string(e.what()).find("nothing was written") != std::string::npos, e.what());
            }
            QVERIFY(!fs::exists(small / "ckpt" / step_dir_name(2))); // not one byte
            QCOMPARE(read_latest(small / "ckpt"), std::optional<std::string>(step_dir_name(1)));
            QVERIFY(latest_problem(small / "ckpt").isEmpty());
            fs::remove(small / "filler");
            manager.save(state(3), 3);
            QVERIFY(latest_problem(small / "ckpt").isEmpty());
            QCOMPARE(read_latest(small / "ckpt"), std::optional<std::string>(step_dir_name(3)));
        }
    }
};

QTEST_GUILESS_MAIN(TestPressure)
#include "tst_pressure.moc"
