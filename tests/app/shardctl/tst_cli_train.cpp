// The contract that matters: a training run killed with SIGKILL at arbitrary moments and resumed
// until it reaches S steps ends with exactly the digests and loss of an uninterrupted run.

#include "testutil.h"

#include <QElapsedTimer>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <map>
#include <random>
#include <sys/mount.h>
#include <unistd.h>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;

class TestCliTrain : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    nlohmann::json m_reference; // uninterrupted run
    qint64 m_reference_ms = 0; // how long it took, to aim the kills inside a run
    fs::path root(const char* name) const { return fs::path(m_tmp.path().toStdString()) / name; }

    static QStringList train_args(const fs::path& root, int steps, int world, const QStringList& extra = {})
    {
        return QStringList{QStringLiteral("train"),   QStringLiteral("--root"),       qs(root),
                           QStringLiteral("--steps"), QString::number(steps),         QStringLiteral("--save-every"),
                           QStringLiteral("3"),       QStringLiteral("--world-size"), QString::number(world),
                           QStringLiteral("--numel"), QStringLiteral("60000"),        QStringLiteral("--seed"),
                           QStringLiteral("11"),      QStringLiteral("--json")} +
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
        QCOMPARE(load.json()["digests"]["master"].get<std::string>(),
                 m_reference["digests"]["master"].get<std::string>());
    }

    void divergedRunKeepsAndResumesFromItsLastHealthyStep()
    {
        // Saves at 3, 6, ..., 18; from step 10 on every step holds a NaN in exp_avg_sq. Keep-last-2
        // alone would leave 15 and 18, both diverged.
        const fs::path poisoned = root("poisoned");
        const auto run = shardctl(
            train_args(poisoned, 18, 2,
                       {QStringLiteral("--keep"), QStringLiteral("2"), QStringLiteral("--inject-nan-at-step"),
                        QStringLiteral("10"), QStringLiteral("--inject-nan-state"), QStringLiteral("exp_avg_sq")}));
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.err.contains("keeping step-00000009 beyond keep_last 2 on the local tier: it is the newest "
                                  "healthy step"),
                 run.err.constData());
        std::vector<std::string> left;
        for (const auto& entry : fs::directory_iterator(poisoned))
            if (entry.path().filename().string().starts_with("step-"))
                left.push_back(entry.path().filename().string());
        std::sort(left.begin(), left.end());
        QCOMPARE(left, (std::vector<std::string>{"step-00000009", "step-00000015", "step-00000018"}));

        // status reads the records without reading a value, and says why step 9 is still there.
        const auto status = shardctl({QStringLiteral("status"), qs(poisoned), QStringLiteral("--keep"),
                                      QStringLiteral("2"), QStringLiteral("--json")});
        QCOMPARE(status.exit_code, 0);
        const auto st = status.json();
        QCOMPARE(st["next_rotation"]["kept_as_newest_healthy"].get<std::string>(), std::string("step-00000009"));
        QCOMPARE(st["steps"][0]["local"]["recorded_health"].get<std::string>(), std::string("healthy"));
        QCOMPARE(st["steps"][2]["local"]["recorded_health"].get<std::string>(), std::string("unhealthy"));
        QVERIFY(st["steps"][2]["local"]["recorded_health_detail"].get<std::string>().starts_with("rank 0: "));

        // load of the root goes to it, naming what it passed over; --allow-unhealthy does not.
        const QStringList load = {QStringLiteral("load"), qs(poisoned), QStringLiteral("--expect-world-size"),
                                  QStringLiteral("2"), QStringLiteral("--json")};
        const auto loaded = shardctl(load);
        QCOMPARE(loaded.exit_code, 0);
        QCOMPARE(loaded.json()["step"].get<int>(), 9);
        QCOMPARE(loaded.json()["skipped_unhealthy"].size(), std::size_t(2));
        // The planted NaN spreads through the update into master and param, as divergence does.
        QCOMPARE(loaded.json()["skipped_unhealthy"][0].get<std::string>(),
                 std::string("step-00000018: rank 0: 1 non-finite param values, 1 non-finite master values, 1 "
                             "non-finite exp_avg_sq values"));
        QCOMPARE(shardctl(load + QStringList{QStringLiteral("--allow-unhealthy")}).json()["step"].get<int>(), 18);

        // Told to, a run resumes from the diverged step itself (its loss was NaN: saved as null).
        const fs::path copy = root("poisoned-copy");
        fs::copy(poisoned, copy, fs::copy_options::recursive);
        fs::remove(copy / "writer.lock");
        const auto onward =
            shardctl(train_args(copy, 21, 2, {QStringLiteral("--resume"), QStringLiteral("--allow-unhealthy")}));
        QVERIFY2(onward.exit_code == 0, onward.err.constData());
        QCOMPARE(onward.json()["resumed_from"]["step"].get<int>(), 18);
        QVERIFY(onward.json()["final_loss"].is_null()); // NaN: the run is still diverged

        // Resumed without the fault, the run ends bit-exactly where an uninterrupted one does.
        const auto rest = shardctl(train_args(poisoned, 30, 2, {QStringLiteral("--resume")}));
        QCOMPARE(rest.exit_code, 0);
        QCOMPARE(rest.json()["resumed_from"]["step"].get<int>(), 9);
        QCOMPARE(rest.json()["skipped_unhealthy"].size(), std::size_t(2));
        compare_to(rest.json(), m_reference);

        const auto bad = shardctl(train_args(root("bad-flag"), 3, 1,
                                             {QStringLiteral("--inject-nan-at-step"), QStringLiteral("1"),
                                              QStringLiteral("--inject-nan-state"), QStringLiteral("adam")}));
        QCOMPARE(bad.exit_code, 2);
        QCOMPARE(bad.json()["ok"].get<bool>(), false);
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

    // A fresh root whose bucket mirror does not answer: whether the bucket holds a run to resume
    // (or one a fresh run would overwrite) cannot be told, and no training starts, with or without
    // --resume; the sentence says so, naming the mirror and the request.
    void aMirrorThatCannotBeReadStartsNoRun()
    {
        const QByteArray id = qgetenv("AWS_ACCESS_KEY_ID"), secret = qgetenv("AWS_SECRET_ACCESS_KEY");
        qputenv("AWS_ACCESS_KEY_ID", "AKIDUNREACHABLE");
        qputenv("AWS_SECRET_ACCESS_KEY", "unreachable-secret");
        const auto restore = qScopeGuard([&] {
            qputenv("AWS_ACCESS_KEY_ID", id);
            qputenv("AWS_SECRET_ACCESS_KEY", secret);
        });
        for (const bool resume : {false, true}) {
            const fs::path dir = root(resume ? "unreadable-resume" : "unreadable");
            QStringList args = train_args(dir, 3, 2,
                                          {QStringLiteral("--mirror"), QStringLiteral("s3://ckpt-down/run"),
                                           QStringLiteral("--endpoint"), QStringLiteral("http://127.0.0.1:1")});
            if (resume)
                args << QStringLiteral("--resume");
            const auto run = shardctl(args);
            QCOMPARE(run.exit_code, 2);
            QCOMPARE(run.json()["error"]["kind"].get<std::string>(), std::string("remote_error"));
            const std::string said = run.json()["error"]["message"].get<std::string>();
            QVERIFY2(said.starts_with("cannot tell whether s3://ckpt-down/run (--mirror) holds a run to resume") &&
                         said.find("GET s3://ckpt-down/run/latest") != std::string::npos,
                     said.c_str());
            QVERIFY(!fs::exists(dir / "latest"));
            QVERIFY(!run.err.contains("unreachable-secret") && !run.out.contains("unreachable-secret"));
        }
    }

    void secondJobOnTheSameRootIsRefused()
    {
        const fs::path dir = root("two-jobs");
        QProcess first;
        first.start(QStringLiteral(SHARDCTL_PATH), train_args(dir, 100'000, 2));
        QVERIFY(first.waitForStarted());
        QElapsedTimer wait;
        wait.start();
        while (!fs::exists(dir / "writer.lock") && wait.elapsed() < 20'000)
            QTest::qWait(20);
        QVERIFY(fs::exists(dir / "writer.lock"));
        const auto second = shardctl(train_args(dir, 30, 2, {QStringLiteral("--resume")}));
        QCOMPARE(second.exit_code, 2);
        QCOMPARE(second.json()["error"]["kind"].get<std::string>(), std::string("root_locked"));
        const QString err = QString::fromUtf8(second.err).trimmed();
        QVERIFY2(!err.contains(QLatin1Char('\n')), qPrintable(err)); // one sentence
        QVERIFY2(err.contains(QStringLiteral("is being written by another job (pid %1 on host").arg(first.processId())),
                 qPrintable(err));
        QVERIFY(first.state() == QProcess::Running); // the first job is untouched
        // status reads the root as it is written, without the lock, and names the holder.
        const auto status = shardctl({QStringLiteral("status"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(status.exit_code, 0);
        QCOMPARE(status.json()["lock"]["pid"].get<qint64>(), first.processId());
        QCOMPARE(status.json()["lock"]["running"].get<bool>(), true);
        first.kill(); // its lock file stays behind, naming a dead process
        first.waitForFinished();
        QVERIFY(fs::exists(dir / "writer.lock"));
        const auto left = shardctl({QStringLiteral("status"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(left.json()["lock"]["running"].get<bool>(), false); // a leftover, said so
        const auto next = shardctl(train_args(dir, 6, 2, {QStringLiteral("--resume")}));
        QCOMPARE(next.exit_code, 0);
        QVERIFY2(next.err.contains("took over the lock"), next.err.constData());
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir)}).exit_code, 0);
    }

    void statusShowsEveryStepAndTheNextRotation()
    {
        const fs::path dir = root("status"), mirror = root("status-mirror");
        QCOMPARE(shardctl(train_args(dir, 12, 2,
                                     {QStringLiteral("--keep"), QStringLiteral("2"), QStringLiteral("--mirror"),
                                      qs(mirror), QStringLiteral("--mirror-keep"), QStringLiteral("3")}))
                     .exit_code,
                 0);
        fs::create_directories(dir / "step-00000013"); // what a crash mid-save leaves
        fs::remove(mirror / "step-00000012" / "upload.json"); // an upload that never finished
        const auto run = shardctl({QStringLiteral("status"), qs(dir), QStringLiteral("--mirror"), qs(mirror),
                                   QStringLiteral("--keep"), QStringLiteral("1"), QStringLiteral("--mirror-keep"),
                                   QStringLiteral("3"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QCOMPARE(st["latest"].get<std::string>(), std::string("step-00000012"));
        QVERIFY(st["lock"].is_null());
        QCOMPARE(st["space"].size(), std::size_t(2));
        QVERIFY(st["space"][0]["free_bytes"].get<uint64_t>() > 0);
        std::map<std::string, nlohmann::json> steps;
        for (const auto& s : st["steps"])
            steps[s["name"].get<std::string>()] = s;
        QVERIFY(steps["step-00000006"]["local"].is_null()); // rotated locally, kept by the mirror
        QCOMPARE(steps["step-00000006"]["upload"].get<std::string>(), std::string("uploaded"));
        QCOMPARE(steps["step-00000009"]["upload"].get<std::string>(), std::string("uploaded"));
        QCOMPARE(steps["step-00000012"]["upload"].get<std::string>(), std::string("partial"));
        // No job writes the root any more: an upload that never finished has failed.
        QCOMPARE(steps["step-00000012"]["upload_state"].get<std::string>(), std::string("failed"));
        QCOMPARE(steps["step-00000009"]["upload_state"].get<std::string>(), std::string("uploaded"));
        QVERIFY(steps["step-00000012"]["local"]["latest"].get<bool>());
        QCOMPARE(steps["step-00000013"]["local"]["complete"].get<bool>(), false);
        QVERIFY(steps["step-00000012"]["local"]["bytes"].get<uint64_t>() > 0);
        // keep 1: step 9 goes (uploaded); the mirror keeps 3 complete: none of its go.
        QVERIFY2(st["next_rotation"]["local"] == nlohmann::json::array({"step-00000009"}), st.dump().c_str());
        QVERIFY2(st["next_rotation"]["mirror"].empty(), st.dump().c_str());
        QVERIFY(steps["step-00000009"]["next_rotation_deletes"] == nlohmann::json::array({"local"}));
        // The text says the same, with each step's wall clock.
        const auto text = shardctl({QStringLiteral("status"), qs(dir), QStringLiteral("--mirror"), qs(mirror),
                                    QStringLiteral("--keep"), QStringLiteral("1"), QStringLiteral("--mirror-keep"),
                                    QStringLiteral("3")});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("step-00000012  local: complete (latest), ") && text.out.contains(", wall clock "),
                 text.out.constData());
        QVERIFY2(text.out.contains("step-00000009  local: complete") && text.out.contains("next rotation deletes it"),
                 text.out.constData());
    }

    void fullMirrorDoesNotStopTraining()
    {
        if (::geteuid() != 0)
            QSKIP("not running as root: a real tmpfs cannot be mounted for the mirror");
        const fs::path dir = root("full-mirror"), mirror = root("full-mirror-tier");
        fs::create_directories(mirror);
        if (::mount("tmpfs", mirror.c_str(), "tmpfs", 0, "size=400k") != 0)
            QSKIP("mount -t tmpfs failed");
        // A step is 840 KB: no upload fits. Training goes on and ends as the reference run does.
        const auto run = shardctl(train_args(dir, 30, 2, {QStringLiteral("--mirror"), qs(mirror)}));
        ::umount2(mirror.c_str(), MNT_DETACH);
        QCOMPARE(run.exit_code, 3); // every save committed; the mirror lacks steps
        compare_to(run.json(), m_reference);
        QVERIFY(run.err.contains("are free on the mirror"));
        const auto mirror_json = run.json()["mirror"];
        QCOMPARE(mirror_json["complete"].get<bool>(), false);
        QCOMPARE(mirror_json["steps"].size(), std::size_t(10)); // the newest --mirror-keep (10) steps
        for (const auto& step : mirror_json["steps"]) {
            QCOMPARE(step["state"].get<std::string>(), std::string("failed"));
            QVERIFY(step["attempts"].get<int>() >= 1);
        }
        // None of them was deleted locally although --keep is 3: they are the only copies.
        int local_steps = 0;
        for (const auto& e : fs::directory_iterator(dir))
            local_steps += e.path().filename().string().starts_with("step-") && fs::exists(e.path() / "manifest.json");
        QCOMPARE(local_steps, 10);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir)}).exit_code, 0);
        // The mirror is back (the mount point, empty): the resumed run uploads what it lacks.
        const auto again =
            shardctl(train_args(dir, 33, 2, {QStringLiteral("--resume"), QStringLiteral("--mirror"), qs(mirror)}));
        QCOMPARE(again.exit_code, 0);
        QCOMPARE(again.json()["mirror"]["complete"].get<bool>(), true);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(mirror)}).exit_code, 0);
    }
};

QTEST_GUILESS_MAIN(TestCliTrain)
#include "tst_cli_train.moc"
