// The real main window, offscreen, against this run's S3 server (the RADOS Gateway the suite starts,
// tests/core/storage/s3_server.h): File › Open Location… with an s3:// URL verifies the rank objects
// in place and reads their values, the same as the local copy's; an object changed in the bucket is
// a hash mismatch on its rank; the location is remembered as typed, and no secret reaches the
// settings file. A prefix without a checkpoint offers the step inside it. A run's root in a bucket
// lists its steps as a folder's does, each opened where it lives, and a local root's mirror can be
// a bucket.

#include "app/shardscope/mainwindow.h"
#include "core/checkpoint/verify.h"
#include "core/inspect/content.h"
#include "core/storage/s3.h"
#include "core/storage/s3_server.h"
#include "widgets/models/steplistmodel.h"
#include "widgets/models/summarymodel.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/stepspane.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/settings/settings.h"
#include "widgets/views/failurebanner.h"
#include "open_location.h"
#include "widgettestutil.h"

#include <QDir>
#include <QFile>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

class TestMainWindowS3 : public QObject {
    Q_OBJECT

    shardscope::storage::S3Config m_config;
    std::string m_bucket;

    // The checkpoint folder `dir` as objects under `prefix` of the test bucket, byte for byte.
    void upload(const QString& dir, const std::string& prefix)
    {
        const shardscope::storage::S3Client s3(m_config);
        for (const QString& name : QDir(dir).entryList(QDir::Files)) {
            QFile f(QDir(dir).filePath(name));
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray bytes = f.readAll();
            s3.put(m_bucket, prefix + "/" + name.toStdString(),
                   std::as_bytes(std::span(bytes.constData(), std::size_t(bytes.size()))));
        }
    }

private slots:
    void initTestCase()
    {
        m_config = s3test::server_config();
        if (m_config.endpoint.empty())
            QSKIP("no S3 server: run through ctest, whose s3_server fixture starts one");
        // The app finds its server and keys where every S3 tool does: the environment.
        qputenv("AWS_ENDPOINT_URL", QByteArray::fromStdString(m_config.endpoint));
        qputenv("AWS_ACCESS_KEY_ID", QByteArray::fromStdString(m_config.credentials.access_key_id));
        qputenv("AWS_SECRET_ACCESS_KEY", QByteArray::fromStdString(m_config.credentials.secret_access_key));
        qputenv("AWS_DEFAULT_REGION", QByteArray::fromStdString(m_config.region));
        m_bucket = s3test::fresh_bucket("app");
        shardscope::storage::S3Client(m_config).create_bucket(m_bucket);
    }

    void aBucketIsReadInPlaceAndAChangedObjectIsFound()
    {
        QTemporaryDir tmp;
        const QString ini = tmp.filePath(QStringLiteral("settings.ini"));
        shardwidgets::Settings settings(ini);
        MainWindow window(&settings, false);
        window.show();
        const QString local = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(local, 2, 20'000);
        upload(local, "good");

        const QString url = QStringLiteral("s3://%1/good").arg(QString::fromStdString(m_bucket));
        QVERIFY(windowtest::openLocation(window, url));
        QCOMPARE(window.checkpointPanel()->currentPath(), url);
        const auto& report = window.checkpointPanel()->report();
        QVERIFY(report && report->ok());
        QCOMPARE(report->shards.size(), std::size_t(2));
        for (const shardscope::ShardCheck& s : report->shards)
            QCOMPARE(int(s.status), int(shardscope::ShardStatus::ok));
        QVERIFY2(window.checkpointPanel()->banner()->title().startsWith(QStringLiteral("Safe to resume")),
                 qPrintable(window.checkpointPanel()->banner()->title()));
        // The values are the local copy's.
        const shardscope::ContentReport expected =
            shardscope::inspect_content(std::filesystem::path(local.toStdString()));
        const auto& remote = window.tensorsPanel()->report()->tensors;
        QCOMPARE(remote.size(), expected.tensors.size());
        for (std::size_t t = 0; t < remote.size(); ++t)
            QVERIFY(remote[t].stats.sum_squares == expected.tensors[t].stats.sum_squares &&
                    remote[t].stats.numel == expected.tensors[t].stats.numel);
        QCOMPARE(settings.recentFolders().first(), url);

        // One byte of rank 1 changed in the bucket: its rank is a hash mismatch, and the verdict
        // is no longer safe.
        QDir(local).mkpath(QStringLiteral("."));
        QFile rank1(QDir(local).filePath(QStringLiteral("rank1.safetensors")));
        QVERIFY(rank1.open(QIODevice::ReadWrite));
        QByteArray bytes = rank1.readAll();
        bytes[bytes.size() - 5] = char(bytes[bytes.size() - 5] ^ 0x40);
        QVERIFY(rank1.seek(0) && rank1.write(bytes) == bytes.size());
        rank1.close();
        upload(local, "changed");
        const QString changed = QStringLiteral("s3://%1/changed").arg(QString::fromStdString(m_bucket));
        QVERIFY(windowtest::openLocation(window, changed));
        const auto& bad = window.checkpointPanel()->report();
        QVERIFY(bad && !bad->ok());
        QCOMPARE(int(bad->shards[1].status), int(shardscope::ShardStatus::hash_mismatch));
        QCOMPARE(int(bad->shards[0].status), int(shardscope::ShardStatus::ok));
        QVERIFY2(!window.checkpointPanel()->banner()->title().startsWith(QStringLiteral("Safe to resume")),
                 qPrintable(window.checkpointPanel()->banner()->title()));
        QCOMPARE(settings.recentFolders().first(), changed);

        // Nothing was taken for a local path, and the keys stay out of the settings.
        QVERIFY(!QFileInfo::exists(QStringLiteral("s3:")));
        settings.sync();
        QFile written(ini);
        QVERIFY(written.open(QIODevice::ReadOnly));
        const QByteArray text = written.readAll();
        QVERIFY(text.contains(m_bucket.c_str())); // the recent locations are in it
        QVERIFY(!text.contains(QByteArray::fromStdString(m_config.credentials.secret_access_key)));
        QVERIFY(!text.contains(QByteArray::fromStdString(m_config.credentials.access_key_id)));

        // A prefix that holds nothing (a typo) cannot be opened, as a folder that does not exist,
        // and is not kept among the recent locations.
        const QString typo = QStringLiteral("s3://%1/goood").arg(QString::fromStdString(m_bucket));
        QSignalSpy failed(window.checkpointPanel(), &shardwidgets::CheckpointPanel::openFailed);
        window.openPath(typo);
        QVERIFY(failed.wait(60000));
        QVERIFY2(failed.first().at(0).toString().contains(QStringLiteral("no such object")),
                 qPrintable(failed.first().at(0).toString()));
        QVERIFY(!settings.recentFolders().contains(typo));
        QCOMPARE(settings.recentFolders().first(), changed);
    }

    // A prefix with no checkpoint, as a folder without one: the banner says so, the step inside it
    // is offered, and its button opens it where it lives.
    void aPrefixWithoutACheckpointOffersTheStepInsideIt()
    {
        QTemporaryDir tmp;
        const QString local = tmp.filePath(QStringLiteral("step-000007"));
        widgettest::makeCheckpoint(local, 2, 1000, 7);
        upload(local, "near/run/step-000007");
        const std::string notes = "hi\n";
        shardscope::storage::S3Client(m_config).put(m_bucket, "near/run/notes.txt",
                                                    std::as_bytes(std::span(notes.data(), notes.size())));

        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        auto* panel = window.checkpointPanel();
        const QString run = QStringLiteral("s3://%1/near/run").arg(QString::fromStdString(m_bucket));
        const QString step = run + QStringLiteral("/step-000007");
        QSignalSpy finished(panel, &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(run);
        QVERIFY(finished.wait(60000));
        shardwidgets::FailureBanner* banner = panel->banner();
        QCOMPARE(banner->state(), shardwidgets::FailureBanner::State::NoCheckpoint);
        QTRY_COMPARE_WITH_TIMEOUT(banner->suggestedPath(), step, 30000);
        QVERIFY2(banner->text().contains(step), qPrintable(banner->text()));
        auto* open = banner->findChild<QPushButton*>(QStringLiteral("bannerOpenSuggested"));
        QVERIFY(open && open->isVisibleTo(panel));
        finished.clear();
        QTest::mouseClick(open, Qt::LeftButton);
        QVERIFY(finished.wait(60000));
        QCOMPARE(panel->currentPath(), step);
        QVERIFY(panel->report() && panel->report()->ok());
        QVERIFY(banner->suggestedPath().isEmpty());
        QVERIFY(!QFileInfo::exists(QStringLiteral("s3:"))); // no local folder was made of the URL
    }

    void aRootInABucketListsItsStepsAndOpensEachInPlace()
    {
        QTemporaryDir tmp;
        const QString root = tmp.filePath(QStringLiteral("run"));
        for (int step : {10, 20}) {
            const QString name = QStringLiteral("step-%1").arg(step, 8, 10, QLatin1Char('0'));
            widgettest::makeCheckpoint(QDir(root).filePath(name), 2, 5'000, uint64_t(step));
            upload(QDir(root).filePath(name), "run/" + name.toStdString());
        }
        QFile latest(QDir(root).filePath(QStringLiteral("latest")));
        QVERIFY(latest.open(QIODevice::WriteOnly));
        latest.write("step-00000020\n");
        latest.close();
        upload(root, "run");

        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        const QString url = QStringLiteral("s3://%1/run").arg(QString::fromStdString(m_bucket));
        QVERIFY(windowtest::openLocation(window, url));
        auto* panel = window.checkpointPanel();
        auto* pane = panel->stepsPane();
        auto* steps = pane->model();
        QVERIFY(pane->isVisible());
        // Listed by the pane in the background once the step `latest` names is shown.
        QVERIFY(QTest::qWaitFor([&] { return steps->rowCount() == 2; }, 30000));
        // Newest first, each step a URL beneath the root (never QDir's "s3:/…"), in the bucket's tier.
        QCOMPARE(steps->directory(0), url + QStringLiteral("/step-00000020"));
        QCOMPARE(steps->directory(1), url + QStringLiteral("/step-00000010"));
        QCOMPARE(steps->index(0, shardwidgets::StepListModel::Tier).data().toString(), QStringLiteral("bucket"));
        QCOMPARE(steps->index(0, shardwidgets::StepListModel::Latest).data().toString(), QStringLiteral("latest"));
        QVERIFY(steps->index(0, 0).data(Qt::FontRole).value<QFont>().bold()); // the step `latest` opened
        QVERIFY(panel->report() && panel->report()->ok());
        QCOMPARE(panel->controller()->directory(), url + QStringLiteral("/step-00000020"));

        // The older step, opened from the list, is verified in place and the list stays.
        QSignalSpy verified(panel, &shardwidgets::CheckpointPanel::verificationFinished);
        pane->view()->selectRow(1);
        emit pane->view()->activated(steps->index(1, 0));
        QVERIFY(verified.wait(60000));
        QCOMPARE(panel->currentPath(), url + QStringLiteral("/step-00000010"));
        QVERIFY(panel->report() && panel->report()->ok());
        QCOMPARE(panel->summaryModel()->value(QStringLiteral("Step")), QStringLiteral("10"));
        QVERIFY(pane->isVisible());
        QCOMPARE(steps->rowCount(), 2);
        QVERIFY(steps->index(1, 0).data(Qt::FontRole).value<QFont>().bold());

        // The same steps as the mirror of the local root: listed beside the local ones, each a URL.
        QVERIFY(QTest::qWaitFor([&] { return !pane->isListing(); }, 30000));
        window.openPath(root);
        QVERIFY(QTest::qWaitFor([&] { return !panel->isVerifying() && panel->report(); }, 60000));
        QVERIFY(QTest::qWaitFor([&] { return !pane->isListing(); }, 30000));
        QSignalSpy listed(pane, &shardwidgets::StepsPane::listed);
        pane->setMirror(url);
        QVERIFY(listed.wait(30000));
        QVERIFY2(pane->readingProblem().isEmpty(), qPrintable(pane->readingProblem()));
        QCOMPARE(steps->rowCount(), 4);
        int mirrorRows = 0;
        for (int row = 0; row < steps->rowCount(); ++row) {
            if (steps->step(row).tier != shardscope::StepTier::mirror)
                continue;
            ++mirrorRows;
            QVERIFY2(steps->directory(row).startsWith(url + QStringLiteral("/step-")),
                     qPrintable(steps->directory(row)));
        }
        QCOMPARE(mirrorRows, 2);

        // A mirror whose bucket does not exist is said, and the local steps stay listed.
        pane->setMirror(QStringLiteral("s3://%1-none/run").arg(QString::fromStdString(m_bucket)));
        QVERIFY(listed.wait(30000));
        QVERIFY2(pane->readingProblem().contains(QStringLiteral("-none")), qPrintable(pane->readingProblem()));
        QCOMPARE(steps->rowCount(), 2);
        for (int row = 0; row < 2; ++row) // not "failed": nothing is known of the uploads
            QCOMPARE(steps->index(row, shardwidgets::StepListModel::Upload).data().toString(),
                     QStringLiteral("unknown"));
    }
};

QTEST_MAIN(TestMainWindowS3)
#include "tst_mainwindow_s3.moc"
