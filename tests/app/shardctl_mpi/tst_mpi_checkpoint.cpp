// shardctl-mpi under mpirun on loopback (-np 4 and -np 2): every command must agree with the
// single-process shardctl — same digests, same loss — and a failure on one rank must fail all.

#include "testutil.h"

#include <QDir>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <csignal>
#include <fstream>
#include <sys/types.h>
#include <tuple>

using namespace testutil;
namespace fs = std::filesystem;

namespace {

QProcessEnvironment mpi_environment()
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1"));
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
    env.insert(QStringLiteral("OMPI_MCA_btl"), QStringLiteral("self,tcp")); // loopback only
    env.insert(QStringLiteral("OMPI_MCA_btl_tcp_if_include"), QStringLiteral("lo"));
    env.insert(QStringLiteral("OMPI_MCA_oob_tcp_if_include"), QStringLiteral("lo"));
    return env;
}

QStringList mpirun_arguments(int processes, const QStringList& arguments)
{
    return QStringList{QStringLiteral("--allow-run-as-root"), QStringLiteral("--oversubscribe"), QStringLiteral("-np"),
                       QString::number(processes), QStringLiteral(SHARDCTL_MPI_PATH)} +
        arguments;
}

Run mpirun(int processes, const QStringList& arguments, int timeout_ms = 120000)
{
    QProcess process;
    process.setProcessEnvironment(mpi_environment());
    process.start(QStringLiteral(MPIEXEC_PATH), mpirun_arguments(processes, arguments));
    Run run;
    if (!process.waitForFinished(timeout_ms)) {
        process.kill();
        process.waitForFinished();
        run.err = "timed out";
        return run;
    }
    run.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -2;
    run.out = process.readAllStandardOutput();
    run.err = process.readAllStandardError();
    return run;
}

nlohmann::json digests_of(const fs::path& dir, int world)
{
    const Run run = shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"),
                              QString::number(world), QStringLiteral("--json")});
    if (run.exit_code != 0)
        return {{"error", run.err.toStdString()}};
    return run.json().at("digests");
}

std::vector<pid_t> children_of(qint64 pid)
{
    std::vector<pid_t> out;
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    for (pid_t child = 0; in >> child;)
        out.push_back(child);
    return out;
}

} // namespace

class TestMpiCheckpoint : public QObject {
    Q_OBJECT

private slots:
    void demoSaveLoadVerify_data();
    void demoSaveLoadVerify();
    void corruptShardFailsEveryProcess();
    void urlsAreRefused();
    void reshardFourToTwo();
    void trainEqualsSingleProcess_data();
    void trainEqualsSingleProcess();
    void killOneRankAndResumeOnOtherCount();
    void statsAndDiffEqualSingleProcess();
};

void TestMpiCheckpoint::demoSaveLoadVerify_data()
{
    QTest::addColumn<int>("processes");
    QTest::addColumn<int>("world");
    QTest::newRow("np4 world6") << 4 << 6;
    QTest::newRow("np2 world4") << 2 << 4;
}

void TestMpiCheckpoint::demoSaveLoadVerify()
{
    QFETCH(int, processes);
    QFETCH(int, world);
    QTemporaryDir tmp;
    const fs::path mpi_dir = tmp.filePath(QStringLiteral("mpi")).toStdString();
    const fs::path single_dir = tmp.filePath(QStringLiteral("single")).toStdString();
    const QStringList common{QStringLiteral("--world-size"), QString::number(world),   QStringLiteral("--numel"),
                             QStringLiteral("100003"),       QStringLiteral("--seed"), QStringLiteral("7"),
                             QStringLiteral("--json")};

    const Run saved =
        mpirun(processes, QStringList{QStringLiteral("demo-save"), QStringLiteral("--out"), qs(mpi_dir)} + common);
    QVERIFY2(saved.exit_code == 0, saved.err.constData());
    QCOMPARE(saved.json().at("processes").get<int>(), processes);
    QCOMPARE(saved.json().at("world_size").get<int>(), world);
    QCOMPARE(
        shardctl(QStringList{QStringLiteral("demo-save"), QStringLiteral("--out"), qs(single_dir)} + common).exit_code,
        0);

    // Written by P processes, read by one: the same state as the single-process save.
    const nlohmann::json reference = digests_of(single_dir, world);
    QCOMPARE(digests_of(mpi_dir, world).dump(), reference.dump());
    QCOMPARE(shardctl({QStringLiteral("verify"), qs(mpi_dir)}).exit_code, 0);

    // And read by P processes: the same digests and a clean verification.
    const Run loaded = mpirun(processes,
                              {QStringLiteral("load"), qs(mpi_dir), QStringLiteral("--expect-world-size"),
                               QString::number(world), QStringLiteral("--json")});
    QVERIFY2(loaded.exit_code == 0, loaded.err.constData());
    QCOMPARE(loaded.json().at("digests").dump(), reference.dump());
    const Run verified = mpirun(processes, {QStringLiteral("verify"), qs(single_dir), QStringLiteral("--json")});
    QVERIFY2(verified.exit_code == 0, verified.err.constData());
    QCOMPARE(verified.json().at("ok").get<bool>(), true);
    QCOMPARE(verified.json().at("shards").size(), static_cast<std::size_t>(world));
    const nlohmann::json shards = verified.json().at("shards"); // range-for over a temporary's member dangles
    for (const auto& shard : shards)
        QCOMPARE(shard.at("status").get<std::string>(), std::string("ok"));

    // A second save into a committed checkpoint is refused on every process; nothing changes.
    const Run again =
        mpirun(processes, QStringList{QStringLiteral("demo-save"), QStringLiteral("--out"), qs(mpi_dir)} + common);
    QCOMPARE(again.exit_code, 2);
    QVERIFY(again.err.contains("refusing to overwrite"));
    QCOMPARE(digests_of(mpi_dir, world).dump(), reference.dump());
}

void TestMpiCheckpoint::corruptShardFailsEveryProcess()
{
    QTemporaryDir tmp;
    const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
    QCOMPARE(mpirun(4,
                    {QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir), QStringLiteral("--world-size"),
                     QStringLiteral("4"), QStringLiteral("--numel"), QStringLiteral("50000")})
                 .exit_code,
             0);
    flip_byte(dir / "rank3.safetensors", 1000); // rank 3 belongs to process 3 alone

    for (const QString& command : {QStringLiteral("load"), QStringLiteral("verify")}) {
        const Run run = mpirun(4, {command, qs(dir), QStringLiteral("--expect-world-size"), QStringLiteral("4")});
        QCOMPARE(run.exit_code, 1);
        // Every process learned rank 3's error and reports it itself.
        for (int p = 0; p < 4; ++p) {
            const QByteArray prefix = "shardctl-mpi[" + QByteArray::number(p) + "/4]: rank 3: ";
            QVERIFY2(run.err.contains(prefix), (command.toStdString() + ": " + run.err.toStdString()).c_str());
        }
        QVERIFY(run.err.contains("hash") || run.err.contains("sha256"));
    }
    // One verify --json object (core's verify_report_json): the same keys from both tools, down to
    // the shard and the problem; shardctl-mpi only adds how many processes took part.
    const QStringList verify_json = {QStringLiteral("verify"), qs(dir), QStringLiteral("--json")};
    const Run by_mpi = mpirun(4, verify_json);
    const Run by_shardctl = shardctl(verify_json);
    QCOMPARE(by_mpi.exit_code, 1);
    QCOMPARE(by_shardctl.exit_code, 1);
    nlohmann::json mpi_json = by_mpi.json(), single_json = by_shardctl.json();
    QCOMPARE(mpi_json.at("processes").get<int>(), 4);
    mpi_json.erase("processes");
    auto keys = [](const nlohmann::json& object) {
        std::vector<std::string> out;
        for (const auto& item : object.items())
            out.push_back(item.key());
        return out;
    };
    QCOMPARE(keys(mpi_json), keys(single_json));
    QCOMPARE(keys(mpi_json.at("shards").at(3)), keys(single_json.at("shards").at(3)));
    QCOMPARE(mpi_json.at("shards").at(3).at("status").dump(), single_json.at("shards").at(3).at("status").dump());
    QCOMPARE(mpi_json.at("problems").size(), std::size_t(1));
    QCOMPARE(keys(mpi_json.at("problems").at(0)), keys(single_json.at("problems").at(0)));
    QCOMPARE(mpi_json.at("problems").at(0).at("kind").dump(), single_json.at("problems").at(0).at("kind").dump());
    QCOMPARE(mpi_json.at("problems").at(0).at("rank").get<int>(), 3);
    QCOMPARE(mpi_json.at("path").dump(), single_json.at("path").dump());
    // Reshard of a corrupt source writes no manifest.
    const fs::path out = tmp.filePath(QStringLiteral("out")).toStdString();
    const Run reshard = mpirun(4,
                               {QStringLiteral("reshard"), qs(dir), QStringLiteral("--to"), QStringLiteral("2"),
                                QStringLiteral("--out"), qs(out)});
    QCOMPARE(reshard.exit_code, 1);
    QVERIFY(!fs::exists(out / "manifest.json"));
}

// Each process opens its own ranks' files on its own disk: a URL is refused in one sentence and
// never becomes a relative folder.
void TestMpiCheckpoint::urlsAreRefused()
{
    QTemporaryDir tmp;
    const QString cwd = tmp.path();
    for (const QStringList& arguments :
         {QStringList{QStringLiteral("verify"), QStringLiteral("s3://ckpt/run")},
          QStringList{QStringLiteral("stats"), QStringLiteral("https://example.org/ckpt")},
          QStringList{QStringLiteral("load"), QStringLiteral("s3://ckpt/run"), QStringLiteral("--json")}}) {
        QProcess process;
        process.setProcessEnvironment(mpi_environment());
        process.setWorkingDirectory(cwd);
        process.start(QStringLiteral(MPIEXEC_PATH), mpirun_arguments(2, arguments));
        QVERIFY(process.waitForFinished(120000));
        const QByteArray err = process.readAllStandardError();
        QCOMPARE(process.exitCode(), 2);
        QVERIFY2(err.contains("of 'shardctl-mpi " + arguments.at(0).toUtf8() + "' is a local path"), err.constData());
        if (arguments.contains(QStringLiteral("--json")))
            QCOMPARE(nlohmann::json::parse(process.readAllStandardOutput().toStdString()).at("ok").get<bool>(), false);
        QVERIFY(QDir(cwd).entryList(QDir::AllEntries | QDir::NoDotAndDotDot).isEmpty()); // no s3:/ folder
    }
}

void TestMpiCheckpoint::reshardFourToTwo()
{
    QTemporaryDir tmp;
    const fs::path source = tmp.filePath(QStringLiteral("src")).toStdString();
    const fs::path by_mpi = tmp.filePath(QStringLiteral("mpi2")).toStdString();
    const fs::path by_shardctl = tmp.filePath(QStringLiteral("single2")).toStdString();
    QCOMPARE(mpirun(4,
                    {QStringLiteral("demo-save"), QStringLiteral("--out"), qs(source), QStringLiteral("--numel"),
                     QStringLiteral("77777"), QStringLiteral("--dtype"), QStringLiteral("bf16")})
                 .exit_code,
             0);
    const Run run = mpirun(4,
                           {QStringLiteral("reshard"), qs(source), QStringLiteral("--to"), QStringLiteral("2"),
                            QStringLiteral("--out"), qs(by_mpi), QStringLiteral("--json")});
    QVERIFY2(run.exit_code == 0, run.err.constData());
    QCOMPARE(run.json().at("world_size").get<int>(), 2);
    QCOMPARE(shardctl({QStringLiteral("reshard"), qs(source), QStringLiteral("--to"), QStringLiteral("2"),
                       QStringLiteral("--out"), qs(by_shardctl)})
                 .exit_code,
             0);
    QCOMPARE(
        shardctl({QStringLiteral("verify"), qs(by_mpi), QStringLiteral("--expect-world-size"), QStringLiteral("2")})
            .exit_code,
        0);
    const nlohmann::json expected = digests_of(by_shardctl, 2);
    QVERIFY(!expected.contains("error"));
    QCOMPARE(digests_of(by_mpi, 2).dump(), expected.dump());
    QCOMPARE(digests_of(source, 4).dump(), expected.dump());
    // The shard files themselves are byte-identical to shardctl's.
    for (const char* name : {"rank0.safetensors", "rank1.safetensors"})
        QCOMPARE(read_text(by_mpi / name) == read_text(by_shardctl / name), true);
}

void TestMpiCheckpoint::trainEqualsSingleProcess_data()
{
    QTest::addColumn<int>("processes");
    QTest::newRow("np4") << 4;
    QTest::newRow("np2") << 2;
}

void TestMpiCheckpoint::trainEqualsSingleProcess()
{
    QFETCH(int, processes);
    QTemporaryDir tmp;
    const QStringList common{QStringLiteral("--steps"), QStringLiteral("30"),      QStringLiteral("--save-every"),
                             QStringLiteral("10"),      QStringLiteral("--numel"), QStringLiteral("5000"),
                             QStringLiteral("--seed"),  QStringLiteral("3"),       QStringLiteral("--json")};
    const Run single =
        shardctl(QStringList{QStringLiteral("train"), QStringLiteral("--root"), tmp.filePath(QStringLiteral("s")),
                             QStringLiteral("--world-size"), QString::number(processes)} +
                 common);
    QVERIFY2(single.exit_code == 0, single.err.constData());
    const fs::path root = tmp.filePath(QStringLiteral("m")).toStdString();
    const Run run =
        mpirun(processes, QStringList{QStringLiteral("train"), QStringLiteral("--root"), qs(root)} + common);
    QVERIFY2(run.exit_code == 0, run.err.constData());
    QCOMPARE(run.json().at("digests").dump(), single.json().at("digests").dump());
    QCOMPARE(run.json().at("final_loss").get<double>(), single.json().at("final_loss").get<double>()); // bit-exact
    QCOMPARE(run.json().at("latest").get<std::string>(), std::string("step-00000030"));
    // The checkpoint the processes wrote together loads to the same state in one process.
    QCOMPARE(digests_of(root / "step-00000030", processes).dump(), single.json().at("digests").dump());
}

void TestMpiCheckpoint::killOneRankAndResumeOnOtherCount()
{
    QTemporaryDir tmp;
    const QStringList common{QStringLiteral("--steps"), QStringLiteral("300"),     QStringLiteral("--save-every"),
                             QStringLiteral("5"),       QStringLiteral("--numel"), QStringLiteral("16384"),
                             QStringLiteral("--json")};
    const Run reference =
        shardctl(QStringList{QStringLiteral("train"), QStringLiteral("--root"), tmp.filePath(QStringLiteral("ref")),
                             QStringLiteral("--world-size"), QStringLiteral("4"), QStringLiteral("--no-fsync")} +
                 common);
    QVERIFY2(reference.exit_code == 0, reference.err.constData());

    const fs::path root = tmp.filePath(QStringLiteral("run")).toStdString();
    QProcess job;
    job.setProcessEnvironment(mpi_environment());
    job.start(QStringLiteral(MPIEXEC_PATH),
              mpirun_arguments(4, QStringList{QStringLiteral("train"), QStringLiteral("--root"), qs(root)} + common));
    QVERIFY(job.waitForStarted());
    // Wait for a few committed steps, then SIGKILL one rank mid-run: the job must die.
    QDeadlineTimer deadline(120000);
    while (!deadline.hasExpired() && job.state() == QProcess::Running && read_text(root / "latest") < "step-00000020")
        QThread::msleep(10);
    QVERIFY2(job.state() == QProcess::Running, "the run finished before it could be killed; make it longer");
    pid_t victim = 0;
    for (pid_t child : children_of(job.processId()))
        if (read_text("/proc/" + std::to_string(child) + "/comm").starts_with("shardctl-mpi"))
            victim = child;
    QVERIFY(victim > 0);
    QCOMPARE(::kill(victim, SIGKILL), 0);
    QVERIFY(job.waitForFinished(60000));
    QVERIFY(job.exitStatus() != QProcess::NormalExit || job.exitCode() != 0);
    const std::string killed_at = read_text(root / "latest");
    QVERIFY2(killed_at < "step-00000300", killed_at.c_str());

    // Resume on two processes: resharded 4 -> 2 on load, same final state as the uninterrupted run.
    const Run resumed = mpirun(
        2,
        QStringList{QStringLiteral("train"), QStringLiteral("--root"), qs(root), QStringLiteral("--resume")} + common);
    QVERIFY2(resumed.exit_code == 0, resumed.err.constData());
    QCOMPARE(resumed.json().at("resumed_from").at("world_size").get<int>(), 4);
    QVERIFY(resumed.json().at("resumed_from").at("step").get<int>() >= 20);
    QCOMPARE(resumed.json().at("digests").dump(), reference.json().at("digests").dump());
    QCOMPARE(resumed.json().at("final_loss").get<double>(), reference.json().at("final_loss").get<double>());
}

// stats and diff under 3 processes (work items split 3 ways, so no process holds a whole tensor's
// parts): the same JSON as shardctl's, but for the timing and the process count; a NaN planted in
// one rank's file is found and fails every process; a failure to open is agreed on.
void TestMpiCheckpoint::statsAndDiffEqualSingleProcess()
{
    QTemporaryDir tmp;
    const fs::path a = tmp.filePath(QStringLiteral("a")).toStdString();
    const fs::path b = tmp.filePath(QStringLiteral("b")).toStdString();
    for (const auto& [dir, world, seed] : {std::tuple{a, "4", "3"}, std::tuple{b, "5", "4"}})
        QCOMPARE(shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir),
                           QStringLiteral("--world-size"), QString::fromLatin1(world), QStringLiteral("--numel"),
                           QStringLiteral("50001"), QStringLiteral("--seed"), QString::fromLatin1(seed)})
                     .exit_code,
                 0);
    auto same = [](const Run& mpi, const Run& single) {
        nlohmann::json m = mpi.json(), s = single.json();
        if (m.value("processes", 0) != 3)
            return false;
        for (auto* j : {&m, &s}) {
            j->erase("processes");
            j->erase("seconds");
        }
        return m == s;
    };
    const QStringList stats{QStringLiteral("stats"), qs(a), QStringLiteral("--json")};
    Run mpi = mpirun(3, stats);
    QVERIFY2(mpi.exit_code == 0, mpi.err.constData());
    QVERIFY(same(mpi, shardctl(stats)));
    const QStringList diff{QStringLiteral("diff"), qs(a), qs(b), QStringLiteral("--json")};
    mpi = mpirun(3, diff);
    QCOMPARE(mpi.exit_code, 1); // other seeds: everything changed
    QVERIFY(same(mpi, shardctl(diff)));
    QCOMPARE(mpi.json().at("summary").at("changed").get<int>(), int(mpi.json().at("tensors").size()));
    const QStringList identical{QStringLiteral("diff"), qs(a), qs(a), QStringLiteral("--json")};
    QCOMPARE(mpirun(3, identical).exit_code, 0);

    // A NaN in rank 2's exp_avg, and rank 1's fourth parameter changed (so it is not its master
    // rounded): each at its offset from the safetensors header's data start.
    const auto poke = [&](const char* file, const char* tensor, uint64_t at, const void* bytes, std::size_t n) {
        std::fstream f(a / file, std::ios::in | std::ios::out | std::ios::binary);
        uint64_t length = 0;
        f.read(reinterpret_cast<char*>(&length), 8);
        std::string header(length, ' ');
        f.read(header.data(), static_cast<std::streamsize>(length));
        const uint64_t begin = nlohmann::json::parse(header).at(tensor).at("data_offsets").at(0).get<uint64_t>();
        f.seekp(static_cast<std::streamoff>(8 + length + begin + at));
        f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
    };
    const uint32_t nan_bits = 0x7fc00000u;
    poke("rank2.safetensors", "exp_avg", 0, &nan_bits, 4);
    const uint16_t param_bits = 0x3f80; // 1.0 in BF16: no demo master rounds to exactly that
    poke("rank1.safetensors", "param", 3 * 2, &param_bits, 2);
    mpi = mpirun(3, stats);
    QCOMPARE(mpi.exit_code, 1);
    QVERIFY(same(mpi, shardctl(stats)));
    const nlohmann::json found = mpi.json().at("problems");
    QCOMPARE(found.size(), std::size_t(2));
    QCOMPARE(found.at(0).at("kind").get<std::string>(), std::string("param_master_mismatch"));
    QCOMPARE(found.at(0).at("rank").get<int>(), 1);
    QVERIFY2(found.at(0).at("message").get<std::string>().find("1 parameters") != std::string::npos,
             found.dump().c_str());
    QCOMPARE(found.at(1).at("kind").get<std::string>(), std::string("nonfinite_values"));
    QCOMPARE(found.at(1).at("rank").get<int>(), 2);

    mpi = mpirun(3, {QStringLiteral("stats"), QStringLiteral("/nonexistent/ckpt"), QStringLiteral("--json")});
    QCOMPARE(mpi.exit_code, 2);
    QCOMPARE(mpi.json().at("error").at("kind").get<std::string>(), std::string("cannot_open"));
}

QTEST_GUILESS_MAIN(TestMpiCheckpoint)
#include "tst_mpi_checkpoint.moc"
