// Power cuts during one checkpoint write: save_sharded (threads), write_rank_shard + commit as a
// multi-process job runs them, and reshard. Each crash state the persistence model allows is
// written out and opened again: a manifest means every shard verifies with the bytes that were
// saved, a save that returned survives, and what a crash left is reported and replaced by the
// next save.

#include "crash_check.h"

#include "core/checkpoint/reshard.h"
#include "core/checkpoint/save.h"
#include "core/run/demo.h"

using namespace crash;

namespace {

constexpr uint64_t kNumel = 3000; // 750 elements a rank: 10.5 KiB, three 4 KiB blocks per shard
constexpr int kWorld = 4;
constexpr std::size_t kCap = 24; // states per crash point at most

std::vector<RankState> state(uint64_t seed, int world = kWorld)
{
    return make_demo_state(seed, kNumel, world, ParamDtype::BF16);
}

// The checks for a directory one save writes: a manifest only over the saved bytes; the save
// survives once it returned; otherwise verify says what is wrong and the next save succeeds.
std::string check_one_save(const fs::path& dir, bool returned, const std::vector<RankState>& saved)
{
    if (auto why = manifest_without_shards(dir.parent_path()); !why.empty())
        return why;
    const bool has_manifest = fs::exists(dir / "manifest.json");
    if (returned && !has_manifest)
        return "the save had returned, but after the power cut " + dir.filename().string() + " has no manifest";
    if (has_manifest)
        return differs(dir, saved);
    if (fs::exists(dir) && !reported_as_interrupted(dir)) // what the crash left is reported as such
        return "verify does not report " + dir.filename().string() + " (no manifest) as an interrupted save";
    SaveOptions again;
    again.threads = 2;
    const std::vector<RankState> next = state(77);
    save_sharded(next, dir, 1, again);
    if (auto why = leftovers(dir.parent_path()); !why.empty())
        return "after the next save: " + why;
    return differs(dir, next);
}

} // namespace

class TestCrashSave : public QObject {
    Q_OBJECT

    Workspace m_work;
    fs::path fresh() { return m_work.fresh(); }

private slots:
    void theModelReplaysTheRun()
    {
        // Everything kept at the last point is exactly what is on disk: the recorder saw every
        // change (a change it missed would make the crash states fiction).
        const fs::path base = fresh();
        CrashRecorder rec(base);
        SaveOptions options;
        options.threads = 2;
        save_sharded(state(1), base / "step", 1, options);
        finish_recording(rec, base, m_work.scratch());
        QVERIFY(rec.operations() > 30);
    }

    void saveSharded()
    {
        const fs::path base = fresh();
        const std::vector<RankState> saved = state(1);
        CrashRecorder rec(base);
        SaveOptions options;
        options.threads = 2;
        save_sharded(saved, base / "step", 1, options);
        rec.mark("returned");
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check_states("save_sharded, 4 ranks on 2 threads", rec, kCap, 17, m_work.scratch(),
                     [&](const CrashRecorder::Point& p, const fs::path& out) {
                         return check_one_save(out / "step", !marked(rec, p.position, "returned").empty(), saved);
                     });
    }

    void writeRankShardThenCommit()
    {
        // What a job of four processes does: each writes its own shard, one commits. The
        // processes' operations are recorded one after another; the model lets any of them be
        // lost independently, which covers every interleaving's crash states.
        const fs::path base = fresh();
        const std::vector<RankState> saved = state(2);
        CrashRecorder rec(base);
        std::vector<ShardRecord> records;
        for (const RankState& rank : saved)
            records.push_back(write_rank_shard(base / "step", rank, kWorld));
        CheckpointMeta meta;
        meta.world_size = kWorld;
        meta.step = 1;
        meta.param_dtype = ParamDtype::BF16;
        meta.param_numel_total = kNumel;
        commit(base / "step", records, meta);
        rec.mark("returned");
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check_states("write_rank_shard x4 + commit", rec, kCap, 18, m_work.scratch(),
                     [&](const CrashRecorder::Point& p, const fs::path& out) {
                         return check_one_save(out / "step", !marked(rec, p.position, "returned").empty(), saved);
                     });
    }

    void reshardFourToThree()
    {
        const fs::path base = fresh();
        const std::vector<RankState> saved = state(3);
        save_sharded(saved, base / "src", 1);
        const StateDigests expected = flat_state_digests(saved);
        CrashRecorder rec(base);
        reshard(base / "src", 3, base / "dst");
        rec.mark("returned");
        finish_recording(rec, base, m_work.scratch());
        if (QTest::currentTestFailed())
            return;
        check_states(
            "reshard 4 -> 3", rec, kCap, 19, m_work.scratch(), [&](const CrashRecorder::Point& p, const fs::path& out) {
                if (auto why = manifest_without_shards(out); !why.empty())
                    return why;
                if (auto why = differs(out / "src", saved); !why.empty())
                    return "the source changed: " + why;
                const fs::path dst = out / "dst";
                const bool has_manifest = fs::exists(dst / "manifest.json");
                if (!marked(rec, p.position, "returned").empty() && !has_manifest)
                    return std::string("reshard had returned, but the destination has no manifest");
                if (!has_manifest) {
                    if (!fs::exists(dst))
                        return std::string();
                    return reported_as_interrupted(dst) ? std::string()
                                                        : std::string("verify does not report the interrupted reshard");
                }
                if (flat_state_digests(load_sharded(dst, 3).ranks) != expected)
                    return std::string("the resharded checkpoint verifies but holds other bytes");
                return std::string();
            });
    }
};

QTEST_GUILESS_MAIN(TestCrashSave)
#include "tst_crash_save.moc"
