// widgets/jobs/checkpointlocation: how the app spells, joins and refuses the text of a checkpoint.
// A URL is never cleaned as a path (QDir would make "s3://ckpt/run" the folder "s3:/ckpt/run"), a
// step beneath a URL is a URL, and a field for URLs refuses a folder or a mistyped URL without
// advising the "./" that only a path field takes.

#include "widgets/jobs/checkpointlocation.h"

#include <QDir>
#include <QTest>

using namespace shardwidgets;

class TestCheckpointLocation : public QObject {
    Q_OBJECT
private slots:
    void aUrlIsKeptAsTypedAndAPathIsCleaned()
    {
        QCOMPARE(cleanCheckpointText(QStringLiteral("s3://ckpt/run")), QStringLiteral("s3://ckpt/run"));
        QCOMPARE(cleanCheckpointText(QStringLiteral("/tmp//run/./a/")), QStringLiteral("/tmp/run/a"));
    }

    void aStepBeneathAUrlIsAUrl()
    {
        QCOMPARE(childOf(QStringLiteral("s3://ckpt/run"), QStringLiteral("step-00000010")),
                 QStringLiteral("s3://ckpt/run/step-00000010"));
        QCOMPARE(childOf(QStringLiteral("s3://ckpt/run/"), QStringLiteral("step-00000010")),
                 QStringLiteral("s3://ckpt/run/step-00000010"));
        QCOMPARE(childOf(QStringLiteral("/tmp/run/"), QStringLiteral("step-00000010")),
                 QStringLiteral("/tmp/run/step-00000010"));
    }

    void oneSpellingForComparing()
    {
        QCOMPARE(comparableCheckpointText(QStringLiteral("s3://ckpt/run/")), QStringLiteral("s3://ckpt/run"));
        QCOMPARE(comparableCheckpointText(QStringLiteral("run/../run/step-1")),
                 QDir::current().absoluteFilePath(QStringLiteral("run/step-1")));
    }

    void aFieldForUrlsSaysWhatIsWrong()
    {
        QVERIFY(urlProblem(QStringLiteral("s3://ckpt/run")).isEmpty());
        QVERIFY(urlProblem(QStringLiteral("https://host/model.safetensors")).isEmpty());
        for (const char* text : {"s3:/ckpt/run", "s3:ckpt", "/tmp/run", "run"}) {
            const QString problem = urlProblem(QString::fromLatin1(text));
            QVERIFY2(problem.startsWith(QString::fromLatin1(text) + QStringLiteral(": not a URL")),
                     qPrintable(problem));
            QVERIFY2(!problem.contains(QStringLiteral("./")), qPrintable(problem));
        }
        // The advice where a folder is chosen follows "not a URL" only.
        QVERIFY(urlProblem(QStringLiteral("/tmp/run"), QStringLiteral("use Open Folder…"))
                    .endsWith(QStringLiteral("; use Open Folder…")));
        QVERIFY(!urlProblem(QStringLiteral("s3://Bad_Bucket/run"), QStringLiteral("use Open Folder…"))
                     .contains(QStringLiteral("Open Folder")));
        const QString bucket = urlProblem(QStringLiteral("s3://Bad_Bucket/run"));
        QVERIFY2(bucket.contains(QStringLiteral("Bad_Bucket")) && bucket.contains(QStringLiteral("bucket name")),
                 qPrintable(bucket));
        QVERIFY(urlProblem(QStringLiteral("gs://ckpt/run")).contains(QStringLiteral("gs://ckpt/run")));
        // Credentials in a URL are refused without being repeated.
        const QString secret = urlProblem(QStringLiteral("https://user:hunter2@host/m.safetensors"));
        QVERIFY(!secret.isEmpty());
        QVERIFY2(!secret.contains(QStringLiteral("hunter2")), qPrintable(secret));
    }
};

QTEST_MAIN(TestCheckpointLocation)
#include "tst_checkpointlocation.moc"
