// core/inspect: FP8 weights stored with DeepSeek-V3's 128x128 block scales (*_scale_inv). The
// statistics of such a weight are those of its dequantized values, checked against a float64
// reference decoded in this file from the same FP8 bytes and scales; scales of the wrong shape or
// dtype, or missing, are problems naming the file and tensor, and the weight falls back to raw.

#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/open/verify.h"
#include "content_fixtures.h"
#include "foreign_fixtures.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

const TensorContent* find(const ContentReport& report, const std::string& name)
{
    for (const auto& t : report.tensors)
        if (t.name == name)
            return &t;
    return nullptr;
}

std::vector<const Problem*> of_kind(const std::vector<Problem>& problems, ProblemKind kind)
{
    std::vector<const Problem*> out;
    for (const auto& p : problems)
        if (p.kind == kind)
            out.push_back(&p);
    return out;
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

// Statistics against a two-pass long double reference over `values`: counts and extremes exact,
// the sums to 1e-12 relative.
bool matches(const ValueStats& s, const std::vector<double>& values, QString& why)
{
    long double sum = 0, squares = 0;
    uint64_t finite = 0, nan = 0, zeros = 0, negatives = 0;
    double min = INFINITY, max = -INFINITY;
    for (double x : values) {
        if (std::isnan(x)) {
            ++nan;
            continue;
        }
        ++finite;
        sum += x;
        squares += (long double)x * x;
        zeros += x == 0;
        negatives += x < 0;
        min = std::min(min, x);
        max = std::max(max, x);
    }
    const long double mean = sum / finite;
    long double m2 = 0;
    for (double x : values)
        if (!std::isnan(x))
            m2 += (x - mean) * (x - mean);
    const long double std_dev = std::sqrt(m2 / finite), l2 = std::sqrt(squares);
    auto close = [](double actual, long double expected) {
        return std::abs((long double)actual - expected) <= 1e-12L * std::abs(expected);
    };
    why = QStringLiteral("numel %1/%2 nan %3/%4 min %5/%6 max %7/%8 mean %9/%10 std %11/%12")
              .arg(s.numel)
              .arg(values.size())
              .arg(s.nan)
              .arg(nan)
              .arg(s.min)
              .arg(min)
              .arg(s.max)
              .arg(max)
              .arg(s.mean, 0, 'g', 17)
              .arg(double(mean), 0, 'g', 17)
              .arg(s.std_dev(), 0, 'g', 17)
              .arg(double(std_dev), 0, 'g', 17);
    return s.numel == values.size() && s.nan == nan && s.finite == finite && s.zeros == zeros &&
        s.negatives == negatives && s.min == min && s.max == max && close(s.mean, mean) &&
        close(s.std_dev(), std_dev) && close(s.l2(), l2);
}

#define QVERIFY_STATS(stats, values)                                                                                   \
    do {                                                                                                               \
        QString why;                                                                                                   \
        QVERIFY2(matches(stats, values, why), qPrintable(why));                                                        \
    } while (false)

std::string f64_bytes(const std::vector<double>& values)
{
    return bytes_of(values);
}

} // namespace

class TestFp8Scales : public QObject {
    Q_OBJECT
private slots:
    // The decoder of the reference, at the values the OCP specification lists for E4M3.
    void referenceDecoderIsE4m3()
    {
        QCOMPARE(e4m3_reference(0x00), 0.0);
        QCOMPARE(e4m3_reference(0x38), 1.0); // 0.0111.000: 2^(7-7)
        QCOMPARE(e4m3_reference(0x7E), 448.0); // the largest finite: 1.75 * 2^8
        QCOMPARE(e4m3_reference(0x01), std::ldexp(1.0, -9)); // the smallest subnormal
        QCOMPARE(e4m3_reference(0x08), std::ldexp(1.0, -6)); // the smallest normal
        QCOMPARE(e4m3_reference(0xC4), -3.0); // 1.1000.100: -1.5 * 2
        QVERIFY(std::isnan(e4m3_reference(0x7F)) && std::isnan(e4m3_reference(0xFF)));
    }

    // One safetensors file: a weight whose shape is no multiple of 128 (blocks cut at the edges),
    // spanning several 16384-element scan blocks, with a NaN; the scales; a plain F32 tensor.
    void safetensorsWeightIsDequantized()
    {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "model.safetensors";
        const Fp8Weight w = make_fp8_weight(300, 200, 1, 300 * 200 - 7);
        auto entries = fp8_entries("layers.0.mlp.weight", w);
        entries.push_back({{.name = "norm.weight", .dtype = "F32", .shape = {2}}, bytes_of(std::vector<float>{1, 2})});
        write_safetensors(file, entries);

        const ContentReport r = inspect_content(file);
        const TensorContent* t = find(r, "layers.0.mlp.weight");
        QVERIFY(t);
        QVERIFY(t->scale >= 0);
        QCOMPARE(r.tensors[std::size_t(t->scale)].name, std::string("layers.0.mlp.weight_scale_inv"));
        QVERIFY_STATS(t->stats, w.values());
        QCOMPARE(t->stats.nan, uint64_t(1));
        // The scale tensor keeps statistics of its own; the NaN is the one problem.
        QVERIFY_STATS(find(r, "layers.0.mlp.weight_scale_inv")->stats,
                      std::vector<double>(w.scales.begin(), w.scales.end()));
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(r.problems[0].kind, ProblemKind::nonfinite_values);
        QVERIFY(of_kind(r.problems, ProblemKind::invalid_fp8_scale).empty());
        const nlohmann::json j = content_report_json(r);
        for (const auto& entry : j.at("tensors"))
            QCOMPARE(entry.contains("dequantized_by"), entry.at("name") == "layers.0.mlp.weight");
        QCOMPARE(j.at("tensors").at(0).at("dequantized_by").get<std::string>(),
                 std::string("layers.0.mlp.weight_scale_inv"));

        // Raw on request: the stored values, as before, and nothing says dequantized.
        ContentOptions raw;
        raw.raw_fp8 = true;
        const ContentReport rr = inspect_content(file, raw);
        QCOMPARE(find(rr, "layers.0.mlp.weight")->scale, -1);
        QVERIFY_STATS(find(rr, "layers.0.mlp.weight")->stats, w.values(true));
        QVERIFY(find(rr, "layers.0.mlp.weight")->stats.mean != t->stats.mean);
        QVERIFY(!content_report_json(rr).at("tensors").at(0).contains("dequantized_by"));

        // A glob that selects the weight brings its scales along; one that selects the scales
        // alone does not bring the weight.
        ContentOptions only;
        only.tensor_globs = {"*.mlp.weight"};
        const ContentReport ro = inspect_content(file, only);
        QCOMPARE(ro.tensors.size(), std::size_t(2));
        QVERIFY(find(ro, "layers.0.mlp.weight")->scale >= 0);
        QVERIFY_STATS(find(ro, "layers.0.mlp.weight")->stats, w.values());
        only.tensor_globs = {"*_scale_inv"};
        QCOMPARE(inspect_content(file, only).tensors.size(), std::size_t(1));
    }

    // An index whose weight and scales sit in different files.
    void indexPairsAcrossFiles()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight w = make_fp8_weight(129, 257, 2, 5);
        const auto entries = fp8_entries("proj.weight", w);
        write_safetensors(dir / "model-00001-of-00002.safetensors", {entries[0]});
        write_safetensors(dir / "model-00002-of-00002.safetensors", {entries[1]});
        std::ofstream(dir / "model.safetensors.index.json")
            << R"({"metadata": {}, "weight_map": {"proj.weight": "model-00001-of-00002.safetensors",
                 "proj.weight_scale_inv": "model-00002-of-00002.safetensors"}})";
        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("safetensors-index"));
        const TensorContent* t = find(r, "proj.weight");
        QVERIFY(t && t->scale >= 0);
        QVERIFY_STATS(t->stats, w.values());
    }

    // torch's Hugging Face storage per rank: the weight in two column chunks split at column 100,
    // inside a 128-column block, so each chunk's elements find their blocks from the chunk's box.
    void dcpHfChunksAreDequantized()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight w = make_fp8_weight(260, 200, 3, 261);
        std::string left, right;
        for (uint64_t r = 0; r < w.rows; ++r) {
            left += w.codes.substr(r * w.cols, 100);
            right += w.codes.substr(r * w.cols + 100, 100);
        }
        fixtures::write_file(
            dir / "sharded" / fixtures::dcp_hf_shard_name(0),
            fixtures::dcp_hf_shard(
                {{.fqn = "w.weight", .offsets = {0, 0}, .sizes = {260, 100}, .bytes = left, .dtype = "F8_E4M3"},
                 {.fqn = "w.weight_scale_inv",
                  .offsets = {0, 0},
                  .sizes = w.scale_shape(),
                  .bytes = bytes_of(w.scales)}}));
        fixtures::write_file(
            dir / "sharded" / fixtures::dcp_hf_shard_name(1),
            fixtures::dcp_hf_shard(
                {{.fqn = "w.weight", .offsets = {0, 100}, .sizes = {260, 100}, .bytes = right, .dtype = "F8_E4M3"}}));
        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("torch-dcp-hf"));
        const TensorContent* t = find(r, "w.weight");
        QVERIFY2(t && t->scale >= 0, r.problems.empty() ? "" : r.problems[0].message.c_str());
        QCOMPARE(t->parts.size(), std::size_t(2));
        QVERIFY_STATS(t->stats, w.values());
        // Each part is its chunk's elements dequantized.
        std::vector<double> left_values;
        const std::vector<double> all = w.values();
        for (uint64_t row = 0; row < w.rows; ++row)
            left_values.insert(left_values.end(), all.begin() + long(row * w.cols),
                               all.begin() + long(row * w.cols + 100));
        QVERIFY_STATS(t->part_stats[0], left_values);
    }

    // torch DCP: the weight in two row chunks (rows 0..99 and 100..199, the first split inside a
    // 128-row block), raw bytes in one .distcp file, the scales in another.
    void dcpChunksAreDequantized()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight w = make_fp8_weight(200, 130, 8, 150 * 130 + 3);
        const std::vector<fixtures::DcpTensorSpec> tensors = {
            {.fqn = "m.weight",
             .size = {200, 130},
             .chunks =
                 {{.offsets = {0, 0}, .sizes = {100, 130}, .file = "__0_0.distcp", .length = 13000},
                  {.offsets = {100, 0}, .sizes = {100, 130}, .file = "__0_0.distcp", .offset = 13000, .length = 13000}},
             .dtype = "float8_e4m3fn"},
            {.fqn = "m.weight_scale_inv",
             .size = w.scale_shape(),
             .chunks = {{.offsets = {0, 0}, .sizes = w.scale_shape(), .file = "__1_0.distcp", .length = 16}}}};
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        fixtures::write_file(dir / "__0_0.distcp", w.codes);
        fixtures::write_file(dir / "__1_0.distcp", bytes_of(w.scales));
        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("torch-dcp"));
        const TensorContent* t = find(r, "m.weight");
        QVERIFY2(t && t->scale >= 0, r.problems.empty() ? "" : r.problems[0].message.c_str());
        QCOMPARE(t->parts.size(), std::size_t(2));
        QVERIFY_STATS(t->stats, w.values());
        const std::vector<double> all = w.values();
        QVERIFY_STATS(t->part_stats[1], std::vector<double>(all.begin() + 13000, all.end()));
    }

    // Scales that cannot be used: each is one invalid_fp8_scale problem naming the file and both
    // tensors, and the weight's statistics are of its raw values.
    void unusableScalesFallBackToRaw_data()
    {
        QTest::addColumn<QString>("dtype");
        QTest::addColumn<QList<qulonglong>>("shape");
        QTest::addColumn<QString>("says");
        QTest::newRow("wrong shape") << QStringLiteral("F32") << QList<qulonglong>{2, 2}
                                     << QStringLiteral(
                                            "shape is [2, 2], and a weight of shape [300, 130] needs [3, 2]");
        QTest::newRow("transposed shape")
            << QStringLiteral("F32") << QList<qulonglong>{2, 3} << QStringLiteral("needs [3, 2]");
        QTest::newRow("wrong dtype") << QStringLiteral("BF16") << QList<qulonglong>{3, 2}
                                     << QStringLiteral("dtype is BF16, not F32");
    }

    void unusableScalesFallBackToRaw()
    {
        QFETCH(QString, dtype);
        QFETCH(QList<qulonglong>, shape);
        QFETCH(QString, says);
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "bad.safetensors";
        const Fp8Weight w = make_fp8_weight(300, 130, 4);
        write_safetensors(
            file, fp8_entries("a.weight", w, dtype.toStdString(), std::vector<uint64_t>(shape.begin(), shape.end())));
        const ContentReport r = inspect_content(file);
        const auto found = of_kind(r.problems, ProblemKind::invalid_fp8_scale);
        QCOMPARE(found.size(), std::size_t(1));
        const std::string& message = found[0]->message;
        QVERIFY2(contains(message, file.string()) && contains(message, "'a.weight'") &&
                     contains(message, "'a.weight_scale_inv'") && contains(message, says.toStdString()),
                 message.c_str());
        QCOMPARE(found[0]->path, std::string("bad.safetensors"));
        QVERIFY(!r.ok());
        QCOMPARE(find(r, "a.weight")->scale, -1);
        QVERIFY_STATS(find(r, "a.weight")->stats, w.values(true));
        // Raw on request: nothing is paired, so nothing is wrong.
        ContentOptions raw;
        raw.raw_fp8 = true;
        QVERIFY(inspect_content(file, raw).ok());
        // verify says the same from the header alone (the checkpoint is unusable as shipped).
        const VerifyReport v = verify_checkpoint(file);
        QCOMPARE(v.problems.size(), std::size_t(1));
        QCOMPARE(v.problems[0].kind, ProblemKind::invalid_fp8_scale);
        QCOMPARE(v.problems[0].path, std::string("bad.safetensors"));
        QVERIFY2(v.problems[0].message.starts_with(file.string() +
                                                   ": FP8 weight 'a.weight' cannot be dequantized by "
                                                   "'a.weight_scale_inv': ") &&
                     contains(v.problems[0].message, says.toStdString()),
                 v.problems[0].message.c_str());
        // ... and nothing about a pair that fits.
        write_safetensors(file, fp8_entries("a.weight", w));
        const VerifyReport good = verify_checkpoint(file);
        QVERIFY2(good.ok(), good.problems.empty() ? "" : good.problems[0].message.c_str());
    }

    // Blocks of 128x128 need a matrix: a 1-D FP8 weight with a partner is read raw, with a problem.
    void oneDimensionalWeightStaysRaw()
    {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "v.safetensors";
        const Fp8Weight w = make_fp8_weight(1, 300, 9);
        write_safetensors(file,
                          {{{.name = "v.weight", .dtype = "F8_E4M3", .shape = {300}}, w.codes},
                           {{.name = "v.weight_scale_inv", .dtype = "F32", .shape = {3}}, bytes_of(w.scales)}});
        const ContentReport r = inspect_content(file);
        const auto found = of_kind(r.problems, ProblemKind::invalid_fp8_scale);
        QCOMPARE(found.size(), std::size_t(1));
        QVERIFY2(contains(found[0]->message, "'v.weight'") &&
                     contains(found[0]->message, "shape is [300], and 128x128 blocks need two dimensions"),
                 found[0]->message.c_str());
        QVERIFY_STATS(find(r, "v.weight")->stats, w.values(true));
    }

    // Among weights that have their scales, one without is a problem; an FP8 checkpoint with no
    // block scales at all (per-tensor scaling, or none) is read raw as always.
    void missingPartner()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight a = make_fp8_weight(128, 128, 5), b = make_fp8_weight(64, 300, 6);
        auto entries = fp8_entries("a.weight", a);
        entries.push_back(fp8_entries("b.weight", b, "")[0]);
        write_safetensors(dir / "two.safetensors", entries);
        const ContentReport r = inspect_content(dir / "two.safetensors");
        const auto found = of_kind(r.problems, ProblemKind::invalid_fp8_scale);
        QCOMPARE(found.size(), std::size_t(1));
        QVERIFY2(contains(found[0]->message,
                          (dir / "two.safetensors").string() +
                              ": FP8 weight 'b.weight' has no "
                              "scale tensor 'b.weight_scale_inv'"),
                 found[0]->message.c_str());
        QVERIFY_STATS(find(r, "a.weight")->stats, a.values());
        QVERIFY_STATS(find(r, "b.weight")->stats, b.values(true));

        write_safetensors(dir / "plain.safetensors", {fp8_entries("b.weight", b, "")[0]});
        const ContentReport plain = inspect_content(dir / "plain.safetensors");
        QVERIFY(plain.ok());
        QVERIFY_STATS(find(plain, "b.weight")->stats, b.values(true));
    }

    // diff compares dequantized values: against an F64 file of the exact products nothing
    // changed; scales changed in one block change exactly that block's elements.
    void diffComparesDequantizedValues()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight w = make_fp8_weight(200, 150, 7, 17);
        write_safetensors(dir / "a.safetensors", fp8_entries("m.weight", w));
        // fp8 (4 significant bits) times binary32 (24): exact in binary64.
        write_safetensors(dir / "exact.safetensors",
                          {{{.name = "m.weight", .dtype = "F64", .shape = {200, 150}}, f64_bytes(w.values())}});
        Fp8Weight rescaled = w;
        rescaled.scales[1] *= 2; // block (0, 1): rows 0..127, columns 128..149
        write_safetensors(dir / "b.safetensors", fp8_entries("m.weight", rescaled));

        DiffReport d = diff_checkpoints(dir / "a.safetensors", dir / "exact.safetensors");
        const TensorDiff* t = &d.tensors[0];
        QCOMPARE(t->name, std::string("m.weight"));
        QCOMPARE(t->status, DiffStatus::dtype_changed);
        QCOMPARE(t->sums.changed, uint64_t(0));
        QCOMPARE(t->sums.max_abs_diff, 0.0);
        QCOMPARE(diff_report_json(d).at("tensors").at(0).at("dequantized_by_a").get<std::string>(),
                 std::string("m.weight_scale_inv"));

        d = diff_checkpoints(dir / "a.safetensors", dir / "b.safetensors");
        uint64_t block = 0; // the nonzero elements of block (0, 1): a zero times 2 is still 0
        std::optional<uint64_t> first;
        for (uint64_t r = 0; r < 128; ++r)
            for (uint64_t c = 128; c < 150; ++c)
                if ((w.codes[r * 150 + c] & 0x7F) != 0) {
                    ++block;
                    first = first.value_or(r * 150 + c);
                }
        QVERIFY(block > 2000); // of 128 * 22
        QCOMPARE(d.tensors[0].status, DiffStatus::changed);
        QCOMPARE(d.tensors[0].sums.changed, block);
        QCOMPARE(d.tensors[0].sums.first_changed, first);
        QCOMPARE(d.tensors[1].name, std::string("m.weight_scale_inv"));
        QCOMPARE(d.tensors[1].sums.changed, uint64_t(1));

        // Raw: the stored bytes are the same, only the scale tensor differs.
        d = diff_checkpoints(dir / "a.safetensors", dir / "b.safetensors", {.raw_fp8 = true});
        QCOMPARE(d.tensors[0].status, DiffStatus::identical);
        QCOMPARE(d.tensors[1].status, DiffStatus::changed);
    }
};

QTEST_GUILESS_MAIN(TestFp8Scales)
#include "tst_fp8_scales.moc"
