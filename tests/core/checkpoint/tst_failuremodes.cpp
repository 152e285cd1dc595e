// Every way a checkpoint can be broken gets its own problem kind from verify, the same kind from
// load (as an Error), and a message naming the file and, where there is one, the rank.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/checkpoint/internal/shardfile.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace shardscope;
namespace fs = std::filesystem;
using testutil::edit_manifest;

namespace {

const Problem* find_problem(const VerifyReport& report, ProblemKind kind)
{
    for (const auto& p : report.problems)
        if (p.kind == kind)
            return &p;
    return nullptr;
}

QString kinds(const VerifyReport& report)
{
    QStringList out;
    for (const auto& p : report.problems)
        out << QString::fromStdString(std::string(to_string(p.kind)) + ": " + p.message);
    return out.join(QStringLiteral(" | "));
}

ProblemKind load_error(const fs::path& dir, int expected, std::string* message = nullptr)
{
    try {
        load_sharded(dir, expected);
    } catch (const Error& e) {
        if (message)
            *message = e.what();
        return e.kind();
    }
    return ProblemKind::cancelled; // "no error": never a valid answer for these cases
}

} // namespace

class TestFailureModes : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path m_dir;

private slots:
    void init()
    {
        std::string name = QTest::currentTestFunction();
        if (const char* tag = QTest::currentDataTag())
            name += std::string("-") + tag; // data rows each get a fresh checkpoint
        m_dir = fs::path(m_tmp.path().toStdString()) / name;
        save_sharded(make_demo_state(7, 40'000, 4, ParamDtype::F16), m_dir, 123);
        QVERIFY(verify_checkpoint(m_dir).ok());
    }

    void worldSizeChanged()
    {
        VerifyOptions options;
        options.expected_world_size = 8;
        const VerifyReport report = verify_checkpoint(m_dir, options);
        const Problem* p = find_problem(report, ProblemKind::world_size_mismatch);
        QVERIFY2(p, qPrintable(kinds(report)));
        QVERIFY(p->message.find("manifest.json") != std::string::npos);
        QVERIFY(p->message.find("world_size 4") != std::string::npos);
        std::string message;
        QCOMPARE(load_error(m_dir, 8, &message), ProblemKind::world_size_mismatch);
        QVERIFY(message.find("8 ranks are expected") != std::string::npos);
    }

    void shardCountMismatch()
    {
        edit_manifest(m_dir, [](auto& m) { m["shards"].erase(m["shards"].begin() + 3); });
        const VerifyReport report = verify_checkpoint(m_dir);
        QVERIFY2(find_problem(report, ProblemKind::shard_count_mismatch), qPrintable(kinds(report)));
        const Problem* missing = find_problem(report, ProblemKind::missing_shard);
        QVERIFY(missing && missing->message.find("rank(s) 3") != std::string::npos);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::shard_count_mismatch);
    }

    void duplicateRank()
    {
        edit_manifest(m_dir, [](auto& m) { m["shards"][2]["rank"] = 1; });
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::duplicate_rank);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 1);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::duplicate_rank);
    }

    void truncatedShardIsPartialWrite()
    {
        fs::resize_file(m_dir / "rank2.safetensors", fs::file_size(m_dir / "rank2.safetensors") / 2);
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::partial_write);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 2);
        QVERIFY(p->message.find("rank2.safetensors") != std::string::npos);
        QCOMPARE(report.shards[2].status, ShardStatus::size_mismatch);
        QCOMPARE(report.shards[1].status, ShardStatus::ok); // the others are still checked
        QCOMPARE(load_error(m_dir, 4), ProblemKind::partial_write);
    }

    void flippedByteIsHashMismatch()
    {
        testutil::flip_byte(m_dir / "rank1.safetensors", 5000);
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::hash_mismatch);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 1);
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(report.shards[1].status, ShardStatus::hash_mismatch);
        std::string message;
        QCOMPARE(load_error(m_dir, 4, &message), ProblemKind::hash_mismatch);
        QVERIFY(message.find("rank 1") != std::string::npos);

        VerifyOptions fast;
        fast.fast = true;
        QVERIFY(find_problem(verify_checkpoint(m_dir, fast), ProblemKind::hash_mismatch));
    }

    void missingShard()
    {
        fs::remove(m_dir / "rank3.safetensors");
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::missing_shard);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 3);
        QCOMPARE(report.shards[3].status, ShardStatus::missing);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::missing_shard);
    }

    void tmpLeftoversWithoutManifest()
    {
        fs::rename(m_dir / "rank0.safetensors", m_dir / "rank0.safetensors.tmp");
        fs::remove(m_dir / "manifest.json");
        const VerifyReport report = verify_checkpoint(m_dir);
        QVERIFY2(find_problem(report, ProblemKind::partial_write), qPrintable(kinds(report)));
        QCOMPARE(report.leftover_tmp_files, std::vector<std::string>{"rank0.safetensors.tmp"});
        QCOMPARE(load_error(m_dir, 4), ProblemKind::partial_write);
    }

    void layoutGapAndOverlap()
    {
        edit_manifest(m_dir, [](auto& m) { m["shards"][1]["param_shard_offset"] = 10'005; });
        VerifyReport report = verify_checkpoint(m_dir);
        QVERIFY2(find_problem(report, ProblemKind::layout_gap), qPrintable(kinds(report)));
        QCOMPARE(load_error(m_dir, 4), ProblemKind::layout_gap);

        edit_manifest(m_dir, [](auto& m) { m["shards"][1]["param_shard_offset"] = 9'000; });
        report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::layout_overlap);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 1);
    }

    void pathsLeavingTheDirectory_data()
    {
        QTest::addColumn<QString>("path");
        QTest::newRow("dotdot") << QStringLiteral("../rank0.safetensors");
        QTest::newRow("absolute") << QStringLiteral("/etc/passwd");
        QTest::newRow("inner dotdot") << QStringLiteral("sub/../../x");
        QTest::newRow("empty") << QString();
    }

    void pathsLeavingTheDirectory()
    {
        QFETCH(QString, path);
        edit_manifest(m_dir, [&](auto& m) { m["shards"][0]["path"] = path.toStdString(); });
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::path_outside_checkpoint);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 0);
        QCOMPARE(report.shards[0].status, ShardStatus::invalid);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::path_outside_checkpoint);
    }

    void symlinkLeadingOutside()
    {
        // The shard is replaced by a symlink to an identical copy outside: even though the bytes
        // would verify, a checkpoint must not reach outside its directory.
        const fs::path outside = m_dir.parent_path() / "outside.safetensors";
        fs::copy_file(m_dir / "rank2.safetensors", outside, fs::copy_options::overwrite_existing);
        fs::remove(m_dir / "rank2.safetensors");
        fs::create_symlink(outside, m_dir / "rank2.safetensors");
        const VerifyReport report = verify_checkpoint(m_dir);
        const Problem* p = find_problem(report, ProblemKind::path_outside_checkpoint);
        QVERIFY2(p, qPrintable(kinds(report)));
        QCOMPARE(p->rank, 2);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::path_outside_checkpoint);
    }

    void malformedManifests_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("kind");
        const int invalid = int(ProblemKind::invalid_manifest);
        QTest::newRow("not json") << QStringLiteral("{\"schema_version\": 1, ") << invalid;
        QTest::newRow("array") << QStringLiteral("[1, 2]") << invalid;
        QTest::newRow("schema 2") << QStringLiteral("{\"schema_version\": 2}") << int(ProblemKind::unsupported_schema);
        QTest::newRow("world_size string")
            << QStringLiteral("{\"schema_version\":1,\"world_size\":\"4\",\"step\":1,\"shards\":[]}") << invalid;
        QTest::newRow("world_size 0") << QStringLiteral(
                                             "{\"schema_version\":1,\"world_size\":0,\"step\":1,\"shards\":[]}")
                                      << invalid;
        QTest::newRow("world_size 2^31")
            << QStringLiteral("{\"schema_version\":1,\"world_size\":2147483648,\"step\":1,\"shards\":[]}") << invalid;
        QTest::newRow("negative step") << QStringLiteral(
                                              "{\"schema_version\":1,\"world_size\":1,\"step\":-1,\"shards\":[]}")
                                       << invalid;
        QTest::newRow("numel overflows")
            << QStringLiteral("{\"schema_version\":1,\"world_size\":1,\"step\":1,\"shards\":[{\"rank\":0,"
                              "\"path\":\"rank0.safetensors\",\"sha256\":\"%1\",\"bytes\":10,"
                              "\"param_shard_offset\":18446744073709551615,\"param_shard_numel\":2}]}")
                   .arg(QString(64, QLatin1Char('a')))
            << invalid;
        QTest::newRow("bad sha") << QStringLiteral(
                                        "{\"schema_version\":1,\"world_size\":1,\"step\":1,\"shards\":[{\"rank\":0,"
                                        "\"path\":\"rank0.safetensors\",\"sha256\":\"xyz\",\"bytes\":10,"
                                        "\"param_shard_offset\":0,\"param_shard_numel\":2}]}")
                                 << invalid;
        QTest::newRow("deep nesting") << QStringLiteral("{\"schema_version\":1,\"x\":%1%2}")
                                             .arg(QString(5000, QLatin1Char('[')), QString(5000, QLatin1Char(']')))
                                      << invalid;
    }

    void malformedManifests()
    {
        QFETCH(QString, text);
        QFETCH(int, kind);
        testutil::write_text(m_dir / "manifest.json", text.toStdString());
        const VerifyReport report = verify_checkpoint(m_dir);
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(int(report.problems[0].kind), kind);
        QVERIFY2(report.problems[0].message.find("manifest.json") != std::string::npos,
                 report.problems[0].message.c_str());
        QCOMPARE(int(load_error(m_dir, 4)), kind);
    }

    void fifoAndDirectoryInsteadOfShards()
    {
        fs::remove(m_dir / "rank1.safetensors");
        QCOMPARE(::mkfifo((m_dir / "rank1.safetensors").c_str(), 0644), 0);
        fs::remove(m_dir / "rank2.safetensors");
        fs::create_directory(m_dir / "rank2.safetensors");
        const VerifyReport report = verify_checkpoint(m_dir); // must not block on the FIFO
        QCOMPARE(report.shards[1].status, ShardStatus::unreadable);
        QCOMPARE(report.shards[2].status, ShardStatus::unreadable);
        QVERIFY(report.shards[1].detail.find("FIFO") != std::string::npos);
        QCOMPARE(load_error(m_dir, 4), ProblemKind::unreadable);
    }

    void unreadablePermissions()
    {
        if (::geteuid() == 0)
            QSKIP("root reads files regardless of their permission bits");
        fs::permissions(m_dir / "rank0.safetensors", fs::perms::none);
        const VerifyReport report = verify_checkpoint(m_dir);
        QCOMPARE(report.shards[0].status, ShardStatus::unreadable);
    }

    void corruptHeaderIsInvalidShard()
    {
        testutil::flip_byte(m_dir / "rank0.safetensors", 10); // inside the JSON header
        const VerifyReport report = verify_checkpoint(m_dir);
        QVERIFY2(!report.ok(), qPrintable(kinds(report)));
        QVERIFY(report.shards[0].status == ShardStatus::invalid ||
                report.shards[0].status == ShardStatus::hash_mismatch);
    }

    // A manifest may claim a model far bigger than this machine (hostile, or just too big): load
    // says so before allocating, instead of being killed for memory. The shard is sparse, so it
    // passes the size checks without taking disk space.
    void stateBiggerThanMemory()
    {
        const fs::path dir = m_dir.parent_path() / "too-big";
        fs::create_directories(dir);
        const uint64_t numel = 1ull << 36; // 14 bytes each: 896 GiB of state
        const std::string header = rank_shard_header(0, 1, ParamDtype::F16, 0, numel);
        const uint64_t bytes = header.size() + numel * 14;
        {
            std::ofstream(dir / "rank0.safetensors", std::ios::binary) << header;
        }
        fs::resize_file(dir / "rank0.safetensors", bytes);
        CheckpointMeta meta;
        meta.world_size = 1;
        meta.param_numel_total = numel;
        commit(dir, {ShardRecord{0, "rank0.safetensors", std::string(64, 'a'), {}, bytes, 0, numel}}, meta, false);
        std::string message;
        QCOMPARE(load_error(dir, 1, &message), ProblemKind::io_error);
        QVERIFY2(message.find("more than this machine's") != std::string::npos, message.c_str());
        QVERIFY2(message.find("68719476736 parameters") != std::string::npos, message.c_str());
        QVERIFY_THROWS_EXCEPTION(Error, ensure_state_fits_in_memory(~0ull, dir)); // 14 x 2^64 overflows
        ensure_state_fits_in_memory(1'000'000, dir); // 14 MB fits anywhere
    }

    void missingPathIsAnEnvironmentError()
    {
        try {
            verify_checkpoint(m_dir / "does-not-exist");
            QFAIL("verify of a missing path must throw");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cannot_open);
            QCOMPARE(exit_code_for(e.kind()), 2);
        }
    }
};

QTEST_GUILESS_MAIN(TestFailureModes)
#include "tst_failuremodes.moc"
