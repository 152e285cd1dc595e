// core/inspect: element decoding, statistics against a float64 (long double) reference, and
// inspect_content over native and safetensors checkpoints with NaN, Inf, negative second moments
// and mismatched parameters planted at known places.

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/rounding.h"
#include "core/inspect/content.h"
#include "core/open/verify.h"
#include "core/inspect/internal/halves.h"
#include "core/run/demo.h"
#include "core/util/volume.h"
#include "foreign_fixtures.h"
#include "content_fixtures.h"

#include <QTemporaryDir>
#include <QTest>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// The reference: two passes in long double over the finite values.
struct Reference {
    long double mean = 0, std = 0, l2 = 0;
    double min = 0, max = 0;
    uint64_t finite = 0;
};

Reference reference(const std::vector<double>& values)
{
    Reference r;
    long double sum = 0, squares = 0;
    bool first = true;
    for (double x : values)
        if (std::isfinite(x)) {
            sum += x;
            squares += (long double)x * x;
            ++r.finite;
            r.min = first ? x : std::min(r.min, x);
            r.max = first ? x : std::max(r.max, x);
            first = false;
        }
    r.mean = sum / r.finite;
    long double m2 = 0;
    for (double x : values)
        if (std::isfinite(x))
            m2 += (x - r.mean) * (x - r.mean);
    r.std = std::sqrt(m2 / r.finite);
    r.l2 = std::sqrt(squares);
    return r;
}

bool close(double actual, long double expected, double relative)
{
    return std::abs((long double)actual - expected) <= relative * std::abs(expected);
}

const TensorContent* find(const ContentReport& report, const std::string& name, const std::string& state = "")
{
    for (const auto& t : report.tensors)
        if (t.name == name && t.state == state)
            return &t;
    return nullptr;
}

bool has(const std::vector<Problem>& problems, ProblemKind kind, int rank = -2)
{
    for (const auto& p : problems)
        if (p.kind == kind && (rank == -2 || p.rank == rank))
            return true;
    return false;
}

} // namespace

class TestContent : public QObject {
    Q_OBJECT
private slots:
    void decodesEveryElementType()
    {
        double out[4];
        const uint16_t f16[] = {0x3c00, 0xc000, 0x7c00, 0x0001}; // 1, -2, +Inf, smallest subnormal
        decode_elements(ElementType::F16, reinterpret_cast<const std::byte*>(f16), 4, out);
        QCOMPARE(out[0], 1.0);
        QCOMPARE(out[1], -2.0);
        QVERIFY(std::isinf(out[2]) && out[2] > 0);
        QCOMPARE(out[3], std::ldexp(1.0, -24));
        const uint16_t bf16[] = {0x3f80, 0x7fc0};
        decode_elements(ElementType::BF16, reinterpret_cast<const std::byte*>(bf16), 2, out);
        QCOMPARE(out[0], 1.0);
        QVERIFY(std::isnan(out[1]));
        // F8 E4M3 (no infinities): 0x7e is the largest finite, 448; 0x7f is NaN; 0x01 is 2^-9.
        const uint8_t e4m3[] = {0x7e, 0x7f, 0x01, 0xb8};
        decode_elements(ElementType::F8_E4M3, reinterpret_cast<const std::byte*>(e4m3), 4, out);
        QCOMPARE(out[0], 448.0);
        QVERIFY(std::isnan(out[1]));
        QCOMPARE(out[2], std::ldexp(1.0, -9));
        QCOMPARE(out[3], -1.0);
        // F8 E5M2: 0x7b is 57344, 0x7c is +Inf, 0x7d NaN, 0x3c is 1.
        const uint8_t e5m2[] = {0x7b, 0x7c, 0x7d, 0x3c};
        decode_elements(ElementType::F8_E5M2, reinterpret_cast<const std::byte*>(e5m2), 4, out);
        QCOMPARE(out[0], 57344.0);
        QVERIFY(std::isinf(out[1]));
        QVERIFY(std::isnan(out[2]));
        QCOMPARE(out[3], 1.0);
        const int16_t i16[] = {-32768, 7};
        decode_elements(ElementType::I16, reinterpret_cast<const std::byte*>(i16), 2, out);
        QCOMPARE(out[0], -32768.0);
        QCOMPARE(out[1], 7.0);
        const uint8_t flags[] = {0, 3};
        decode_elements(ElementType::BOOL, reinterpret_cast<const std::byte*>(flags), 2, out);
        QCOMPARE(out[0], 0.0);
        QCOMPARE(out[1], 1.0);
        QCOMPARE(element_type_from_safetensors("F8_E5M2"), std::optional(ElementType::F8_E5M2));
        QVERIFY(!element_type_from_safetensors("F4"));
    }

    // The fused binary32 kernels (F32, BF16 read as bits; F16 and F8 through them) against the
    // double path over the same values: counts, min, max, abs_max (with the sign of a zero) and
    // the histogram exactly; mean, sum of squares and m2 to rounding. Random bit patterns bring
    // NaN, infinities, subnormals and both zeros; sizes cover partial vectors and several blocks.
    void fusedKernelsEqualTheDoublePath()
    {
        std::mt19937_64 rng(1234);
        for (const ElementType type : {ElementType::F32, ElementType::BF16, ElementType::F16, ElementType::F8_E4M3}) {
            for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(17), std::size_t(1000),
                                        std::size_t(16384), std::size_t(40'000)}) {
                for (int pattern = 0; pattern < 4; ++pattern) {
                    const std::size_t size = element_size(type);
                    std::vector<std::byte> bytes(n * size);
                    for (std::size_t i = 0; i < n; ++i) {
                        uint32_t bits = uint32_t(rng());
                        if (pattern == 1) // finite values around a large mean
                            bits = std::bit_cast<uint32_t>(1e4f + float(rng() % 1000) * 1e-3f);
                        if (pattern == 2) // zeros of both signs among small values
                            bits = rng() % 3 == 0 ? (rng() % 2 ? 0x80000000u : 0u)
                                                  : std::bit_cast<uint32_t>(float(int(rng() % 200) - 100) * 0.5f);
                        if (pattern == 3 && type != ElementType::F8_E4M3) // finite only: the fast path whole
                            bits = std::bit_cast<uint32_t>(float(int64_t(rng() % 2'000'001) - 1'000'000) * 1e-6f);
                        if (type == ElementType::F32)
                            std::memcpy(&bytes[i * 4], &bits, 4);
                        else if (type == ElementType::BF16 || type == ElementType::F16) {
                            const uint16_t half = type == ElementType::BF16 ? uint16_t(bits >> 16)
                                                                            : float_to_f16(std::bit_cast<float>(bits));
                            std::memcpy(&bytes[i * 2], pattern == 0 ? reinterpret_cast<const uint16_t*>(&bits) : &half,
                                        2);
                        } else
                            bytes[i] = std::byte(bits & 0xff);
                    }
                    ValueStats fused;
                    accumulate_elements(type, bytes.data(), n, fused);
                    std::vector<double> values(n);
                    decode_elements(type, bytes.data(), n, values.data());
                    ValueStats reference;
                    for (std::size_t at = 0; at < n; at += 16384) // the double path in the scan's blocks
                        reference.add(values.data() + at, std::min<std::size_t>(16384, n - at));
                    const std::string what = std::string(to_string(type)) + " n=" + std::to_string(n) + " pattern " +
                        std::to_string(pattern);
                    QVERIFY2(fused.numel == reference.numel && fused.nan == reference.nan &&
                                 fused.posinf == reference.posinf && fused.neginf == reference.neginf &&
                                 fused.zeros == reference.zeros && fused.negatives == reference.negatives &&
                                 fused.finite == reference.finite,
                             what.c_str());
                    QVERIFY2(fused.histogram == reference.histogram, what.c_str());
                    QVERIFY2(std::bit_cast<uint64_t>(fused.min) == std::bit_cast<uint64_t>(reference.min) &&
                                 std::bit_cast<uint64_t>(fused.max) == std::bit_cast<uint64_t>(reference.max) &&
                                 fused.abs_max == reference.abs_max,
                             what.c_str());
                    auto near = [](double a, double b, double tolerance) {
                        return std::abs(a - b) <= tolerance * std::max({std::abs(a), std::abs(b), 1e-300});
                    };
                    QVERIFY2(near(fused.mean, reference.mean, 1e-12) &&
                                 near(fused.sum_squares, reference.sum_squares, 1e-12) &&
                                 (near(fused.m2, reference.m2, 1e-9) || std::abs(fused.m2 - reference.m2) < 1e-300),
                             what.c_str());
                }
            }
        }
    }

    // Mean and std against long double to 1e-9 relative, including values far from zero (a
    // naive sum of squares loses all digits of the std there), whatever the block and part split.
    void statsMatchTheFloat64Reference()
    {
        std::mt19937_64 rng(42);
        std::normal_distribution<double> noise(0.0, 1e-3);
        std::vector<double> values(300'001);
        for (auto& v : values)
            v = 1e4 + noise(rng);
        values[17] = std::numeric_limits<double>::quiet_NaN();
        values[18] = std::numeric_limits<double>::infinity();
        values[19] = -std::numeric_limits<double>::infinity();
        values[20] = 0.0;
        ValueStats whole;
        whole.add(values.data(), values.size());
        const Reference ref = reference(values);
        QCOMPARE(whole.numel, uint64_t(values.size()));
        QCOMPARE(whole.nan, uint64_t(1));
        QCOMPARE(whole.posinf, uint64_t(1));
        QCOMPARE(whole.neginf, uint64_t(1));
        QCOMPARE(whole.zeros, uint64_t(1));
        QCOMPARE(whole.finite, ref.finite);
        QCOMPARE(whole.min, ref.min);
        QCOMPARE(whole.max, ref.max);
        QVERIFY2(close(whole.mean, ref.mean, 1e-12), std::to_string(whole.mean).c_str());
        QVERIFY2(close(whole.std_dev(), ref.std, 1e-9), std::to_string(whole.std_dev()).c_str());
        QVERIFY(close(whole.l2(), ref.l2, 1e-12));

        // Parts of odd sizes, merged, give the same figures.
        ValueStats merged;
        for (std::size_t at = 0; at < values.size();) {
            const std::size_t n = std::min<std::size_t>(values.size() - at, 1 + (at * 7919) % 40'000);
            ValueStats part;
            part.add(values.data() + at, n);
            merged.merge(part);
            at += n;
        }
        QCOMPARE(merged.finite, whole.finite);
        QVERIFY(close(merged.mean, ref.mean, 1e-12));
        QVERIFY(close(merged.std_dev(), ref.std, 1e-9));
    }

    void histogramBinsByLog2()
    {
        const double values[] = {1.0, 1.5, -1.9, 0.25, std::ldexp(1.0, -70), 1e30, 0.0};
        ValueStats s;
        s.add(values, std::size(values));
        const int one = 0 - kHistogramLowExponent; // floor(log2 1) = 0
        QCOMPARE(s.histogram[one], uint64_t(3)); // 1, 1.5, -1.9
        QCOMPARE(s.histogram[one - 2], uint64_t(1)); // 0.25
        QCOMPARE(s.histogram[0], uint64_t(1)); // 2^-70: below the range, first bin
        QCOMPARE(s.histogram[kHistogramBins - 1], uint64_t(1)); // 1e30: above, last bin
        QCOMPARE(s.zeros, uint64_t(1)); // zeros are counted apart
    }

    // A native checkpoint: each model tensor per state, whole and per rank, equal to the reference
    // over the saved vectors; the same state saved at another world size gives the same figures.
    // count_unrounded's lane-parallel conversions against dtype.cpp's float_to_f16 and
    // float_to_bf16: every upper half of a binary32 with the low halves where rounding turns
    // (ties with even and odd kept bits, either side of them), and random patterns, so NaN,
    // infinities, overflow to infinity, F16 subnormals and both zeros all occur; about a third of
    // the parameters are then changed, and the count must be the scalar count of mismatches.
    void roundingCheckEqualsTheConversion()
    {
        // First the lane-parallel F16 decoder, over all 65536 halves (and 5 more: a partial vector).
        std::vector<uint16_t> halves(65541);
        for (std::size_t h = 0; h < halves.size(); ++h)
            halves[h] = static_cast<uint16_t>(h * 40503u); // a permutation of 0..65535 first
        std::vector<double> decoded(halves.size());
        decode_elements(ElementType::F16, reinterpret_cast<const std::byte*>(halves.data()), halves.size(),
                        decoded.data());
        for (std::size_t h = 0; h < halves.size(); ++h)
            if (std::bit_cast<uint64_t>(decoded[h]) != std::bit_cast<uint64_t>(double(f16_to_float(halves[h])))) {
                if (!std::isnan(decoded[h]) || !std::isnan(f16_to_float(halves[h])))
                    QFAIL(("F16 " + std::to_string(halves[h]) + " decodes to " + std::to_string(decoded[h])).c_str());
            }

        std::vector<uint32_t> masters;
        for (uint32_t high = 0; high < 65536; ++high)
            for (const uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
                masters.push_back(high << 16 | low);
        std::mt19937 rng(99);
        for (int i = 0; i < 400'000; ++i)
            masters.push_back(rng());
        const std::size_t n = masters.size() - 3; // not a whole number of vectors
        for (const ElementType type : {ElementType::F16, ElementType::BF16}) {
            const auto dtype_of = [](ElementType t) {
                return t == ElementType::F16 ? ParamDtype::F16 : ParamDtype::BF16;
            };
            const auto convert = [type](float m) {
                return type == ElementType::F16 ? float_to_f16(m) : float_to_bf16(m);
            };
            std::vector<uint16_t> params(masters.size());
            for (std::size_t i = 0; i < masters.size(); ++i)
                params[i] = convert(std::bit_cast<float>(masters[i]));
            const auto* m = reinterpret_cast<const std::byte*>(masters.data());
            QCOMPARE(count_unrounded(dtype_of(type), reinterpret_cast<const std::byte*>(params.data()), m, n),
                     uint64_t(0));
            uint64_t expected = 0;
            for (std::size_t i = 0; i < n; ++i) {
                if (rng() % 3 == 0)
                    params[i] = static_cast<uint16_t>(rng() % 2 ? params[i] ^ (1u << (rng() % 16)) : rng());
                const float master = std::bit_cast<float>(masters[i]);
                expected += !std::isnan(master) && convert(master) != params[i];
            }
            QVERIFY(expected > n / 4);
            QCOMPARE(count_unrounded(dtype_of(type), reinterpret_cast<const std::byte*>(params.data()), m, n),
                     expected);
        }
    }

    void nativeTensorsWholeAndPerRank()
    {
        QTemporaryDir tmp;
        const uint64_t numel = 100'000;
        auto save = [&](const fs::path& dir, int world) {
            SaveOptions options;
            options.tensors = demo_tensor_layout(numel);
            save_sharded(make_demo_state(3, numel, world, ParamDtype::BF16), dir, 10, options);
        };
        const fs::path four = tmp.filePath(QStringLiteral("w4")).toStdString();
        const fs::path seven = tmp.filePath(QStringLiteral("w7")).toStdString();
        save(four, 4);
        save(seven, 7);
        const ContentReport a = inspect_content(four);
        const ContentReport b = inspect_content(seven);
        QVERIFY2(a.ok(), a.problems.empty() ? "" : a.problems[0].message.c_str());
        QVERIFY(b.ok());
        QVERIFY(a.warnings.empty());
        const auto layout = demo_tensor_layout(numel);
        QCOMPARE(a.tensors.size(), layout.size() * 4);

        std::vector<float> master;
        for (const auto& r : make_demo_state(3, numel, 1, ParamDtype::BF16))
            master.insert(master.end(), r.master.begin(), r.master.end());
        for (const auto& t : layout) {
            const TensorContent* got = find(a, t.name, "master");
            QVERIFY(got);
            const std::vector<double> values(master.begin() + t.offset, master.begin() + t.offset + t.numel);
            const Reference ref = reference(values);
            QCOMPARE(got->stats.numel, t.numel);
            QCOMPARE(got->stats.min, ref.min);
            QCOMPARE(got->stats.max, ref.max);
            QVERIFY(close(got->stats.mean, ref.mean, 1e-9));
            QVERIFY(close(got->stats.std_dev(), ref.std, 1e-9));
            uint64_t parts = 0;
            for (const auto& p : got->parts)
                parts += p.numel;
            QCOMPARE(parts, t.numel);
            const TensorContent* other = find(b, t.name, "master");
            QCOMPARE(other->stats.finite, got->stats.finite);
            QVERIFY(close(other->stats.std_dev(), got->stats.std_dev(), 1e-12));
        }
        // A tensor that straddles ranks reports each rank's part.
        bool straddles = false;
        for (const auto& t : a.tensors)
            straddles = straddles || t.parts.size() > 1;
        QVERIFY(straddles);

        // --tensor: a glob on names.
        ContentOptions only;
        only.tensor_globs = {"embed*"};
        const ContentReport some = inspect_content(four, only);
        QCOMPARE(some.tensors.size(), std::size_t(4));
        for (const auto& t : some.tensors)
            QCOMPARE(t.name, std::string("embed.weight"));
    }

    void nativeHealthChecks()
    {
        QTemporaryDir tmp;
        const uint64_t numel = 40'000;
        auto state = make_demo_state(5, numel, 4, ParamDtype::F16);
        const auto layout = demo_tensor_layout(numel);
        // rank 2: a NaN and an Inf in exp_avg_sq, a negative second moment; rank 1: a parameter
        // that is not its master rounded; rank 3: a NaN master (its param is left alone).
        state[2].exp_avg_sq[5] = std::numeric_limits<float>::quiet_NaN();
        state[2].exp_avg_sq[6] = std::numeric_limits<float>::infinity();
        state[2].exp_avg_sq[7] = -1e-9f;
        state[1].param[100] = static_cast<uint16_t>(state[1].param[100] ^ 0x0400);
        state[3].master[9] = std::numeric_limits<float>::quiet_NaN(); // its param stays as it was
        SaveOptions options;
        options.tensors = layout;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        save_sharded(state, dir, 1, options);
        const ContentReport r = inspect_content(dir);
        QVERIFY(!r.ok());
        QVERIFY(has(r.problems, ProblemKind::nonfinite_values, 2));
        QVERIFY(has(r.problems, ProblemKind::negative_second_moment));
        QVERIFY(has(r.problems, ProblemKind::param_master_mismatch, 1));
        QVERIFY(has(r.problems, ProblemKind::nonfinite_values, 3)); // the NaN master...
        QVERIFY(!has(r.problems, ProblemKind::param_master_mismatch, 3)); // ...is not also a mismatch
        QCOMPARE(r.problems.size(), std::size_t(4));
        // The mismatch is named by its flat index and by its element of the tensor that holds it.
        const uint64_t flat = state[1].param_shard_offset + 100;
        std::string holder;
        for (const auto& t : layout)
            if (t.offset <= flat && flat < t.offset + t.numel)
                holder = "element " + std::to_string(flat - t.offset) + " of '" + t.name + "'";
        QVERIFY(!holder.empty());
        for (const auto& p : r.problems)
            if (p.kind == ProblemKind::param_master_mismatch)
                QVERIFY2(p.message.find("1 parameters") != std::string::npos &&
                             p.message.find("flat index " + std::to_string(flat)) != std::string::npos &&
                             p.message.find(holder) != std::string::npos,
                         p.message.c_str());
        // The NaN is traced to its tensor, its state and the rank that holds it.
        for (const auto& t : r.tensors)
            if (t.state == "exp_avg_sq" && t.stats.nonfinite() > 0) {
                QCOMPARE(t.stats.nan, uint64_t(1));
                QCOMPARE(t.stats.posinf, uint64_t(1));
                for (std::size_t p = 0; p < t.parts.size(); ++p)
                    QCOMPARE(t.part_stats[p].nonfinite(), t.parts[p].rank == 2 ? uint64_t(2) : uint64_t(0));
            }
    }

    // Which tensors hold values from given files (those that failed verification): exactly the
    // tensors with a part in one of them, however the path is spelled, and nothing for no file.
    void tensorsReadFromFiles()
    {
        QTemporaryDir tmp;
        const uint64_t numel = 100'000;
        const fs::path dir = tmp.filePath(QStringLiteral("w4")).toStdString();
        SaveOptions options;
        options.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(3, numel, 4, ParamDtype::BF16), dir, 10, options);
        const ContentReport r = inspect_content(dir);
        QVERIFY(r.ok());

        const std::vector<std::string> failed = {"missing.safetensors", "./rank3.safetensors", "rank1.safetensors"};
        const std::vector<TensorFromFiles> from = tensors_read_from(r, failed);
        std::size_t next = 0, partly = 0;
        for (std::size_t t = 0; t < r.tensors.size(); ++t) {
            std::vector<std::size_t> files;
            uint64_t elements = 0;
            for (const TensorPart& p : r.tensors[t].parts)
                if (p.rank == 3 || p.rank == 1) {
                    const std::size_t f = p.rank == 3 ? 1 : 2;
                    if (std::find(files.begin(), files.end(), f) == files.end())
                        files.push_back(f);
                    elements += p.numel;
                }
            std::sort(files.begin(), files.end());
            if (files.empty())
                continue;
            QVERIFY(next < from.size());
            QCOMPARE(from[next].tensor, t);
            QCOMPARE(from[next].files, files);
            QCOMPARE(from[next].numel, elements);
            partly += elements < r.tensors[t].stats.numel;
            ++next;
        }
        QCOMPARE(next, from.size());
        QVERIFY(next > 0 && next < r.tensors.size()); // some tensors, not all
        QVERIFY(partly > 0); // a tensor straddling rank 0 and 1 (or 2 and 3) is read in part from them
        QVERIFY(tensors_read_from(r, {}).empty());
        QVERIFY(tensors_read_from(r, {"rank7.safetensors"}).empty());

        // A truncated rank 0: its header no longer fits the file, so its parts are not listed and
        // the tensors it held report elements no part holds.
        fs::resize_file(dir / "rank0.safetensors", fs::file_size(dir / "rank0.safetensors") / 2);
        const ContentReport cut = inspect_content(dir);
        QVERIFY(!cut.ok());
        const std::vector<TensorFromFiles> unread = tensors_read_from(cut, {"rank0.safetensors"});
        const uint64_t slice = numel / 4; // rank 0 holds [0, slice) of the flat vector
        std::size_t at = 0;
        for (std::size_t t = 0; t < cut.tensors.size(); ++t) {
            const TensorContent& tc = cut.tensors[t];
            uint64_t n = 0;
            QVERIFY(checked_volume(tc.shape, n));
            const uint64_t lost = tc.flat_offset < slice ? std::min(slice, tc.flat_offset + n) - tc.flat_offset : 0;
            if (lost == 0)
                continue;
            QVERIFY(at < unread.size());
            QCOMPARE(unread[at].tensor, t);
            QVERIFY(unread[at].files.empty());
            QCOMPARE(unread[at].unread, lost);
            ++at;
        }
        QCOMPARE(at, unread.size());
        QVERIFY(at > 0);
        QVERIFY(tensors_read_from(cut, {}).empty()); // nothing failed: nothing to blame
    }

    void safetensorsFileAndIndex()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::vector<float> w(1000);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = float(i) * 0.5f - 100.0f;
        w[999] = -std::numeric_limits<float>::infinity();
        std::vector<uint16_t> h(64, float_to_f16(0.0f));
        std::vector<int64_t> ids = {1, 2, 3, -4};
        write_safetensors(dir / "model-00001-of-00002.safetensors",
                          {{{.name = "w", .dtype = "F32", .shape = {10, 100}}, bytes_of(w)},
                           {{.name = "zeros", .dtype = "F16", .shape = {64}}, bytes_of(h)}});
        write_safetensors(dir / "model-00002-of-00002.safetensors",
                          {{{.name = "ids", .dtype = "I64", .shape = {4}}, bytes_of(ids)}});
        std::ofstream(dir / "model.safetensors.index.json")
            << R"({"metadata": {"total_size": 4160}, "weight_map": {"w": "model-00001-of-00002.safetensors",
                 "zeros": "model-00001-of-00002.safetensors", "ids": "model-00002-of-00002.safetensors"}})";
        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("safetensors-index"));
        QCOMPARE(r.tensors.size(), std::size_t(3));
        const TensorContent* tw = find(r, "w");
        QVERIFY(tw);
        QCOMPARE(tw->stats.neginf, uint64_t(1));
        QCOMPARE(tw->stats.min, -100.0);
        QCOMPARE(tw->stats.max, 998 * 0.5 - 100.0);
        QVERIFY(has(r.problems, ProblemKind::nonfinite_values));
        QCOMPARE(r.problems[0].path, std::string("model-00001-of-00002.safetensors"));
        QVERIFY(has(r.warnings, ProblemKind::all_zero_tensor));
        const TensorContent* ti = find(r, "ids");
        QCOMPARE(ti->stats.mean, 0.5);
        QCOMPARE(ti->stats.negatives, uint64_t(1));

        // One file on its own.
        const ContentReport one = inspect_content(dir / "model-00002-of-00002.safetensors");
        QCOMPARE(one.format, std::string("safetensors"));
        QCOMPARE(one.tensors.size(), std::size_t(1));
        QVERIFY(one.ok());

        // The index is the truth: a tensor it maps to a file that lacks it, or a file's tensor it
        // maps elsewhere, is a problem (as verify says), never read from the wrong file.
        const fs::path moved = dir / "moved";
        fs::create_directories(moved);
        for (const char* f : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
            fs::copy_file(dir / f, moved / f);
        std::ofstream(moved / "model.safetensors.index.json")
            << R"({"weight_map": {"w": "model-00002-of-00002.safetensors", "zeros": "model-00001-of-00002.safetensors",
                 "ids": "model-00002-of-00002.safetensors"}})";
        const ContentReport wrong = inspect_content(moved);
        QVERIFY(!find(wrong, "w"));
        QVERIFY(find(wrong, "ids") && find(wrong, "zeros"));
        QVERIFY(has(wrong.problems, ProblemKind::missing_tensor));
        QVERIFY(has(wrong.problems, ProblemKind::unmapped_tensor));

        // Without an index, two files holding one name: which is the checkpoint's cannot be told.
        const fs::path twice = dir / "twice";
        fs::create_directories(twice);
        write_safetensors(twice / "a.safetensors", {{{.name = "x", .dtype = "I64", .shape = {4}}, bytes_of(ids)}});
        write_safetensors(twice / "b.safetensors", {{{.name = "x", .dtype = "I64", .shape = {4}}, bytes_of(ids)}});
        const ContentReport both = inspect_content(twice);
        QCOMPARE(both.tensors.size(), std::size_t(1));
        QVERIFY(has(both.problems, ProblemKind::layout_overlap));
    }

    // torch.save archives read through the restricted pickle reader: a transposed view, views with
    // gaps (a slice with a step) and repeats (expand),
    // a view at an offset into a shared storage, a bf16 storage, a NaN; the same names in two
    // rank files become one tensor with two parts.
    void torchArchivesWithViews()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::vector<float> storage(12);
        for (std::size_t i = 0; i < storage.size(); ++i)
            storage[i] = float(i) - 3.0f; // -3 .. 8
        storage[11] = std::numeric_limits<float>::quiet_NaN();
        std::vector<uint16_t> half = {float_to_bf16(1.0f), float_to_bf16(-2.0f), float_to_bf16(4.0f)};
        auto archive = [&](const std::string& prefix, int variant) {
            fixtures::PickleWriter p;
            p.proto(2);
            p.global("collections", "OrderedDict").op(')').op('R');
            p.mark();
            p.str("t"); // a 3x4 tensor stored transposed: shape (4, 3), strides (1, 4)
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 0, {4, 3}, {1, 4});
            p.str("slice"); // elements 4..7 of the same storage
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 4, {4}, {1});
            p.str("h");
            fixtures::pickle_tensor_view(p, "1", "BFloat16Storage", 3, 0, {3}, {1});
            p.str("gappy"); // every other element: a view with gaps
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 0, {6}, {2});
            p.str("repeated"); // elements 4 and 5 three times over (expand: stride 0)
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 4, {3, 2}, {0, 1});
            p.str("endless"); // one stored element standing for 2^40: not walked
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 0, {uint64_t(1) << 40}, {0});
            if (variant == 1) {
                p.str("outside"); // reaches past its storage
                fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 10, {4}, {1});
                p.str("outside_gappy"); // its last element (2 + 5 * 2) is past the storage's 12
                fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 2, {6}, {2});
            }
            p.op('u').stop();
            fixtures::ZipWriter zip;
            zip.add(prefix + "/data.pkl", p.out, p.out);
            zip.add(prefix + "/data/0", bytes_of(storage), bytes_of(storage));
            zip.add(prefix + "/data/1", bytes_of(half), bytes_of(half));
            zip.add(prefix + "/version", "3\n", "3\n");
            return zip.finish();
        };
        fixtures::write_file(dir / "model.pt", archive("model", 0));
        const ContentReport r = inspect_content(dir / "model.pt");
        QCOMPARE(r.format, std::string("torch"));
        const TensorContent* t = find(r, "t");
        std::string said;
        for (const auto& p : r.problems)
            said += p.message + "\n";
        for (const auto& p : r.warnings)
            said += p.message + "\n";
        QVERIFY2(t, said.c_str());
        QCOMPARE(t->stats.numel, uint64_t(12));
        QCOMPARE(t->stats.nan, uint64_t(1));
        QCOMPARE(t->stats.min, -3.0);
        QCOMPARE(t->stats.max, 7.0);
        const TensorContent* slice = find(r, "slice");
        QCOMPARE(slice->stats.min, 1.0);
        QCOMPARE(slice->stats.max, 4.0);
        QCOMPARE(slice->stats.mean, 2.5);
        const TensorContent* h = find(r, "h");
        QCOMPARE(h->type, ElementType::BF16);
        QCOMPARE(h->stats.mean, 1.0);
        const TensorContent* gappy = find(r, "gappy"); // -3, -1, 1, 3, 5, 7
        QCOMPARE(gappy->stats.numel, uint64_t(6));
        QCOMPARE(gappy->stats.min, -3.0);
        QCOMPARE(gappy->stats.max, 7.0);
        QCOMPARE(gappy->stats.mean, 2.0);
        const TensorContent* repeated = find(r, "repeated"); // 1, 2 three times
        QCOMPARE(repeated->stats.numel, uint64_t(6));
        QCOMPARE(repeated->stats.mean, 1.5);
        QCOMPARE(repeated->stats.std_dev(), 0.5);
        QVERIFY(!find(r, "endless"));
        QCOMPARE(r.left_out.size(), std::size_t(1));
        QVERIFY2(r.left_out[0].message.find("'endless' repeats its 1 stored elements 1099511627776 times") !=
                     std::string::npos,
                 r.left_out[0].message.c_str());
        QVERIFY(has(r.problems, ProblemKind::nonfinite_values));

        // A view that reaches past its storage is a problem naming the file and the tensor.
        fixtures::write_file(dir / "bad.pt", archive("bad", 1));
        const ContentReport bad = inspect_content(dir / "bad.pt");
        for (const char* name : {"'outside'", "'outside_gappy'"}) {
            bool named = false;
            for (const auto& p : bad.problems)
                named = named ||
                    (p.kind == ProblemKind::range_outside_file && p.message.find(name) != std::string::npos &&
                     p.path == "bad.pt");
            QVERIFY2(named, name);
        }

        // A stored storage entry that claims more bytes than it holds is refused, never read past.
        {
            fixtures::PickleWriter p;
            p.proto(2);
            p.global("collections", "OrderedDict").op(')').op('R');
            p.mark();
            p.str("big");
            fixtures::pickle_tensor_view(p, "0", "FloatStorage", 12, 0, {12}, {1});
            p.op('u').stop();
            fixtures::ZipWriter zip;
            zip.add("lie/data.pkl", p.out, p.out);
            zip.add("lie/data/0", bytes_of(storage), bytes_of(storage).substr(0, 8)); // 48 claimed, 8 stored
            zip.add("lie/version", "3\n", "3\n");
            fixtures::write_file(dir / "lie.pt", zip.finish());
            const ContentReport lie = inspect_content(dir / "lie.pt");
            QVERIFY(!find(lie, "big"));
            QVERIFY(has(lie.problems, ProblemKind::invalid_archive));
        }

        // pytorch_model.bin.index.json: two files, tensors listed once each.
        const fs::path hf = dir / "hf";
        fs::create_directories(hf);
        fixtures::write_file(hf / "pytorch_model-00001-of-00002.bin", archive("archive", 0));
        fixtures::write_file(hf / "pytorch_model-00002-of-00002.bin",
                             fixtures::torch_archive("archive", {{"w2", {2, 2}}}));
        std::ofstream(hf / "pytorch_model.bin.index.json")
            << R"({"metadata": {}, "weight_map": {"t": "pytorch_model-00001-of-00002.bin",
                 "w2": "pytorch_model-00002-of-00002.bin"}})";
        const ContentReport index = inspect_content(hf);
        QCOMPARE(index.format, std::string("torch-index"));
        QVERIFY(find(index, "t") && find(index, "w2"));
        QCOMPARE(find(index, "w2")->stats.numel, uint64_t(4));
    }

    // DeepSpeed: the same optimizer tensor in every ZeRO rank's file is one tensor with a part per
    // rank, and a NaN is traced to the rank file that holds it.
    void deepspeedPartsPerRank()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        fixtures::write_file(root / "latest", "global_step3\n");
        const fs::path tag = root / "global_step3";
        fixtures::write_file(tag / "mp_rank_00_model_states.pt",
                             float_archive("mp_rank_00_model_states", "module.w", {1, 2, 3, 4}));
        for (int d = 0; d < 2; ++d) {
            std::vector<float> part(8, float(d + 1));
            if (d == 1)
                part[3] = std::numeric_limits<float>::quiet_NaN();
            const std::string name = "zero_pp_rank_" + std::to_string(d) + "_mp_rank_00_optim_states";
            fixtures::write_file(tag / (name + ".pt"), float_archive(name, "optimizer_state_dict.exp_avg_sq", part));
        }
        const ContentReport r = inspect_content(root);
        QCOMPARE(r.format, std::string("deepspeed"));
        const TensorContent* t = find(r, "optimizer_state_dict.exp_avg_sq");
        QVERIFY(t);
        QCOMPARE(t->parts.size(), std::size_t(2));
        QCOMPARE(t->stats.numel, uint64_t(16));
        QCOMPARE(t->stats.nan, uint64_t(1));
        QCOMPARE(t->part_stats[0].nonfinite() + t->part_stats[1].nonfinite(), uint64_t(1));
        QVERIFY(has(r.problems, ProblemKind::nonfinite_values, 1));
        QCOMPARE(find(r, "module.w")->stats.mean, 2.5);

        // Pipeline layer files: the same key in two layers names two tensors; the tensor-parallel
        // files of one layer are its slices.
        fixtures::write_file(tag / "layer_01-model_00-model_states.pt", float_archive("l1m0", "weight", {1, 1}));
        fixtures::write_file(tag / "layer_01-model_01-model_states.pt", float_archive("l1m1", "weight", {3, 3}));
        fixtures::write_file(tag / "layer_02-model_00-model_states.pt", float_archive("l2m0", "weight", {-5}));
        fixtures::write_file(tag / "layer_02-model_01-model_states.pt", float_archive("l2m1", "weight", {-7}));
        fixtures::write_file(tag / "mp_rank_01_model_states.pt",
                             float_archive("mp_rank_01_model_states", "module.w", {5, 6}));
        const ContentReport layers = inspect_content(root);
        const TensorContent* one = find(layers, "layer_01-model_*-model_states.pt: weight");
        const TensorContent* two = find(layers, "layer_02-model_*-model_states.pt: weight");
        QVERIFY(one && two);
        QCOMPARE(one->parts.size(), std::size_t(2));
        QCOMPARE(one->stats.mean, 2.0);
        QCOMPARE(two->stats.mean, -6.0);
        QCOMPARE(find(layers, "module.w")->parts.size(), std::size_t(2)); // mp_rank_00 and mp_rank_01
        QCOMPARE(find(layers, "module.w")->shape, std::vector<uint64_t>{6});
    }

    // A rank file the layout implies but that is not there is a problem of stats, as of verify:
    // a Megatron tensor-parallel rank missing from one stage would otherwise give half tensors
    // that pass for whole ones, and ZeRO optimizer files without the module file they go with
    // are no loadable DeepSpeed step.
    void aMissingRankFileIsAProblemOfStats()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path iter = root / "mg" / "iter_0000020";
        write_megatron_iteration(root / "one", {1, 2, 3, 4});
        for (const char* rank : {"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_001"}) {
            fs::create_directories(iter / rank);
            fs::copy_file(root / "one" / "mp_rank_00" / "model_optim_rng.pt", iter / rank / "model_optim_rng.pt");
        }
        const ContentReport megatron = inspect_content(iter);
        QCOMPARE(megatron.format, std::string("megatron"));
        QVERIFY(has(megatron.problems, ProblemKind::missing_shard));
        QVERIFY(!megatron.ok());
        const auto named = [](const std::vector<Problem>& problems, const std::string& file) {
            return std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
                return p.kind == ProblemKind::missing_shard && p.message.find(file) != std::string::npos;
            });
        };
        QVERIFY(named(megatron.problems, "mp_rank_01_000/model_optim_rng.pt"));
        fs::create_directories(iter / "mp_rank_01_000");
        fs::copy_file(iter / "mp_rank_00_000" / "model_optim_rng.pt", iter / "mp_rank_01_000" / "model_optim_rng.pt");
        QVERIFY(!has(inspect_content(iter).problems, ProblemKind::missing_shard));

        const fs::path ds = root / "ds";
        write_deepspeed_step(ds, {1, 2, 3, 4});
        QVERIFY(verify_checkpoint(ds).ok());
        fs::remove(ds / "mp_rank_00_model_states.pt");
        const VerifyReport verified = verify_checkpoint(ds);
        QVERIFY(!verified.ok());
        QVERIFY(named(verified.problems, "mp_rank_00_model_states.pt"));
        QVERIFY(named(inspect_content(ds).problems, "mp_rank_00_model_states.pt"));
    }

    // DCP: a raw chunk on rank 0 and a torch.save-archived chunk on rank 1 (as FileSystemWriter
    // stores it), each a part; the figures equal a reference decoded from the same bytes.
    void dcpChunksAsParts()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::vector<fixtures::DcpTensorSpec> tensors = {
            {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}}};
        std::vector<float> raw(12);
        for (std::size_t i = 0; i < raw.size(); ++i)
            raw[i] = 0.25f * float(i) - 1.0f;
        raw[4] = std::numeric_limits<float>::infinity();
        const std::string archive = fixtures::torch_tensor_archive({2, 6});
        auto& c0 = tensors[0].chunks[0];
        c0.offset = 0;
        c0.length = raw.size() * 4;
        auto& c1 = tensors[0].chunks[1];
        c1.offset = 0;
        c1.length = archive.size();
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        fixtures::write_file(dir / "__0_0.distcp", bytes_of(raw));
        fixtures::write_file(dir / "__1_0.distcp", archive);

        // The archived chunk's elements: torch_zip's storage "0" pattern, decoded here by hand.
        std::vector<double> expected(raw.begin(), raw.end());
        for (uint64_t e = 0; e < 12; ++e)
            expected.push_back(fixtures::torch_zip_element(e));
        ValueStats want;
        want.add(expected.data(), expected.size());

        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("torch-dcp"));
        const TensorContent* t = find(r, "model.weight");
        QVERIFY(t);
        QCOMPARE(t->parts.size(), std::size_t(2));
        QCOMPARE(t->parts[0].rank, 0);
        QCOMPARE(t->parts[1].rank, 1);
        QCOMPARE(t->stats.numel, uint64_t(24));
        QCOMPARE(t->stats.posinf, want.posinf);
        QCOMPARE(t->stats.nan, want.nan);
        QCOMPARE(t->stats.min, want.min);
        QCOMPARE(t->stats.max, want.max);
        QVERIFY(close(t->stats.mean, want.mean, 1e-12));
        QCOMPARE(t->part_stats[0].posinf, uint64_t(1)); // the Inf is rank 0's
        bool traced = false;
        for (const auto& p : r.problems)
            traced =
                traced || (p.kind == ProblemKind::nonfinite_values && p.message.find("rank 0") != std::string::npos);
        QVERIFY(traced);
    }

    // torch's Hugging Face storage per rank, 4 ranks: each tensor is one tensor of 4 chunks (not
    // one per file), its statistics those of a float64 reference over the same values, the NaN
    // traced to the rank that holds it.
    void dcpHfShardsAsOneCheckpoint()
    {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "step-3";
        std::vector<float> w(16 * 5);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = std::sin(float(i) * 0.7f) * (1.0f + float(i % 7));
        w[47] = std::numeric_limits<float>::quiet_NaN(); // row 9: rank 2's
        std::vector<double> finite;
        for (float v : w)
            if (!std::isnan(v))
                finite.push_back(v);
        for (int r = 0; r < 4; ++r) {
            const std::vector<float> rows(w.begin() + r * 20, w.begin() + (r + 1) * 20);
            const std::vector<float> bias = {float(r), -float(r)};
            fixtures::write_file(
                dir / "sharded" / fixtures::dcp_hf_shard_name(r),
                fixtures::dcp_hf_shard(
                    {{.fqn = "bias", .offsets = {uint64_t(2 * r)}, .sizes = {2}, .bytes = bytes_of(bias)},
                     {.fqn = "w", .offsets = {uint64_t(4 * r), 0}, .sizes = {4, 5}, .bytes = bytes_of(rows)}}));
        }
        const ContentReport r = inspect_content(dir);
        QCOMPARE(r.format, std::string("torch-dcp-hf"));
        QCOMPARE(r.tensors.size(), std::size_t(2));
        const TensorContent* t = find(r, "w");
        QVERIFY(t);
        QCOMPARE(t->shape, (std::vector<uint64_t>{16, 5}));
        QCOMPARE(t->parts.size(), std::size_t(4));
        for (int k = 0; k < 4; ++k)
            QCOMPARE(t->parts[std::size_t(k)].rank, k);
        // The float64 reference, by hand: mean and population std of the finite values.
        double sum = 0, m2 = 0;
        for (double v : finite)
            sum += v;
        const double mean = sum / double(finite.size());
        for (double v : finite)
            m2 += (v - mean) * (v - mean);
        QCOMPARE(t->stats.numel, uint64_t(80));
        QCOMPARE(t->stats.nan, uint64_t(1));
        QCOMPARE(t->stats.min, *std::min_element(finite.begin(), finite.end()));
        QCOMPARE(t->stats.max, *std::max_element(finite.begin(), finite.end()));
        QVERIFY(close(t->stats.mean, mean, 1e-12));
        QVERIFY(close(t->stats.std_dev(), std::sqrt(m2 / double(finite.size())), 1e-12));
        QCOMPARE(t->part_stats[2].nan, uint64_t(1));
        bool traced = false;
        for (const auto& p : r.problems)
            traced =
                traced || (p.kind == ProblemKind::nonfinite_values && p.message.find("rank 2") != std::string::npos);
        QVERIFY(traced);
        const TensorContent* b = find(r, "bias");
        QVERIFY(b);
        QCOMPARE(b->shape, (std::vector<uint64_t>{8}));
        QCOMPARE(b->stats.mean, 0.0);
    }

    void unknownFolderSaysSo()
    {
        QTemporaryDir tmp;
        std::ofstream(fs::path(tmp.path().toStdString()) / "notes.txt") << "x";
        try {
            inspect_content(fs::path(tmp.path().toStdString()));
            QFAIL("a folder without a checkpoint must be refused");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
            QVERIFY(std::string(e.what()).find("not a checkpoint stats can read") != std::string::npos);
        }
    }
};

QTEST_GUILESS_MAIN(TestContent)
#include "tst_content.moc"
