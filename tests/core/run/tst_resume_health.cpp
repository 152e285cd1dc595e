// A step's health over its lifetime: counted by the writer and recorded in the commit, kept by
// retention when it is the last healthy one, chosen by resume over newer diverged steps — and a
// load or resume that would drop state refuses, or names what it dropped.

#include "core/checkpoint/rankio.h"
#include "core/checkpoint/reshard.h"
#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "core/run/lifecycle.h"
#include "core/run/training.h"
#include "core/util/hashing.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <limits>

using namespace shardscope;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<RankState> state(uint64_t seed, ParamDtype dtype = ParamDtype::F16)
{
    return make_demo_state(seed, 10'000, 2, dtype);
}

// A state whose rank 1 holds a NaN in exp_avg_sq, as a run that diverged saves it.
std::vector<RankState> diverged(uint64_t seed)
{
    auto s = state(seed);
    s[1].exp_avg_sq[17] = kNaN;
    return s;
}

std::vector<uint64_t> complete_steps(const fs::path& root)
{
    std::vector<uint64_t> out;
    for (const auto& s : list_steps(root))
        if (s.complete)
            out.push_back(s.step);
    return out;
}

// Appends an F32 tensor `name` to a shard file and records the new size and digest in the
// manifest, as a writer that saves more than the four vectors would.
void add_tensor(const fs::path& dir, int rank, const std::string& name, const std::vector<float>& values)
{
    const fs::path file = dir / ("rank" + std::to_string(rank) + ".safetensors");
    const std::string bytes = testutil::read_text(file);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    json header = json::parse(bytes.substr(8, length));
    std::string data = bytes.substr(8 + length);
    header[name] = {
        {"dtype", "F32"}, {"shape", {values.size()}}, {"data_offsets", {data.size(), data.size() + values.size() * 4}}};
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t new_length = text.size();
    std::string out(8, '\0');
    std::memcpy(out.data(), &new_length, 8);
    out += text + data;
    testutil::write_text(file, out);
    testutil::edit_manifest(dir, [&](json& m) {
        for (auto& s : m["shards"])
            if (s["rank"] == rank) {
                s["bytes"] = out.size();
                s["sha256"] = sha256_hex(std::as_bytes(std::span(out.data(), out.size())));
                s.erase("xxh3");
            }
    });
}

} // namespace

class TestResumeHealth : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    int m_counter = 0;
    fs::path fresh(const char* name)
    {
        return fs::path(m_tmp.path().toStdString()) / (std::string(name) + "-" + std::to_string(++m_counter));
    }

    ManagerOptions options(const fs::path& root, int keep, std::vector<std::string>* warnings = nullptr)
    {
        ManagerOptions o;
        o.root = root;
        o.keep_last = keep;
        o.durable = false;
        o.on_warning = [warnings](const std::string& m) {
            if (warnings)
                warnings->push_back(m);
        };
        return o;
    }

private slots:
    void scanCountsEachFinding_data()
    {
        QTest::addColumn<ParamDtype>("dtype");
        QTest::addRow("f16") << ParamDtype::F16;
        QTest::addRow("bf16") << ParamDtype::BF16;
    }

    void scanCountsEachFinding()
    {
        QFETCH(ParamDtype, dtype);
        RankState s = state(3, dtype)[0];
        QVERIFY(scan_health(s).healthy());
        QCOMPARE(describe(scan_health(s)), std::string("healthy"));

        s.master[3] = kNaN; // its param is still the old rounding: a NaN master is not a mismatch
        s.exp_avg[0] = std::numeric_limits<float>::infinity();
        s.exp_avg_sq[5] = -1.0f;
        s.exp_avg_sq[6] = -0.0f; // not negative
        s.param[7] ^= 1; // one unit in the last place off its master
        s.param[8] = float_to_param(kNaN, dtype);
        const StateHealth h = scan_health(s);
        QCOMPARE(h.nonfinite_master, uint64_t(1));
        QCOMPARE(h.nonfinite_exp_avg, uint64_t(1));
        QCOMPARE(h.nonfinite_exp_avg_sq, uint64_t(0));
        QCOMPARE(h.negative_exp_avg_sq, uint64_t(1));
        QCOMPARE(h.nonfinite_param, uint64_t(1));
        QCOMPARE(h.param_master_mismatch, uint64_t(2)); // elements 7 and 8
        QVERIFY(!h.healthy());
        QCOMPARE(describe(h),
                 std::string("1 non-finite param values, 1 non-finite master values, 1 non-finite "
                             "exp_avg values, 1 negative exp_avg_sq values, 2 params that are not "
                             "their master weight rounded"));
    }

    void writersCountEveryPiece()
    {
        // Large enough for several of the writer's pieces per vector, with findings either side of
        // a piece boundary: what write_rank_shard and reshard record equals the count over the
        // whole state.
        std::vector<RankState> ranks = make_demo_state(8, 2 * 200'000, 2, ParamDtype::BF16);
        for (RankState& r : ranks)
            for (const std::size_t k : {std::size_t(65535), std::size_t(65536), std::size_t(131072)}) {
                r.param[k] = float_to_param(kNaN, r.dtype);
                r.master[k + 1] = std::numeric_limits<float>::infinity();
                r.exp_avg[k] = kNaN;
                r.exp_avg_sq[k] = -2.0f;
                r.exp_avg_sq[k + 2] = kNaN;
            }
        const fs::path dir = fresh("pieces");
        const Manifest m = save_sharded(ranks, dir, 1, {.durable = false});
        for (std::size_t i = 0; i < ranks.size(); ++i)
            QCOMPARE(*m.shards[i].health, scan_health(ranks[i]));
        QCOMPARE(m.shards[0].health->nonfinite_exp_avg_sq, uint64_t(3));
        QCOMPARE(m.shards[0].health->negative_exp_avg_sq, uint64_t(3));
        // NaN params at 65535, 65536, 131072 and Inf masters at 65536, 65537, 131073: 5 elements.
        QCOMPARE(m.shards[0].health->param_master_mismatch, uint64_t(5));

        // A reshard streams the same bytes into other slices and counts them as they pass.
        const fs::path three = fresh("pieces-3");
        const ReshardResult resharded = reshard(dir, 3, three, {.durable = false});
        const LoadedCheckpoint loaded = load_sharded(three, 3);
        StateHealth sum;
        for (std::size_t i = 0; i < loaded.ranks.size(); ++i) {
            QCOMPARE(*resharded.manifest.shards[i].health, scan_health(loaded.ranks[i]));
            sum += *resharded.manifest.shards[i].health;
        }
        QCOMPARE(sum, *m.health());
    }

    void healthIsRecordedInTheCommit()
    {
        const fs::path root = fresh("record");
        CheckpointManager manager(options(root, 3));
        const Manifest good = manager.save(state(1), 1);
        QVERIFY(good.health() && good.health()->healthy());
        const Manifest bad = manager.save(diverged(2), 2);
        QCOMPARE(bad.health()->nonfinite_exp_avg_sq, uint64_t(1));
        QCOMPARE(bad.describe_health(), std::string("rank 1: 1 non-finite exp_avg_sq values"));
        // On disk, per shard, as the writer counted it.
        const Manifest read = read_manifest(root / step_dir_name(2));
        QVERIFY(read.shards[0].health && read.shards[0].health->healthy());
        QCOMPARE(read.shards[1].health, bad.shards[1].health);
        const auto steps = list_steps(root);
        QVERIFY(steps[0].maybe_healthy() && !steps[1].maybe_healthy());

        // A malformed record is a malformed manifest, naming the rank.
        testutil::edit_manifest(root / step_dir_name(2), [](json& m) { m["shards"][1]["health"]["nonfinite"] = 3; });
        try {
            read_manifest(root / step_dir_name(2));
            QFAIL("a malformed health record was accepted");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_manifest);
            QCOMPARE(e.problem().rank, 1);
            QVERIFY(std::string(e.what()).find("health") != std::string::npos);
        }
    }

    void retentionKeepsTheNewestHealthyStep()
    {
        const fs::path root = fresh("retain");
        std::vector<std::string> warnings;
        CheckpointManager manager(options(root, 2, &warnings));
        manager.save(state(1), 1);
        manager.save(state(2), 2);
        for (uint64_t step = 3; step <= 5; ++step)
            manager.save(diverged(step), step);
        // keep-last-2 alone would keep 4 and 5, both diverged.
        QCOMPARE(complete_steps(root), (std::vector<uint64_t>{2, 4, 5}));
        QCOMPARE(warnings.size(), std::size_t(1)); // said once, when it first applied
        QVERIFY2(warnings[0].find("keeping step-00000002 beyond keep_last 2") != std::string::npos &&
                     warnings[0].find("newest healthy step") != std::string::npos &&
                     warnings[0].find("step-00000004 (rank 1: 1 non-finite exp_avg_sq values)") != std::string::npos,
                 warnings[0].c_str());
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(5))); // `latest`: the newest commit

        // Resume goes back to it and names what it passed over.
        ResumePoint point = load_resume_point(root, std::nullopt);
        QCOMPARE(point.checkpoint.manifest.step, uint64_t(2));
        QCOMPARE(point.checkpoint.ranks, state(2));
        QCOMPARE(point.skipped.size(), std::size_t(2));
        QVERIFY(point.skipped[0].starts_with("step-00000005: rank 1: 1 non-finite exp_avg_sq values"));
        QCOMPARE(load_step_or_root(root).checkpoint.manifest.step, uint64_t(2));
        // Unless told otherwise; and a step named explicitly is loaded as it is.
        QCOMPARE(load_resume_point(root, std::nullopt, {.allow_unhealthy = true}).checkpoint.manifest.step,
                 uint64_t(5));
        QCOMPARE(load_step_or_root(root / step_dir_name(4)).checkpoint.manifest.step, uint64_t(4));
        // By the records alone (shardctl-mpi, whose processes each load one shard): the same step.
        const auto chosen = choose_resume_step(root, false);
        QCOMPARE(chosen->name, step_dir_name(2));
        QCOMPARE(chosen->skipped, point.skipped);
        QCOMPARE(choose_resume_step(root, true)->name, step_dir_name(5));

        // Once a healthy step is newer, the old one goes with the others.
        manager.save(state(6), 6);
        QCOMPARE(complete_steps(root), (std::vector<uint64_t>{5, 6}));
    }

    void noHealthyStepIsRefusedNamingEach()
    {
        const fs::path root = fresh("none");
        CheckpointManager manager(options(root, 2));
        manager.save(diverged(1), 1);
        manager.save(diverged(2), 2);
        QVERIFY_THROWS_EXCEPTION(Error, choose_resume_step(root, false));
        try {
            load_resume_point(root, std::nullopt);
            QFAIL("resumed from a diverged step");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::nonfinite_values);
            const std::string what = e.what();
            QVERIFY2(what.find("no healthy step to resume from: step-00000002") != std::string::npos &&
                         what.find("step-00000001: rank 1") != std::string::npos &&
                         what.find("--allow-unhealthy") != std::string::npos,
                     what.c_str());
        }
    }

    void aDamagedLatestIsNeverPassedOver()
    {
        const fs::path root = fresh("damaged");
        CheckpointManager manager(options(root, 3));
        manager.save(state(1), 1);
        manager.save(state(2), 2);
        testutil::write_text(root / step_dir_name(2) / "manifest.json", "{ torn");
        try {
            load_resume_point(root, std::nullopt);
            QFAIL("resumed from an older step past a damaged latest");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_manifest);
        }
        QCOMPARE(choose_resume_step(root, false)->name, step_dir_name(2)); // its load will say why
        // The next save's clean-up keeps it for verify to explain: no crash leaves a torn manifest.
        manager.save(state(3), 3);
        QVERIFY(fs::exists(root / step_dir_name(2) / "manifest.json"));
    }

    void aStepWithoutARecordIsJudgedByItsValues()
    {
        // A manifest from before health was recorded (or another writer): the values decide.
        const fs::path root = fresh("unrecorded");
        CheckpointManager manager(options(root, 3));
        manager.save(state(1), 1);
        manager.save(diverged(2), 2);
        testutil::edit_manifest(root / step_dir_name(2), [](json& m) {
            for (auto& s : m["shards"])
                s.erase("health");
        });
        QVERIFY(!list_steps(root)[1].recorded_health);
        const ResumePoint point = load_resume_point(root, std::nullopt);
        QCOMPARE(point.checkpoint.manifest.step, uint64_t(1));
        QCOMPARE(point.skipped, std::vector<std::string>{"step-00000002: rank 1: 1 non-finite exp_avg_sq values"});
    }

    void loadNamesTensorsItWouldDrop()
    {
        const fs::path dir = fresh("extra");
        const auto saved = state(4);
        save_sharded(saved, dir, 4, {.durable = false});
        add_tensor(dir, 1, "ema", std::vector<float>(saved[1].numel(), 0.5f));
        try {
            load_sharded(dir, 2);
            QFAIL("a load dropped a tensor silently");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::unread_state);
            QCOMPARE(e.problem().rank, 1);
            QVERIFY2(std::string(e.what()).find("rank1.safetensors (rank 1) holds 'ema'") != std::string::npos,
                     e.what());
        }
        const LoadedCheckpoint loaded = load_sharded(dir, 2, {.allow_unread_state = true});
        QCOMPARE(loaded.ranks, saved);
        QCOMPARE(loaded.unread, std::vector<std::string>{"rank 1: tensor 'ema'"});

        // A reshard writes the four states only: it refuses too, before it creates anything, and
        // so do shardctl-mpi's check before it creates its output and its per-rank read.
        const fs::path out = fresh("extra-resharded");
        try {
            reshard(dir, 3, out, {.durable = false});
            QFAIL("a reshard dropped a tensor silently");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::unread_state);
            QCOMPARE(e.problem().rank, 1);
            QVERIFY2(std::string(e.what()).find("holds 'ema' besides param") != std::string::npos, e.what());
        }
        QVERIFY(!fs::exists(out));
        const Manifest m = read_manifest(dir);
        const ReshardPlan plan = plan_reshard(m, 1);
        QVERIFY_THROWS_EXCEPTION(Error, refuse_dropped_state(dir, m));
        QVERIFY_THROWS_EXCEPTION(Error, read_reshard_target(dir, m, plan.targets[0]));
    }

    void resumeRefusesToDropTrainingState()
    {
        const fs::path root = fresh("trainer");
        TrainConfig config;
        config.world_size = 2;
        config.numel = 4096;
        Trainer trainer(config);
        trainer.step();
        CheckpointManager manager(options(root, 2));
        json ts = trainer.training_state();
        ts["ema"] = {{"decay", 0.999}};
        ts["dataloader"]["prefetch"] = 2;
        manager.save(trainer.ranks(), 1, {.training_state = ts});
        testutil::edit_manifest(root / step_dir_name(1), [](json& m) { m["grad_scaler"] = {{"scale", 65536}}; });

        try {
            Trainer::resume(config, load_resume_point(root, std::nullopt).checkpoint);
            QFAIL("a resume dropped state silently");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::unread_state);
            QVERIFY2(std::string(e.what()).find("training_state.dataloader.prefetch, training_state.ema, manifest "
                                                "field 'grad_scaler'") != std::string::npos,
                     e.what());
        }
        std::vector<std::string> unread;
        const Trainer resumed = Trainer::resume(config, load_resume_point(root, std::nullopt).checkpoint, &unread);
        QCOMPARE(resumed.steps_done(), uint64_t(1));
        QCOMPARE(unread.size(), std::size_t(3));

        // What the trainer restores is checked against the run, not overwritten silently.
        TrainConfig other = config;
        other.beta2 = 0.999;
        try {
            Trainer::resume(other, load_resume_point(root, std::nullopt).checkpoint, &unread);
            QFAIL("resumed with different optimizer settings");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
            QVERIFY(std::string(e.what()).find("optimizer") != std::string::npos);
        }
    }
};

QTEST_GUILESS_MAIN(TestResumeHealth)
#include "tst_resume_health.moc"
