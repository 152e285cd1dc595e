// widgets/panels/tensorspanel with its models (TensorStatsModel, TensorPartsModel, each under
// QAbstractItemModelTester) and the histogram's geometry: a NaN planted on one rank shows up red,
// in the banner, and in the selected tensor's parts, all read off the GUI thread; it sorts first
// and stands alone behind "Only tensors with problems".

#include "core/inspect/content.h"
#include "core/open/verify.h"
#include "core/report/verdict.h"
#include "core/run/demo.h"
#include "widgets/jobs/contentcontroller.h"
#include "widgets/models/tensorstatsmodel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/histogramgeometry.h"
#include "widgets/views/histogramview.h"
#include "widgets/style/statusstyle.h"
#include "megatron_dist_fixture.h"
#include "widgettestutil.h"
#include "zstd_dcp_fixture.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <limits>

using namespace shardwidgets;

class TestTensorsPanel : public QObject {
    Q_OBJECT

    static FailureBanner* banner(const TensorsPanel& p)
    {
        return p.findChild<FailureBanner*>(QStringLiteral("banner"));
    }
    static QTableView* table(const TensorsPanel& p) { return p.findChild<QTableView*>(QStringLiteral("tensorTable")); }
    static HistogramView* histogram(const TensorsPanel& p)
    {
        return p.findChild<HistogramView*>(QStringLiteral("histogram"));
    }
    static QSortFilterProxyModel* proxy(const TensorsPanel& p)
    {
        return qobject_cast<QSortFilterProxyModel*>(table(p)->model());
    }

    static QString writeCheckpoint(const QTemporaryDir& tmp, bool withNan)
    {
        auto states = shardscope::make_demo_state(9, 40'000, 4, shardscope::ParamDtype::BF16);
        if (withNan)
            states[2].exp_avg_sq[11] = std::numeric_limits<float>::quiet_NaN();
        shardscope::SaveOptions options;
        options.durable = false;
        options.tensors = shardscope::demo_tensor_layout(40'000);
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        shardscope::save_sharded(states, dir.toStdString(), 5, options);
        return dir;
    }

private slots:
    void histogramGeometry()
    {
        HistogramGeometry g;
        g.plot = QRectF(10, 20, 640, 100);
        g.bins = 64;
        g.maxCount = 50;
        QCOMPARE(g.binWidth(), 10.0);
        QCOMPARE(g.binAt(9.9), -1);
        QCOMPARE(g.binAt(10.0), 0);
        QCOMPARE(g.binAt(649.0), 64 - 1);
        QCOMPARE(g.binAt(650.0), -1);
        for (int b = 0; b < 64; ++b)
            QCOMPARE(g.binAt(g.barRect(b, 25).center().x()), b);
        QCOMPARE(g.barRect(3, 50).top(), 20.0); // the tallest bar fills the plot
        QCOMPARE(g.barRect(3, 25).height(), 50.0); // half the count, half the height
        QVERIFY(g.barRect(70, 1).isNull());
        // Axis labels 40 px wide: every 8 bins at 10 px a bin, every 16 in a 260 px plot.
        QCOMPARE(g.labelStep(40), 8);
        g.plot.setWidth(260);
        QCOMPARE(g.labelStep(40), 16);
    }

    void nanOnOneRankIsShown()
    {
        QTemporaryDir tmp;
        const QString dir = writeCheckpoint(tmp, true);
        TensorsPanel panel;
        QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester partsTester(panel.partsModel(),
                                             QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Bad);
        QVERIFY2(banner(panel)->title().contains(QStringLiteral("rank 2")), qPrintable(banner(panel)->title()));
        QCOMPARE(panel.model()->rowCount(), int(shardscope::demo_tensor_layout(40'000).size() * 4));

        // The tensor holding the NaN is selected: its NaN cell is red and its parts name rank 2.
        const QModelIndex current = proxy(panel)->mapToSource(table(panel)->currentIndex());
        const shardscope::TensorContent* tensor = panel.model()->tensorAt(current.row());
        QVERIFY(tensor);
        QCOMPARE(tensor->state, std::string("exp_avg_sq"));
        QCOMPARE(tensor->stats.nan, uint64_t(1));
        const QModelIndex nanCell = panel.model()->index(current.row(), TensorStatsModel::NonFinite);
        QCOMPARE(panel.model()->data(nanCell).toString(), QStringLiteral("1 NaN"));
        QVERIFY(panel.model()->data(nanCell, Qt::ForegroundRole).isValid());
        bool rankTwo = false;
        for (int row = 0; row < panel.partsModel()->rowCount(); ++row)
            if (panel.partsModel()->data(panel.partsModel()->index(row, TensorPartsModel::NonFinite)).toString() ==
                QStringLiteral("1 NaN"))
                rankTwo = panel.partsModel()->data(panel.partsModel()->index(row, TensorPartsModel::Rank)).toInt() == 2;
        QVERIFY(rankTwo);
        // The histogram under the mouse: exp_avg_sq of the demo state is about 5e-9, i.e. 2^-28.
        histogram(panel)->resize(640, 200);
        const HistogramGeometry hg = histogram(panel)->geometryFor(histogram(panel)->rect());
        const int bin = -28 - shardscope::kHistogramLowExponent;
        const QString said = histogram(panel)->describeAt(hg.barRect(bin, 1).center());
        QVERIFY2(said.startsWith(QStringLiteral("2^-28 ≤ |x| < 2^-27: ")), qPrintable(said));
        QCOMPARE(said.section(QStringLiteral(": "), 1)
                     .remove(QLatin1Char(','))
                     .section(QLatin1Char(' '), 0, 0)
                     .toULongLong(),
                 qulonglong(tensor->stats.histogram[std::size_t(bin)]));
        QVERIFY(tensor->stats.histogram[std::size_t(bin)] > 0);

        // Typing in the filter narrows the table live.
        QTest::keyClicks(panel.findChild<QLineEdit*>(QStringLiteral("tensorFilter")), QStringLiteral("head.weight"));
        QCOMPARE(proxy(panel)->rowCount(), 4);
    }

    // As a person would: the first click on "NaN / Inf" puts the NaN first, the check box leaves
    // only the tensors with problems (and says how many), long names are elided in the middle.
    void problemsComeFirstAndCanBeAlone()
    {
        QTemporaryDir tmp;
        const QString dir = writeCheckpoint(tmp, true);
        TensorsPanel panel;
        QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.resize(1400, 700);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QTableView* view = table(panel);
        const int all = panel.model()->rowCount();
        QCOMPARE(panel.model()->problemCount(), 1);

        QCOMPARE(view->textElideMode(), Qt::ElideMiddle);
        QHeaderView* header = view->horizontalHeader();
        QCOMPARE(proxy(panel)->headerData(1, Qt::Horizontal).toString(), QStringLiteral("NaN / Inf"));
        QCOMPARE(proxy(panel)->headerData(2, Qt::Horizontal).toString(), QStringLiteral("Zeros"));
        QCOMPARE(proxy(panel)->headerData(TensorStatsModel::Min, Qt::Horizontal).toString(),
                 QStringLiteral("Min (finite)"));
        // The health columns are in sight without scrolling.
        QVERIFY(header->sectionViewportPosition(TensorStatsModel::Zeros) +
                    header->sectionSize(TensorStatsModel::Zeros) <=
                view->viewport()->width());

        auto clickHeader = [&](int section) {
            const QPoint at(header->sectionViewportPosition(section) + header->sectionSize(section) / 2,
                            header->height() / 2);
            QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, at);
        };
        clickHeader(TensorStatsModel::NonFinite);
        QCOMPARE(header->sortIndicatorSection(), int(TensorStatsModel::NonFinite));
        QCOMPARE(header->sortIndicatorOrder(), Qt::DescendingOrder);
        const auto* first = panel.model()->tensorAt(proxy(panel)->mapToSource(proxy(panel)->index(0, 0)).row());
        QCOMPARE(first->stats.nan, uint64_t(1));
        clickHeader(TensorStatsModel::NonFinite); // the second click turns it round
        QCOMPARE(header->sortIndicatorOrder(), Qt::AscendingOrder);
        clickHeader(TensorStatsModel::Zeros);
        QCOMPARE(header->sortIndicatorOrder(), Qt::DescendingOrder);
        clickHeader(TensorStatsModel::Name); // names as Qt sorts them: A first
        QCOMPARE(header->sortIndicatorOrder(), Qt::AscendingOrder);

        auto* count = panel.findChild<QLabel*>(QStringLiteral("tensorCount"));
        QCOMPARE(count->text(), QStringLiteral("%1 tensors").arg(all));
        auto* only = panel.findChild<QCheckBox*>(QStringLiteral("onlyProblems"));
        QCOMPARE(only->text(), QStringLiteral("Only tensors with problems"));
        QTest::mouseClick(only, Qt::LeftButton, {}, QPoint(8, only->height() / 2));
        QVERIFY(only->isChecked());
        QCOMPARE(proxy(panel)->rowCount(), 1);
        QCOMPARE(panel.model()->tensorAt(proxy(panel)->mapToSource(proxy(panel)->index(0, 0)).row())->state,
                 std::string("exp_avg_sq"));
        QCOMPARE(count->text(), QStringLiteral("1 of %1 tensors").arg(all));
        // With a name that none of them has: none.
        QTest::keyClicks(panel.findChild<QLineEdit*>(QStringLiteral("tensorFilter")), QStringLiteral("head.weight"));
        QCOMPARE(proxy(panel)->rowCount(), 0);
        QCOMPARE(count->text(), QStringLiteral("0 of %1 tensors").arg(all));
        panel.findChild<QLineEdit*>(QStringLiteral("tensorFilter"))->clear();
        QTest::mouseClick(only, Qt::LeftButton, {}, QPoint(8, only->height() / 2));
        QCOMPARE(proxy(panel)->rowCount(), all);
        QCOMPARE(count->text(), QStringLiteral("%1 tensors").arg(all));
    }

    void healthyCheckpointIsGood()
    {
        QTemporaryDir tmp;
        const QString dir = writeCheckpoint(tmp, false);
        TensorsPanel panel;
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Good);
    }

    // Today's DCP layouts read in the app as the core reads them: items compressed through torch's
    // ZStandard extension, and a Megatron torch_dist root (mcore_data, integrity.json).
    void dcpLayoutsReadAsTheCoreReadsThem_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::newRow("zstd") << QStringLiteral("zstd");
        QTest::newRow("torch_dist") << QStringLiteral("torch_dist");
    }
    void dcpLayoutsReadAsTheCoreReadsThem()
    {
        QFETCH(QString, layout);
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.path().toStdString();
        if (layout == QStringLiteral("zstd"))
            fixtures::write_zstd_dcp(dir);
        else
            fixtures::write_torch_dist(dir);
        TensorsPanel panel;
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Good);
        const shardscope::ContentReport expected = shardscope::inspect_content(dir);
        QVERIFY(expected.ok());
        const auto& shown = panel.report()->tensors;
        QCOMPARE(shown.size(), std::size_t(2)); // model.weight [4, 6] from two ranks' chunks, model.bias
        QCOMPARE(shown.size(), expected.tensors.size());
        for (std::size_t t = 0; t < shown.size(); ++t) {
            QCOMPARE(shown[t].name, expected.tensors[t].name);
            QCOMPARE(shown[t].stats.numel, expected.tensors[t].stats.numel);
            QVERIFY(shown[t].stats.sum_squares == expected.tensors[t].stats.sum_squares);
        }
        QCOMPARE(shown[0].parts.size(), std::size_t(2));
    }

    // A shard that fails verification (a flipped byte, a truncated file): the one verdict names it,
    // and every tensor with values from it — and only those — is marked in the table and in its
    // parts, and the summary line counts them instead of reading as a plain success.
    void tensorsFromAFailedFileAreMarked_data()
    {
        QTest::addColumn<bool>("truncate");
        QTest::addColumn<int>("rank");
        QTest::newRow("hash mismatch") << false << 3;
        QTest::newRow("truncated") << true << 0;
    }
    void tensorsFromAFailedFileAreMarked()
    {
        QFETCH(bool, truncate);
        QFETCH(int, rank);
        QTemporaryDir tmp;
        const QString dir = writeCheckpoint(tmp, false);
        const std::string file = "rank" + std::to_string(rank) + ".safetensors";
        const std::filesystem::path path = std::filesystem::path(dir.toStdString()) / file;
        if (truncate)
            std::filesystem::resize_file(path, std::filesystem::file_size(path) * 2 / 3);
        else
            widgettest::flipByte(path);
        TensorsPanel panel;
        QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester partsTester(panel.partsModel(),
                                             QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.model()->fromFailedFileCount(), 0); // nothing is known about the bytes yet

        // What the main window does once the bytes are verified too.
        const shardscope::VerifyReport verify = shardscope::verify_checkpoint(std::filesystem::path(dir.toStdString()));
        const shardscope::ResumeVerdict verdict = shardscope::resume_verdict(verify, panel.report());
        QCOMPARE(verdict.failed_files, std::vector<std::string>{file});
        const auto shard = std::find_if(verify.shards.begin(), verify.shards.end(),
                                        [&](const shardscope::ShardCheck& s) { return s.path == file; });
        QVERIFY(shard != verify.shards.end());
        panel.showVerdict(verdict, false, &verify);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Bad);

        const TensorStatsModel& model = *panel.model();
        const QString why = QStringLiteral("%1, which failed verification (%2)")
                                .arg(QString::fromStdString(file), statusText(shard->status));
        int marked = 0, partly = 0;
        for (int row = 0; row < model.rowCount(); ++row) {
            const shardscope::TensorContent& t = *model.tensorAt(row);
            uint64_t fromFile = 0, held = 0, whole = 1;
            for (const auto& part : t.parts) {
                fromFile += part.rank == rank ? part.numel : 0;
                held += part.numel;
            }
            for (uint64_t d : t.shape)
                whole *= d;
            // A truncated file's header is invalid: its parts are not even listed, its elements unread.
            const bool expected = fromFile > 0 || held < whole;
            QCOMPARE(model.isFromFailedFile(row), expected);
            QCOMPARE(model.index(row, TensorStatsModel::Name).data(Qt::DecorationRole).isValid(), expected);
            QCOMPARE(model.index(row, TensorStatsModel::Mean).data(Qt::BackgroundRole).isValid(), expected);
            const QString tip = model.index(row, TensorStatsModel::Mean).data(Qt::ToolTipRole).toString();
            QCOMPARE(tip.contains(why), expected);
            QVERIFY2(!expected || tip.contains(QStringLiteral("not the saved values")), qPrintable(tip));
            if (expected && fromFile < whole) { // in part from it, or in part unread: says how much
                QVERIFY2(tip.contains(QStringLiteral("of its")), qPrintable(tip));
                ++partly;
            }
            marked += expected;
        }
        QVERIFY(marked > 0 && marked < model.rowCount());
        QVERIFY(partly > 0);
        QCOMPARE(model.fromFailedFileCount(), marked);

        // The summary line counts them and names the file; it does not read as a plain success.
        const QString summary = panel.findChild<QLabel*>(QStringLiteral("tensorSummary"))->text();
        QVERIFY2(summary.contains(
                     QStringLiteral("%1 of them %2 %3, which failed verification")
                         .arg(marked)
                         .arg(truncate ? QStringLiteral("lack the values in") : QStringLiteral("hold values from"))
                         .arg(QString::fromStdString(file))),
                 qPrintable(summary));
        QVERIFY(!banner(panel)->text().contains(QStringLiteral("finite")));

        // The page selects a marked tensor, whose failed part is marked in the parts table too.
        const QModelIndex current = proxy(panel)->mapToSource(table(panel)->currentIndex());
        QVERIFY(model.isFromFailedFile(current.row()));
        const TensorPartsModel& parts = *panel.partsModel();
        bool sawFailed = false;
        for (int row = 0; row < parts.rowCount(); ++row) {
            const bool failed = parts.index(row, TensorPartsModel::Rank).data().toInt() == rank;
            QCOMPARE(parts.index(row, TensorPartsModel::File).data(Qt::DecorationRole).isValid(), failed);
            sawFailed = sawFailed || failed;
        }
        QCOMPARE(sawFailed, !truncate); // a truncated file's parts are not listed at all

        // A verdict without failed files (the shard restored and verified again) takes the marks away.
        panel.showVerdict(shardscope::ResumeVerdict{}, false, nullptr);
        QCOMPARE(model.fromFailedFileCount(), 0);
        QVERIFY(!model.index(current.row(), TensorStatsModel::Name).data(Qt::DecorationRole).isValid());
        QVERIFY(!panel.findChild<QLabel*>(QStringLiteral("tensorSummary"))->text().contains(QStringLiteral("failed")));
    }

    void tensorNamesAreEscaped()
    {
        // A name from a file with a terminal escape and a C1 control in it: shown as \x1b and
        // \xc2\x85 in the table and over the histogram, never obeyed by whatever displays it.
        QTemporaryDir tmp;
        auto states = shardscope::make_demo_state(9, 4'000, 2, shardscope::ParamDtype::BF16);
        shardscope::SaveOptions options;
        options.durable = false;
        options.tensors = shardscope::demo_tensor_layout(4'000);
        options.tensors.front().name = "emb\x1b[2J\xc2\x85"
                                       "ed";
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        shardscope::save_sharded(states, dir.toStdString(), 5, options);
        TensorsPanel panel;
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        const QString escaped = QStringLiteral("emb\\x1b[2J\\xc2\\x85ed");
        QCOMPARE(panel.model()->index(0, TensorStatsModel::Name).data().toString(), escaped);
        QVERIFY(histogram(panel)->title().startsWith(escaped)); // the first tensor is selected
    }

    void unreadablePathSaysSo()
    {
        TensorsPanel panel;
        QSignalSpy finished(&panel, &TensorsPanel::scanFinished);
        panel.open(QStringLiteral("/nonexistent/checkpoint"));
        QVERIFY(finished.wait(10000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Bad);
        QVERIFY(banner(panel)->text().contains(QStringLiteral("/nonexistent/checkpoint")));
    }
};

QTEST_MAIN(TestTensorsPanel)
#include "tst_tensorspanel.moc"
