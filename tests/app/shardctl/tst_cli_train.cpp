// The contract that matters: a training run killed with SIGKILL at arbitrary moments and resumed
// until it reaches S steps ends with exactly the digests and loss of an uninterrupted run.

#include "testutil.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>
#include <random>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;

class TestCliTrain : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    nlohmann::json m_reference; // uninterrupted run
    qint64 m_reference_ms = 0;  // how long it took, to aim the kills inside a run
    fs::path root(const char* name) const { return fs::path(m_tmp.path().toStdString()) / name; }

    static QStringList train_args(const fs::path& root, int steps, int world, const QStringList& extra = {})
    {
        return QStringList{QStringLiteral("train"), QStringLiteral("--root"), qs(root), QStringLiteral("--steps"),
                           QString::number(steps), QStringLiteral("--save-every"), QStringLiteral("3"),
                           QStringLiteral("--world-size"), QString::number(world), QStringLiteral("--numel"),
                           QStringLiteral("60000"), QStringLiteral("--seed"), QStringLiteral("11"), QStringLiteral("--json")} +
               extra;
    }

    static void compare_to(const nlohmann::json& run, const nlohmann::json& reference)
    {
        QVERIFY2(run.value("ok", false), run.dump().c_str());
        QCOMPARE(run["steps"].get<int>(), reference["steps"].get<int>());
        QCOMPARE(run["final_loss"].get<double>(), reference["final_loss"].get<double>()); // exactly
        for (const char* key : {"param", "master", "exp_avg", "exp_avg_sq"})
            QCOMPARE(run["digests"][key].get<std::string>(), reference["digests"][key].get<std::string>());
    }

private slots:
    void initTestCase()
    {
        QElapsedTimer timer;
        timer.start();
        const auto run = shardctl(train_args(root("reference"), 30, 2));
        m_reference_ms = timer.elapsed();
        QCOMPARE(run.exit_code, 0);
        m_reference = run.json();
        QCOMPARE(m_reference["steps"].get<int>(), 30);
        QVERIFY(m_reference["final_loss"].get<double>() > 0);
        QCOMPARE(m_reference["latest"].get<std::string>(), std::string("step-00000030"));
    }

    void lossDecreases()
    {
        const auto early = shardctl(train_args(root("early"), 3, 2));
        QCOMPARE(early.exit_code, 0);
        QVERIFY(early.json()["final_loss"].get<double>() > m_reference["final_loss"].get<double>());
    }

    void resumeContinuesExactly()
    {
        QCOMPARE(shardctl(train_args(root("halves"), 14, 2)).exit_code, 0);
        const auto rest = shardctl(train_args(root("halves"), 30, 2, {QStringLiteral("--resume")}));
        QCOMPARE(rest.exit_code, 0);
        QCOMPARE(rest.json()["resumed_from"]["step"].get<int>(), 14);
        compare_to(rest.json(), m_reference);
        // The checkpoint on disk is what `load` sees too.
        const auto load = shardctl({QStringLiteral("load"), qs(root("halves")), QStringLiteral("--expect-world-size"),
                                    QStringLiteral("2"), QStringLiteral("--json")});
        QCOMPARE(load.exit_code, 0);
        QCOMPARE(load.json()["digests"]["master"].get<std::string>(), m_reference["digests"]["master"].get<std::string>());
    }

    void resultsDoNotDependOnWorldSize()
    {
        const auto four = shardctl(train_args(root("four"), 30, 4));
        QCOMPARE(four.exit_code, 0);
        compare_to(four.json(), m_reference);
        // Resuming on a different number of ranks reshards the state on load.
        QCOMPARE(shardctl(train_args(root("two-then-three"), 12, 2)).exit_code, 0);
        const auto three = shardctl(train_args(root("two-then-three"), 30, 3, {QStringLiteral("--resume")}));
        QCOMPARE(three.exit_code, 0);
        compare_to(three.json(), m_reference);
    }

    void killedAtRandomInstantsAndResumed_data()
    {
        QTest::addColumn<bool>("async");
        QTest::newRow("sync saves") << false;
        QTest::newRow("async saves") << true;
    }

    void killedAtRandomInstantsAndResumed()
    {
        QFETCH(bool, async);
        const fs::path dir = root(async ? "killed-async" : "killed-sync");
        QStringList extra{QStringLiteral("--resume")};
        if (async)
            extra << QStringLiteral("--async");
        std::mt19937 rng(async ? 7u : 3u);
        int kills = 0;
        QElapsedTimer budget;
        budget.start();
        // Bounded: at most 6 kills and 90 s, then the run is allowed to finish.
        qint64 run_ms = m_reference_ms;
        for (int attempt = 0; attempt < 8 && budget.elapsed() < 90'000; ++attempt) {
            QProcess process;
            process.start(QStringLiteral(SHARDCTL_PATH), train_args(dir, 30, 2, extra));
            QVERIFY(process.waitForStarted());
            // Somewhere inside a whole run (10 % to 90 % of the reference run's duration); later
            // attempts have less left to do and may finish first, which ends the loop.
            const int delay_ms = int(run_ms / 10 + qint64(rng() % 800) * run_ms / 1000);
            if (process.waitForFinished(delay_ms)) {
                if (kills > 0)
                    break; // it finished after being killed and resumed: the checks below apply
                // It finished before the first kill: the reference was timed on a busier machine
                // (ctest runs suites side by side). Start over from scratch with shorter delays.
                fs::remove_all(dir);
                run_ms = std::max<qint64>(run_ms / 2, 20);
                continue;
            }
            process.kill(); // SIGKILL: no destructor, no flush, no cleanup
            process.waitForFinished();
            ++kills;
        }
        const auto final_run = shardctl(train_args(dir, 30, 2, extra));
        QCOMPARE(final_run.exit_code, 0);
        compare_to(final_run.json(), m_reference);
        qInfo("%d kill(s) before the run completed", kills);
        QVERIFY(kills >= 1);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir)}).exit_code, 0);
    }

    void refusesToClobberAnotherRun()
    {
        QCOMPARE(shardctl(train_args(root("clobber"), 3, 2)).exit_code, 0);
        const auto again = shardctl(train_args(root("clobber"), 6, 2));
        QCOMPARE(again.exit_code, 2);
        QVERIFY(again.err.contains("--resume"));
        auto other_seed = train_args(root("clobber"), 6, 2, {QStringLiteral("--resume")});
        other_seed[other_seed.indexOf(QStringLiteral("--seed")) + 1] = QStringLiteral("12");
        const auto mismatch = shardctl(other_seed);
        QCOMPARE(mismatch.exit_code, 2);
        QVERIFY(mismatch.err.contains("seed"));
    }
};

QTEST_GUILESS_MAIN(TestCliTrain)
#include "tst_cli_train.moc"
