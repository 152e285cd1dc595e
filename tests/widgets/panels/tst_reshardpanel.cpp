// The reshard page driven as a person would: change the target world size and read the table and
// the totals (they must be core's plan_reshard), run a reshard in the background to the end and
// check the result verifies, cancel one and check it left no manifest, and find the preview in
// the exported report.

#include "widgets/export/exporter.h"
#include "widgets/jobs/reshardcontroller.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/models/reshardplanmodel.h"
#include "widgets/views/reshardview.h"
#include "widgets/style/format.h"
#include "widgettestutil.h"

#include "core/open/verify.h"

#include <QAbstractItemModelTester>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QTest>

using namespace shardwidgets;
namespace fs = std::filesystem;

class TestReshardPanel : public QObject {
    Q_OBJECT

    static void expectTableMatchesPlan(const ReshardPanel& panel, const shardscope::ReshardPlan& expected)
    {
        const ReshardPlanModel* model = panel.model();
        QCOMPARE(model->rowCount(), expected.target_world_size);
        for (int row = 0; row < model->rowCount(); ++row) {
            const auto& t = expected.targets[std::size_t(row)];
            auto raw = [&](int column) { return model->index(row, column).data(ReshardPlanModel::RawRole); };
            QCOMPARE(raw(ReshardPlanModel::Rank).toInt(), t.rank);
            QCOMPARE(raw(ReshardPlanModel::Elements).toULongLong(), t.numel);
            QCOMPARE(raw(ReshardPlanModel::Bytes).toULongLong(), t.bytes);
            QCOMPARE(raw(ReshardPlanModel::Sources).toInt(), int(t.runs.size()));
            QCOMPARE(raw(ReshardPlanModel::Staying).toULongLong(), t.bytes_staying);
            QCOMPARE(raw(ReshardPlanModel::Moving).toULongLong(), t.bytes - t.bytes_staying);
            // What the person reads names the source ranks.
            const QString sources = model->index(row, ReshardPlanModel::Sources).data().toString();
            for (const auto& run : t.runs)
                QVERIFY2(sources.contains(QStringLiteral("r%1").arg(run.source_rank)) || t.runs.size() > 4,
                         qPrintable(sources));
        }
        const auto& plan = *panel.plan();
        QCOMPARE(plan.bytes_read, expected.bytes_read);
        QCOMPARE(plan.bytes_written, expected.bytes_written);
        QCOMPARE(plan.bytes_staying, expected.bytes_staying);
        QCOMPARE(plan.bytes_moving, expected.bytes_moving);
        const QString totals = panel.totalsText();
        QVERIFY2(totals.contains(
                     QStringLiteral("%1 → %2 ranks").arg(expected.source_world_size).arg(expected.target_world_size)),
                 qPrintable(totals));
    }

private slots:
    void changingTheTargetReplans()
    {
        QTemporaryDir tmp;
        const auto manifest = widgettest::makeCheckpoint(tmp.path(), 4, 100003); // not divisible by 3 or 8
        ReshardPanel panel;
        panel.setInteractive(false);
        // Attached before any data: every reset of the plan table is checked.
        QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(panel.model()->rowCount(), 0);
        QVERIFY(!panel.reshardButton()->isEnabled());

        panel.setCheckpoint(tmp.path(), manifest);
        QCOMPARE(panel.targetWorldSize(), 8); // twice the world size until the user picks one
        expectTableMatchesPlan(panel, shardscope::plan_reshard(manifest, 8));
        QVERIFY(panel.reshardButton()->isEnabled());
        QVERIFY(panel.view()->hasPlan());

        // The person types a new world size into the control.
        QSpinBox* box = panel.targetBox();
        QSignalSpy changed(&panel, &ReshardPanel::targetChanged);
        box->setFocus();
        box->selectAll();
        QTest::keyClicks(box, QStringLiteral("3"));
        QCOMPARE(changed.count(), 1);
        QCOMPARE(panel.targetWorldSize(), 3);
        expectTableMatchesPlan(panel, shardscope::plan_reshard(manifest, 3));

        QTest::keyClick(box, Qt::Key_Down); // 2
        QTest::keyClick(box, Qt::Key_Down); // 1: everything lands on rank 0
        expectTableMatchesPlan(panel, shardscope::plan_reshard(manifest, 1));
        QCOMPARE(panel.model()->index(0, ReshardPlanModel::Sources).data(ReshardPlanModel::RawRole).toInt(), 4);

        panel.setTargetWorldSize(4); // same world size: nothing moves
        expectTableMatchesPlan(panel, shardscope::plan_reshard(manifest, 4));
        QCOMPARE(panel.plan()->bytes_moving, uint64_t(0));

        // A new checkpoint keeps the target the user chose.
        QTemporaryDir other;
        const auto two = widgettest::makeCheckpoint(other.path(), 2, 5000);
        panel.setCheckpoint(other.path(), two);
        QCOMPARE(panel.targetWorldSize(), 4);
        expectTableMatchesPlan(panel, shardscope::plan_reshard(two, 4));

        panel.clear();
        QCOMPARE(panel.model()->rowCount(), 0);
        QVERIFY(!panel.reshardButton()->isEnabled());
    }

    void sharesNeverRoundToNothing()
    {
        QCOMPARE(formatPercent(1, 8), QStringLiteral("12.5 %"));
        QCOMPARE(formatPercent(0, 8), QStringLiteral("0.0 %"));
        QCOMPARE(formatPercent(8, 8), QStringLiteral("100.0 %"));
        QCOMPARE(formatPercent(1, 3000), QStringLiteral("< 0.1 %"));
        QCOMPARE(formatPercent(2999, 3000), QStringLiteral("> 99.9 %"));
        QCOMPARE(formatPercent(3, 0), QStringLiteral("–"));
    }

    void aThousandRanksReadClearly()
    {
        // 1,024 -> 2,048 ranks: only rank 0 keeps a sliver on its own index.
        QTemporaryDir tmp;
        const auto manifest = widgettest::makeCheckpoint(tmp.path(), 1024, 200'000);
        ReshardPanel panel;
        panel.setInteractive(false);
        panel.setCheckpoint(tmp.path(), manifest);
        QCOMPARE(panel.targetWorldSize(), 2048);
        const auto& plan = *panel.plan();
        QVERIFY(plan.bytes_staying > 0 && plan.bytes_staying * 1000 < plan.bytes_written);
        // Staying is a sliver, not "0.0 %", and moving is not "100.0 %" beside it.
        QTextDocument totals;
        totals.setHtml(panel.totalsText());
        const QString text = totals.toPlainText();
        QVERIFY2(text.contains(QStringLiteral("(< 0.1 %)")) && text.contains(QStringLiteral("(> 99.9 %)")),
                 qPrintable(text));

        // The picture: the bar titles fit, and ranks are grouped so that ribbons are visible.
        ReshardView* view = panel.view();
        const QRect rect(0, 0, 1400, view->preferredHeight());
        const QFontMetricsF metrics(view->font());
        const ReshardGeometry g = view->geometryFor(rect, metrics);
        QVERIFY(g.left - 14 >= metrics.horizontalAdvance(QStringLiteral("After: 2048 ranks")));
        QVERIFY(g.rankGroup >= 8);
        const QString legend = view->legend(g.rankGroup);
        QVERIFY2(legend.contains(QStringLiteral("grouped by %1 ranks").arg(g.rankGroup)), qPrintable(legend));
        QVERIFY2(legend.contains(QStringLiteral("(> 99.9 %)")), qPrintable(legend));
        // Hovering a group's box names its ranks.
        const auto boxes = g.sourceBoxes(plan, [&] {
            std::vector<ReshardBox> slices;
            for (const auto& s : manifest.shards)
                slices.push_back({.rank = s.rank, .offset = s.param_shard_offset, .numel = s.param_shard_numel});
            return slices;
        }());
        view->resize(rect.size());
        const QString hover = view->describeAt(boxes[1].rect.center());
        QVERIFY2(hover.startsWith(QStringLiteral("Now: ranks %1–%2").arg(g.rankGroup).arg(2 * g.rankGroup - 1)),
                 qPrintable(hover));
    }

    void backgroundReshardVerifies()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("step-000042"));
        const auto manifest = widgettest::makeCheckpoint(source, 4, 300001);
        const QString destination = tmp.filePath(QStringLiteral("step-000042-ws3"));
        ReshardPanel panel;
        panel.setInteractive(false);
        panel.controller()->setDurable(false);
        panel.controller()->setThrottleInterval(10);
        panel.setCheckpoint(source, manifest);
        panel.setTargetWorldSize(3);
        QSignalSpy finished(&panel, &ReshardPanel::reshardFinished);
        QSignalSpy progress(panel.controller(), &ReshardController::progressChanged);
        QSignalSpy open(&panel, &ReshardPanel::openRequested);
        QString error;
        QVERIFY2(panel.startReshard(destination, &error), qPrintable(error));
        QVERIFY(panel.controller()->isRunning());
        QVERIFY(!panel.reshardButton()->isEnabled()); // one job at a time
        QVERIFY(!panel.targetBox()->isEnabled());
        QVERIFY(!panel.startReshard(tmp.filePath(QStringLiteral("again")), &error));
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.first().at(0).toBool(), true);
        QVERIFY(progress.count() >= 1);
        const auto last = progress.last();
        QCOMPARE(last.at(0).toULongLong(), last.at(1).toULongLong()); // ends at 100 %

        const shardscope::VerifyReport report =
            shardscope::verify_checkpoint(std::filesystem::path(destination.toStdString()));
        QVERIFY2(report.ok(), report.problems.empty() ? "cancelled" : report.problems.front().message.c_str());
        QCOMPARE(report.manifest->world_size, 3);
        QCOMPARE(report.manifest->param_numel_total, manifest.param_numel_total);
        QCOMPARE(report.manifest->step, manifest.step);

        // The result is offered: the button opens it.
        QVERIFY(panel.openResultButton()->isVisibleTo(&panel));
        QTest::mouseClick(panel.openResultButton(), Qt::LeftButton);
        QCOMPARE(open.count(), 1);
        QCOMPARE(open.first().at(0).toString(), QDir::cleanPath(destination));
        QVERIFY(panel.reshardButton()->isEnabled());
    }

    // A source that failed verification: Reshard… is disabled before any dialog, and says why;
    // opening the next checkpoint enables it again.
    void failedSourceDisablesReshard()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("step-7"));
        const auto manifest = widgettest::makeCheckpoint(source, 2, 1000);
        ReshardPanel panel;
        panel.setInteractive(false);
        panel.setCheckpoint(source, manifest);
        QVERIFY(panel.reshardButton()->isEnabled());
        panel.setSourceProblem(QStringLiteral("Corruption: rank 1's shard does not match its hash"));
        QVERIFY(!panel.reshardButton()->isEnabled());
        QVERIFY(panel.reshardButton()->toolTip().contains(QStringLiteral("rank 1's shard")));
        QString error;
        QVERIFY(!panel.startReshard(tmp.filePath(QStringLiteral("out")), &error));
        QVERIFY2(error.contains(QStringLiteral("failed verification")), qPrintable(error));
        QVERIFY(!QFileInfo::exists(tmp.filePath(QStringLiteral("out"))));
        panel.setCheckpoint(source, manifest);
        QVERIFY(panel.reshardButton()->isEnabled());
    }

    void cancelLeavesNoManifest()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("src"));
        const auto manifest = widgettest::makeCheckpoint(source, 4, 6u << 20); // ~84 MB: time to cancel
        ReshardPanel panel;
        panel.setInteractive(false);
        panel.controller()->setDurable(false);
        panel.controller()->setThrottleInterval(5);
        panel.setCheckpoint(source, manifest);
        panel.setTargetWorldSize(8);

        // At once: the cancel lands during the source verification.
        const QString first = tmp.filePath(QStringLiteral("out-now"));
        QSignalSpy finished(&panel, &ReshardPanel::reshardFinished);
        QVERIFY(panel.startReshard(first));
        panel.cancelReshard();
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.first().at(0).toBool(), false);
        QVERIFY(panel.controller()->outcome().cancelled);
        QVERIFY(!QFile::exists(QDir(first).filePath(QStringLiteral("manifest.json"))));

        // In the copy phase (past half of the progress, which counts verification first).
        const QString second = tmp.filePath(QStringLiteral("out-copying"));
        QSignalSpy progress(panel.controller(), &ReshardController::progressChanged);
        bool cancelledInCopy = false;
        connect(panel.controller(), &ReshardController::progressChanged, this, [&](quint64 done, quint64 total) {
            if (!cancelledInCopy && total > 0 && done * 2 > total) {
                cancelledInCopy = true;
                panel.cancelReshard();
            }
        });
        finished.clear();
        QVERIFY(panel.startReshard(second));
        QVERIFY(finished.wait(60000));
        qInfo("cancel during the copy %s", panel.controller()->outcome().cancelled ? "landed" : "came too late");
        if (panel.controller()->outcome().cancelled) {
            QVERIFY(!QFile::exists(QDir(second).filePath(QStringLiteral("manifest.json"))));
            // core removes the shards it completed and the .tmp files: nothing half-written stays.
            const QStringList left = QDir(second).entryList(QDir::Files);
            QVERIFY2(left.isEmpty(), qPrintable(left.join(QStringLiteral(", "))));
        } else { // the machine copied everything before the cancel arrived: then it must verify
            QVERIFY(shardscope::verify_checkpoint(std::filesystem::path(second.toStdString())).ok());
        }
        // The source is only read.
        QVERIFY(shardscope::verify_checkpoint(std::filesystem::path(source.toStdString())).ok());
    }

    void previewIsInTheReport()
    {
        QTemporaryDir tmp;
        const auto manifest = widgettest::makeCheckpoint(tmp.path(), 4, 20000);
        ReshardPanel panel;
        panel.resize(1200, 600);
        panel.setCheckpoint(tmp.path(), manifest);
        panel.setTargetWorldSize(6);
        const shardscope::VerifyReport report =
            shardscope::verify_checkpoint(std::filesystem::path(tmp.path().toStdString()));
        ReportSources sources;
        sources.checkpointPath = tmp.path();
        sources.report = &report;
        sources.reshardPlan = &*panel.plan();
        sources.reshardView = panel.view();

        const QString json = tmp.filePath(QStringLiteral("report.json"));
        QString error;
        QVERIFY2(Exporter::exportReport(json, sources, &error), qPrintable(error));
        QFile file(json);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject reshard =
            QJsonDocument::fromJson(file.readAll()).object().value(QStringLiteral("reshard")).toObject();
        const auto expected = shardscope::plan_reshard(manifest, 6);
        QCOMPARE(reshard.value(QStringLiteral("target_world_size")).toInt(), 6);
        QCOMPARE(reshard.value(QStringLiteral("targets")).toArray().size(), 6);
        QCOMPARE(qulonglong(reshard.value(QStringLiteral("bytes_moving")).toDouble()),
                 qulonglong(expected.bytes_moving));

        const QString md = tmp.filePath(QStringLiteral("report.md"));
        QVERIFY2(Exporter::exportReport(md, sources, &error), qPrintable(error));
        QFile mdFile(md);
        QVERIFY(mdFile.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(mdFile.readAll());
        QVERIFY(text.contains(QStringLiteral("## Reshard preview: 4 → 6 ranks")));
        QVERIFY(text.contains(QStringLiteral("![reshard preview](report-reshard.png)")));
        const QImage picture(tmp.filePath(QStringLiteral("report-reshard.png")));
        QVERIFY(!picture.isNull());
        QCOMPARE(picture.height(), panel.view()->preferredHeight());
    }
};

QTEST_MAIN(TestReshardPanel)
#include "tst_reshardpanel.moc"
