// Every case of the hostile corpus through `shardctl verify --json` and `shardctl load`, as a
// user's script runs them: the promised exit status and problem kind, one sentence on stderr
// that names the file, no crash or hang, and nothing outside the corpus read or written.

#include "core/util/printable.h"
#include "hostile_corpus.h"
#include "testutil.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

namespace fs = std::filesystem;

class TestCliHostile : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    hostile::Corpus m_corpus;
    QTemporaryDir m_foreignTmp, m_convertTmp;
    hostile::Corpus m_foreign;
    std::map<std::string, std::string> m_foreignBefore;
    std::map<std::string, std::string> m_outsideBefore;
    std::map<std::string, std::string> m_rootBefore;

    static constexpr int kTimeoutMs = 30000; // a hang fails the case instead of the whole suite

    // Every stderr line is one "shardctl: ..." sentence; the first names the file.
    static void checkStderr(const testutil::Run& run, const hostile::Case& c)
    {
        const QString err = QString::fromUtf8(run.err);
        QVERIFY2(!err.trimmed().isEmpty(), "a failure must say what is wrong on stderr");
        const QStringList lines = err.trimmed().split(QLatin1Char('\n'));
        for (const QString& line : lines) {
            QVERIFY2(line.startsWith(QStringLiteral("shardctl: ")), qPrintable(line));
            QVERIFY2(!line.contains(QStringLiteral("internal error")), qPrintable(line));
        }
        QVERIFY2(
            lines.first().contains(QString::fromStdString(c.names)),
            qPrintable(QStringLiteral("'%1' does not name %2").arg(lines.first(), QString::fromStdString(c.names))));
    }

private slots:
    void initTestCase()
    {
        m_foreign = hostile::make_foreign_corpus(fs::path(m_foreignTmp.path().toStdString()));
        m_foreignBefore = hostile::snapshot(m_foreign.root);
        QVERIFY(m_tmp.isValid());
        QElapsedTimer timer;
        timer.start();
        m_corpus = hostile::make_corpus(fs::path(m_tmp.path().toStdString()));
        qInfo("hostile corpus: %zu cases generated in %lld ms", m_corpus.cases.size(), timer.elapsed());
        QVERIFY(m_corpus.cases.size() >= 30);
        m_outsideBefore = hostile::snapshot(m_corpus.outside);
        m_rootBefore = hostile::snapshot(m_corpus.root);
    }

    void verifyAndLoad_data()
    {
        QTest::addColumn<int>("index");
        for (std::size_t i = 0; i < m_corpus.cases.size(); ++i)
            QTest::newRow(m_corpus.cases[i].name.c_str()) << int(i);
    }

    void verifyAndLoad()
    {
        QFETCH(int, index);
        const hostile::Case& c = m_corpus.cases[std::size_t(index)];
        if (!c.skipped.empty())
            QSKIP(c.skipped.c_str());
        const QString path = testutil::qs(c.path);

        const testutil::Run verify =
            testutil::shardctl({QStringLiteral("verify"), path, QStringLiteral("--json")}, kTimeoutMs);
        QVERIFY2(verify.exit_code != -1, "shardctl verify hung");
        QVERIFY2(verify.exit_code != -2, "shardctl verify crashed");
        QCOMPARE(verify.exit_code, c.verify_exit);
        nlohmann::json report;
        try {
            report = verify.json();
        } catch (const std::exception&) {
            QFAIL(qPrintable(
                QStringLiteral("verify --json printed no JSON: %1").arg(QString::fromUtf8(verify.out.left(200)))));
        }
        QCOMPARE(report["ok"].get<bool>(), false);
        std::vector<std::string> kinds;
        for (const auto& p : report["problems"])
            kinds.push_back(p["kind"].get<std::string>());
        QVERIFY2(
            std::find(kinds.begin(), kinds.end(), c.kind) != kinds.end(),
            qPrintable(QStringLiteral("expected %1 among %2")
                           .arg(QString::fromStdString(c.kind), QString::fromStdString(report["problems"].dump()))));
        checkStderr(verify, c);

        const testutil::Run load =
            testutil::shardctl({QStringLiteral("load"), path, QStringLiteral("--expect-world-size"),
                                QStringLiteral("4"), QStringLiteral("--json")},
                               kTimeoutMs);
        QVERIFY2(load.exit_code != -1, "shardctl load hung");
        QVERIFY2(load.exit_code != -2, "shardctl load crashed");
        QCOMPARE(load.exit_code, c.load_exit);
        // A failed load prints no digests: --json's one object is the error, with the stderr sentence.
        const nlohmann::json failed = load.json();
        QCOMPARE(failed.at("ok").get<bool>(), false);
        QVERIFY(!failed.contains("digests"));
        QVERIFY(failed.at("error").at("message").get<std::string>().size() > 0);
        checkStderr(load, c);
    }

    void foreignRefused_data()
    {
        QTest::addColumn<int>("index");
        QTest::addColumn<QStringList>("command");
        for (std::size_t i = 0; i < m_foreign.cases.size(); ++i)
            for (const char* command : {"info", "verify", "stats"})
                for (const bool json : {false, true}) {
                    QStringList args{QString::fromLatin1(command), testutil::qs(m_foreign.cases[i].path)};
                    if (json)
                        args << QStringLiteral("--json");
                    QTest::addRow("%s %s%s", m_foreign.cases[i].name.c_str(), command, json ? " --json" : "")
                        << int(i) << args;
                }
        for (std::size_t i = 0; i < m_foreign.cases.size(); ++i) {
            const hostile::Case& c = m_foreign.cases[i];
            QTest::addRow("%s convert", c.name.c_str())
                << int(i)
                << QStringList{QStringLiteral("convert"), testutil::qs(c.path),
                               QStringLiteral("--to"),    QStringLiteral("hf"),
                               QStringLiteral("--out"),   m_convertTmp.filePath(QString::fromStdString(c.name)),
                               QStringLiteral("--json")};
        }
    }

    // The foreign corpus: every command refuses each case with a non-zero exit and one sentence
    // on stderr that names the file and the tensor; with --json, one object saying the same. (A
    // command that by its contract does not look where the damage is accepts it, saying nothing.)
    void foreignRefused()
    {
        QFETCH(int, index);
        QFETCH(QStringList, command);
        const hostile::Case& c = m_foreign.cases[std::size_t(index)];
        const testutil::Run run = testutil::shardctl(command, kTimeoutMs);
        QVERIFY2(run.exit_code != -1, "shardctl hung");
        QVERIFY2(run.exit_code != -2, "shardctl crashed");
        if (std::ranges::count(c.accepted_by, command.first().toStdString())) {
            QVERIFY2(run.exit_code == 0 && run.err.isEmpty(), run.err.constData());
            if (command.contains(QStringLiteral("--json")))
                QCOMPARE(run.json().value("problems", nlohmann::json::array()).size(), std::size_t(0));
            return;
        }
        QVERIFY2(run.exit_code == 1 || run.exit_code == 2,
                 qPrintable(QStringLiteral("exit %1: %2").arg(run.exit_code).arg(QString::fromUtf8(run.err))));
        if (command.first() == QStringLiteral("convert"))
            QVERIFY2(!QFileInfo::exists(command.at(command.indexOf(QStringLiteral("--out")) + 1)),
                     "a refused convert left its output behind");
        const QString err = QString::fromUtf8(run.err).trimmed();
        QVERIFY2(!err.isEmpty() && !err.contains(QLatin1Char('\n')),
                 qPrintable(QStringLiteral("not one sentence on stderr: ") + err));
        QVERIFY2(err.startsWith(QStringLiteral("shardctl: ")) && !err.contains(QStringLiteral("internal error")),
                 qPrintable(err));
        QVERIFY2(err.contains(QString::fromStdString(c.names)) &&
                     err.contains(QStringLiteral("'%1'").arg(QString::fromStdString(c.tensor))),
                 qPrintable(QStringLiteral("'%1' does not name %2 and '%3'")
                                .arg(err, QString::fromStdString(c.names), QString::fromStdString(c.tensor))));
        if (!command.contains(QStringLiteral("--json")))
            return;
        nlohmann::json out;
        try {
            out = run.json(); // one object: anything after it fails the parse
        } catch (const std::exception& e) {
            QFAIL(qPrintable(QStringLiteral("--json printed no single object (%1): %2")
                                 .arg(QString::fromUtf8(e.what()), QString::fromUtf8(run.out.left(300)))));
        }
        QVERIFY(out.is_object());
        // info's report has no `ok`: its problems say it (docs/shardctl.md, 1.3)
        if (command.first() != QStringLiteral("info"))
            QCOMPARE(out.at("ok").get<bool>(), false);
        std::string said;
        if (out.contains("problems"))
            for (const auto& p : out["problems"]) {
                said += p.at("kind").get<std::string>() + " ";
                if (p.at("kind") == c.kind)
                    QVERIFY2(p.at("message").get<std::string>().find("'" + c.tensor + "'") != std::string::npos,
                             p.dump().c_str());
            }
        if (out.contains("error"))
            said += out["error"].at("kind").get<std::string>();
        QVERIFY2(said.find(c.kind) != std::string::npos,
                 qPrintable(QStringLiteral("expected %1 in %2")
                                .arg(QString::fromStdString(c.kind), QString::fromUtf8(run.out.left(400)))));
    }

    // Whatever a file holds, what reaches the terminal is valid UTF-8 without C0 or C1 controls:
    // printable() lets valid UTF-8 through and escapes the rest as \xNN.
    void printableEscapesEverythingElse()
    {
        using shardscope::printable;
        QCOMPARE(printable("caf\xc3\xa9 \xe2\x9c\x93"), std::string("caf\xc3\xa9 \xe2\x9c\x93")); // é ✓ kept
        QCOMPARE(printable("a\x1b[31mb"), std::string("a\\x1b[31mb"));
        QCOMPARE(printable("\xcd!"), std::string("\\xcd!")); // not UTF-8
        QCOMPARE(printable("\xc2\x9b"), std::string("\\xc2\\x9b")); // C1 CSI
        QCOMPARE(printable("\xc0\xaf"), std::string("\\xc0\\xaf")); // overlong '/'
        QCOMPARE(printable("\xed\xa0\x80"), std::string("\\xed\\xa0\\x80")); // a surrogate
        QCOMPARE(printable("ab\xe2\x9c\x93", 3), std::string("ab...")); // a cut character is dropped
        QCOMPARE(printable("\xff"
                           "ab",
                           2),
                 std::string("\\xffa...")); // an invalid byte is not

        // End to end: a manifest holding 0xCD, an escape and a C1 control, loaded.
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "ckpt";
        QCOMPARE(testutil::shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), testutil::qs(dir),
                                     QStringLiteral("--world-size"), QStringLiteral("2"), QStringLiteral("--numel"),
                                     QStringLiteral("100")})
                     .exit_code,
                 0);
        std::string manifest;
        {
            std::ifstream in(dir / "manifest.json", std::ios::binary);
            manifest.assign(std::istreambuf_iterator<char>(in), {});
        }
        manifest.insert(manifest.find("\"step\""), "\xcd\x1b[31m\xc2\x9b");
        std::ofstream(dir / "manifest.json", std::ios::binary | std::ios::trunc) << manifest;
        for (const bool json : {false, true}) {
            QStringList args{QStringLiteral("load"), testutil::qs(dir), QStringLiteral("--expect-world-size"),
                             QStringLiteral("2")};
            if (json)
                args << QStringLiteral("--json");
            const testutil::Run run = testutil::shardctl(args);
            QCOMPARE(run.exit_code, 1);
            for (const QByteArray& stream : {run.out, run.err}) {
                QVERIFY(QString::fromUtf8(stream).toUtf8() == stream); // valid UTF-8
                for (const char c : stream)
                    QVERIFY2(static_cast<unsigned char>(c) >= 0x20 || c == '\n' || (json && c == ' '),
                             stream.constData());
                QVERIFY(!stream.contains("\xc2\x9b"));
            }
            QVERIFY(run.err.contains("\\xcd"));
        }

        // A file whose name holds a terminal escape, a bell and a byte that is not UTF-8: the
        // text on stdout shows them, as stderr does, and the terminal is given none of them.
        const fs::path named = fs::path(tmp.path().toStdString()) / "named";
        fs::create_directories(named);
        const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
        std::string file(8, '\0');
        file[0] = static_cast<char>(header.size());
        file += header + std::string(4, '\0');
        std::ofstream(named / "\x1b[31mred\x1b[0m\x07\xcd.safetensors", std::ios::binary) << file;
        for (const char* command : {"info", "verify", "stats"}) {
            const testutil::Run run = testutil::shardctl({QString::fromLatin1(command), testutil::qs(named)});
            QVERIFY2(run.exit_code == 0, run.err.constData());
            if (std::string_view(command) == "verify") // the one that lists the files
                QVERIFY2(run.out.contains("\\x1b[31mred\\x1b[0m\\x07\\xcd.safetensors"), run.out.constData());
            for (const char c : run.out)
                QVERIFY2(static_cast<unsigned char>(c) >= 0x20 || c == '\n', run.out.constData());
        }
    }

    void aUrlIsNeverTakenForALocalPath()
    {
        // `s3://ckpt/run` as a path would be the relative folder `s3:/ckpt/run`: created and
        // written while the user believes the bucket holds the run.
        QTemporaryDir cwd;
        const QString before = QDir::currentPath();
        QVERIFY(QDir::setCurrent(cwd.path()));
        // No credentials anywhere: a bucket mirror is refused before anything is created.
        const QByteArray id = qgetenv("AWS_ACCESS_KEY_ID");
        qunsetenv("AWS_ACCESS_KEY_ID");
        qputenv("AWS_SHARED_CREDENTIALS_FILE", cwd.filePath(QStringLiteral("none")).toUtf8());
        const auto restore = qScopeGuard([&] {
            qunsetenv("AWS_SHARED_CREDENTIALS_FILE");
            if (!id.isEmpty())
                qputenv("AWS_ACCESS_KEY_ID", id);
        });
        const auto back = qScopeGuard([&] { QDir::setCurrent(before); });
        struct Case {
            std::vector<const char*> args;
            const char* said;
        };
        const Case cases[] = {
            {{"train", "--root", "s3://ckpt/run", "--steps", "2"},
             "s3://ckpt/run: --root of 'shardctl train' is a local path"},
            {{"train", "--root", "run", "--mirror", "s3://ckpt/run", "--steps", "2"}, "no S3 credentials"},
            {{"status", "run", "--mirror", "gs://ckpt/run"}, "unknown URL scheme \"gs\""},
            // Mistyped URLs would be folders named "s3:" and "file:fm" here.
            {{"train", "--root", "run", "--mirror", "s3:/ckpt/run", "--steps", "2"}, "s3:/ckpt/run: not a URL"},
            {{"train", "--root", "run", "--mirror", "file:fm", "--steps", "2"}, "file:fm: not a URL"},
            {{"status", "run", "--mirror", " s3://ckpt/run", "--json"}, "begins with blanks"},
            {{"train", "--root", "s3:ckpt", "--steps", "2"}, "s3:ckpt: not a URL"},
            {{"demo-save", "--out", "s3://ckpt/demo", "--world-size", "2", "--numel", "100"},
             "s3://ckpt/demo: --out of 'shardctl demo-save' is a local path"},
            {{"reshard", "https://models.example/org/m", "--to", "2", "--out", "out", "--json"},
             "the path argument of 'shardctl reshard'"},
            {{"status", "https://models.example/org/run", "--json"}, "a web server cannot list its steps"},
            {{"status", "s3://ckpt/run"}, "no S3 credentials"},
            // A reading command goes to the server, and says so when there is none.
            {{"verify", "https://models.example.invalid/org/m", "--json"},
             "no answer from https://models.example.invalid"},
            {{"plan-reshard", "https://models.example.invalid/org/m", "--to", "2", "--json"},
             "no answer from https://models.example.invalid"},
            {{"info", "gs://bucket/x"}, "unknown URL scheme \"gs\""},
            {{"info", "s3://Not_A_Bucket/x"}, "not a valid S3 bucket name"},
            {{"stats", "https://user:hunter2@host/x"}, "credentials in it"},
            // An empty value names nothing: never resolved to the working directory or a folder.
            {{"train", "--root", "run", "--mirror", "", "--steps", "2", "--json"},
             "--mirror is given an empty value (see shardctl train --help)"},
            {{"demo-save", "--out", "", "--json"}, "--out is given an empty value"},
            {{"info", "", "--json"}, "the path argument is empty"},
        };
        for (const Case& c : cases) {
            QStringList args;
            for (const char* a : c.args)
                args << QString::fromUtf8(a);
            const testutil::Run run = testutil::shardctl(args);
            QCOMPARE(run.exit_code, 2);
            QVERIFY2(run.err.contains(c.said), run.err.constData());
            QCOMPARE(run.err.count('\n'), 1);
            QVERIFY(!run.err.contains("hunter2") && !run.out.contains("hunter2"));
            if (args.contains(QStringLiteral("--json")))
                QCOMPARE(run.json()["error"]["kind"].get<std::string>(),
                         args.first() == QStringLiteral("verify") || args.first() == QStringLiteral("plan-reshard")
                             ? "remote_error"
                             : args.first() == QStringLiteral("status") ? "invalid_argument"
                                                                        : "usage");
        }
        QVERIFY2(QDir(cwd.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden).isEmpty(),
                 "a URL was taken for a local path: something was created in the working directory");
    }

    void nothingOutsideWasTouched()
    {
        // The decoys are byte-identical copies of real shards and manifests: had any case
        // followed a link or a `..` to them, it would have reported a good shard and failed above.
        QCOMPARE(hostile::snapshot(m_corpus.outside), m_outsideBefore);
        // Reading never writes: the whole temporary tree, cases included, is exactly as
        // generated (no .tmp, no lock, no repaired file, nothing new).
        QCOMPARE(hostile::snapshot(m_corpus.root), m_rootBefore);
        QCOMPARE(hostile::snapshot(m_foreign.root), m_foreignBefore);
    }
};

QTEST_GUILESS_MAIN(TestCliHostile)
#include "tst_cli_hostile.moc"
