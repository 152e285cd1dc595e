// shardctl stats end to end: exit codes, the --json object in every outcome, and a NaN planted
// in one rank's file traced back to that rank.

#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <fstream>

using namespace testutil;
namespace fs = std::filesystem;

namespace {

// Writes a float NaN over element `index` of tensor `name` in a safetensors file.
void plant_nan(const fs::path& file, const std::string& name, uint64_t index)
{
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t length = 0;
    f.read(reinterpret_cast<char*>(&length), 8);
    std::string header(length, ' ');
    f.read(header.data(), static_cast<std::streamsize>(length));
    const auto json = nlohmann::json::parse(header);
    const uint64_t begin = json.at(name).at("data_offsets").at(0).get<uint64_t>();
    const uint32_t nan_bits = 0x7fc00000u;
    f.seekp(static_cast<std::streamoff>(8 + length + begin + index * 4));
    f.write(reinterpret_cast<const char*>(&nan_bits), 4);
}

} // namespace

class TestCliStats : public QObject {
    Q_OBJECT
private slots:
    void healthyThenNan()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        QCOMPARE(shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir), QStringLiteral("--world-size"),
                           QStringLiteral("4"), QStringLiteral("--numel"), QStringLiteral("20000"), QStringLiteral("--dtype"),
                           QStringLiteral("bf16")})
                     .exit_code,
                 0);
        Run run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        nlohmann::json out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), true);
        QCOMPARE(out.at("format").get<std::string>(), std::string("shardscope"));
        QVERIFY(out.at("problems").empty());
        QVERIFY(out.at("tensors").size() > 4);
        for (const char* key : {"name", "state", "dtype", "shape", "numel", "nan", "posinf", "neginf", "zeros", "min",
                                "max", "mean", "std", "abs_max", "l2", "histogram", "parts"})
            QVERIFY2(out.at("tensors").at(0).contains(key), key);
        QCOMPARE(out.at("tensors").at(0).at("histogram").at("counts").size(), std::size_t(64));

        plant_nan(dir / "rank3.safetensors", "exp_avg_sq", 7);
        run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), false);
        QCOMPARE(out.at("problems").size(), std::size_t(1));
        const auto& problem = out.at("problems").at(0);
        QCOMPARE(problem.at("kind").get<std::string>(), std::string("nonfinite_values"));
        QCOMPARE(problem.at("rank").get<int>(), 3);
        QVERIFY(problem.at("message").get<std::string>().find("exp_avg_sq") != std::string::npos);
        QVERIFY(run.err.contains("rank 3"));

        // The text form says the same on stderr and exits 1.
        run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--tensor"), QStringLiteral("head*")});
        QVERIFY(run.exit_code == 0 || run.exit_code == 1);
        QVERIFY(run.out.contains("head.weight"));
        QVERIFY(!run.out.contains("embed.weight"));
    }

    void jsonInEveryOutcome()
    {
        Run run = shardctl({QStringLiteral("stats"), QStringLiteral("/nonexistent/ckpt"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 2);
        nlohmann::json out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), false);
        QCOMPARE(out.at("error").at("kind").get<std::string>(), std::string("cannot_open"));
        QVERIFY(run.err.contains("/nonexistent/ckpt"));

        run = shardctl({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--bogus")});
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json().at("ok").get<bool>(), false);
    }
};

QTEST_GUILESS_MAIN(TestCliStats)
#include "tst_cli_stats.moc"
