#include "widgets/models/shardtablemodel.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTest>

using namespace shardwidgets;
using shardscope::ShardStatus;

class TestShardTableModel : public QObject {
    Q_OBJECT

    static shardscope::Manifest manifest(int ranks)
    {
        shardscope::Manifest m;
        m.world_size = ranks;
        for (int r = 0; r < ranks; ++r)
            m.shards.push_back({r, "rank" + std::to_string(r) + ".safetensors", std::string(64, char('a' + r)), "",
                                uint64_t(1000 + r), uint64_t(r * 100), 100});
        m.param_numel_total = uint64_t(ranks) * 100;
        return m;
    }

private slots:
    void testerSeesEveryChange()
    {
        ShardTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setManifest(manifest(5));
        QCOMPARE(model.rowCount(), 5);
        QCOMPARE(model.columnCount(), int(ShardTableModel::ColumnCount));
        model.setShardPercent(2, 40);
        shardscope::ShardCheck check{2, "rank2.safetensors", 1002, 1002, ShardStatus::hash_mismatch, "ff", "corrupt"};
        model.setShardResult(2, check);
        model.setShardPercent(99, 10); // out of range: ignored
        model.setManifest(manifest(3));
        QCOMPARE(model.rowCount(), 3);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    // A truncated shard's row shows what is on disk beside what the manifest records.
    void truncatedShardShowsItsRealSize()
    {
        ShardTableModel model;
        model.setManifest(manifest(2));
        shardscope::ShardCheck check{1, "rank1.safetensors", 1001, 10, ShardStatus::size_mismatch, "", "truncated"};
        model.setShardResult(1, check);
        QCOMPARE(model.index(1, ShardTableModel::Bytes).data().toString(), QStringLiteral("10 B of 1001 B"));
        QCOMPARE(model.index(0, ShardTableModel::Bytes).data().toString(), QStringLiteral("1000 B"));
    }

    void foreignFilesFromChecks()
    {
        ShardTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        std::vector<shardscope::ShardCheck> checks = {
            {-1, "model-00001-of-00002.safetensors", 100, 100, ShardStatus::ok, {}, {}},
            {-1, "model-00002-of-00002.safetensors", 0, 0, ShardStatus::missing, {}, "missing"}};
        model.setChecks(checks);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.status(0), ShardStatus::ok);
        QCOMPARE(model.status(1), ShardStatus::missing);
        QCOMPARE(model.record(1).path, std::string("model-00002-of-00002.safetensors"));
        // No manifest: no parameter ranges or recorded digests; the last column is the detail.
        QVERIFY(!model.hasManifest());
        QCOMPARE(model.headerData(ShardTableModel::Sha256, Qt::Horizontal).toString(), QStringLiteral("Detail"));
        QCOMPARE(model.index(1, ShardTableModel::Sha256).data().toString(), QStringLiteral("missing"));
        QVERIFY(!model.index(0, ShardTableModel::Offset).data().isValid());
        // A format without ranks shows none: the internal -1 never reaches the screen.
        QCOMPARE(model.index(0, ShardTableModel::Rank).data().toString(), QStringLiteral("–"));
        model.setManifest(manifest(2));
        QVERIFY(model.hasManifest());
        QCOMPARE(model.headerData(ShardTableModel::Sha256, Qt::Horizontal).toString(), QStringLiteral("SHA-256"));
    }

    void statusFlowsPendingHashingResult()
    {
        ShardTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setManifest(manifest(3));
        QCOMPARE(model.status(1), ShardStatus::pending);
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        model.setShardPercent(1, 37);
        QCOMPARE(model.status(1), ShardStatus::hashing);
        QCOMPARE(changed.count(), 1);
        QVERIFY(model.index(1, ShardTableModel::Status).data().toString().contains(QStringLiteral("37")));

        shardscope::ShardCheck ok{1, "rank1.safetensors", 1001, 1001, ShardStatus::ok, "bb", ""};
        model.setShardResult(1, ok);
        QCOMPARE(model.status(1), ShardStatus::ok);
        model.setShardPercent(1, 80); // a late progress report must not undo the result
        QCOMPARE(model.status(1), ShardStatus::ok);
        QCOMPARE(model.index(1, ShardTableModel::Status).data().toString(), QStringLiteral("ok"));
        QVERIFY(!model.index(1, ShardTableModel::Status).data(Qt::DecorationRole).value<QIcon>().isNull());
    }

    void aCancelLeavesUnfinishedRowsNotChecked()
    {
        ShardTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setManifest(manifest(3));
        model.setShardResult(0, {0, "rank0.safetensors", 1000, 1000, ShardStatus::ok, "aa", ""});
        model.setShardPercent(1, 59);
        model.markUnchecked();
        QCOMPARE(model.status(0), ShardStatus::ok);
        for (const int row : {1, 2}) {
            QCOMPARE(model.status(row), ShardStatus::pending);
            QCOMPARE(model.index(row, ShardTableModel::Status).data().toString(),
                     QStringLiteral("not checked (cancelled)"));
        }
        model.setShardPercent(1, 70); // a late progress report from the cancelled job
        QCOMPARE(model.index(1, ShardTableModel::Status).data().toString(), QStringLiteral("not checked (cancelled)"));
        model.setManifest(manifest(3)); // a new verification
        QCOMPARE(model.index(1, ShardTableModel::Status).data().toString(), QStringLiteral("pending"));
    }

    void digestAbbreviatedButCopyable()
    {
        ShardTableModel model;
        model.setManifest(manifest(2));
        const QModelIndex sha = model.index(1, ShardTableModel::Sha256);
        QVERIFY(sha.data().toString().size() < 20);
        QCOMPARE(sha.data(ShardTableModel::FullValueRole).toString(), QString(64, QLatin1Char('b')));
        QVERIFY(sha.data(Qt::ToolTipRole).toString().contains(QString(64, QLatin1Char('b'))));
    }

    void sortsNumericallyAndFilters()
    {
        ShardTableModel model;
        auto m = manifest(12);
        model.setManifest(m);
        QSortFilterProxyModel proxy;
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        proxy.setSourceModel(&model);
        proxy.setSortRole(ShardTableModel::SortRole);
        proxy.sort(ShardTableModel::Bytes, Qt::DescendingOrder);
        QCOMPARE(proxy.index(0, ShardTableModel::Rank).data().toInt(), 11); // 1011 bytes, not "1011" < "1002"
        proxy.setFilterKeyColumn(-1);
        proxy.setFilterFixedString(QStringLiteral("rank10."));
        QCOMPARE(proxy.rowCount(), 1);
    }
};

QTEST_MAIN(TestShardTableModel)
#include "tst_shardtablemodel.moc"
