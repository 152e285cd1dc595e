// widgets/panels/tensorspanel with its models (TensorStatsModel, TensorPartsModel, each under
// QAbstractItemModelTester) and the histogram's geometry: a NaN planted on one rank shows up red,
// in the banner, and in the selected tensor's parts, all read off the GUI thread.

#include "core/inspect/content.h"
#include "core/run/demo.h"
#include "widgets/jobs/contentcontroller.h"
#include "widgets/models/tensorstatsmodel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/histogramgeometry.h"
#include "widgets/views/histogramview.h"

#include <QAbstractItemModelTester>
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
