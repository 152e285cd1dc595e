// A checkpoint root's steps: the model over core's list_steps (complete or not, `latest`, tier),
// and the checkpoint page's steps pane, from which the user opens any step, refreshes the list
// while a run keeps saving, and adds the mirror tier.

#include "widgets/panels/checkpointpanel.h"
#include "widgets/models/steplistmodel.h"
#include "widgets/panels/stepspane.h"
#include "widgets/views/failurebanner.h"
#include "widgettestutil.h"

#include "core/run/lifecycle.h"
#include "core/run/root_lock.h"
#include "core/run/root_status.h"

#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QScrollBar>
#include <QDateTime>
#include <QDir>
#include <QLabel>
#include <QFile>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <numeric>
#include <unistd.h>

using namespace shardwidgets;
namespace fs = std::filesystem;

class TestStepListModel : public QObject {
    Q_OBJECT

    // step-00000010, -20, -30 complete; `latest` names 20 (an older step: latest is what the file
    // says, not the biggest number); step-00000040 crashed mid-save (a .tmp, no manifest).
    static void makeRoot(const QString& root)
    {
        for (int step : {10, 20, 30})
            widgettest::makeCheckpoint(QDir(root).filePath(QString::fromStdString(shardscope::step_dir_name(step))), 2,
                                       1000, uint64_t(step));
        shardscope::write_latest(root.toStdString(), shardscope::step_dir_name(20), false);
        const QString crashed = QDir(root).filePath(QString::fromStdString(shardscope::step_dir_name(40)));
        QDir().mkpath(crashed);
        QFile tmp(QDir(crashed).filePath(QStringLiteral("rank0.safetensors.tmp")));
        QVERIFY(tmp.open(QIODevice::WriteOnly));
        tmp.write("partial");
    }

    static QString cell(const StepListModel* model, int row, int column)
    {
        return model->index(row, column).data().toString();
    }

private slots:
    void modelShowsCoresListing()
    {
        QTemporaryDir tmp;
        makeRoot(tmp.path());
        StepListModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setSteps(shardscope::list_steps(tmp.path().toStdString()), tmp.path());
        QCOMPARE(model.rowCount(), 4);
        // Newest first.
        QCOMPARE(cell(&model, 0, StepListModel::Step), QStringLiteral("40"));
        QCOMPARE(cell(&model, 0, StepListModel::Status), QStringLiteral("incomplete"));
        QVERIFY(model.index(0, 0).data(Qt::ToolTipRole).toString().contains(QStringLiteral("rank0.safetensors.tmp")));
        QCOMPARE(cell(&model, 0, StepListModel::WallClock), QStringLiteral("–"));
        QCOMPARE(cell(&model, 1, StepListModel::Step), QStringLiteral("30"));
        QCOMPARE(cell(&model, 1, StepListModel::Status), QStringLiteral("complete"));
        QCOMPARE(cell(&model, 1, StepListModel::Latest), QString());
        QCOMPARE(cell(&model, 2, StepListModel::Latest), QStringLiteral("latest"));
        QCOMPARE(cell(&model, 2, StepListModel::Tier), QStringLiteral("local"));
        QCOMPARE(model.directory(3), QDir(tmp.path()).filePath(QStringLiteral("step-00000010")));
        QCOMPARE(model.rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000030"))), 1);

        model.setCurrentDirectory(model.directory(2));
        QVERIFY(model.index(2, 0).data(Qt::FontRole).value<QFont>().bold());
        QVERIFY(!model.index(1, 0).data(Qt::FontRole).value<QFont>().bold());
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void pageListsAndOpensSteps()
    {
        QTemporaryDir tmp;
        makeRoot(tmp.path());
        CheckpointPanel panel;
        StepsPane* pane = panel.stepsPane();
        QAbstractItemModelTester tester(pane->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        panel.resize(1400, 800);
        panel.show();
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QVERIFY(pane->isVisible());
        QCOMPARE(pane->model()->rowCount(), 4);
        QCOMPARE(QDir(panel.controller()->directory()).dirName(), QStringLiteral("step-00000020")); // what latest says
        const int latestRow = pane->model()->rowForDirectory(panel.controller()->directory());
        QVERIFY(pane->model()->index(latestRow, 0).data(Qt::FontRole).value<QFont>().bold());

        // The user double-clicks step 10.
        QTableView* view = pane->view();
        const int row10 = pane->model()->rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000010")));
        const QRect cellRect = view->visualRect(pane->model()->index(row10, StepListModel::Step));
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, cellRect.center());
        QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, cellRect.center());
        QVERIFY(finished.wait(30000));
        QCOMPARE(QDir(panel.controller()->directory()).dirName(), QStringLiteral("step-00000010"));
        QVERIFY(panel.report()->ok());
        QCOMPARE(cell(pane->model(), row10, StepListModel::Status), QStringLiteral("verified"));

        QCOMPARE(pane->model()->rowCount(), 4); // still the root's list
        QVERIFY(pane->model()->index(row10, 0).data(Qt::FontRole).value<QFont>().bold());

        // Step 30 corrupted on disk: opened, it fails verification, and its row says so (the
        // listing alone would still call it complete).
        const int row30 = pane->model()->rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000030")));
        QCOMPARE(cell(pane->model(), row30, StepListModel::Status), QStringLiteral("complete"));
        widgettest::flipByte(fs::path(QDir(tmp.path()).filePath(QStringLiteral("step-00000030")).toStdString()) /
                             "rank1.safetensors");
        view->setCurrentIndex(pane->model()->index(row30, 0));
        QTest::keyClick(view, Qt::Key_Return);
        QVERIFY(finished.wait(30000));
        QVERIFY(!panel.report()->ok());
        QCOMPARE(cell(pane->model(), row30, StepListModel::Status), QStringLiteral("failed verification"));
        QCOMPARE(pane->model()->index(row30, 0).data(StepListModel::CompleteRole).toBool(), false);

        // The crashed step opens too, and says why it cannot be used.
        view->setCurrentIndex(pane->model()->index(0, 0));
        QTest::keyClick(view, Qt::Key_Return);
        QVERIFY(finished.wait(30000));
        QCOMPARE(QDir(panel.controller()->directory()).dirName(), QStringLiteral("step-00000040"));
        QVERIFY(!panel.report()->ok());
        QVERIFY(pane->isVisible());
        // Headlined as what is missing: its manifest (the save never committed), not a shard.
        const QString title = panel.banner()->title();
        QVERIFY2(title.startsWith(QStringLiteral("Missing manifest")), qPrintable(title));
        QVERIFY2(!title.contains(QStringLiteral("shard is missing")), qPrintable(title));

        // A run that keeps saving: Refresh lists the new step.
        widgettest::makeCheckpoint(QDir(tmp.path()).filePath(QStringLiteral("step-00000050")), 2, 1000, 50);
        QSignalSpy listed(pane, &StepsPane::listed);
        pane->refresh();
        QVERIFY(listed.wait(10000));
        QCOMPARE(pane->model()->rowCount(), 5);
        QCOMPARE(cell(pane->model(), 0, StepListModel::Step), QStringLiteral("50"));
    }

    void refreshKeepsTheColumns()
    {
        QTemporaryDir tmp;
        makeRoot(tmp.path());
        CheckpointPanel panel;
        StepsPane* pane = panel.stepsPane();
        panel.resize(1400, 800);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QTableView* view = pane->view();
        auto widths = [view] {
            std::vector<int> w;
            for (int c = 0; c < view->model()->columnCount(); ++c)
                w.push_back(view->horizontalHeader()->sectionSize(c));
            return w;
        };
        QCoreApplication::processEvents();
        const std::vector<int> before = widths();
        // The columns fill the table: the last one takes what the others leave.
        QCOMPARE(std::accumulate(before.begin(), before.end(), 0), view->viewport()->width());

        QSignalSpy listed(pane, &StepsPane::listed);
        pane->refresh();
        QVERIFY(listed.wait(10000));
        QCoreApplication::processEvents();
        const std::vector<int> after = widths();
        QCOMPARE(std::accumulate(after.begin(), after.end(), 0), view->viewport()->width());
        for (std::size_t c = 0; c < before.size(); ++c)
            QVERIFY2(after[c] >= before[c],
                     qPrintable(QStringLiteral("column %1: %2 -> %3").arg(c).arg(before[c]).arg(after[c])));
        // In a small window every column is still in sight: the pane keeps the table's width.
        panel.resize(780, 560);
        QCoreApplication::processEvents();
        QCOMPARE(view->horizontalScrollBar()->maximum(), 0);
    }

    void mirrorTierIsListed()
    {
        QTemporaryDir tmp, mirror;
        makeRoot(tmp.path());
        // The mirror holds a verified copy of step 30 (its upload manifest says so).
        const fs::path copy = fs::path(mirror.path().toStdString()) / shardscope::step_dir_name(30);
        fs::copy(fs::path(tmp.path().toStdString()) / shardscope::step_dir_name(30), copy);
        QFile upload(QString::fromStdString((copy / shardscope::kUploadManifest).string()));
        QVERIFY(upload.open(QIODevice::WriteOnly));
        upload.write("{}");
        upload.close();

        StepsPane pane;
        QAbstractItemModelTester tester(pane.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        pane.setSteps(shardscope::list_steps(tmp.path().toStdString()), tmp.path());
        QSignalSpy listed(&pane, &StepsPane::listed);
        pane.setMirror(mirror.path());
        QVERIFY(listed.wait(10000));
        const StepListModel* model = pane.model();
        QCOMPARE(model->rowCount(), 5);
        // Step 30: the local copy first (uploaded), then the mirror's.
        QCOMPARE(cell(model, 1, StepListModel::Step), QStringLiteral("30"));
        QCOMPARE(cell(model, 1, StepListModel::Tier), QStringLiteral("local + mirror"));
        QCOMPARE(cell(model, 2, StepListModel::Step), QStringLiteral("30"));
        QCOMPARE(cell(model, 2, StepListModel::Tier), QStringLiteral("mirror"));
        QCOMPARE(cell(model, 2, StepListModel::Status), QStringLiteral("complete"));
        QCOMPARE(model->directory(2), QDir(mirror.path()).filePath(QStringLiteral("step-00000030")));
        QCOMPARE(cell(model, 3, StepListModel::Tier), QStringLiteral("local")); // step 20: not uploaded
    }

    // The mirror of makeRoot's root as a run under way leaves it: step 30 uploaded (verified,
    // upload.json), step 20 copied without upload.json (an upload under way, or one that
    // failed), step 10 not copied at all.
    static void makeMirror(const QString& root, const QString& mirror)
    {
        for (int step : {20, 30}) {
            const std::string name = shardscope::step_dir_name(uint64_t(step));
            fs::copy(fs::path(root.toStdString()) / name, fs::path(mirror.toStdString()) / name);
        }
        QFile upload(QDir(mirror).filePath(QStringLiteral("step-00000030/upload.json")));
        QVERIFY(upload.open(QIODevice::WriteOnly));
        upload.write("{}");
    }

    static QString uploadOf(const StepListModel* model, const QString& root, int step)
    {
        const int row = model->rowForDirectory(
            QDir(root).filePath(QString::fromStdString(shardscope::step_dir_name(uint64_t(step)))));
        return model->index(row, StepListModel::Upload).data(StepListModel::UploadStateRole).toString();
    }

    void modelShowsUploadStates()
    {
        QTemporaryDir tmp, mirror;
        makeRoot(tmp.path());
        makeMirror(tmp.path(), mirror.path());
        StepListModel model;
        // Attached before any data: every reset and cell change below is checked.
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const fs::path root = tmp.path().toStdString(), mirrorPath = mirror.path().toStdString();
        const auto steps = shardscope::list_steps(root, mirrorPath);
        model.setSteps(steps, tmp.path(), mirror.path());
        QVERIFY(uploadOf(&model, tmp.path(), 30).isEmpty()); // nothing read yet: no state claimed

        // A job holds the lock (this process): what lacks a verified copy is still on its way.
        {
            const shardscope::RootLock lock = shardscope::RootLock::acquire(root, {});
            const auto holder = shardscope::read_lock_holder(root);
            QVERIFY(holder && holder->running == std::optional<bool>(true));
            model.setRootState(holder, shardscope::upload_states_on_disk(steps, holder, 10));
            QCOMPARE(uploadOf(&model, tmp.path(), 30), QStringLiteral("uploaded"));
            QCOMPARE(uploadOf(&model, tmp.path(), 20), QStringLiteral("uploading"));
            QCOMPARE(uploadOf(&model, tmp.path(), 10), QStringLiteral("pending"));
            const int row20 = model.rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000020")));
            QCOMPARE(cell(&model, row20, StepListModel::Upload), QStringLiteral("uploading"));
            // Its partial mirror copy is being written, not broken.
            QCOMPARE(cell(&model, row20 + 1, StepListModel::Tier), QStringLiteral("mirror"));
            QCOMPARE(cell(&model, row20 + 1, StepListModel::Status), QStringLiteral("uploading"));
            QVERIFY(model.lockHolder() && model.lockHolder()->pid == ::getpid());
        }
        // No job any more: the run ended without those copies.
        model.setRootState(std::nullopt, shardscope::upload_states_on_disk(steps, std::nullopt, 10));
        QCOMPARE(uploadOf(&model, tmp.path(), 30), QStringLiteral("uploaded"));
        QCOMPARE(uploadOf(&model, tmp.path(), 20), QStringLiteral("failed"));
        const int row20 = model.rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000020")));
        QCOMPARE(cell(&model, row20 + 1, StepListModel::Status), QStringLiteral("incomplete")); // left behind
        QCOMPARE(uploadOf(&model, tmp.path(), 10), QStringLiteral("failed"));
        QCOMPARE(model.rowCount(), 6); // 4 local rows, 2 mirror rows: the cells changed, not the rows
        // Only the newest mirror_keep_last are the mirror's: with 2, step 10 is not.
        model.setRootState(std::nullopt, shardscope::upload_states_on_disk(steps, std::nullopt, 2));
        QVERIFY(uploadOf(&model, tmp.path(), 10).isEmpty());
        const int row10 = model.rowForDirectory(QDir(tmp.path()).filePath(QStringLiteral("step-00000010")));
        QCOMPARE(cell(&model, row10, StepListModel::Upload), QStringLiteral("–"));
        model.clear();
        QVERIFY(!model.lockHolder());
    }

    void paneNamesTheWriterOfALockedRoot()
    {
        QTemporaryDir tmp, mirror;
        makeRoot(tmp.path());
        makeMirror(tmp.path(), mirror.path());
        const fs::path root = tmp.path().toStdString();
        // This process writes the root: it holds the flock of writer.lock, as `train` would.
        const shardscope::RootLock lock = shardscope::RootLock::acquire(root, {});
        const auto holder = shardscope::read_lock_holder(root);
        QVERIFY(holder);

        CheckpointPanel panel;
        StepsPane* pane = panel.stepsPane();
        pane->setAutoRefreshInterval(0); // one listing at a time, each waited for below
        QAbstractItemModelTester tester(pane->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        panel.resize(1400, 800);
        panel.show();
        QSignalSpy listed(pane, &StepsPane::listed);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QVERIFY(listed.count() > 0 || listed.wait(10000)); // the lock is read in the background
        const QString since = QDateTime::fromSecsSinceEpoch(holder->started_at).toString(QStringLiteral("HH:mm"));
        const QString expected =
            QStringLiteral("Being written by pid %1 on %2, since %3 — showing committed steps only")
                .arg(::getpid())
                .arg(QString::fromStdString(holder->host), since);
        QCOMPARE(pane->lockText(), expected);
        const auto labels = pane->findChildren<QLabel*>();
        QVERIFY(std::any_of(labels.begin(), labels.end(),
                            [&](const QLabel* l) { return l->isVisible() && l->text() == expected; }));
        // The mirror is chosen: each local step says where its upload stands.
        listed.clear();
        pane->setMirror(mirror.path());
        QVERIFY(listed.wait(10000));
        const StepListModel* model = pane->model();
        QCOMPARE(uploadOf(model, tmp.path(), 30), QStringLiteral("uploaded"));
        QCOMPARE(uploadOf(model, tmp.path(), 20), QStringLiteral("uploading"));
        QCOMPARE(uploadOf(model, tmp.path(), 10), QStringLiteral("pending"));
        QCOMPARE(model->headerData(StepListModel::Upload, Qt::Horizontal).toString(), QStringLiteral("Upload"));
    }

    void paneForgetsTheWriterWhenItIsGone()
    {
        QTemporaryDir tmp;
        makeRoot(tmp.path());
        StepsPane pane;
        pane.setAutoRefreshInterval(0);
        QSignalSpy listed(&pane, &StepsPane::listed);
        {
            const shardscope::RootLock lock = shardscope::RootLock::acquire(tmp.path().toStdString(), {});
            pane.setSteps(shardscope::list_steps(tmp.path().toStdString()), tmp.path());
            QVERIFY(listed.wait(10000));
            QVERIFY(pane.lockText().startsWith(QStringLiteral("Being written by pid")));
        }
        // The job ended (its lock file went with it); reopening, or the next refresh, says so.
        listed.clear();
        pane.refresh();
        QVERIFY(listed.wait(10000));
        QVERIFY2(pane.lockText().isEmpty(), qPrintable(pane.lockText()));
    }
};

QTEST_MAIN(TestStepListModel)
#include "tst_steplistmodel.moc"
