// shardctl profile end to end: a checkpoint and a trace become profiles that shardctl schedule and
// plan read unchanged; bad inputs exit 2 with one sentence and, with --json, exactly one object.
#include "testutil.h"
#include "content_fixtures.h"
#include "foreign_fixtures.h"

#include "core/checkpoint/safetensors.h"

#include <QTemporaryDir>
#include <QTest>
#include <nlohmann/json.hpp>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void add(std::vector<std::pair<shardscope::SafetensorsTensor, std::string>>& tensors, const std::string& name,
         std::vector<uint64_t> shape)
{
    uint64_t n = 1;
    for (uint64_t d : shape)
        n *= d;
    tensors.push_back({shardscope::SafetensorsTensor{.name = name, .dtype = "F16", .shape = std::move(shape)},
                       std::string(2 * n, '\0')});
}

// A GPT-2-shaped model: transformer.wte, h.{0..2}, ln_f, tied head; h 32, 4 heads, V 64.
fs::path write_gpt2(const fs::path& dir)
{
    fs::create_directories(dir);
    std::vector<std::pair<shardscope::SafetensorsTensor, std::string>> tensors;
    add(tensors, "transformer.wte.weight", {64, 32});
    add(tensors, "transformer.wpe.weight", {16, 32});
    for (int b = 0; b < 3; ++b) {
        const std::string p = "transformer.h." + std::to_string(b) + ".";
        add(tensors, p + "attn.c_attn.weight", {32, 96});
        add(tensors, p + "attn.c_proj.weight", {32, 32});
        add(tensors, p + "mlp.c_fc.weight", {32, 128});
        add(tensors, p + "mlp.c_proj.weight", {128, 32});
        add(tensors, p + "ln_1.weight", {32});
        add(tensors, p + "ln_2.weight", {32});
    }
    add(tensors, "transformer.ln_f.weight", {32});
    write_safetensors(dir / "model.safetensors", tensors);
    fixtures::write_file(dir / "config.json",
                         R"({"n_embd": 32, "n_head": 4, "n_layer": 3, "n_inner": null, "vocab_size": 64})");
    return dir;
}

// Prints exactly one JSON object (and a newline) on stdout.
json one_object(const testutil::Run& run)
{
    json value;
    try {
        value = json::parse(run.out.toStdString());
    } catch (const json::exception& e) {
        qWarning("stdout is not one JSON value: %s\n%s", e.what(), run.out.constData());
        return nullptr;
    }
    return value.is_object() ? value : json(nullptr);
}

} // namespace

class TestCliProfile : public QObject {
    Q_OBJECT

private slots:
    void checkpointProfileFeedsScheduleAndPlan()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_gpt2(fs::path(tmp.path().toStdString()) / "gpt2");
        const auto run =
            shardctl({QStringLiteral("profile"), qs(dir), QStringLiteral("--seq-len"), QStringLiteral("16"),
                      QStringLiteral("--micro-batch-size"), QStringLiteral("2"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.err.isEmpty(), run.err.constData());
        const json p = one_object(run);
        QVERIFY(p.is_object());
        QVERIFY(p["ok"] == json(true));
        QCOMPARE(p["layers"].size(), std::size_t(5));
        QCOMPARE(p["layers"][0]["name"].get<std::string>(), std::string("embedding"));
        QCOMPARE(p["layers"][0]["params"].get<std::int64_t>(), std::int64_t(64 * 32 + 16 * 32));
        QCOMPARE(p["layers"][1]["name"].get<std::string>(), std::string("transformer.h.0"));
        QCOMPARE(p["layers"][1]["params"].get<std::int64_t>(), std::int64_t(32 * 96 + 32 * 32 + 2 * 32 * 128 + 2 * 32));
        QCOMPARE(p["layers"][4]["name"].get<std::string>(), std::string("head"));
        QCOMPARE(p["layers"][4]["params"].get<std::int64_t>(), std::int64_t(32));
        // Tied head: charged the 2 V h tokens of the projection it shares with wte.
        QCOMPARE(p["fwd_flops"][4].get<double>(), 2.0 * (32 + 64 * 32) * 32);
        // A 4h GELU MLP with MHA: Korthikanti's s b h (34 + 5 a s / h).
        QCOMPARE(p["layers"][2]["activation_bytes"].get<std::int64_t>(),
                 std::int64_t(16 * 2 * 32 * (34 + 5 * 4 * 16 / 32)));
        QVERIFY(p["micro_batch_size"] == json(2));

        const QString file = tmp.filePath(QStringLiteral("gpt2.json"));
        const auto out =
            shardctl({QStringLiteral("profile"), qs(dir), QStringLiteral("--seq-len"), QStringLiteral("16"),
                      QStringLiteral("--micro-batch-size"), QStringLiteral("2"), QStringLiteral("--out"), file});
        QCOMPARE(out.exit_code, 0);
        QVERIFY(out.out.contains("written to"));
        const auto schedule =
            shardctl({QStringLiteral("schedule"), QStringLiteral("--profile"), file, QStringLiteral("--stages"),
                      QStringLiteral("2"), QStringLiteral("--microbatches"), QStringLiteral("4"),
                      QStringLiteral("--schedule"), QStringLiteral("1f1b"), QStringLiteral("--partition"),
                      QStringLiteral("compute"), QStringLiteral("--json")});
        QVERIFY2(schedule.exit_code == 0, schedule.err.constData());
        const json s = one_object(schedule);
        QVERIFY(s["profile"] == json("gpt2"));
        QVERIFY(s["makespan"].get<double>() > 0);
        const auto plan = shardctl({QStringLiteral("plan"), QStringLiteral("--profile"), file, QStringLiteral("--gpus"),
                                    QStringLiteral("2"), QStringLiteral("--global-batch"), QStringLiteral("8"),
                                    QStringLiteral("--micro-batch-size"), QStringLiteral("2"),
                                    QStringLiteral("--gpu-memory"), QStringLiteral("1"), QStringLiteral("--json")});
        QVERIFY2(plan.exit_code == 0, plan.err.constData());
    }

    void traceProfileFeedsSchedule()
    {
        QTemporaryDir tmp;
        json events = json::array();
        for (int step = 0; step < 2; ++step)
            for (int l = 0; l < 4; ++l)
                events.push_back({{"ph", "X"},
                                  {"cat", "user_annotation"},
                                  {"name", "layers." + std::to_string(l)},
                                  {"ts", 1000 * step + 100 * l},
                                  {"dur", 50 + 10 * step},
                                  {"pid", 1},
                                  {"tid", 1}});
        const fs::path trace = fs::path(tmp.path().toStdString()) / "run.json";
        fixtures::write_file(trace, events.dump()); // torch 1.x: a bare array
        const auto run =
            shardctl({QStringLiteral("profile"), QStringLiteral("--from-trace"), qs(trace), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const json p = one_object(run);
        QCOMPARE(p["layers"].size(), std::size_t(4));
        QCOMPARE(p["layers"][3]["fwd_ms"].get<double>(), 0.055);
        const QString file = tmp.filePath(QStringLiteral("p.json"));
        QCOMPARE(shardctl({QStringLiteral("profile"), QStringLiteral("--from-trace"), qs(trace),
                           QStringLiteral("--out"), file})
                     .exit_code,
                 0);
        const auto schedule =
            shardctl({QStringLiteral("schedule"), QStringLiteral("--profile"), file, QStringLiteral("--stages"),
                      QStringLiteral("2"), QStringLiteral("--microbatches"), QStringLiteral("2"),
                      QStringLiteral("--schedule"), QStringLiteral("gpipe"), QStringLiteral("--json")});
        QVERIFY2(schedule.exit_code == 0, schedule.err.constData());
        // 2 layers per stage of 0.055 ms, gpipe N=2 M=2: (M + N - 1) (F + B) = 3 * 0.33
        QVERIFY(std::fabs(one_object(schedule)["makespan"].get<double>() - 3 * 0.33) < 1e-9);
    }

    void badInputsExitTwoWithOneObject_data()
    {
        QTest::addColumn<QString>("case_name");
        QTest::addColumn<QString>("expect"); // in the sentence
        QTest::newRow("config missing a field") << QStringLiteral("config") << QStringLiteral("'vocab_size'");
        QTest::newRow("trace without layer ranges")
            << QStringLiteral("trace") << QStringLiteral("no record_function ranges");
        QTest::newRow("no layer-indexed tensors")
            << QStringLiteral("flat") << QStringLiteral("no layer-indexed tensors");
        QTest::newRow("missing --seq-len") << QStringLiteral("usage") << QStringLiteral("--seq-len");
        QTest::newRow("missing path") << QStringLiteral("nopath") << QStringLiteral("no such file");
    }
    void badInputsExitTwoWithOneObject()
    {
        QFETCH(QString, case_name);
        QFETCH(QString, expect);
        QTemporaryDir tmp;
        const fs::path root(tmp.path().toStdString());
        QStringList arguments{QStringLiteral("profile")};
        const QStringList workload{QStringLiteral("--seq-len"), QStringLiteral("8"),
                                   QStringLiteral("--micro-batch-size"), QStringLiteral("1")};
        if (case_name == QStringLiteral("config")) {
            const fs::path dir = write_gpt2(root / "m");
            fixtures::write_file(dir / "config.json", R"({"n_embd": 32, "n_head": 4, "n_layer": 3, "n_inner": null})");
            arguments << qs(dir) << workload;
        } else if (case_name == QStringLiteral("trace")) {
            fixtures::write_file(root / "t.json",
                                 R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 0, "dur": 5}]})");
            arguments << QStringLiteral("--from-trace") << qs(root / "t.json");
        } else if (case_name == QStringLiteral("flat")) {
            std::vector<std::pair<shardscope::SafetensorsTensor, std::string>> tensors;
            add(tensors, "weight", {4, 4});
            fs::create_directories(root / "f");
            write_safetensors(root / "f" / "model.safetensors", tensors);
            arguments << qs(root / "f") << workload;
        } else if (case_name == QStringLiteral("usage")) {
            arguments << qs(write_gpt2(root / "m")) << QStringLiteral("--micro-batch-size") << QStringLiteral("1");
        } else {
            arguments << qs(root / "absent") << workload;
        }
        const auto text = shardctl(arguments);
        QCOMPARE(text.exit_code, 2);
        QVERIFY2(text.out.isEmpty(), text.out.constData()); // nothing half-printed
        QCOMPARE(text.err.count('\n'), 1); // one sentence
        QVERIFY2(text.err.contains(expect.toUtf8()), text.err.constData());
        const auto run = shardctl(arguments << QStringLiteral("--json"));
        QCOMPARE(run.exit_code, 2);
        const json object = one_object(run);
        QVERIFY(object.is_object());
        QVERIFY(object["ok"] == json(false));
        QVERIFY(QString::fromStdString(object["error"]["message"].get<std::string>()).contains(expect));
        QCOMPARE(object["problems"].size(), std::size_t(1));
    }

    void noConfigIsTheEstimate()
    {
        QTemporaryDir tmp;
        const fs::path dir = write_gpt2(fs::path(tmp.path().toStdString()) / "gpt2");
        const auto run = shardctl({QStringLiteral("profile"), qs(dir), QStringLiteral("--seq-len"),
                                   QStringLiteral("16"), QStringLiteral("--micro-batch-size"), QStringLiteral("2"),
                                   QStringLiteral("--no-config"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const json p = one_object(run);
        QVERIFY(p["config"].is_null());
        QVERIFY(!p.contains("attention_heads"));
        const std::int64_t block = 32 * 96 + 32 * 32 + 2 * 32 * 128 + 2 * 32;
        QCOMPARE(p["fwd_flops"][1].get<double>(), 2.0 * block * 32); // no 4 b s^2 h
        QCOMPARE(p["layers"][1]["activation_bytes"].get<std::int64_t>(), std::int64_t(34 * 16 * 2 * 32));
        QVERIFY(p["notes"][0].get<std::string>().find("no config.json") != std::string::npos);
    }

    void jsonAndOutTogetherIsAUsageError()
    {
        const auto run = shardctl({QStringLiteral("profile"), QStringLiteral("--from-trace"), QStringLiteral("x.json"),
                                   QStringLiteral("--json"), QStringLiteral("--out"), QStringLiteral("y.json")});
        QCOMPARE(run.exit_code, 2);
        QVERIFY(one_object(run)["error"]["kind"] == json("usage"));
    }
};

QTEST_GUILESS_MAIN(TestCliProfile)
#include "tst_cli_profile.moc"
