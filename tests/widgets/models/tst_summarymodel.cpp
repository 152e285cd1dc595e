#include "widgets/models/summarymodel.h"

#include <QAbstractItemModelTester>
#include <QTest>

using namespace shardwidgets;

class TestSummaryModel : public QObject {
    Q_OBJECT
private slots:
    void showsManifestAndTrainingState()
    {
        SummaryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        shardscope::Manifest m;
        m.world_size = 8;
        m.step = 1234;
        m.wall_clock_seconds = 4521;
        m.param_dtype = shardscope::ParamDtype::BF16;
        m.param_numel_total = 65536;
        m.shards.push_back({0, "rank0.safetensors", "", "", 1000, 0, 65536});
        m.training_state = {{"optimizer", {{"lr", 0.5}}}, {"rng", {{"state", std::vector<int>(100, 7)}}}};
        model.setCheckpoint(QStringLiteral("/ck/step-1234"), QStringLiteral("shardscope"), m);
        QVERIFY(model.rowCount() > 8);
        QCOMPARE(model.value(QStringLiteral("World size")), QStringLiteral("8"));
        QCOMPARE(model.value(QStringLiteral("Step")), QStringLiteral("1,234"));
        QCOMPARE(model.value(QStringLiteral("Parameter dtype")), QStringLiteral("BF16"));
        QCOMPARE(model.value(QStringLiteral("Wall clock")), QStringLiteral("1 h 15 min"));
        QCOMPARE(model.value(QStringLiteral("Training state: optimizer.lr")), QStringLiteral("0.5"));
        // Long values are shortened in the cell and whole in the tooltip.
        const QString rng = model.value(QStringLiteral("Training state: rng.state"));
        QVERIFY(rng.size() <= 60);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    void showsForeignSummaryAndTensors()
    {
        SummaryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        shardscope::VerifyReport report;
        report.format = "torch-dcp";
        report.foreign.emplace();
        report.foreign->rows = {{"format", "torch-dcp"}, {"ranks", "2"}, {"chunks", "3"}};
        report.foreign->tensors.push_back(
            {"model.w",
             "bfloat16",
             {8, 4},
             "__0_0.distcp",
             0,
             64,
             "2 chunks",
             {{{0, 0}, {4, 4}, "__0_0.distcp", 0, 32}, {{4, 0}, {4, 4}, "__1_0.distcp", 0, 32}}});
        report.foreign->tensors_total = 1;
        model.setForeign(QStringLiteral("/ck/dcp"), report);
        QCOMPARE(model.value(QStringLiteral("Format")), QStringLiteral("torch-dcp"));
        QCOMPARE(model.value(QStringLiteral("ranks")), QStringLiteral("2"));
        QVERIFY(model.value(QStringLiteral("Tensor model.w")).startsWith(QStringLiteral("bfloat16 [8, 4]")));
        // The row shows one line; its tooltip says where every chunk is stored.
        int row = 0;
        while (model.index(row, SummaryModel::Property).data().toString() != QStringLiteral("Tensor model.w"))
            ++row;
        QCOMPARE(model.index(row, SummaryModel::Value).data().toString(),
                 QStringLiteral("bfloat16 [8, 4] 64 B in 2 chunks"));
        const QString tip = model.index(row, SummaryModel::Value).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(QStringLiteral("at [4, 0] size [4, 4]: __1_0.distcp bytes [0, +32)")), qPrintable(tip));
        QVERIFY(model.value(QStringLiteral("World size")).isEmpty()); // no manifest rows
    }
};

QTEST_MAIN(TestSummaryModel)
#include "tst_summarymodel.moc"
