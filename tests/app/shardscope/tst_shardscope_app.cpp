// The shardscope executable end to end: headless --export with no display, and its exit codes
// (0 all good, 1 a check failed, 2 usage or environment error), as a script would run it.

#include "range_server.h"
#include "widgettestutil.h"

#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

class TestShardscopeApp : public QObject {
    Q_OBJECT

    struct Run {
        int code = -1;
        QByteArray err;
    };

    static Run run(const QStringList& arguments, bool withoutDisplay = false)
    {
        QProcess process;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (withoutDisplay) { // what ssh or CI gives: no display and no platform chosen
            env.remove(QStringLiteral("DISPLAY"));
            env.remove(QStringLiteral("WAYLAND_DISPLAY"));
            env.remove(QStringLiteral("QT_QPA_PLATFORM"));
        }
        process.setProcessEnvironment(env);
        process.start(QStringLiteral(SHARDSCOPE_PATH), arguments);
        if (!process.waitForFinished(120000))
            return {};
        return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1, process.readAllStandardError()};
    }

    QTemporaryDir m_tmp;

private slots:
    void initTestCase()
    {
        widgettest::makeCheckpoint(m_tmp.filePath(QStringLiteral("good")), 4);
        widgettest::makeCheckpoint(m_tmp.filePath(QStringLiteral("bad")), 4);
        widgettest::flipByte(std::filesystem::path(m_tmp.filePath(QStringLiteral("bad")).toStdString()) /
                             "rank0.safetensors");
    }

    void goodCheckpointExitsZero()
    {
        const QString out = m_tmp.filePath(QStringLiteral("good.json"));
        const Run r = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), out}, true);
        QCOMPARE(r.code, 0);
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
        QCOMPARE(root.value(QStringLiteral("ok")).toBool(), true);
    }

    // --compare B: the report carries the comparison (the diff object in JSON); good and bad differ
    // only in the one flipped byte's tensor. Differences are findings, not failures: exit 0.
    void compareInTheReport()
    {
        const QString out = m_tmp.filePath(QStringLiteral("compare.json"));
        const Run r = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--compare"),
                           m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), out},
                          true);
        QCOMPARE(r.code, 0);
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject diff =
            QJsonDocument::fromJson(file.readAll()).object().value(QStringLiteral("diff")).toObject();
        QCOMPARE(diff.value(QStringLiteral("ok")).toBool(), true);
        QVERIFY(diff.value(QStringLiteral("tensors")).toArray().size() > 0);
        QCOMPARE(run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--compare"),
                      m_tmp.filePath(QStringLiteral("missing")), QStringLiteral("--export"), out},
                     true)
                     .code,
                 2);
        QCOMPARE(
            run({QStringLiteral("--compare"), m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), out},
                true)
                .code,
            2);
    }

    // An https:// server's certificate is checked unless the run says --no-verify-tls: a
    // self-signed one is refused, naming the server, and read only when told.
    void tlsIsCheckedUnlessTold()
    {
        const QString cert = m_tmp.filePath(QStringLiteral("cert.pem")),
                      key = m_tmp.filePath(QStringLiteral("key.pem"));
        QVERIFY(testutil::self_signed_certificate(cert, key));
        testutil::RangeServer server(m_tmp.path().toStdString(), cert, key);
        QVERIFY(server.port() > 0);
        const QString url = QStringLiteral("https://127.0.0.1:%1/good").arg(server.port());
        const QString out = m_tmp.filePath(QStringLiteral("tls.json"));
        const Run refused = run({url, QStringLiteral("--export"), out}, true);
        QCOMPARE(refused.code, 2);
        QVERIFY2(refused.err.contains("https://127.0.0.1:"), refused.err.constData());
        QVERIFY2(refused.err.contains("certificate") || refused.err.contains("SSL"), refused.err.constData());
        QVERIFY(!QFile::exists(out));

        const Run told = run({url, QStringLiteral("--no-verify-tls"), QStringLiteral("--export"), out}, true);
        QVERIFY2(told.code == 0, told.err.constData());
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
        QCOMPARE(root.value(QStringLiteral("ok")).toBool(), true);
        const QJsonObject verify =
            root.value(QStringLiteral("checkpoint")).toObject().value(QStringLiteral("verify")).toObject();
        QCOMPARE(verify.value(QStringLiteral("shards")).toArray().size(), 4);
        QCOMPARE(root.value(QStringLiteral("checkpoint")).toObject().value(QStringLiteral("path")).toString(), url);
    }

    void corruptedCheckpointExitsOne()
    {
        const QString out = m_tmp.filePath(QStringLiteral("bad.pdf"));
        const Run r = run({m_tmp.filePath(QStringLiteral("bad")), QStringLiteral("--export"), out}, true);
        QCOMPARE(r.code, 1);
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(file.read(5) == "%PDF-");
    }

    // A .png is the pipeline timeline as Export Timeline writes it (1600 wide, its own height),
    // not the whole window; and stderr carries nothing but findings.
    void pngWithoutADisplay()
    {
        const QString out = m_tmp.filePath(QStringLiteral("timeline.png"));
        const Run r = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), out}, true);
        QCOMPARE(r.code, 0);
        const QImage image(out);
        QCOMPARE(image.width(), 1600);
        QVERIFY2(image.height() >= 100 && image.height() < 700, qPrintable(QString::number(image.height())));
        QVERIFY2(!r.err.contains("propagateSizeHints"), r.err.constData());

        const QString map = m_tmp.filePath(QStringLiteral("map.png"));
        const Run m = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), map,
                           QStringLiteral("--export-view"), QStringLiteral("ownership")},
                          true);
        QCOMPARE(m.code, 0);
        QCOMPARE(QImage(map).width(), 1600);
        QVERIFY(QImage(map).height() < image.height() + 400);
        QCOMPARE(run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), map,
                      QStringLiteral("--export-view"), QStringLiteral("window")},
                     true)
                     .code,
                 2);
        QCOMPARE(
            run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"),
                 m_tmp.filePath(QStringLiteral("x.pdf")), QStringLiteral("--export-view"), QStringLiteral("reshard")},
                true)
                .code,
            2);
    }

    void pdfWithoutNoise()
    {
        const QString out = m_tmp.filePath(QStringLiteral("good.pdf"));
        const Run r = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"), out}, true);
        QCOMPARE(r.code, 0);
        QVERIFY2(!r.err.contains("propagateSizeHints"), r.err.constData());
    }

    void usageAndEnvironmentErrorsExitTwo()
    {
        QCOMPARE(run({QStringLiteral("/nonexistent/ck"), QStringLiteral("--export"),
                      m_tmp.filePath(QStringLiteral("x.json"))},
                     true)
                     .code,
                 2);
        QCOMPARE(run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"),
                      m_tmp.filePath(QStringLiteral("x.docx"))},
                     true)
                     .code,
                 2);
        QCOMPARE(run({QStringLiteral("--no-such-flag"), QStringLiteral("--export"),
                      m_tmp.filePath(QStringLiteral("x.json"))},
                     true)
                     .code,
                 2);
        QCOMPARE(run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--profile"),
                      QStringLiteral("/nonexistent.json"), QStringLiteral("--export"),
                      m_tmp.filePath(QStringLiteral("x.json"))},
                     true)
                     .code,
                 2);
        const Run r = run({m_tmp.filePath(QStringLiteral("good")), QStringLiteral("--export"),
                           QStringLiteral("/nonexistent/dir/x.json")},
                          true);
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("/nonexistent/dir/x.json"));
    }

    // The planner starts on a bundled demo profile; without --profile a checkpoint's report must not
    // carry that demo's plan (no `pipeline` key, no Pipeline section, no timeline picture beside
    // the Markdown). With --profile the plan is there, named after the profile given.
    void checkpointReportHasAPipelineOnlyWithAProfile()
    {
        const QString checkpoint = m_tmp.filePath(QStringLiteral("good"));
        auto readAll = [](const QString& path) {
            QFile file(path);
            return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
        };

        const QString json = m_tmp.filePath(QStringLiteral("noprofile.json"));
        const QString md = m_tmp.filePath(QStringLiteral("noprofile.md"));
        QCOMPARE(run({checkpoint, QStringLiteral("--export"), json}, true).code, 0);
        QCOMPARE(run({checkpoint, QStringLiteral("--export"), md}, true).code, 0);
        const QJsonObject bare = QJsonDocument::fromJson(readAll(json)).object();
        QVERIFY(bare.contains(QStringLiteral("checkpoint")));
        QVERIFY(!bare.contains(QStringLiteral("pipeline")));
        const QByteArray bareMd = readAll(md);
        QVERIFY(bareMd.contains("Shards"));
        QVERIFY2(!bareMd.contains("Pipeline"), bareMd.constData());
        QVERIFY(!QFile::exists(m_tmp.filePath(QStringLiteral("noprofile-timeline.png"))));

        const QString profile = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/profiles/uniform-16.json");
        if (!QFile::exists(profile))
            QSKIP("bundled profile uniform-16.json not present");
        const QString withJson = m_tmp.filePath(QStringLiteral("profile.json"));
        const QString withMd = m_tmp.filePath(QStringLiteral("profile.md"));
        QCOMPARE(
            run({checkpoint, QStringLiteral("--profile"), profile, QStringLiteral("--export"), withJson}, true).code,
            0);
        QCOMPARE(run({checkpoint, QStringLiteral("--profile"), profile, QStringLiteral("--export"), withMd}, true).code,
                 0);
        const QJsonObject root = QJsonDocument::fromJson(readAll(withJson)).object();
        QVERIFY(root.contains(QStringLiteral("checkpoint")));
        QCOMPARE(root.value(QStringLiteral("pipeline")).toObject().value(QStringLiteral("profile")).toString(),
                 QStringLiteral("uniform-16"));
        QVERIFY(readAll(withMd).contains("## Pipeline plan"));
        QVERIFY(QFile::exists(m_tmp.filePath(QStringLiteral("profile-timeline.png"))));
    }

    void profileAndPipelineOnlyReport()
    {
        const QString out = m_tmp.filePath(QStringLiteral("plan.json"));
        const QString profile = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/profiles/uniform-16.json");
        if (!QFile::exists(profile))
            QSKIP("bundled profile uniform-16.json not present");
        const Run r = run({QStringLiteral("--profile"), profile, QStringLiteral("--export"), out}, true);
        QCOMPARE(r.code, 0);
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
        QVERIFY(!root.contains(QStringLiteral("checkpoint")));
        QCOMPARE(root.value(QStringLiteral("pipeline")).toObject().value(QStringLiteral("profile")).toString(),
                 QStringLiteral("uniform-16"));
    }

    void scheduleCsvOnTheTimeline()
    {
        const QString csv = m_tmp.filePath(QStringLiteral("schedule.csv"));
        QFile file(csv);
        QVERIFY(file.open(QIODevice::WriteOnly));
        // 1F1B on two ranks in torch.distributed.pipelining's format, with a send it skips.
        file.write("0F0,0SEND_F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
        file.close();
        const QString profile = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/profiles/decoder-7b-32.json");
        const QString out = m_tmp.filePath(QStringLiteral("csv-plan.json"));
        const Run r = run({QStringLiteral("--profile"), profile, QStringLiteral("--schedule-csv"), csv,
                           QStringLiteral("--export"), out},
                          true);
        QVERIFY2(r.code == 0, r.err.constData());
        QFile report(out);
        QVERIFY(report.open(QIODevice::ReadOnly));
        const QJsonObject pipeline =
            QJsonDocument::fromJson(report.readAll()).object().value(QStringLiteral("pipeline")).toObject();
        QCOMPARE(pipeline.value(QStringLiteral("schedule")).toString(), QStringLiteral("custom"));
        QCOMPARE(pipeline.value(QStringLiteral("stages")).toInt(), 2);
        QCOMPARE(pipeline.value(QStringLiteral("microbatches")).toInt(), 2);

        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write("0F0,0F1\n1Z0\n");
        file.close();
        const Run bad = run({QStringLiteral("--profile"), profile, QStringLiteral("--schedule-csv"), csv,
                             QStringLiteral("--export"), out},
                            true);
        QCOMPARE(bad.code, 1);
        QVERIFY2(bad.err.contains("line 2 (rank 1), cell 1"), bad.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestShardscopeApp)
#include "tst_shardscope_app.moc"
