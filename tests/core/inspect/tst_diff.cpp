// core/inspect diff: tensors paired by name and state across formats and world sizes, compared in
// each tensor's own element order (flat native slices, DCP boxes split along any dimension,
// transposed torch views), with changes planted at known elements; tolerances; the statuses; and
// layouts that cannot be read reported, never read outside their files.

#include "core/checkpoint/save.h"
#include "core/inspect/diff.h"
#include "core/run/demo.h"
#include "content_fixtures.h"
#include "foreign_fixtures.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

const TensorDiff* find(const DiffReport& report, const std::string& name, const std::string& state = "")
{
    for (const auto& t : report.tensors)
        if (t.name == name && t.state == state)
            return &t;
    return nullptr;
}

fs::path save_demo(const fs::path& dir, std::vector<RankState> states)
{
    SaveOptions options;
    uint64_t numel = 0;
    for (const auto& s : states)
        numel += s.numel();
    options.tensors = demo_tensor_layout(numel);
    save_sharded(states, dir, 10, options);
    return dir;
}

// A 4x6 float32 tensor with values 0.5 * i - 3 at flat index i.
std::vector<float> matrix()
{
    std::vector<float> m(24);
    for (std::size_t i = 0; i < m.size(); ++i)
        m[i] = 0.5f * float(i) - 3.0f;
    return m;
}

// The same 4x6 tensor as DCP chunks split along the columns (each chunk a 4x3 box stored
// row-major in its own rank's file), optionally with one element of the second box changed.
void write_dcp_columns(const fs::path& dir, const std::vector<float>& m, float changed_value = NAN)
{
    fs::create_directories(dir);
    std::vector<fixtures::DcpTensorSpec> tensors = {
        {"w", {4, 6}, {{{0, 0}, {4, 3}, "__0_0.distcp"}, {{0, 3}, {4, 3}, "__1_0.distcp"}}}};
    for (int c = 0; c < 2; ++c) {
        std::vector<float> box;
        for (int r = 0; r < 4; ++r)
            for (int k = 0; k < 3; ++k)
                box.push_back(m[std::size_t(r * 6 + c * 3 + k)]);
        if (c == 1 && !std::isnan(changed_value))
            box.back() = changed_value; // element (3, 5): flat index 23
        tensors[0].chunks[std::size_t(c)].offset = 0;
        tensors[0].chunks[std::size_t(c)].length = box.size() * 4;
        fixtures::write_file(dir / tensors[0].chunks[std::size_t(c)].file, bytes_of(box));
    }
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
}

} // namespace

class TestDiff : public QObject {
    Q_OBJECT
private slots:
    // The same state saved at world sizes 4 and 8 is identical, bitwise, in every state; a master
    // weight changed at a known global index shows as one changed element of its tensor.
    void nativeAcrossWorldSizes()
    {
        QTemporaryDir tmp;
        const uint64_t numel = 60'001;
        const fs::path four =
            save_demo(fs::path(tmp.path().toStdString()) / "w4", make_demo_state(3, numel, 4, ParamDtype::BF16));
        const fs::path eight =
            save_demo(fs::path(tmp.path().toStdString()) / "w8", make_demo_state(3, numel, 8, ParamDtype::BF16));
        const DiffReport same = diff_checkpoints(four, eight);
        QVERIFY2(same.problems.empty(), same.problems.empty() ? "" : same.problems[0].message.c_str());
        const auto layout = demo_tensor_layout(numel);
        QCOMPARE(same.tensors.size(), layout.size() * 4);
        QVERIFY(same.identical());

        // Change master element g (inside a tensor that straddles two of the eight ranks).
        auto states = make_demo_state(3, numel, 4, ParamDtype::BF16);
        const uint64_t g = numel / 2 + 17;
        for (auto& s : states)
            if (g >= s.param_shard_offset && g < s.param_shard_offset + s.numel())
                s.master[g - s.param_shard_offset] += 0.25f;
        const fs::path changed = save_demo(fs::path(tmp.path().toStdString()) / "changed", states);
        const DiffReport d = diff_checkpoints(eight, changed);
        QVERIFY(!d.identical());
        const TensorInfo* holder = nullptr;
        for (const auto& t : layout)
            if (g >= t.offset && g < t.offset + t.numel)
                holder = &t;
        QVERIFY(holder);
        int differing = 0;
        for (const auto& t : d.tensors)
            differing += t.status != DiffStatus::identical;
        QCOMPARE(differing, 1);
        const TensorDiff* t = find(d, holder->name, "master");
        QVERIFY(t);
        QCOMPARE(t->status, DiffStatus::changed);
        QCOMPARE(t->sums.changed, uint64_t(1));
        QCOMPARE(*t->sums.first_changed, g - holder->offset);
        QVERIFY(std::abs(t->sums.max_abs_diff - 0.25) < 1e-6);
        QVERIFY(t->rel_l2().value() > 0);

        // Within a tolerance the change is no change; a tighter one still sees it.
        DiffOptions loose;
        loose.atol = 0.3;
        QVERIFY(diff_checkpoints(eight, changed, loose).identical());
        DiffOptions tight;
        tight.atol = 0.1;
        QVERIFY(!diff_checkpoints(eight, changed, tight).identical());

        // --tensor limits both sides.
        DiffOptions only;
        only.tensor_globs = {"embed*"};
        const DiffReport some = diff_checkpoints(eight, changed, only);
        QCOMPARE(some.tensors.size(), std::size_t(4));
    }

    // A DCP tensor split along its columns against a safetensors file of the same values: the
    // boxes are read in row-major order, so they are identical; one changed element is found at
    // its flat index.
    void dcpBoxesAgainstSafetensors()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const auto m = matrix();
        write_safetensors(root / "model.safetensors", {{{"w", "F32", {4, 6}, 0, 0}, bytes_of(m)}});
        write_dcp_columns(root / "dcp", m);
        const DiffReport same = diff_checkpoints(root / "dcp", root / "model.safetensors");
        QVERIFY2(same.problems.empty(), same.problems.empty() ? "" : same.problems[0].message.c_str());
        QCOMPARE(same.a.format, std::string("torch-dcp"));
        QCOMPARE(same.tensors.size(), std::size_t(1));
        QVERIFY(same.identical());

        write_dcp_columns(root / "dcp2", m, 100.0f);
        const DiffReport d = diff_checkpoints(root / "dcp2", root / "model.safetensors");
        const TensorDiff* t = find(d, "w");
        QCOMPARE(t->status, DiffStatus::changed);
        QCOMPARE(t->sums.changed, uint64_t(1));
        QCOMPARE(*t->sums.first_changed, uint64_t(23));
        QCOMPARE(t->sums.max_abs_diff, double(100.0f - m[23]));
        // rel_l2 = |a - b| / ||a|| for the one changed element.
        double a2 = 0;
        for (std::size_t i = 0; i < m.size(); ++i)
            a2 += double(i == 23 ? 100.0f : m[i]) * double(i == 23 ? 100.0f : m[i]);
        QVERIFY(std::abs(*t->rel_l2() - (100.0 - m[23]) / std::sqrt(a2)) < 1e-12);
    }

    // torch.save keeps a transpose as a strided view of its storage: read in the view's order it
    // equals the contiguous transpose in a safetensors file.
    // The same 4x6 tensor saved by torch's Hugging Face storage per rank, split along its columns
    // (each rank's entry a 4x3 chunk placed by DCP_SHARDING_INFO): one tensor, identical to the
    // .distcp layout of the same values; an element changed on rank 1 is found at its flat index.
    void hfShardsAgainstDcp()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const auto m = matrix();
        write_dcp_columns(root / "dcp", m);
        auto write_hf = [&](const fs::path& dir, float changed) {
            for (int c = 0; c < 2; ++c) {
                std::vector<float> box;
                for (int r = 0; r < 4; ++r)
                    for (int k = 0; k < 3; ++k)
                        box.push_back(m[std::size_t(r * 6 + c * 3 + k)]);
                if (c == 1 && !std::isnan(changed))
                    box.back() = changed;
                fixtures::write_file(
                    dir / "sharded" / fixtures::dcp_hf_shard_name(c),
                    fixtures::dcp_hf_shard(
                        {{.fqn = "w", .offsets = {0, uint64_t(3 * c)}, .sizes = {4, 3}, .bytes = bytes_of(box)}}));
            }
        };
        write_hf(root / "step-7", NAN);
        const DiffReport same = diff_checkpoints(root / "step-7", root / "dcp");
        QVERIFY2(same.problems.empty(), same.problems.empty() ? "" : same.problems[0].message.c_str());
        QCOMPARE(same.a.format, std::string("torch-dcp-hf"));
        QCOMPARE(same.tensors.size(), std::size_t(1));
        QVERIFY(same.identical());
        write_hf(root / "step-8", 100.0f);
        const DiffReport d = diff_checkpoints(root / "step-7", root / "step-8");
        const TensorDiff* t = find(d, "w");
        QVERIFY(t);
        QCOMPARE(t->status, DiffStatus::changed);
        QCOMPARE(t->sums.changed, uint64_t(1));
        QCOMPARE(*t->sums.first_changed, uint64_t(23));
        QCOMPARE(t->sums.max_abs_diff, double(100.0f - m[23]));
    }

    void transposedTorchViewAgainstSafetensors()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const auto m = matrix(); // storage: 4x6 row-major
        std::vector<float> t(24); // its transpose, 6x4, contiguous
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c)
                t[std::size_t(c * 4 + r)] = m[std::size_t(r * 6 + c)];
        fixtures::write_file(root / "view.pt", float_archive("view", "w", m, {6, 4}, {1, 6}));
        write_safetensors(root / "t.safetensors", {{{"w", "F32", {6, 4}, 0, 0}, bytes_of(t)}});
        const DiffReport same = diff_checkpoints(root / "view.pt", root / "t.safetensors");
        QVERIFY2(same.problems.empty(), same.problems.empty() ? "" : same.problems[0].message.c_str());
        QVERIFY(same.identical());
        // The untransposed storage under the same name and shape is not the same tensor.
        write_safetensors(root / "m.safetensors", {{{"w", "F32", {6, 4}, 0, 0}, bytes_of(m)}});
        const DiffReport d = diff_checkpoints(root / "view.pt", root / "m.safetensors");
        QCOMPARE(find(d, "w")->status, DiffStatus::changed);
        QCOMPARE(*find(d, "w")->sums.first_changed, uint64_t(1)); // (0,1): m[6] vs m[1]
    }

    void statusesAndTolerances()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const std::vector<float> x = {1.0f, -0.0f, NAN, INFINITY, 2.0f};
        std::vector<float> y = {1.0f, 0.0f, NAN, INFINITY, 2.0f + 1e-6f};
        const std::vector<double> xd(x.begin(), x.end());
        write_safetensors(root / "a.safetensors",
                          {{{"same", "F32", {5}, 0, 0}, bytes_of(x)},
                           {{"near", "F32", {5}, 0, 0}, bytes_of(x)},
                           {{"reshaped", "F32", {5}, 0, 0}, bytes_of(x)},
                           {{"widened", "F32", {5}, 0, 0}, bytes_of(x)},
                           {{"dropped", "F32", {5}, 0, 0}, bytes_of(x)}});
        write_safetensors(root / "b.safetensors",
                          {{{"same", "F32", {5}, 0, 0}, bytes_of(x)},
                           {{"near", "F32", {5}, 0, 0}, bytes_of(y)},
                           {{"reshaped", "F32", {1, 5}, 0, 0}, bytes_of(x)},
                           {{"widened", "F64", {5}, 0, 0}, bytes_of(xd)},
                           {{"added", "F32", {5}, 0, 0}, bytes_of(x)}});
        const DiffReport d = diff_checkpoints(root / "a.safetensors", root / "b.safetensors");
        QCOMPARE(find(d, "same")->status, DiffStatus::identical);
        // Bitwise: -0 is not +0, and 2 + 1e-6 is not 2.
        QCOMPARE(find(d, "near")->status, DiffStatus::changed);
        QCOMPARE(find(d, "near")->sums.changed, uint64_t(2));
        QCOMPARE(find(d, "near")->sums.nonfinite_changed, uint64_t(0));
        QCOMPARE(*find(d, "near")->sums.first_changed, uint64_t(1));
        QCOMPARE(find(d, "reshaped")->status, DiffStatus::shape_changed);
        QCOMPARE(find(d, "widened")->status, DiffStatus::dtype_changed);
        QCOMPARE(find(d, "widened")->sums.changed, uint64_t(0)); // same values, other dtype
        QCOMPARE(find(d, "dropped")->status, DiffStatus::only_in_a);
        QCOMPARE(find(d, "added")->status, DiffStatus::only_in_b);
        QCOMPARE(d.tensors.back().name, std::string("added")); // B's extra after A's order

        // With a tolerance: -0 equals +0, NaN equals NaN, Inf itself, and 1e-6 is within 1e-5.
        DiffOptions tol;
        tol.atol = 1e-5;
        const DiffReport t = diff_checkpoints(root / "a.safetensors", root / "b.safetensors", tol);
        QCOMPARE(find(t, "near")->status, DiffStatus::identical);
        tol.atol = 0;
        tol.rtol = 1e-8;
        QCOMPARE(find(diff_checkpoints(root / "a.safetensors", root / "b.safetensors", tol), "near")->status,
                 DiffStatus::changed);

        // A NaN where the other side has a number: changed, and said apart from the sums.
        const std::vector<float> nan_at_1 = {1.0f, NAN, 3.0f};
        write_safetensors(root / "c.safetensors", {{{"v", "F32", {3}, 0, 0}, bytes_of(std::vector<float>{1, 2, 3})}});
        write_safetensors(root / "d.safetensors", {{{"v", "F32", {3}, 0, 0}, bytes_of(nan_at_1)}});
        const DiffReport n = diff_checkpoints(root / "c.safetensors", root / "d.safetensors");
        QCOMPARE(find(n, "v")->sums.changed, uint64_t(1));
        QCOMPARE(find(n, "v")->sums.nonfinite_changed, uint64_t(1));
        QCOMPARE(find(n, "v")->sums.max_abs_diff, 0.0);

        const auto j = diff_report_json(d);
        QCOMPARE(j["ok"].get<bool>(), false);
        QCOMPARE(j["summary"]["identical"].get<int>(), 1);
        QCOMPARE(j["summary"]["only_in_b"].get<int>(), 1);
        QCOMPARE(j["summary"]["largest_rel_l2"]["name"].get<std::string>(), std::string("near"));
    }

    // A native checkpoint beside a safetensors file of its parameters: the model is the native
    // side's param state, the optimizer states are not compared.
    void nativeAgainstParamsOnly()
    {
        QTemporaryDir tmp;
        const uint64_t numel = 5'000;
        auto states = make_demo_state(4, numel, 2, ParamDtype::BF16);
        const fs::path native = save_demo(fs::path(tmp.path().toStdString()) / "n", states);
        std::vector<uint16_t> flat;
        for (const auto& s : states)
            flat.insert(flat.end(), s.param.begin(), s.param.end());
        std::vector<std::pair<SafetensorsTensor, std::string>> tensors;
        for (const auto& t : demo_tensor_layout(numel))
            tensors.push_back(
                {{t.name, "BF16", t.shape, 0, 0},
                 bytes_of(std::vector<uint16_t>(flat.begin() + t.offset, flat.begin() + t.offset + t.numel))});
        const fs::path file = fs::path(tmp.path().toStdString()) / "params.safetensors";
        write_safetensors(file, tensors);
        const DiffReport d = diff_checkpoints(file, native);
        QVERIFY(d.states_as_param);
        QCOMPARE(d.tensors.size(), demo_tensor_layout(numel).size());
        QVERIFY2(d.identical(), d.problems.empty() ? "" : d.problems[0].message.c_str());
        QCOMPARE(d.tensors[0].state, std::string("param"));
    }

    // A chunk that reaches outside its tensor, or a tensor a chunk is missing from, is a problem
    // naming the tensor; nothing is read outside the files.
    void brokenLayoutsReported()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const auto m = matrix();
        write_safetensors(root / "model.safetensors", {{{"w", "F32", {4, 6}, 0, 0}, bytes_of(m)}});
        for (int variant = 0; variant < 4; ++variant) {
            const fs::path dir = root / ("dcp" + std::to_string(variant));
            fs::create_directories(dir);
            std::vector<fixtures::DcpTensorSpec> tensors = {
                {"w", {4, 6}, {{{0, 0}, {4, 3}, "__0_0.distcp"}, {{0, 3}, {4, 3}, "__1_0.distcp"}}}};
            if (variant == 0)
                tensors[0].chunks[1].offsets = {0, 4}; // reaches column 7 of 6
            if (variant == 1)
                tensors[0].chunks.pop_back(); // columns 3..5 are in no chunk
            for (auto& c : tensors[0].chunks) {
                c.offset = 0;
                c.length = 48;
                fixtures::write_file(dir / c.file, bytes_of(std::vector<float>(12, 1.0f)));
            }
            if (variant == 2) // the second file is shorter than its chunk
                fixtures::write_file(dir / "__1_0.distcp", bytes_of(std::vector<float>(5, 1.0f)));
            if (variant == 3) // a forged size: 2^40 rows, of which the chunks hold 4 (no work for the rest)
                tensors[0].size = {uint64_t(1) << 40, 6};
            fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
            const DiffReport d = diff_checkpoints(dir, variant == 3 ? dir : root / "model.safetensors");
            QVERIFY(!d.identical());
            QCOMPARE(diff_work_items(d), std::size_t(0));
            QVERIFY2(!d.problems.empty(), std::to_string(variant).c_str());
            QVERIFY2(d.problems.back().message.find("'w'") != std::string::npos, d.problems.back().message.c_str());
            QCOMPARE(find(d, "w")->status, DiffStatus::unreadable);
        }
    }
};

QTEST_GUILESS_MAIN(TestDiff)
#include "tst_diff.moc"
