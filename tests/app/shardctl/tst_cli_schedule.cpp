// shardctl schedule end to end: the --json contract, --trace, profiles and partitions, and the
// exit codes (0 ok, 1 bad schedule/profile, 2 usage).
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QDir>
#include <QTest>
#include <nlohmann/json.hpp>
#include <set>

namespace {

struct Run {
    int exit_code = -1;
    QByteArray out;
    QByteArray err;
};

Run shardctl(const QStringList& arguments)
{
    QProcess process;
    process.start(QStringLiteral(SHARDCTL_PATH), QStringList{QStringLiteral("schedule")} + arguments);
    Run run;
    if (!process.waitForFinished(60000)) {
        process.kill();
        process.waitForFinished();
        return run;
    }
    run.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -2;
    run.out = process.readAllStandardOutput();
    run.err = process.readAllStandardError();
    return run;
}

QString profile(const char* name)
{
    return QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/profiles/") + QString::fromLatin1(name);
}

nlohmann::json json_of(const Run& run)
{
    return nlohmann::json::parse(run.out.toStdString());
}

QStringList args(const char* text)
{
    return QString::fromLatin1(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

} // namespace

class TestCliSchedule : public QObject {
    Q_OBJECT

private slots:
    void jsonHonoursTheContract_data()
    {
        QTest::addColumn<QString>("arguments");
        QTest::addColumn<QString>("bubble"); // percent, 2 decimals
        QTest::addColumn<int>("peak0");
        QTest::newRow("gpipe") << QStringLiteral("--stages 4 --microbatches 8 --schedule gpipe")
                               << QStringLiteral("27.27") << 8;
        QTest::newRow("1f1b") << QStringLiteral("--stages 4 --microbatches 8 --schedule 1f1b")
                              << QStringLiteral("27.27") << 4;
        QTest::newRow("gpipe 64") << QStringLiteral("--stages 4 --microbatches 64 --schedule gpipe")
                                  << QStringLiteral("4.48") << 64;
        QTest::newRow("interleaved") << QStringLiteral("--stages 4 --microbatches 8 --schedule interleaved --virtual 2")
                                     << QStringLiteral("15.79") << 11;
        QTest::newRow("zb-h1") << QStringLiteral("--stages 4 --microbatches 8 --schedule zb-h1")
                               << QStringLiteral("11.11") << 4;
        // ZB-H2 ends a single uniform step as ZB-H1 does, holding 2N - 1; the V kinds idle N - 1
        // chunk slots of 6M (3/51), holding 2N and 2N + 1 chunk activations.
        QTest::newRow("zb-h2") << QStringLiteral("--stages 4 --microbatches 8 --schedule zb-h2")
                               << QStringLiteral("11.11") << 7;
        QTest::newRow("zb-v") << QStringLiteral("--stages 4 --microbatches 8 --schedule zb-v") << QStringLiteral("5.88")
                              << 8;
        QTest::newRow("dualpipe-v") << QStringLiteral("--stages 4 --microbatches 8 --schedule dualpipe-v")
                                    << QStringLiteral("5.88") << 9;
    }
    void jsonHonoursTheContract()
    {
        QFETCH(QString, arguments);
        QFETCH(QString, bubble);
        QFETCH(int, peak0);
        const Run run = shardctl(arguments.split(QLatin1Char(' ')) << QStringLiteral("--json"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const nlohmann::json j = json_of(run);
        for (const char* key : {"schedule", "stages", "microbatches", "virtual_stages", "makespan", "bubble_fraction",
                                "closed_form_bubble", "stage_stats", "ops"})
            QVERIFY2(j.contains(key), key);
        QCOMPARE(QString::number(100 * j["bubble_fraction"].get<double>(), 'f', 2), bubble);
        QCOMPARE(QString::number(100 * j["closed_form_bubble"].get<double>(), 'f', 2), bubble);
        const int n = j["stages"].get<int>(), m = j["microbatches"].get<int>(), v = j["virtual_stages"].get<int>();
        QCOMPARE(j["stage_stats"].size(), std::size_t(n));
        for (const auto& s : j["stage_stats"])
            for (const char* key : {"stage", "layers", "busy", "idle", "bubble_fraction", "peak_activations"})
                QVERIFY2(s.contains(key), key);
        QCOMPARE(j["stage_stats"][0]["peak_activations"].get<int>(), peak0);
        const bool split = j["schedule"] != "gpipe" && j["schedule"] != "1f1b" && j["schedule"] != "interleaved";
        QCOMPARE(j["ops"].size(), std::size_t(n * m * v * (split ? 3 : 2)));
        std::set<std::string> kinds;
        for (const auto& op : j["ops"]) {
            for (const char* key : {"stage", "microbatch", "kind", "chunk", "start", "end"})
                QVERIFY2(op.contains(key), key);
            QVERIFY(op["end"].get<double>() >= op["start"].get<double>());
            kinds.insert(op["kind"].get<std::string>());
        }
        QCOMPARE(kinds, split ? (std::set<std::string>{"F", "B", "W"}) : (std::set<std::string>{"F", "B"}));
        // Default costs: one layer per piece, so stage s covers layers [s, s] without chunks.
        if (v == 1)
            QVERIFY(j["stage_stats"][2]["layers"] == nlohmann::json({2, 2}));
    }

    void traceOpensAsChromeTraceEvents()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("trace.json"));
        const Run run = shardctl(args("--stages 4 --microbatches 8 --schedule 1f1b --trace") << path);
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const nlohmann::json trace = nlohmann::json::parse(file.readAll().toStdString());
        QVERIFY(trace["traceEvents"].is_array());
        std::set<int> named;
        int thread_names = 0, spans = 0;
        double last_end_us = 0;
        for (const auto& e : trace["traceEvents"]) {
            if (e["ph"] == "M" && e["name"] == "thread_name") {
                ++thread_names;
                named.insert(e["tid"].get<int>());
                QVERIFY(e["args"]["name"].is_string());
            } else if (e["ph"] == "X") {
                ++spans;
                QVERIFY(e["ts"].is_number() && e["dur"].is_number());
                QVERIFY(named.count(e["tid"].get<int>()) == 1 || e["tid"].get<int>() < 4);
                last_end_us = std::max(last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
            }
        }
        QCOMPARE(thread_names, 4);
        QCOMPARE(named, (std::set<int>{0, 1, 2, 3}));
        QCOMPARE(spans, 4 * 8 * 2);
        QCOMPARE(last_end_us, 33.0 * 1000.0); // makespan 33 ms in µs
        QVERIFY(run.out.contains("bubble 27.27 %")); // human text alongside the trace
    }

    void computeBeatsParamsOnTheDecoderProfile()
    {
        double makespan[2] = {0, 0};
        const char* methods[2] = {"params", "compute"};
        for (int i = 0; i < 2; ++i) {
            const Run run = shardctl(args("--stages 4 --microbatches 8 --schedule 1f1b --json --profile")
                                     << profile("decoder-7b-32.json") << QStringLiteral("--partition")
                                     << QString::fromLatin1(methods[i]));
            QVERIFY2(run.exit_code == 0, run.err.constData());
            const nlohmann::json j = json_of(run);
            makespan[i] = j["makespan"].get<double>();
            QCOMPARE(j["stage_stats"][3]["layers"][1].get<int>(), 33); // LM head on the last stage
        }
        QVERIFY2(makespan[1] < makespan[0],
                 qPrintable(QStringLiteral("compute %1 ms vs params %2 ms").arg(makespan[1]).arg(makespan[0])));
    }

    void profilesPartitionsAndLatency()
    {
        Run run = shardctl(args("--stages 3 --microbatches 6 --schedule zb-h1 --json --partition compute --profile")
                           << profile("mixed-12.csv"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        run = shardctl(
            args("--stages 2 --microbatches 4 --schedule interleaved --json --partition manual:2,5,9 --profile")
            << profile("uneven.json"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        nlohmann::json j = json_of(run);
        QVERIFY(j["stage_stats"][0]["chunk_layers"] == nlohmann::json({{0, 1}, {5, 8}}));
        QVERIFY(j["boundaries"] == nlohmann::json({2, 5, 9}));
        run = shardctl(args("--stages 4 --microbatches 8 --schedule gpipe --json --p2p-latency 0.5"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(json_of(run)["makespan"].get<double>(), 33.0 + 2 * 3 * 0.5);
        run = shardctl(args("--stages 4 --microbatches 8 --schedule interleaved"));
        QCOMPARE(run.exit_code, 0); // --virtual defaults to 2 for interleaved
        QVERIFY(run.out.contains("15.79 %"));
    }

    void trainingStepOptions()
    {
        // Full recomputation adds one forward to every backward: (M + N - 1)(2F + B) = 11 * 4.
        Run run = shardctl(args("--stages 4 --microbatches 8 --schedule 1f1b --recompute full --json"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        nlohmann::json j = json_of(run);
        QCOMPARE(j["makespan"].get<double>(), 44.0);
        QCOMPARE(j["recompute"].get<std::string>(), std::string("full"));
        QCOMPARE(j["step_time"].get<double>(), 44.0);

        // A profile with 1e9 parameters a stage, DP 4 over 100 Gbit/s links, ZeRO 1.
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("big.json"));
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(R"({"layers": [
            {"name": "a", "params": 1000000000, "fwd_ms": 1, "activation_bytes": 1000000, "output_bytes": 12500000},
            {"name": "b", "params": 1000000000, "fwd_ms": 1, "activation_bytes": 1000000, "output_bytes": 12500000}]})");
        file.close();
        run = shardctl(
            args(
                "--stages 2 --microbatches 4 --schedule gpipe --dp 4 --zero 1 --link-gbps 100 --gpu-memory 10 --json --profile")
            << path);
        QVERIFY2(run.exit_code == 0, run.err.constData());
        j = json_of(run);
        // Each send: 12.5 MB * 8 / (100 * 10^6) ms = 1 ms; GPipe crosses once each way.
        QCOMPARE(j["makespan"].get<double>(), 3.0 * (4 + 2 - 1) + 2 * 1.0);
        QCOMPARE(j["sends"].size(), std::size_t(2 * 4));
        // Ring all-reduce of 2e9 bytes: 2 * 3/4 * 2e9 * 8 / 1e8 ms = 240 ms, after the flush.
        QCOMPARE(j["allreduce_ms"].get<double>(), 240.0);
        QCOMPARE(j["step_time"].get<double>(), j["makespan"].get<double>() + 240.0);
        // ZeRO-1 over 4: (4 + 12/4) bytes a parameter, plus 4 microbatches' activations.
        const auto& memory = j["stage_stats"][0]["memory"];
        QCOMPARE(memory["weights"].get<std::int64_t>(), std::int64_t(2'000'000'000));
        QCOMPARE(memory["optimizer"].get<std::int64_t>(), std::int64_t(3'000'000'000));
        QCOMPARE(memory["activations"].get<std::int64_t>(), std::int64_t(4'000'000));
        QCOMPARE(memory["total"].get<std::int64_t>(), std::int64_t(7'004'000'000));
        QCOMPARE(j["peak_memory_bytes"].get<std::int64_t>(), std::int64_t(7'004'000'000));
        QCOMPARE(j["gpu_memory_bytes"].get<std::int64_t>(), std::int64_t(10) << 30);
        QCOMPARE(j["fits"].get<bool>(), true);
        // The trace carries the sends and all-reduces on tracks beside the stages.
        const QString trace_path = dir.filePath(QStringLiteral("trace.json"));
        run = shardctl(args("--stages 2 --microbatches 4 --schedule gpipe --dp 4 --link-gbps 100 --trace")
                       << trace_path << QStringLiteral("--profile") << path);
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QFile trace_file(trace_path);
        QVERIFY(trace_file.open(QIODevice::ReadOnly));
        int sends = 0, reduces = 0;
        const nlohmann::json trace = nlohmann::json::parse(trace_file.readAll().toStdString());
        for (const auto& e : trace["traceEvents"]) {
            sends += e.value("cat", "") == "send";
            reduces += e.value("cat", "") == "allreduce";
        }
        QCOMPARE(sends, 2 * 4);
        QCOMPARE(reduces, 2);
        // Not fitting is a finding, not an error: exit 0, fits false, the text says so.
        run = shardctl(args("--stages 2 --microbatches 4 --schedule gpipe --dp 4 --gpu-memory 10 --profile") << path);
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("does NOT fit") && run.out.contains("over the limit"), run.out.constData());
    }

    void exitCodes_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("missing --stages")
            << args("--microbatches 8 --schedule 1f1b") << 2 << QStringLiteral("--stages");
        QTest::newRow("missing --schedule") << args("--stages 4 --microbatches 8") << 2 << QStringLiteral("--schedule");
        QTest::newRow("unknown schedule")
            << args("--stages 4 --microbatches 8 --schedule dualpipe") << 2 << QStringLiteral("dualpipe");
        QTest::newRow("zero stages") << args("--stages 0 --microbatches 8 --schedule 1f1b") << 2
                                     << QStringLiteral("--stages");
        QTest::newRow("non-integer") << args("--stages four --microbatches 8 --schedule 1f1b") << 2
                                     << QStringLiteral("four");
        QTest::newRow("unknown flag") << args("--stages 4 --microbatches 8 --schedule 1f1b --bogus") << 2
                                      << QStringLiteral("bogus");
        QTest::newRow("positional") << args("extra --stages 4 --microbatches 8 --schedule 1f1b") << 2 << QString();
        QTest::newRow("bad partition") << args("--stages 4 --microbatches 8 --schedule 1f1b --partition best") << 2
                                       << QStringLiteral("best");
        QTest::newRow("bad latency") << args("--stages 4 --microbatches 8 --schedule 1f1b --p2p-latency -1") << 2
                                     << QStringLiteral("--p2p-latency");
        QTest::newRow("bad zero") << args("--stages 4 --microbatches 8 --schedule 1f1b --zero 4") << 2
                                  << QStringLiteral("--zero");
        QTest::newRow("bad dp") << args("--stages 4 --microbatches 8 --schedule 1f1b --dp 0") << 2
                                << QStringLiteral("--dp");
        QTest::newRow("bad recompute") << args("--stages 4 --microbatches 8 --schedule 1f1b --recompute most") << 2
                                       << QStringLiteral("most");
        QTest::newRow("bad gpu memory") << args("--stages 4 --microbatches 8 --schedule 1f1b --gpu-memory 0") << 2
                                        << QStringLiteral("--gpu-memory");
        QTest::newRow("bad link") << args("--stages 4 --microbatches 8 --schedule 1f1b --link-gbps fast") << 2
                                  << QStringLiteral("--link-gbps");
        QTest::newRow("missing profile")
            << args("--stages 4 --microbatches 8 --schedule 1f1b --profile /nonexistent/p.json") << 2
            << QStringLiteral("/nonexistent/p.json");
        QTest::newRow("interleaved rule") << args("--stages 4 --microbatches 6 --schedule interleaved --virtual 2") << 1
                                          << QStringLiteral("multiple");
        QTest::newRow("virtual without interleaved")
            << args("--stages 4 --microbatches 8 --schedule 1f1b --virtual 2") << 1 << QStringLiteral("interleaved");
        QTest::newRow("boundaries out of order")
            << args("--stages 3 --microbatches 8 --schedule 1f1b --partition manual:2,1") << 1
            << QStringLiteral("boundary 2");
        QTest::newRow("from-csv with stages")
            << args("--from-csv x.csv --stages 4") << 2 << QStringLiteral("--from-csv takes the stages");
        QTest::newRow("missing csv") << args("--from-csv /nonexistent/s.csv") << 2
                                     << QStringLiteral("/nonexistent/s.csv");
        QTest::newRow("V with one chunk") << args("--stages 4 --microbatches 8 --schedule zb-v --virtual 1") << 1
                                          << QStringLiteral("exactly 2 model chunks");
        QTest::newRow("dualpipe-v too few") << args("--stages 4 --microbatches 4 --schedule dualpipe-v") << 1
                                            << QStringLiteral("at least 2N = 8 microbatches");
        // Simulated, but too many ops to list as JSON (about 1 KB each while it is built).
        QTest::newRow("trace of 4.24 million ops")
            << (args("--stages 4 --microbatches 530000 --schedule 1f1b --trace") +
                QStringList{QDir::temp().filePath(QStringLiteral("shardscope-never-written.json"))})
            << 2 << QStringLiteral("the timeline has 4240000 ops, more than the 4194304 --json and --trace list");
        QTest::newRow("more stages than layers")
            << (QStringList{QStringLiteral("--stages"), QStringLiteral("13"), QStringLiteral("--microbatches"),
                            QStringLiteral("4"), QStringLiteral("--schedule"), QStringLiteral("gpipe"),
                            QStringLiteral("--profile"), profile("uneven.json")})
            << 1 << QStringLiteral("cannot cut 12 layers into 13 pieces");
    }
    void exitCodes()
    {
        QFETCH(QStringList, arguments);
        QFETCH(int, code);
        QFETCH(QString, mentions);
        const Run run = shardctl(arguments);
        QCOMPARE(run.exit_code, code);
        QVERIFY(run.out.isEmpty());
        QVERIFY2(run.err.startsWith("shardctl: "), run.err.constData());
        QVERIFY2(run.err.contains(mentions.toUtf8()), run.err.constData());
        QCOMPARE(run.err.count('\n'), qsizetype(1)); // one sentence, no stack trace
    }

    void csvExportRunsBackTheSameStep()
    {
        QTemporaryDir dir;
        for (const char* kind : {"zb-v", "dualpipe-v", "interleaved", "zb-h2"}) {
            const QString csv = dir.filePath(QString::fromLatin1(kind) + QStringLiteral(".csv"));
            const QStringList common =
                QStringList{QStringLiteral("--profile"), profile("decoder-7b-32.json"), QStringLiteral("--partition"),
                            QStringLiteral("compute"),   QStringLiteral("--link-gbps"), QStringLiteral("100"),
                            QStringLiteral("--json")};
            const Run built = shardctl(args("--stages 4 --microbatches 8 --schedule")
                                       << QString::fromLatin1(kind) << QStringLiteral("--export-csv") << csv << common);
            QVERIFY2(built.exit_code == 0, built.err.constData());
            QFile file(csv);
            QVERIFY(file.open(QIODevice::ReadOnly));
            const QByteArray text = file.readAll();
            QCOMPARE(text.count('\n'), qsizetype(4)); // one line per rank
            QVERIFY(text.startsWith("0F0,"));
            const Run read = shardctl(QStringList{QStringLiteral("--from-csv"), csv} << common);
            QVERIFY2(read.exit_code == 0, read.err.constData());
            const nlohmann::json a = json_of(built), b = json_of(read);
            QCOMPARE(b["schedule"].get<std::string>(), std::string("custom"));
            QVERIFY(b["virtual_stages"] == a["virtual_stages"]);
            QCOMPARE(b["makespan"].get<double>(), a["makespan"].get<double>());
            QVERIFY(b["ops"] == a["ops"]);
            QVERIFY(b["stage_stats"] == a["stage_stats"]);
            QVERIFY(b["sends"] == a["sends"]);
        }
    }

    void hostileCsvExitsOne()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("bad.csv"));
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("0F0,0F1,0B0,0B1\n1F0,1B0,1X1,1B1\n");
        file.close();
        const Run run = shardctl(QStringList{QStringLiteral("--from-csv"), path});
        QCOMPARE(run.exit_code, 1);
        QVERIFY2(run.err.contains(path.toUtf8()) && run.err.contains("line 2 (rank 1), cell 3: '1X1'"),
                 run.err.constData());
        QCOMPARE(run.err.count('\n'), qsizetype(1));
        const Run json = shardctl(QStringList{QStringLiteral("--from-csv"), path, QStringLiteral("--json")});
        QCOMPARE(json.exit_code, 1);
        QVERIFY(json_of(json).contains("error"));
    }

    void malformedProfileExitsOne()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("bad.json"));
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(R"({"layers": [{"name": "a", "params": 1, "fwd_ms": -3, "activation_bytes": 1}]})");
        file.close();
        const Run run = shardctl(args("--stages 1 --microbatches 2 --schedule 1f1b --profile") << path);
        QCOMPARE(run.exit_code, 1);
        QVERIFY2(run.err.contains(path.toUtf8()) && run.err.contains("layer 0 ('a')"), run.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCliSchedule)
#include "tst_cli_schedule.moc"
