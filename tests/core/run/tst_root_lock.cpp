// One writer per root (format.md 6.7): the cases of RootLock that need more
// than one process or thread — two jobs taking over one leftover at once, a reused pid, a child
// that inherits the flock by fork, and one that does not by exec.

#include "core/run/root_lock.h"
#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <optional>
#include <chrono>
#include <fstream>
#include <future>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

std::string host_name()
{
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

pid_t dead_pid()
{
    const pid_t child = ::fork();
    if (child == 0)
        ::_exit(0);
    ::waitpid(child, nullptr, 0);
    return child;
}

void write_record(const fs::path& root, int64_t pid, int64_t started_at)
{
    std::ofstream(root / kLockFile)
        << nlohmann::json{{"pid", pid}, {"host", host_name()}, {"started_at", started_at}}.dump();
}

} // namespace

class TestRootLock : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    int m_counter = 0;
    fs::path fresh(const char* name)
    {
        const fs::path dir =
            fs::path(m_tmp.path().toStdString()) / (std::string(name) + "-" + std::to_string(++m_counter));
        fs::create_directories(dir);
        return dir;
    }

private slots:
    void takeoverRaceNamesTheLiveHolder()
    {
        // Two jobs find the same leftover at once. The one that loses must name the one that
        // won, never the dead pid of the leftover whose takeover it happened to see mid-way.
        const fs::path root = fresh("race");
        const pid_t dead = dead_pid();
        write_record(root, dead, 1);
        std::promise<void> in_takeover;
        // Whichever job creates the new lock file first holds the root (the one that took the
        // leftover over, or the other, in the moment between the leftover's removal and the new
        // file): exactly one holds it, and the other's refusal names the live holder.
        RootLock first_lock, second_lock;
        QString first_refusal, refusal;
        std::thread first([&] {
            // The warning comes while the leftover is flocked and not yet replaced: stay there a bit.
            try {
                first_lock = RootLock::acquire(root, [&](const std::string&) {
                    in_takeover.set_value();
                    std::this_thread::sleep_for(std::chrono::milliseconds(150));
                });
            } catch (const Error& e) {
                first_refusal = QString::fromUtf8(e.what());
            }
        });
        in_takeover.get_future().wait();
        std::optional<ProblemKind> kind;
        try {
            second_lock = RootLock::acquire(root, {});
        } catch (const Error& e) {
            kind = e.kind();
            refusal = QString::fromUtf8(e.what());
        }
        first.join();
        QVERIFY(!kind || *kind == ProblemKind::root_locked);
        QVERIFY(static_cast<bool>(first_lock) != static_cast<bool>(second_lock));
        if (second_lock)
            refusal = first_refusal;
        QVERIFY2(refusal.contains(QStringLiteral("is being written by another job (pid %1 on host").arg(::getpid())),
                 qPrintable(refusal));
        QVERIFY2(!refusal.contains(QStringLiteral("pid %1 ").arg(dead)), qPrintable(refusal));
    }

    void reusedPidIsNotTheHolder()
    {
        // The record names a pid that runs now but started after the lock was taken: pid reuse.
        // `status` and the app must not call that job "running" (it is this test process).
        const fs::path root = fresh("reused");
        write_record(root, ::getpid(), 1);
        QCOMPARE(read_lock_holder(root)->running, std::optional<bool>(false));
        // The record a live holder writes is recognised as running.
        const fs::path live = fresh("live");
        const RootLock lock = RootLock::acquire(live, {});
        QVERIFY(lock);
        QCOMPARE(read_lock_holder(live)->running, std::optional<bool>(true));
    }

    void forkedChildKeepsTheLock()
    {
        // A job forks a child (no exec) and dies: the child shares the open file, so the flock,
        // and the root stays locked by a pid the record does not name.
        const fs::path root = fresh("forked");
        int ready[2];
        QVERIFY(::pipe(ready) == 0);
        const pid_t job = ::fork();
        if (job == 0) {
            ::close(ready[0]);
            RootLock lock = RootLock::acquire(root, {});
            const pid_t grandchild = ::fork();
            if (grandchild == 0) {
                ::sleep(30); // holds the inherited flock until killed
                ::_exit(0);
            }
            (void)!::write(ready[1], &grandchild, sizeof grandchild);
            ::_exit(0); // killed, in effect: no destructor removes the lock file
        }
        ::close(ready[1]);
        pid_t holder = 0;
        QCOMPARE(::read(ready[0], &holder, sizeof holder), ssize_t(sizeof holder));
        ::close(ready[0]);
        ::waitpid(job, nullptr, 0); // reaped: the pid the record names runs no more
        QCOMPARE(read_lock_holder(root)->running, std::optional<bool>(false));
        QString refusal;
        try {
            RootLock::acquire(root, {});
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::root_locked);
            refusal = QString::fromUtf8(e.what());
        }
        ::kill(holder, SIGKILL);
        QVERIFY2(refusal.contains(QStringLiteral("its record names pid %1 on host").arg(job)) &&
                     refusal.contains(QStringLiteral("a child it forked")) && !refusal.contains(QLatin1Char('\n')),
                 qPrintable(refusal));
        // Once that child is gone the leftover is taken over.
        for (int i = 0; i < 100 && ::kill(holder, 0) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::string warning;
        const RootLock lock = RootLock::acquire(root, [&](const std::string& m) { warning = m; });
        QVERIFY(lock);
        QVERIFY2(warning.find("took over the lock") != std::string::npos, warning.c_str());
    }

    void executedChildDoesNotHoldTheLock()
    {
        // The lock's descriptor is O_CLOEXEC: a program the job runs does not keep the root locked.
        const fs::path root = fresh("exec");
        QProcess child;
        {
            RootLock lock = RootLock::acquire(root, {});
            child.start(QStringLiteral("/bin/sleep"), {QStringLiteral("20")});
            QVERIFY(child.waitForStarted());
        }
        const RootLock again = RootLock::acquire(root, {}); // while the child still runs
        QVERIFY(again);
        child.kill();
        child.waitForFinished();
    }
};

QTEST_GUILESS_MAIN(TestRootLock)
#include "tst_root_lock.moc"
