// shardctl convert: a DCP (split into boxes) and a ShardScope checkpoint written as Hugging Face
// folders that `shardctl diff` finds identical; safetensors written by torch converted to a DCP
// of one rank and of three that torch's own FileSystemReader loads back equal; --max-shard-size; and every failure (a
// corrupt source, an existing output, bad flags) one JSON object, with nothing written.

#include "foreign_fixtures.h"
#include "hostile_corpus.h"
#include "testutil.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace testutil;
namespace fs = std::filesystem;

namespace {

template <class T>
std::string bytes_of(const std::vector<T>& values)
{
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void write_boxed_dcp(const fs::path& dir)
{
    fs::create_directories(dir);
    std::vector<float> top, bottom;
    for (int i = 0; i < 40; ++i)
        (i < 16 ? top : bottom).push_back(0.25f * float(i) - 4.0f);
    // "w" (10x4) split by rows: rows 0-3 in rank 0's file, rows 4-9 in rank 1's.
    const std::vector<fixtures::DcpTensorSpec> tensors = {
        {.fqn = "w",
         .size = {10, 4},
         .chunks = {{.offsets = {0, 0}, .sizes = {4, 4}, .file = "__0_0.distcp", .offset = 0, .length = 64},
                    {.offsets = {4, 0}, .sizes = {6, 4}, .file = "__1_0.distcp", .offset = 0, .length = 96}}}};
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
    fixtures::write_file(dir / "__0_0.distcp", bytes_of(top));
    fixtures::write_file(dir / "__1_0.distcp", bytes_of(bottom));
}

std::string read_all(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

QStringList convert_args(const fs::path& src, const char* to, const fs::path& out)
{
    return {QStringLiteral("convert"), qs(src), QStringLiteral("--to"),  QString::fromLatin1(to),
            QStringLiteral("--out"),   qs(out), QStringLiteral("--json")};
}

} // namespace

class TestCliConvert : public QObject {
    Q_OBJECT

private slots:
    void dcpToHfThenDiffIdentical()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_boxed_dcp(dir / "dcp");
        Run run = shardctl(convert_args(dir / "dcp", "hf", dir / "hf"));
        QCOMPARE(run.exit_code, 0);
        const nlohmann::json j = run.json();
        QCOMPARE(j.at("ok").get<bool>(), true);
        QCOMPARE(j.at("source").at("format").get<std::string>(), std::string("torch-dcp"));
        QCOMPARE(j.at("to").get<std::string>(), std::string("hf"));
        QCOMPARE(j.at("tensors").get<int>(), 1);
        QCOMPARE(j.at("tensor_bytes").get<int>(), 160);
        QCOMPARE(j.at("files").size(), std::size_t(2));
        QCOMPARE(j.at("verified").get<bool>(), true);
        run = shardctl({QStringLiteral("diff"), qs(dir / "dcp"), qs(dir / "hf"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json().at("summary").at("identical").get<int>(), 1);
        QCOMPARE(run.json().at("bitwise").get<bool>(), true);
        // The text output, and the HF folder back to a DCP, identical again.
        run = shardctl({QStringLiteral("convert"), qs(dir / "hf"), QStringLiteral("--to=dcp"), QStringLiteral("--out"),
                        qs(dir / "dcp2")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("1 tensors"), run.out.constData());
        QCOMPARE(shardctl({QStringLiteral("diff"), qs(dir / "dcp"), qs(dir / "dcp2")}).exit_code, 0);
        // And as a ShardScope checkpoint of two ranks: F32 kept needs a 16-bit dtype (exit 2),
        // bf16 verifies and its params are their masters rounded.
        run = shardctl(convert_args(dir / "dcp", "shardscope", dir / "native")
                       << QStringLiteral("--world-size") << QStringLiteral("2"));
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json().at("error").at("kind").get<std::string>(), std::string("invalid_argument"));
        QVERIFY(!fs::exists(dir / "native"));
        run = shardctl(convert_args(dir / "dcp", "shardscope", dir / "native")
                       << QStringLiteral("--world-size") << QStringLiteral("2") << QStringLiteral("--dtype")
                       << QStringLiteral("bf16"));
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json().at("world_size").get<int>(), 2);
        QCOMPARE(run.json().at("tensors_cast").get<int>(), 1);
        QCOMPARE(run.json().at("tensor_bytes").get<int>(), 40 * 14);
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir / "native")}).exit_code, 0);
        QCOMPARE(shardctl({QStringLiteral("stats"), qs(dir / "native")}).exit_code, 0);
    }

    void shardscopeToHfSplitAndCast()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        QCOMPARE(shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir / "native"),
                           QStringLiteral("--numel"), QStringLiteral("200000"), QStringLiteral("--world-size"),
                           QStringLiteral("3"), QStringLiteral("--dtype"), QStringLiteral("bf16")})
                     .exit_code,
                 0);
        QStringList args = convert_args(dir / "native", "hf", dir / "hf");
        args << QStringLiteral("--max-shard-size") << QStringLiteral("100KB");
        Run run = shardctl(args);
        QCOMPARE(run.exit_code, 0);
        const nlohmann::json j = run.json();
        QCOMPARE(j.at("max_shard_size").get<int>(), 100000);
        QCOMPARE(j.at("tensor_bytes").get<int>(), 400000); // 200000 BF16 params
        const std::size_t shards = j.at("files").size() - 1;
        QVERIFY2(shards >= 4, j.dump().c_str()); // 400 kB in files of at most 100 kB (a larger tensor alone)
        QCOMPARE(j.at("files").at(0).at("name").get<std::string>(),
                 "model-00001-of-0000" + std::to_string(shards) + ".safetensors");
        run = shardctl({QStringLiteral("diff"), qs(dir / "native"), qs(dir / "hf"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json().at("states_as_param").get<bool>(), true);
        // Cast to f32: every BF16 value is exact in F32, so diff by value finds no element changed.
        args = convert_args(dir / "hf", "hf", dir / "f32");
        args << QStringLiteral("--dtype") << QStringLiteral("f32");
        run = shardctl(args);
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json().at("tensor_bytes").get<int>(), 800000);
        run = shardctl({QStringLiteral("diff"), qs(dir / "hf"), qs(dir / "f32"), QStringLiteral("--atol"),
                        QStringLiteral("0"), QStringLiteral("--json")});
        const nlohmann::json tensors = run.json().at("tensors"); // not a temporary's member in range-for
        QVERIFY(!tensors.empty());
        for (const auto& t : tensors)
            QCOMPARE(t.at("changed_elements").get<int>(), 0);
    }

    void safetensorsToDcpLoadsInTorch()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const QString script = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/fixtures/torch_dcp_roundtrip.py");
        QProcess python;
        python.start(QStringLiteral("/usr/bin/python3"), {script, QStringLiteral("make"), tmp.path()});
        if (!python.waitForFinished(120000) || python.exitCode() != 0) {
            if (python.readAllStandardError().contains("No module named 'torch'") ||
                python.error() == QProcess::FailedToStart)
                QSKIP("PyTorch is not installed (apt-get install python3-torch; scripts/setup.sh does)");
            QFAIL("the torch fixture script failed");
        }
        // One rank, and three: each tensor's rows split as torch.chunk splits them (64 rows are
        // 22, 22, 20; 2 rows leave rank 2 without a chunk of it; the 0-d scalar whole on rank 0).
        for (const int world : {1, 3}) {
            const fs::path out = dir / ("dcp" + std::to_string(world));
            Run run = shardctl(convert_args(dir / "model.safetensors", "dcp", out)
                               << QStringLiteral("--world-size") << QString::number(world));
            QCOMPARE(run.exit_code, 0);
            const nlohmann::json j = run.json();
            QCOMPARE(j.at("tensors").get<int>(), 6);
            QCOMPARE(j.at("world_size").get<int>(), world);
            QCOMPARE(j.at("files").size(), std::size_t(world + 1));
            for (int r = 0; r < world; ++r)
                QCOMPARE(j.at("files").at(r).at("name").get<std::string>(), "__" + std::to_string(r) + "_0.distcp");
            python.start(QStringLiteral("/usr/bin/python3"),
                         {script, QStringLiteral("load"), qs(out), qs(dir / "model.safetensors")});
            QVERIFY(python.waitForFinished(120000));
            const QByteArray err = python.readAllStandardError();
            QVERIFY2(python.exitCode() == 0, err.constData());
            QCOMPARE(python.readAllStandardOutput().trimmed(), QByteArray("equal 6"));
            run = shardctl({QStringLiteral("diff"), qs(dir / "model.safetensors"), qs(out), QStringLiteral("--json")});
            QCOMPARE(run.exit_code, 0);
            QCOMPARE(run.json().at("summary").at("identical").get<int>(), 6);
            QCOMPARE(run.json().at("bitwise").get<bool>(), true);
        }
    }

    // Every case of the hostile corpus (damaged, forged and escaping checkpoints): convert refuses
    // it with exit 1 or 2, one JSON object, one sentence per stderr line (the first naming the
    // case's file), no crash or hang, the corpus unchanged and no output or temporary folder.
    void hostileCorpusIsRefused()
    {
        QTemporaryDir tmp, outputs;
        const hostile::Corpus corpus = hostile::make_corpus(fs::path(tmp.path().toStdString()));
        const auto before = hostile::snapshot(corpus.root);
        const fs::path out_dir = outputs.path().toStdString();
        int refused = 0;
        for (const hostile::Case& c : corpus.cases) {
            if (!c.skipped.empty())
                continue;
            const Run run = shardctl(convert_args(c.path, "hf", out_dir / c.name), 30000);
            QVERIFY2(run.exit_code == 1 || run.exit_code == 2,
                     qPrintable(QString::fromStdString(c.name) + QStringLiteral(": exit ") +
                                QString::number(run.exit_code) + QStringLiteral(" ") + QString::fromUtf8(run.err)));
            QCOMPARE(run.json().at("ok").get<bool>(), false);
            const QStringList lines = QString::fromUtf8(run.err).trimmed().split(QLatin1Char('\n'));
            for (const QString& line : lines) {
                QVERIFY2(line.startsWith(QStringLiteral("shardctl: ")), qPrintable(line));
                QVERIFY2(!line.contains(QStringLiteral("internal error")), qPrintable(line));
            }
            QVERIFY2(lines.first().contains(QString::fromStdString(c.names)),
                     qPrintable(QString::fromStdString(c.name) + QStringLiteral(": ") + lines.first()));
            ++refused;
        }
        QVERIFY(refused >= 30);
        QVERIFY(fs::is_empty(out_dir));
        QVERIFY(hostile::snapshot(corpus.root) == before);
    }

    void failuresWriteNothing()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_boxed_dcp(dir / "dcp");
        // The pickle cut in half: the source does not verify, exit 1, no output.
        std::string meta = read_all(dir / "dcp" / ".metadata");
        fs::resize_file(dir / "dcp" / ".metadata", meta.size() / 2);
        Run run = shardctl(convert_args(dir / "dcp", "hf", dir / "hf"));
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.json().at("ok").get<bool>(), false);
        QVERIFY2(run.json().at("error").at("message").get<std::string>().find(".metadata") != std::string::npos,
                 run.out.constData());
        QVERIFY(run.err.startsWith("shardctl: "));
        QVERIFY(!fs::exists(dir / "hf"));
        QCOMPARE(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
        fixtures::write_file(dir / "dcp" / ".metadata", meta);

        // An output that exists: exit 2, already_exists.
        fs::create_directories(dir / "full");
        fixtures::write_file(dir / "full" / "x", "x");
        run = shardctl(convert_args(dir / "dcp", "hf", dir / "full"));
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json().at("error").at("kind").get<std::string>(), std::string("already_exists"));

        // Usage errors: one JSON object, kind usage, exit 2.
        for (const QStringList& extra : {QStringList{QStringLiteral("--max-shard-size"), QStringLiteral("5XB")},
                                         QStringList{QStringLiteral("--dtype"), QStringLiteral("int4")},
                                         QStringList{QStringLiteral("--states"), QStringLiteral("all")},
                                         QStringList{QStringLiteral("--world-size"), QStringLiteral("0")}}) {
            run = shardctl(convert_args(dir / "dcp", "hf", dir / "new") + extra);
            QCOMPARE(run.exit_code, 2);
            QCOMPARE(run.json().at("error").at("kind").get<std::string>(), std::string("usage"));
        }
        // A Hugging Face folder has no ranks: --world-size with --to hf is refused, not ignored.
        run = shardctl(convert_args(dir / "dcp", "hf", dir / "new")
                       << QStringLiteral("--world-size") << QStringLiteral("2"));
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json().at("error").at("kind").get<std::string>(), std::string("usage"));
        QVERIFY2(run.err.contains("--world-size applies to --to dcp and shardscope"), run.err.constData());
        QCOMPARE(run.err.trimmed().count('\n'), 0);
        run = shardctl(convert_args(dir / "dcp", "onnx", dir / "new"));
        QCOMPARE(run.exit_code, 2);
        QVERIFY(run.err.contains("--to must be hf, dcp or shardscope"));
        QVERIFY(!fs::exists(dir / "new"));
    }

    // Ctrl-C while converting: the conversion stops, its temporary folder is removed, and the
    // output is either whole (it had finished) or not there at all; one JSON object either way.
    // The signal lands at several instants of a 100 MB conversion; at least one must find it
    // converting.
    void interruptedLeavesNothing()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Run made =
            shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir / "src"), QStringLiteral("--numel"),
                      QStringLiteral("8000000"), QStringLiteral("--world-size"), QStringLiteral("2")});
        QCOMPARE(made.exit_code, 0);
        int cancelled = 0;
        for (const int ms : {30, 60, 100, 150, 250, 400, 600}) {
            const fs::path out = dir / ("out" + std::to_string(ms));
            QProcess process;
            process.start(QStringLiteral(SHARDCTL_PATH),
                          convert_args(dir / "src", "dcp", out) << QStringLiteral("--dtype") << QStringLiteral("f32"));
            QVERIFY(process.waitForStarted());
            QTest::qWait(ms);
            // Only while it runs: a process already gone has no id (and kill(0) is our own group).
            if (const qint64 pid = process.processId(); process.state() == QProcess::Running && pid > 0)
                ::kill(pid_t(pid), SIGINT);
            QVERIFY(process.state() == QProcess::NotRunning || process.waitForFinished(60000));
            if (process.exitStatus() == QProcess::CrashExit) {
                // The signal came before the command set up its handler (a slow start, under a
                // sanitizer): killed at once, before it wrote anything.
                QVERIFY(!fs::exists(out));
                for (const auto& entry : fs::directory_iterator(dir))
                    QVERIFY2(entry.path().filename().string().find(".convert-") == std::string::npos,
                             entry.path().c_str());
                continue;
            }
            const auto json = nlohmann::json::parse(process.readAllStandardOutput().toStdString());
            if (process.exitCode() == 0) {
                QVERIFY(json.at("ok").get<bool>()); // it had finished: a whole, verified folder
                QVERIFY(fs::exists(out / ".metadata"));
            } else {
                QCOMPARE(process.exitCode(), 2);
                QCOMPARE(json.at("error").at("kind").get<std::string>(), std::string("cancelled"));
                QVERIFY(!fs::exists(out));
                ++cancelled;
            }
            for (const auto& entry : fs::directory_iterator(dir)) // no temporary folder left
                QVERIFY2(entry.path().filename().string().find(".convert-") == std::string::npos, entry.path().c_str());
        }
        QVERIFY(cancelled > 0);
    }
};

QTEST_GUILESS_MAIN(TestCliConvert)
#include "tst_cli_convert.moc"
