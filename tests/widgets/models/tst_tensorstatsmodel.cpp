// widgets/models/tensorstatsmodel under QAbstractItemModelTester, over a content report built in
// memory: the health columns beside the name that sort problems first, the honest "(finite)"
// headers, core's health checks as the model's problems and the whole name in the tooltip.

#include "core/inspect/content.h"
#include "widgets/models/tensorstatsmodel.h"

#include <QAbstractItemModelTester>
#include <QTest>
#include <limits>

using namespace shardwidgets;

class TestTensorStatsModel : public QObject {
    Q_OBJECT

    static shardscope::TensorContent tensor(std::string name, std::string state, std::vector<double> values)
    {
        shardscope::TensorContent t{.name = std::move(name), .state = std::move(state), .shape = {values.size()}};
        t.stats.add(values.data(), values.size());
        return t;
    }

    // Four tensors: a NaN, a negative second moment, all zeros (a warning only), healthy.
    static std::shared_ptr<shardscope::ContentReport> report()
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double inf = std::numeric_limits<double>::infinity();
        auto r = std::make_shared<shardscope::ContentReport>();
        r->format = "shardscope";
        r->tensors.push_back(tensor("layers.0.mlp.up_proj.weight", "exp_avg", {1.0, 2.0, 3.0}));
        r->tensors.push_back(tensor("layers.0.mlp.up_proj.weight", "exp_avg_sq", {1.0, -0.5, 4.0}));
        r->tensors.push_back(tensor("layers.0.bias", "param", {0.0, 0.0, 0.0, 0.0}));
        r->tensors.push_back(tensor("layers.1.mlp.up_proj.weight", "master", {nan, inf, -5.0, 7.0, 0.0}));
        return r;
    }

private slots:
    void headersSayWhatTheFiguresAre()
    {
        TensorStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        auto header = [&](int section, int role = Qt::DisplayRole) {
            return model.headerData(section, Qt::Horizontal, role);
        };
        // The health columns right after the name.
        QCOMPARE(header(0).toString(), QStringLiteral("Tensor"));
        QCOMPARE(header(1).toString(), QStringLiteral("NaN / Inf"));
        QCOMPARE(header(2).toString(), QStringLiteral("Zeros"));
        QCOMPARE(header(TensorStatsModel::Min).toString(), QStringLiteral("Min (finite)"));
        QCOMPARE(header(TensorStatsModel::Max).toString(), QStringLiteral("Max (finite)"));
        QCOMPARE(header(TensorStatsModel::Mean).toString(), QStringLiteral("Mean (finite)"));
        QCOMPARE(header(TensorStatsModel::Std).toString(), QStringLiteral("Std (finite)"));
        for (int section : {int(TensorStatsModel::Min), int(TensorStatsModel::Max), int(TensorStatsModel::Mean),
                            int(TensorStatsModel::Std)})
            QVERIFY2(header(section, Qt::ToolTipRole).toString().contains(QStringLiteral("NaN and ±Inf are left out")),
                     qPrintable(header(section, Qt::ToolTipRole).toString()));
        // Counts sort the most first on the first click; the rest as Qt does.
        QCOMPARE(header(TensorStatsModel::NonFinite, Qt::InitialSortOrderRole).toInt(), int(Qt::DescendingOrder));
        QCOMPARE(header(TensorStatsModel::Zeros, Qt::InitialSortOrderRole).toInt(), int(Qt::DescendingOrder));
        QVERIFY(!header(TensorStatsModel::Name, Qt::InitialSortOrderRole).isValid());

        TensorPartsModel parts;
        QCOMPARE(parts.headerData(TensorPartsModel::Min, Qt::Horizontal).toString(), QStringLiteral("Min (finite)"));
        QCOMPARE(parts.headerData(TensorPartsModel::Mean, Qt::Horizontal).toString(), QStringLiteral("Mean (finite)"));
        QCOMPARE(parts.headerData(TensorPartsModel::NonFinite, Qt::Horizontal, Qt::InitialSortOrderRole).toInt(),
                 int(Qt::DescendingOrder));
    }

    void problemsAreCoresHealthChecks()
    {
        TensorStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.problemCount(), 0);
        model.setReport(report());
        QCOMPARE(model.rowCount(), 4);
        QCOMPARE(model.hasProblem(0), false); // healthy
        QCOMPARE(model.hasProblem(1), true); // a negative second moment
        QCOMPARE(model.hasProblem(2), false); // all zeros: core's warning, not a problem
        QCOMPARE(model.hasProblem(3), true); // NaN and +Inf
        QCOMPARE(model.hasProblem(4), false);
        QCOMPARE(model.problemCount(), 2);

        // Figures of the finite values, in the columns their headers name.
        auto cell = [&](int row, int column, int role = Qt::DisplayRole) {
            return model.index(row, column).data(role);
        };
        QCOMPARE(cell(3, TensorStatsModel::NonFinite).toString(), QStringLiteral("1 NaN, 1 +Inf"));
        QCOMPARE(cell(3, TensorStatsModel::NonFinite, Qt::UserRole).toULongLong(), 2ull);
        QCOMPARE(cell(3, TensorStatsModel::Zeros, Qt::UserRole).toULongLong(), 1ull);
        QCOMPARE(cell(3, TensorStatsModel::Min).toString(), QStringLiteral("-5"));
        QCOMPARE(cell(3, TensorStatsModel::Max).toString(), QStringLiteral("7"));
        QCOMPARE(cell(3, TensorStatsModel::Mean).toString(), QStringLiteral("0.666667"));
        QCOMPARE(cell(2, TensorStatsModel::Zeros, Qt::UserRole).toULongLong(), 4ull);

        // The view elides names in the middle; the tooltip has the whole name and its state.
        const QString tip = cell(1, TensorStatsModel::Name, Qt::ToolTipRole).toString();
        QVERIFY2(tip.startsWith(QStringLiteral("layers.0.mlp.up_proj.weight [exp_avg_sq]\n")), qPrintable(tip));
        QVERIFY2(tip.contains(QStringLiteral("3 elements in 0 part(s)")), qPrintable(tip));

        model.clear();
        QCOMPARE(model.problemCount(), 0);
    }

    // A block-quantized FP8 weight read through its scales says so in its dtype cell, and names
    // the scale tensor in the tooltip; the same dtype read raw does not.
    void dequantizedFp8WeightsSaySo()
    {
        auto r = std::make_shared<shardscope::ContentReport>();
        r->tensors.push_back(tensor("q.weight", "", {0.5, -1.0}));
        r->tensors.back().type = shardscope::ElementType::F8_E4M3;
        r->tensors.back().scale = 1;
        r->tensors.push_back(tensor("q.weight_scale_inv", "", {0.25}));
        r->tensors.push_back(tensor("k.weight", "", {2.0}));
        r->tensors.back().type = shardscope::ElementType::F8_E4M3;
        TensorStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setReport(r);
        auto cell = [&](int row, int role) { return model.index(row, TensorStatsModel::Dtype).data(role).toString(); };
        QCOMPARE(cell(0, Qt::DisplayRole), QStringLiteral("F8_E4M3 × scale"));
        QVERIFY2(cell(0, Qt::ToolTipRole).startsWith(QStringLiteral("Dequantized by q.weight_scale_inv")),
                 qPrintable(cell(0, Qt::ToolTipRole)));
        QCOMPARE(cell(1, Qt::DisplayRole), QStringLiteral("F32"));
        QCOMPARE(cell(2, Qt::DisplayRole), QStringLiteral("F8_E4M3"));
        QVERIFY(cell(2, Qt::ToolTipRole).isEmpty());
    }

    // DeepSpeed ZeRO: an assembled parameter and moment say so in the State column; the flat
    // partition they are read from is no problem and its NaN count (padding) is not red.
    void zeroRowsSayWhatTheyAre()
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        auto r = std::make_shared<shardscope::ContentReport>();
        r->format = "deepspeed";
        r->tensors.push_back(tensor("optimizer_state_dict.fp32_flat_groups.0", "", {1.0, 2.0, nan}));
        r->tensors.back().zero_partition = true;
        r->tensors.push_back(tensor("up.weight", "", {1.0, 2.0}));
        r->tensors.back().assembled = true;
        r->tensors.push_back(tensor("up.weight", "exp_avg", {0.1, 0.2}));
        r->tensors.back().assembled = true;
        TensorStatsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setReport(r);
        auto cell = [&](int row, int column, int role = Qt::DisplayRole) {
            return model.index(row, column).data(role);
        };
        QCOMPARE(cell(0, TensorStatsModel::State).toString(), QStringLiteral("ZeRO partition"));
        QCOMPARE(cell(1, TensorStatsModel::State).toString(), QStringLiteral("assembled"));
        QCOMPARE(cell(2, TensorStatsModel::State).toString(), QStringLiteral("exp_avg, assembled"));
        QCOMPARE(cell(0, TensorStatsModel::NonFinite).toString(), QStringLiteral("1 NaN"));
        QVERIFY(!cell(0, TensorStatsModel::NonFinite, Qt::ForegroundRole).isValid());
        QVERIFY(cell(0, TensorStatsModel::NonFinite, Qt::ToolTipRole).toString().contains(QStringLiteral("padding")));
        QCOMPARE(model.hasProblem(0), false);
        QCOMPARE(model.problemCount(), 0);
    }

    // A part that is a box of its tensor (a DCP chunk, a tensor-parallel slice) says where it lies.
    void boxedPartsSayWhereTheyLie()
    {
        shardscope::TensorContent t{.name = "w", .type = shardscope::ElementType::BF16, .shape = {96, 32}};
        t.parts.push_back({.rank = 0,
                           .file = "mp_rank_00/model_optim_rng.pt",
                           .numel = 768,
                           .box_offsets = {48, 0},
                           .box_sizes = {24, 32}});
        t.parts.push_back({.rank = 1, .file = "plain.pt", .numel = 10});
        t.part_stats.resize(2);
        TensorPartsModel parts;
        parts.setTensor(&t);
        QCOMPARE(parts.index(0, TensorPartsModel::Elements).data(Qt::ToolTipRole).toString(),
                 QStringLiteral("Its place in the tensor: [48:72, 0:32]"));
        QVERIFY(parts.index(1, TensorPartsModel::Elements).data(Qt::ToolTipRole).isNull());
    }
};

QTEST_MAIN(TestTensorStatsModel)
#include "tst_tensorstatsmodel.moc"
