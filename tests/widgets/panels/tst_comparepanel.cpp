// widgets/panels/comparepanel with DiffModel (under QAbstractItemModelTester) and the relative
// change bar's scale: the same state at world sizes 4 and 8 compares identical; one master weight
// changed shows as the one changed row with its bar; tolerances from the fields; a bad tolerance
// or a B that is not a checkpoint is said in the banner. The comparison runs off the GUI thread.

#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "widgets/models/diffmodel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/relativechangedelegate.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

using namespace shardwidgets;

class TestComparePanel : public QObject {
    Q_OBJECT

    static FailureBanner* banner(const ComparePanel& p)
    {
        return p.findChild<FailureBanner*>(QStringLiteral("banner"));
    }
    static QAbstractItemModel* shown(const ComparePanel& p)
    {
        return p.findChild<QTableView*>(QStringLiteral("diffTable"))->model();
    }

    // The demo state at `world` ranks, with master element `changed` (if any) moved by 0.5.
    static QString save(const QTemporaryDir& tmp, const QString& name, int world, int64_t changed = -1)
    {
        auto states = shardscope::make_demo_state(2, 30'000, world, shardscope::ParamDtype::BF16);
        for (auto& s : states)
            if (changed >= 0 && uint64_t(changed) >= s.param_shard_offset &&
                uint64_t(changed) < s.param_shard_offset + s.numel())
                s.master[uint64_t(changed) - s.param_shard_offset] += 0.5f;
        shardscope::SaveOptions options;
        options.durable = false;
        options.tensors = shardscope::demo_tensor_layout(30'000);
        const QString dir = tmp.filePath(name);
        shardscope::save_sharded(states, dir.toStdString(), 5, options);
        return dir;
    }

private slots:
    void barScale()
    {
        QCOMPARE(relativeChangeFraction(-1), -1.0); // not compared: no bar
        QCOMPARE(relativeChangeFraction(0), 0.0);
        QCOMPARE(relativeChangeFraction(1e-8), 0.0);
        QCOMPARE(relativeChangeFraction(10), 1.0);
        QCOMPARE(relativeChangeFraction(INFINITY), 1.0);
        QVERIFY(std::abs(relativeChangeFraction(1e-3) - 5.0 / 9.0) < 1e-12); // one decade = 1/9
        QVERIFY(relativeChangeFraction(1e-4) < relativeChangeFraction(1e-3));
    }

    void identicalThenOneChange()
    {
        QTemporaryDir tmp;
        const QString four = save(tmp, QStringLiteral("w4"), 4), eight = save(tmp, QStringLiteral("w8"), 8);
        ComparePanel panel;
        QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &ComparePanel::compareFinished);
        panel.setBase(four);
        panel.compareWith(eight);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.takeFirst().at(0).toBool(), true);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Good);
        const int tensors = int(shardscope::demo_tensor_layout(30'000).size()) * 4;
        QCOMPARE(panel.model()->rowCount(), tensors);

        const QString changed = save(tmp, QStringLiteral("changed"), 2, 12'345);
        panel.compareWith(changed);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.takeFirst().at(0).toBool(), false);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Bad);
        QVERIFY2(banner(panel)->title().startsWith(QStringLiteral("1 of")), qPrintable(banner(panel)->title()));
        int changedRows = 0, row = -1;
        for (int r = 0; r < panel.model()->rowCount(); ++r)
            if (panel.model()->tensorAt(r)->status == shardscope::DiffStatus::changed) {
                ++changedRows;
                row = r;
            }
        QCOMPARE(changedRows, 1);
        QCOMPARE(panel.model()->index(row, DiffModel::State).data().toString(), QStringLiteral("master"));
        QCOMPARE(panel.model()->index(row, DiffModel::Changed).data(Qt::UserRole).toULongLong(), 1ull);
        QVERIFY(panel.model()->index(row, DiffModel::RelativeChange).data(DiffModel::RelativeChangeRole).toDouble() >
                0);
        QCOMPARE(panel.model()->index(0, DiffModel::RelativeChange).data(DiffModel::RelativeChangeRole).toDouble(),
                 0.0);

        // Only the tensors that differ: the one row.
        panel.findChild<QCheckBox*>(QStringLiteral("onlyDiffering"))->setChecked(true);
        QCOMPARE(shown(panel)->rowCount(), 1);

        // Within atol 0.6 the change is none.
        panel.findChild<QLineEdit*>(QStringLiteral("atol"))->setText(QStringLiteral("0.6"));
        panel.compareWith(changed);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.takeFirst().at(0).toBool(), true);
        QVERIFY(banner(panel)->title().contains(QStringLiteral("within the tolerance")));
        QCOMPARE(shown(panel)->rowCount(), 0);
    }

    void badInputSaysSo()
    {
        QTemporaryDir tmp;
        const QString four = save(tmp, QStringLiteral("w4"), 4);
        ComparePanel panel;
        panel.setBase(four);
        panel.findChild<QLineEdit*>(QStringLiteral("rtol"))->setText(QStringLiteral("-1"));
        panel.compareWith(four);
        QCOMPARE(banner(panel)->state(), FailureBanner::State::Bad); // said at once, nothing started
        QVERIFY(banner(panel)->title().contains(QStringLiteral("Tolerances")));

        panel.findChild<QLineEdit*>(QStringLiteral("rtol"))->clear();
        QSignalSpy finished(&panel, &ComparePanel::compareFinished);
        panel.compareWith(tmp.filePath(QStringLiteral("nothing-here")));
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.takeFirst().at(0).toBool(), false);
        QVERIFY2(banner(panel)->text().contains(QStringLiteral("nothing-here")), qPrintable(banner(panel)->text()));
        QCOMPARE(panel.model()->rowCount(), 0);
    }
};

QTEST_MAIN(TestComparePanel)
#include "tst_comparepanel.moc"
