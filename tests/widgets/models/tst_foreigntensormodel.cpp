#include "widgets/models/foreigntensormodel.h"

#include <QAbstractItemModelTester>
#include <QTest>

using namespace shardwidgets;

namespace {

shardscope::ForeignSummary smallSummary()
{
    shardscope::ForeignSummary s;
    s.tensors.push_back({.name = "model.embed.weight",
                         .dtype = "F16",
                         .shape = {8, 4},
                         .file = "a.safetensors",
                         .offset = 80,
                         .bytes = 64});
    s.tensors.push_back({.name = "model.Layers.0.attn.q",
                         .dtype = "BF16",
                         .shape = {4, 4},
                         .file = "b.safetensors",
                         .offset = 16,
                         .bytes = 32});
    s.tensors.push_back(
        {.name = "lm_head",
         .dtype = "float32",
         .shape = {2, 4},
         .file = "__0_0.distcp",
         .bytes = 32,
         .detail = "2 chunks",
         .chunks = {{.offsets = {0, 0}, .sizes = {1, 4}, .file = "__0_0.distcp", .offset = 0, .length = 16},
                    {.offsets = {1, 0}, .sizes = {1, 4}, .file = "__1_0.distcp", .offset = 0, .length = 16}}});
    s.tensors_total = 5; // two more than listed
    return s;
}

QStringList names(const ForeignTensorModel& model)
{
    QStringList out;
    for (int r = 0; r < model.rowCount(); ++r)
        out << model.index(r, ForeignTensorModel::Name).data().toString();
    return out;
}

} // namespace

class TestForeignTensorModel : public QObject {
    Q_OBJECT
private slots:
    void listsFiltersAndSorts()
    {
        ForeignTensorModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setNameFilter(QStringLiteral("layers")); // a filter set before data applies to it
        const auto summary = smallSummary();
        model.setSummary(&summary);
        QCOMPARE(names(model), QStringList{QStringLiteral("model.Layers.0.attn.q")}); // case-insensitive
        model.setNameFilter(QStringLiteral("layers.0.x"));
        QCOMPARE(model.rowCount(), 0);
        model.setNameFilter(QString());
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.listedCount(), std::size_t(3));
        QCOMPARE(model.totalCount(), uint64_t(5));
        // The core's order until sorted; a sort keeps the filter.
        QCOMPARE(model.index(0, ForeignTensorModel::Name).data().toString(), QStringLiteral("model.embed.weight"));
        model.sort(ForeignTensorModel::Name);
        QCOMPARE(names(model),
                 (QStringList{QStringLiteral("lm_head"), QStringLiteral("model.Layers.0.attn.q"),
                              QStringLiteral("model.embed.weight")}));
        model.sort(ForeignTensorModel::Bytes, Qt::DescendingOrder);
        QCOMPARE(model.index(0, ForeignTensorModel::Name).data().toString(), QStringLiteral("model.embed.weight"));
        model.setNameFilter(QStringLiteral("MODEL"));
        QCOMPARE(names(model),
                 (QStringList{QStringLiteral("model.embed.weight"), QStringLiteral("model.Layers.0.attn.q")}));
        // Text is formatted on demand from the core's fields.
        QCOMPARE(model.index(0, ForeignTensorModel::Shape).data().toString(), QStringLiteral("8 × 4"));
        QCOMPARE(model.index(0, ForeignTensorModel::Bytes).data(ForeignTensorModel::SortRole).toULongLong(), 64ull);
        QCOMPARE(model.index(0, ForeignTensorModel::File).data().toString(), QStringLiteral("a.safetensors"));
        QCOMPARE(model.tensorIndex(1), 1);
        model.clear();
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.nameFilter(), QStringLiteral("MODEL")); // kept for the next checkpoint
    }

    void chunksOfOneTensor()
    {
        ForeignChunkModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const auto summary = smallSummary();
        model.setTensor(summary.tensors[2]);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.index(1, ForeignChunkModel::Offsets).data().toString(), QStringLiteral("[1, 0]"));
        QCOMPARE(model.index(1, ForeignChunkModel::File).data().toString(), QStringLiteral("__1_0.distcp"));
        model.setTensor(std::nullopt);
        QCOMPARE(model.rowCount(), 0);
    }

    void nameContainsFoldsAsciiOnly()
    {
        QVERIFY(nameContains("model.Layers.0", "LAYERS"));
        QVERIFY(nameContains("abc", ""));
        QVERIFY(!nameContains("ab", "abc"));
        QVERIFY(nameContains("x\xc3\xa9y", "\xc3\xa9"));
        QVERIFY(!nameContains("x\xc3\x89y", "\xc3\xa9")); // É is not folded to é: bytes compare
    }
};

QTEST_GUILESS_MAIN(TestForeignTensorModel)
#include "tst_foreigntensormodel.moc"
