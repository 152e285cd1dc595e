// shardctl's contract as a user's script sees it: flags, JSON fields, exit codes, stderr.

#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstdio>
#include <fstream>
#include <limits>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;

class TestCliCheckpoint : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path m_root;

    fs::path save(const char* name, int world, int seed = 1, const char* dtype = "f16", int numel = 100'003)
    {
        const fs::path dir = m_root / name;
        const auto run =
            shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir), QStringLiteral("--world-size"),
                      QString::number(world), QStringLiteral("--numel"), QString::number(numel),
                      QStringLiteral("--seed"), QString::number(seed), QStringLiteral("--step"), QStringLiteral("1234"),
                      QStringLiteral("--dtype"), QLatin1String(dtype)});
        if (run.exit_code != 0)
            qWarning() << run.err;
        return dir;
    }

    nlohmann::json load_json(const fs::path& dir, int world)
    {
        const auto run = shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"),
                                   QString::number(world), QStringLiteral("--json")});
        if (run.exit_code != 0)
            return {{"exit", run.exit_code}, {"err", run.err.toStdString()}};
        return run.json();
    }

private slots:
    void initTestCase() { m_root = fs::path(m_tmp.path().toStdString()); }

    void loadDigestsAreShardingIndependent()
    {
        const auto four = load_json(save("w4", 4, 7), 4);
        const auto eight = load_json(save("w8", 8, 7), 8);
        const auto other = load_json(save("w4-seed8", 4, 8), 4);
        QVERIFY2(four.value("ok", false), four.dump().c_str());
        QCOMPARE(four["world_size"].get<int>(), 4);
        QCOMPARE(four["step"].get<int>(), 1234);
        for (const char* key : {"param", "master", "exp_avg", "exp_avg_sq"}) {
            QCOMPARE(four["digests"][key].get<std::string>().size(), std::size_t(64));
            QCOMPARE(four["digests"][key].get<std::string>(), eight["digests"][key].get<std::string>());
            QVERIFY(four["digests"][key] != other["digests"][key]);
        }
        const auto bf16 = load_json(save("w4-bf16", 4, 7, "bf16"), 4);
        QVERIFY(bf16["digests"]["param"] != four["digests"]["param"]);
        QCOMPARE(bf16["digests"]["master"].get<std::string>(),
                 four["digests"]["master"].get<std::string>()); // fp32 state is the same
    }

    void verifyJsonContract()
    {
        const fs::path dir = save("verify-ok", 4);
        const auto run = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--json"),
                                   QStringLiteral("--threads"), QStringLiteral("2")});
        QCOMPARE(run.exit_code, 0);
        const auto out = run.json();
        QCOMPARE(out["ok"].get<bool>(), true);
        QCOMPARE(out["format"].get<std::string>(), std::string("shardscope"));
        QCOMPARE(out["world_size"].get<int>(), 4);
        QCOMPARE(out["step"].get<int>(), 1234);
        QCOMPARE(out["shards"].size(), std::size_t(4));
        for (const auto& s : out["shards"]) {
            QCOMPARE(s["status"].get<std::string>(), std::string("ok"));
            QVERIFY(s.contains("rank") && s.contains("path") && s.contains("bytes"));
        }
        QVERIFY(out["problems"].is_array() && out["problems"].empty());
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--fast")}).exit_code, 0);
    }

    // verify --content answers "can I resume?" from the bytes and the values together: exit 0 only
    // for safe; plain verify says the values were not read instead of calling a diverged run good.
    void contentVerdict()
    {
        const fs::path good = save("verdict-good", 2, 3, "bf16", 5'001);
        auto run =
            shardctl({QStringLiteral("verify"), qs(good), QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json()["verdict"]["state"].get<std::string>(), std::string("safe"));
        QCOMPARE(run.json()["ok"].get<bool>(), true);

        auto states = shardscope::make_demo_state(3, 5'001, 2, shardscope::ParamDtype::BF16);
        states[1].master[40] = std::numeric_limits<float>::quiet_NaN();
        states[1].param[40] = 0x7fc0; // bf16 NaN: the parameter is its master rounded
        const fs::path nan = m_root / "verdict-nan";
        shardscope::save_sharded(states, nan, 99);

        run = shardctl({QStringLiteral("verify"), qs(nan), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0); // every byte is what was written
        QCOMPARE(run.json()["verdict"]["state"].get<std::string>(), std::string("unchecked"));

        run = shardctl({QStringLiteral("verify"), qs(nan), QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.json()["ok"].get<bool>(), false); // as the exit status: the verdict decides
        const auto verdict = run.json()["verdict"];
        QCOMPARE(verdict["state"].get<std::string>(), std::string("diverged"));
        QCOMPARE(verdict["reasons"][0]["kind"].get<std::string>(), std::string("nonfinite_values"));
        QCOMPARE(verdict["reasons"][0]["rank"].get<int>(), 1);
        QVERIFY2(run.err.contains("NaN"), run.err.constData());

        run = shardctl({QStringLiteral("verify"), qs(nan), QStringLiteral("--content")});
        QCOMPARE(run.exit_code, 1);
        QVERIFY2(run.out.contains("verdict: diverged: Diverged: 2 of "), run.out.constData());

        // A world-size change of intact, finite shards leads to the cure.
        run = shardctl({QStringLiteral("verify"), qs(good), QStringLiteral("--content"), QStringLiteral("--json"),
                        QStringLiteral("--expect-world-size"), QStringLiteral("4")});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.json()["verdict"]["state"].get<std::string>(), std::string("needs_reshard"));
        QCOMPARE(run.json()["verdict"]["reshard_to"].get<int>(), 4);
    }

    // status --content: each complete step's health from the same verdict, and the newest step that
    // is safe to resume from when the newest one (the one `latest` names) diverged.
    void statusNamesTheNewestHealthyStep()
    {
        const fs::path root = m_root / "health-root";
        for (int step = 1; step <= 3; ++step) {
            auto states = shardscope::make_demo_state(9, 3'001, 2, shardscope::ParamDtype::F16);
            if (step == 3)
                states[0].exp_avg[2] = std::numeric_limits<float>::infinity();
            char name[32];
            std::snprintf(name, sizeof name, "step-%08d", step);
            shardscope::save_sharded(states, root / name, std::uint64_t(step));
        }
        std::ofstream(root / "latest") << "step-00000003\n";
        auto run =
            shardctl({QStringLiteral("status"), qs(root), QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QCOMPARE(st["steps"].size(), std::size_t(3));
        QCOMPARE(st["steps"][0]["health"].get<std::string>(), std::string("safe"));
        QCOMPARE(st["steps"][1]["health"].get<std::string>(), std::string("safe"));
        QCOMPARE(st["steps"][2]["health"].get<std::string>(), std::string("diverged"));
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("step-00000002"));
        run = shardctl({QStringLiteral("status"), qs(root), QStringLiteral("--content")});
        QVERIFY2(run.out.contains("newest healthy step: step-00000002"), run.out.constData());
        // Without --content nothing is read: no health claimed.
        run = shardctl({QStringLiteral("status"), qs(root), QStringLiteral("--json")});
        QVERIFY(!run.json().contains("newest_healthy"));
        QVERIFY(!run.json()["steps"][0].contains("health"));
    }

    void corruptionExitsOneAndNamesTheRank()
    {
        const fs::path dir = save("corrupt", 4);
        testutil::flip_byte(dir / "rank3.safetensors", 4000);
        const auto run = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        const auto out = run.json();
        QCOMPARE(out["ok"].get<bool>(), false);
        QCOMPARE(out["shards"][3]["status"].get<std::string>(), std::string("hash_mismatch"));
        QCOMPARE(out["problems"][0]["kind"].get<std::string>(), std::string("hash_mismatch"));
        QCOMPARE(out["problems"][0]["rank"].get<int>(), 3);
        QVERIFY(run.err.contains("rank 3") && run.err.contains("rank3.safetensors"));

        const auto load =
            shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"), QStringLiteral("4")});
        QCOMPARE(load.exit_code, 1);
        QVERIFY(load.err.contains("rank3.safetensors"));
        QCOMPARE(load.err.count('\n'), 1); // one sentence, no stack trace
    }

    void worldSizeChangeIsLoud()
    {
        const fs::path dir = save("ws", 4);
        const auto verify = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--expect-world-size"),
                                      QStringLiteral("8"), QStringLiteral("--json")});
        QCOMPARE(verify.exit_code, 1);
        QCOMPARE(verify.json()["problems"][0]["kind"].get<std::string>(), std::string("world_size_mismatch"));
        const auto load =
            shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"), QStringLiteral("8")});
        QCOMPARE(load.exit_code, 1);
        QVERIFY(load.err.contains("world_size 4"));
    }

    // --json: one object on stdout in every outcome. A load of another world size is a failed
    // check (exit 1, its problem); a bad flag is kind "usage" (exit 2); both say on stderr too.
    void jsonInEveryOutcome()
    {
        const fs::path dir = save("json", 4);
        auto load = shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"),
                              QStringLiteral("8"), QStringLiteral("--json")});
        QCOMPARE(load.exit_code, 1);
        nlohmann::json out = load.json();
        QCOMPARE(out["ok"].get<bool>(), false);
        QCOMPARE(out["problems"][0]["kind"].get<std::string>(), std::string("world_size_mismatch"));
        QVERIFY(!out.contains("digests"));
        QVERIFY(load.err.contains("world_size 4"));
        const QStringList commands[] = {
            {QStringLiteral("load"), qs(dir), QStringLiteral("--bogus")},
            {QStringLiteral("verify"), qs(dir), QStringLiteral("--threads"), QStringLiteral("many")},
            {QStringLiteral("info")},
            {QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir), QStringLiteral("--world-size"),
             QStringLiteral("2"), QStringLiteral("--numel"), QStringLiteral("10")},
            {QStringLiteral("plan-reshard"), qs(dir), QStringLiteral("--to"), QStringLiteral("0")},
            {QStringLiteral("schedule"), QStringLiteral("--stages"), QStringLiteral("x")},
            {QStringLiteral("stats"), qs(m_root / "nope")},
        };
        for (QStringList args : commands) {
            args << QStringLiteral("--json");
            const auto run = shardctl(args);
            QVERIFY2(run.exit_code == 2, qPrintable(args.join(QLatin1Char(' '))));
            out = run.json(); // exactly one object, or this throws
            QCOMPARE(out["ok"].get<bool>(), false);
            QCOMPARE(out["problems"].size(), std::size_t(1));
            QVERIFY(!out["problems"][0]["message"].get<std::string>().empty());
            QVERIFY(run.err.startsWith("shardctl: "));
        }
        QCOMPARE(shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--bogus"), QStringLiteral("--json")})
                     .json()["problems"][0]["kind"]
                     .get<std::string>(),
                 std::string("usage"));
    }

    // A truncated shard: verify --json reports the file's real size next to the recorded one.
    void truncatedShardReportsItsRealSize()
    {
        const fs::path dir = save("truncated", 2);
        fs::resize_file(dir / "rank1.safetensors", 1000);
        const auto run = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        const nlohmann::json shard = run.json()["shards"][1];
        QCOMPARE(shard["status"].get<std::string>(), std::string("size_mismatch"));
        QCOMPARE(shard["actual_bytes"].get<uint64_t>(), uint64_t(1000));
        QVERIFY(shard["bytes"].get<uint64_t>() > 1000);
    }

    // A world_size edited below the shard count: the rank the manifest check names is not "ok",
    // though its file hashes right.
    void rankOutsideWorldIsNotOk()
    {
        const fs::path dir = save("edited", 4);
        std::string manifest;
        {
            std::ifstream in(dir / "manifest.json");
            manifest.assign(std::istreambuf_iterator<char>(in), {});
        }
        const auto at = manifest.find("\"world_size\": 4");
        QVERIFY(at != std::string::npos);
        manifest.replace(at, 15, "\"world_size\": 3");
        std::ofstream(dir / "manifest.json", std::ios::trunc) << manifest;
        const auto run = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        const nlohmann::json shards = run.json()["shards"];
        QCOMPARE(shards[0]["status"].get<std::string>(), std::string("ok"));
        QCOMPARE(shards[3]["status"].get<std::string>(), std::string("invalid"));
        QVERIFY(shards[3]["detail"].get<std::string>().find("outside 0..2") != std::string::npos);
    }

    void usageAndEnvironmentErrorsExitTwo()
    {
        const fs::path dir = save("usage", 2);
        QCOMPARE(shardctl({QStringLiteral("load"), qs(dir)}).exit_code, 2); // no --expect-world-size
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--bogus")}).exit_code, 2);
        QCOMPARE(shardctl({QStringLiteral("verify")}).exit_code, 2);
        QCOMPARE(shardctl({QStringLiteral("frobnicate")}).exit_code, 2);
        QCOMPARE(shardctl({}).exit_code, 2);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--threads"), QStringLiteral("many")})
                     .exit_code,
                 2);
        const auto missing = shardctl({QStringLiteral("verify"), qs(m_root / "nope")});
        QCOMPARE(missing.exit_code, 2);
        QVERIFY(missing.err.contains("nope"));
        // Refusing to overwrite a complete checkpoint is an environment error, and loses nothing.
        const auto again =
            shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir), QStringLiteral("--world-size"),
                      QStringLiteral("2"), QStringLiteral("--numel"), QStringLiteral("10")});
        QCOMPARE(again.exit_code, 2);
        QVERIFY(again.err.contains("refusing to overwrite"));
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir)}).exit_code, 0);
    }

    void infoDetectsFormats()
    {
        const fs::path dir = save("info", 2);
        auto run = shardctl({QStringLiteral("info"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        auto out = run.json();
        QCOMPARE(out["format"].get<std::string>(), std::string("shardscope"));
        QCOMPARE(out["world_size"].get<int>(), 2);
        QCOMPARE(out["param_numel_total"].get<int>(), 100'003);

        // A root: `latest` names the newest step.
        fs::create_directories(m_root / "root");
        fs::rename(dir, m_root / "root" / "step-001234");
        testutil::write_text(m_root / "root" / "latest", "step-001234\n");
        run = shardctl({QStringLiteral("info"), qs(m_root / "root"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json()["step"].get<int>(), 1234);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(m_root / "root")}).exit_code, 0);

        fs::create_directories(m_root / "hf");
        testutil::write_text(m_root / "hf" / "model.safetensors.index.json", "{}");
        QCOMPARE(shardctl({QStringLiteral("info"), qs(m_root / "hf"), QStringLiteral("--json")})
                     .json()["format"]
                     .get<std::string>(),
                 std::string("safetensors-index"));
        fs::create_directories(m_root / "dcp");
        testutil::write_text(m_root / "dcp" / ".metadata", "x");
        QCOMPARE(shardctl({QStringLiteral("info"), qs(m_root / "dcp"), QStringLiteral("--json")})
                     .json()["format"]
                     .get<std::string>(),
                 std::string("torch-dcp"));
        fs::create_directories(m_root / "empty");
        QCOMPARE(shardctl({QStringLiteral("info"), qs(m_root / "empty")}).exit_code, 1);
    }

    void hostileManifestGetsOneSentence()
    {
        const fs::path dir = save("hostile", 2);
        testutil::edit_manifest(dir, [](auto& m) { m["shards"][1]["path"] = "../../../../etc/passwd"; });
        const auto run = shardctl({QStringLiteral("verify"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.json()["problems"][0]["kind"].get<std::string>(), std::string("path_outside_checkpoint"));
        QVERIFY(run.err.contains("rank 1"));
        testutil::write_text(dir / "manifest.json", "{not json");
        const auto bad =
            shardctl({QStringLiteral("load"), qs(dir), QStringLiteral("--expect-world-size"), QStringLiteral("2")});
        QCOMPARE(bad.exit_code, 1);
        QVERIFY(bad.err.contains("manifest.json"));
    }
};

QTEST_GUILESS_MAIN(TestCliCheckpoint)
#include "tst_cli_checkpoint.moc"
