// N -> M resharding: the plan on awkward shapes and random ones, byte-exact execution, refusal of
// dangerous destinations, and interruption that leaves the destination without a manifest.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/util/fsutil.h"
#include "core/util/internal/fault_injection.h"
#include "core/checkpoint/reshard.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cerrno>
#include <random>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

Manifest layout(uint64_t numel, int world)
{
    Manifest m;
    m.world_size = world;
    m.param_numel_total = numel;
    for (int r = 0; r < world; ++r) {
        const uint64_t offset = even_shard_offset(numel, world, r);
        m.shards.push_back({r, shard_file_name(r), std::string(64, '0'), "", 100, offset,
                            even_shard_offset(numel, world, r + 1) - offset});
    }
    return m;
}

// Checks every property a plan must have; returns an empty string or what is wrong.
std::string plan_defect(const Manifest& m, const ReshardPlan& plan, int target)
{
    if (int(plan.targets.size()) != target)
        return "wrong number of targets";
    uint64_t expected_offset = 0, staying = 0;
    for (const auto& t : plan.targets) {
        if (t.offset != expected_offset)
            return "target " + std::to_string(t.rank) + " does not start where the previous ended";
        if (t.offset != even_shard_offset(m.param_numel_total, target, t.rank))
            return "target " + std::to_string(t.rank) + " is not the even split";
        uint64_t covered = 0;
        for (const auto& run : t.runs) {
            const ShardRecord* s = m.shard_for_rank(run.source_rank);
            if (!s || run.numel == 0)
                return "empty run or unknown source";
            if (run.target_offset != covered)
                return "runs of target " + std::to_string(t.rank) + " are not contiguous";
            if (run.source_offset + run.numel > s->param_shard_numel)
                return "run reads past its source slice";
            if (s->param_shard_offset + run.source_offset != t.offset + run.target_offset)
                return "run maps an element to a different global index";
            if (run.source_rank == t.rank)
                staying += run.numel * plan.bytes_per_element;
            covered += run.numel;
        }
        if (covered != t.numel)
            return "runs do not cover target " + std::to_string(t.rank);
        expected_offset += t.numel;
    }
    if (expected_offset != m.param_numel_total)
        return "targets do not cover the parameters";
    if (plan.bytes_written != m.param_numel_total * 14 || plan.bytes_read != plan.bytes_written)
        return "byte totals are wrong";
    if (plan.bytes_staying != staying || plan.bytes_staying + plan.bytes_moving != plan.bytes_written)
        return "staying/moving totals are wrong";
    return {};
}

} // namespace

class TestReshard : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

    fs::path demo(const std::string& name, int world, uint64_t numel, uint64_t seed = 3,
                  ParamDtype dtype = ParamDtype::F16)
    {
        SaveOptions options;
        options.training_state = {{"optimizer", {{"step", 77}}}, {"rng", {{"seed", seed}}}};
        options.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(seed, numel, world, dtype), root() / name, 77, options);
        return root() / name;
    }

private slots:
    void planOnAwkwardShapes_data()
    {
        QTest::addColumn<int>("from");
        QTest::addColumn<int>("to");
        QTest::addColumn<qulonglong>("numel");
        QTest::newRow("4->8") << 4 << 8 << 1000ull;
        QTest::newRow("8->4") << 8 << 4 << 1000ull;
        QTest::newRow("4->3 uneven") << 4 << 3 << 1001ull;
        QTest::newRow("1->5") << 1 << 5 << 12ull;
        QTest::newRow("3->1") << 3 << 1 << 7ull;
        QTest::newRow("fewer params than ranks") << 2 << 8 << 3ull;
        QTest::newRow("same size") << 4 << 4 << 999ull;
        QTest::newRow("no parameters") << 2 << 3 << 0ull;
    }

    void planOnAwkwardShapes()
    {
        QFETCH(int, from);
        QFETCH(int, to);
        QFETCH(qulonglong, numel);
        const Manifest m = layout(numel, from);
        const ReshardPlan plan = plan_reshard(m, to);
        const std::string defect = plan_defect(m, plan, to);
        QVERIFY2(defect.empty(), defect.c_str());
    }

    void planKnownFigures()
    {
        // 4 -> 8 over 800 elements: new rank r reads half of old rank r/2.
        const ReshardPlan plan = plan_reshard(layout(800, 4), 8);
        QCOMPARE(plan.targets[3].runs.size(), std::size_t(1));
        QCOMPARE(plan.targets[3].runs[0].source_rank, 1);
        QCOMPARE(plan.targets[3].runs[0].source_offset, uint64_t(100));
        // Only new rank 0 keeps its index and its bytes ([0,100) of old rank 0).
        QCOMPARE(plan.bytes_staying, uint64_t(100 * 14));
        // 4 -> 3 over 12: new rank 1 = [4, 8) = old rank 1 [1,3) + old rank 2 [0,2).
        const ReshardPlan three = plan_reshard(layout(12, 4), 3);
        QCOMPARE(three.targets[1].runs.size(), std::size_t(2));
        QCOMPARE(three.targets[1].runs[0].source_rank, 1);
        QCOMPARE(three.targets[1].runs[0].source_offset, uint64_t(1));
        QCOMPARE(three.targets[1].runs[1].source_rank, 2);
        QCOMPARE(three.targets[1].runs[1].numel, uint64_t(2));
    }

    void planPropertyOverRandomShapes()
    {
        std::mt19937_64 rng(20261129);
        for (int i = 0; i < 2000; ++i) {
            const int from = 1 + int(rng() % 64), to = 1 + int(rng() % 64);
            const uint64_t numel = (i % 3 == 0) ? rng() % 100 : rng() % 1'000'000'000;
            // Source layouts need not be even: cut at random sorted points.
            Manifest m = layout(numel, from);
            std::vector<uint64_t> cuts{0, numel};
            for (int c = 1; c < from; ++c)
                cuts.push_back(numel ? rng() % (numel + 1) : 0);
            std::sort(cuts.begin(), cuts.end());
            for (int r = 0; r < from; ++r) {
                m.shards[std::size_t(r)].param_shard_offset = cuts[std::size_t(r)];
                m.shards[std::size_t(r)].param_shard_numel = cuts[std::size_t(r) + 1] - cuts[std::size_t(r)];
            }
            const std::string defect = plan_defect(m, plan_reshard(m, to), to);
            QVERIFY2(defect.empty(),
                     (defect + " for " + std::to_string(from) + "->" + std::to_string(to) + " numel " +
                      std::to_string(numel))
                         .c_str());
        }
    }

    void planRejectsBadTargets()
    {
        for (int bad : {0, -1, kMaxWorldSize + 1}) {
            try {
                plan_reshard(layout(10, 2), bad);
                QFAIL("an impossible target world size must be refused");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ProblemKind::invalid_argument);
            }
        }
    }

    void roundTripsPreserveEveryByte_data()
    {
        QTest::addColumn<QList<int>>("chain");
        QTest::newRow("4->8->4") << QList<int>{4, 8, 4};
        QTest::newRow("4->3") << QList<int>{4, 3};
        QTest::newRow("8->1") << QList<int>{8, 1};
        QTest::newRow("1->5") << QList<int>{1, 5};
    }

    void roundTripsPreserveEveryByte()
    {
        QFETCH(QList<int>, chain);
        const uint64_t numel = 123'457;
        const std::string tag = QTest::currentDataTag();
        fs::path current = demo("src-" + tag, chain.front(), numel, 5, ParamDtype::BF16);
        const StateDigests original = flat_state_digests(load_sharded(current, chain.front()).ranks);
        for (int i = 1; i < chain.size(); ++i) {
            const fs::path next = root() / ("dst-" + tag + "-" + std::to_string(i));
            const ReshardResult result = reshard(current, chain[i], next);
            QCOMPARE(result.manifest.world_size, chain[i]);
            const LoadedCheckpoint loaded = load_sharded(next, chain[i]);
            QCOMPARE(flat_state_digests(loaded.ranks), original);
            // Byte for byte what a save at the new world size would have written.
            const auto direct = make_demo_state(5, numel, chain[i], ParamDtype::BF16);
            for (int r = 0; r < chain[i]; ++r)
                QVERIFY(loaded.ranks[std::size_t(r)] == direct[std::size_t(r)]);
            QCOMPARE(loaded.manifest.step, uint64_t(77));
            QVERIFY(loaded.manifest.training_state == read_manifest(current).training_state);
            QCOMPARE(loaded.manifest.tensors.size(), demo_tensor_layout(numel).size());
            current = next;
        }
    }

    void refusesDangerousDestinations()
    {
        const fs::path src = demo("refuse", 2, 1000);
        const auto kind_of = [&](const fs::path& dst) {
            try {
                reshard(src, 4, dst);
            } catch (const Error& e) {
                return e.kind();
            }
            return ProblemKind::cancelled; // means "no error"
        };
        QCOMPARE(kind_of(src), ProblemKind::invalid_argument);
        QCOMPARE(kind_of(src / "inner"), ProblemKind::invalid_argument);
        QCOMPARE(kind_of(src / "." / ".." / "refuse"), ProblemKind::invalid_argument);
        fs::create_directories(root() / "occupied");
        testutil::write_text(root() / "occupied" / "notes.txt", "keep me");
        QCOMPARE(kind_of(root() / "occupied"), ProblemKind::already_exists);
        QVERIFY(fs::exists(root() / "occupied" / "notes.txt"));
        QVERIFY(verify_checkpoint(src).ok());
    }

    void cancelLeavesNoManifestAndSourceUntouched()
    {
        const fs::path src = demo("cancel", 2, 2'000'000);
        const std::string manifest_before = testutil::read_text(src / "manifest.json");
        std::atomic<bool> cancel{false};
        ReshardOptions options;
        options.cancel = &cancel;
        options.progress = [&](uint64_t done, uint64_t total) {
            if (done > total * 3 / 4) // inside the copy phase
                cancel = true;
        };
        const fs::path dst = root() / "cancel-dst";
        try {
            reshard(src, 3, dst, options);
            QFAIL("the reshard should have been cancelled");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cancelled);
        }
        QVERIFY(!fs::exists(dst / "manifest.json"));
        for (const auto& entry : fs::directory_iterator(dst))
            QFAIL(("left behind: " + entry.path().string()).c_str());
        QCOMPARE(testutil::read_text(src / "manifest.json"), manifest_before);
        QVERIFY(verify_checkpoint(src).ok());
    }

    void injectedWriteFailureLeavesNoManifest_data()
    {
        QTest::addColumn<int>("op");
        QTest::addColumn<int>("k");
        QTest::newRow("3rd write ENOSPC") << int(fsutil::IoOp::write) << 3;
        QTest::newRow("2nd fsync EIO") << int(fsutil::IoOp::fsync) << 2;
        QTest::newRow("last fsync (directory after manifest)") << int(fsutil::IoOp::fsync) << 5;
        QTest::newRow("1st rename") << int(fsutil::IoOp::rename) << 1;
        QTest::newRow("manifest rename") << int(fsutil::IoOp::rename) << 3;
    }

    void injectedWriteFailureLeavesNoManifest()
    {
        QFETCH(int, op);
        QFETCH(int, k);
        const std::string tag = QTest::currentDataTag();
        const fs::path src = demo("fault-src-" + tag, 2, 300'000);
        const fs::path dst = root() / ("fault-dst-" + tag);
        ReshardOptions options;
        options.threads = 1; // a deterministic order of operations
        fsutil::inject_fault(static_cast<fsutil::IoOp>(op), k, op == int(fsutil::IoOp::write) ? ENOSPC : EIO);
        try {
            reshard(src, 2, dst, options);
            fsutil::reset_io_counts();
            QFAIL("the injected failure must surface as an error");
        } catch (const Error& e) {
            fsutil::reset_io_counts();
            QCOMPARE(e.kind(), ProblemKind::io_error);
        }
        QVERIFY(!fs::exists(dst / "manifest.json"));
        for (const auto& entry : fs::directory_iterator(dst))
            QFAIL(("left behind: " + entry.path().string()).c_str());
        QVERIFY(verify_checkpoint(src).ok());
    }

    void corruptSourceIsRefused()
    {
        const fs::path src = demo("corrupt-src", 3, 50'000);
        testutil::flip_byte(src / "rank1.safetensors", 20'000);
        try {
            reshard(src, 2, root() / "corrupt-dst");
            QFAIL("a corrupt source must not be resharded");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::hash_mismatch);
            QCOMPARE(e.problem().rank, 1);
        }
        QVERIFY(!fs::exists(root() / "corrupt-dst" / "manifest.json"));
    }
};

QTEST_GUILESS_MAIN(TestReshard)
#include "tst_reshard.moc"
