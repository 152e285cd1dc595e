// ForeignTensorList: what goes in comes out through the views, field for field and
// chunk for chunk (a malformed chunk as read); dtype and file names are stored once; copies are
// independent; and a tensor costs a row, its name and its dimensions, not a heap block a field.
#include "core/checkpoint/foreign_summary.h"

#include <QTest>
#include <string>
#include <vector>

using namespace shardscope;

namespace {

std::vector<uint64_t> vec(std::span<const uint64_t> s)
{
    return {s.begin(), s.end()};
}

void compare(const ForeignTensorView& v, const ForeignTensor& t)
{
    QCOMPARE(std::string(v.name), t.name);
    QCOMPARE(std::string(v.dtype), t.dtype);
    QCOMPARE(vec(v.shape), t.shape);
    QCOMPARE(std::string(v.file), t.file);
    QCOMPARE(v.offset, t.offset);
    QCOMPARE(v.bytes, t.bytes);
    QCOMPARE(std::string(v.detail), t.detail);
    QCOMPARE(v.chunks.size(), t.chunks.size());
    for (std::size_t c = 0; c < t.chunks.size(); ++c) {
        const ForeignChunkView chunk = v.chunks[c];
        QCOMPARE(vec(chunk.offsets), t.chunks[c].offsets);
        QCOMPARE(vec(chunk.sizes), t.chunks[c].sizes);
        QCOMPARE(std::string(chunk.file), t.chunks[c].file);
        QCOMPARE(chunk.offset, t.chunks[c].offset);
        QCOMPARE(chunk.length, t.chunks[c].length);
    }
}

std::vector<ForeignTensor> sample()
{
    return {
        {.name = "model.layers.1.mlp.up_proj.weight",
         .dtype = "BF16",
         .shape = {11008, 4096},
         .file = "model-00002-of-00002.safetensors",
         .offset = 72,
         .bytes = 90177536},
        {.name = "model.embed_tokens.weight",
         .dtype = "BF16",
         .shape = {32000, 4096},
         .file = "model-00001-of-00002.safetensors",
         .offset = 8,
         .bytes = 262144000,
         .detail = "tied"},
        {.name = "w",
         .dtype = "float32",
         .shape = {4, 2},
         .file = "__0_0.distcp",
         .bytes = 32,
         .detail = "2 chunks",
         .chunks = {{.offsets = {0, 0}, .sizes = {2, 2}, .file = "__0_0.distcp", .offset = 0, .length = 16},
                    {.offsets = {2, 0}, .sizes = {2, 2}}}},
        {.name = "", .dtype = "", .shape = {}}, // an index's early row: nothing known but the name
        {.name = "model.layers.0.mlp.up_proj.weight",
         .dtype = "BF16",
         .shape = {11008, 4096},
         .file = "model-00002-of-00002.safetensors",
         .offset = 90177608,
         .bytes = 90177536},
    };
}

} // namespace

class TestForeignTensorList : public QObject {
    Q_OBJECT
private slots:
    void viewsGiveBackWhatWentIn()
    {
        const auto tensors = sample();
        ForeignTensorList list;
        QVERIFY(list.empty());
        for (const auto& t : tensors)
            list.push_back(t);
        QCOMPARE(list.size(), tensors.size());
        std::size_t i = 0;
        for (const ForeignTensorView v : list) // iteration and indexing agree
            compare(v, tensors[i++]);
        QCOMPARE(i, tensors.size());
        compare(list[2], tensors[2]);
        compare(list.back(), tensors.back());
        QCOMPARE(list[2].copy().chunks.size(), std::size_t(2));
        compare(list[2], list[2].copy());
    }

    void addWithoutAForeignTensor()
    {
        ForeignTensorList list;
        const std::vector<uint64_t> a{0, 0}, b{2, 2}, c{1, 2, 3};
        list.add_chunk({.offsets = a, .sizes = b, .file = "__1_0.distcp", .offset = 5, .length = 16});
        list.add_chunk({.offsets = c, .sizes = b}); // malformed: 3 offsets, 2 sizes
        list.add({.name = "x", .dtype = "float32", .shape = b, .bytes = 16}, 2);
        list.add({.name = "y", .dtype = "bytes", .detail = "pickled object"});
        QCOMPARE(list.size(), std::size_t(2));
        QCOMPARE(list[0].chunks.size(), std::size_t(2));
        QCOMPARE(vec(list[0].chunks[0].offsets), a);
        QCOMPARE(list[0].chunks[0].file, std::string_view("__1_0.distcp"));
        QCOMPARE(list[0].chunks[0].offset, uint64_t(5));
        QCOMPARE(vec(list[0].chunks[1].offsets), c); // stored as read: the verifier shows it whole
        QCOMPARE(vec(list[0].chunks[1].sizes), b);
        QVERIFY(list[0].chunks[1].file.empty());
        QVERIFY(list[1].chunks.empty());
        QCOMPARE(list[1].detail, std::string_view("pickled object"));
    }

    void dtypesAndFilesAreStoredOnce()
    {
        ForeignTensorList list;
        for (const auto& t : sample())
            list.push_back(t);
        // The same file name is one string: both views point at the same bytes.
        QCOMPARE(list[0].file.data(), list[4].file.data());
        QCOMPARE(list[0].dtype.data(), list[1].dtype.data());
        QVERIFY(list[1].file.data() != list[0].file.data());
    }

    void copiesAreIndependent()
    {
        ForeignTensorList list;
        for (const auto& t : sample())
            list.push_back(t);
        ForeignTensorList copy = list;
        list.clear();
        QVERIFY(list.empty());
        const auto tensors = sample();
        for (std::size_t i = 0; i < tensors.size(); ++i)
            compare(copy[i], tensors[i]);
        copy.push_back(ForeignTensor{.name = "new", .dtype = "BF16", .file = "model-00001-of-00002.safetensors"});
        QCOMPARE(copy.back().file, std::string_view("model-00001-of-00002.safetensors"));
        QCOMPARE(copy.back().file.data(), copy[1].file.data()); // the copy's interning still works
    }

    // An MoE-like listing: 100,000 tensors with 40-odd-byte names and 2-D shapes in 200 files
    // take a 64-byte row, the name and 16 bytes of shape each (about 125 bytes), where a vector
    // of ForeignTensor took ~370.
    void aTensorCostsItsRowNameAndShape()
    {
        ForeignTensorList list;
        std::size_t name_bytes = 0;
        constexpr std::size_t n = 100000;
        for (std::size_t i = 0; i < n; ++i) {
            const std::string name = "model.layers." + std::to_string(i / 500) + ".mlp.experts." +
                std::to_string(i % 500) + ".down_proj.weight";
            name_bytes += name.size();
            const std::string file = "model-" + std::to_string(i / 500) + "-of-00200.safetensors";
            const std::vector<uint64_t> shape{2048, 7168};
            list.add({.name = name, .dtype = "BF16", .shape = shape, .file = file, .offset = i, .bytes = 8});
        }
        const double per_tensor = double(list.memory_bytes()) / double(n);
        qInfo("%.1f bytes a tensor (names %.1f)", per_tensor, double(name_bytes) / double(n));
        QVERIFY2(per_tensor < 64 + 2.0 * double(name_bytes) / double(n) + 2 * 16 + 8,
                 qPrintable(QString::number(per_tensor)));
        QVERIFY(per_tensor < 200);
    }
};

QTEST_GUILESS_MAIN(TestForeignTensorList)
#include "tst_foreign_tensor_list.moc"
