// Save -> load round trips, the two-phase commit, verification with progress and cancel.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/util/fsutil.h"
#include "core/util/hashing.h"
#include "core/checkpoint/safetensors.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <fstream>
#include <memory>
#include <fcntl.h>
#include <random>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// Per-rank state with no structure at all (random bits, NaN patterns included) so that any byte
// the save/load path rearranged or rounded would show.
std::vector<RankState> random_state(uint64_t numel, int world, ParamDtype dtype, uint32_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<RankState> states;
    for (int r = 0; r < world; ++r) {
        RankState s;
        s.rank = r;
        s.dtype = dtype;
        s.param_shard_offset = even_shard_offset(numel, world, r);
        const auto n = static_cast<std::size_t>(even_shard_offset(numel, world, r + 1) - s.param_shard_offset);
        s.param.resize(n);
        s.master.resize(n);
        s.exp_avg.resize(n);
        s.exp_avg_sq.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const uint64_t bits = rng();
            s.param[i] = static_cast<uint16_t>(bits);
            uint32_t words[3] = {static_cast<uint32_t>(bits >> 16), static_cast<uint32_t>(rng()),
                                 static_cast<uint32_t>(rng() >> 7)};
            std::memcpy(&s.master[i], &words[0], 4);
            std::memcpy(&s.exp_avg[i], &words[1], 4);
            std::memcpy(&s.exp_avg_sq[i], &words[2], 4);
        }
        states.push_back(std::move(s));
    }
    return states;
}

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

fs::path dir_of(const QTemporaryDir& tmp, const char* name = "step-000001")
{
    return fs::path(tmp.path().toStdString()) / name;
}

// save_sharded's error kind for `states` as an int (QCOMPARE prints it), -1 when it saved.
int save_error(const std::vector<RankState>& states, const fs::path& dir)
{
    try {
        save_sharded(states, dir, 1);
    } catch (const Error& e) {
        return int(e.kind());
    }
    return -1;
}

std::string file_bytes(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

} // namespace

class TestCheckpoint : public QObject {
    Q_OBJECT
private slots:
    void roundTripIsByteExact_data()
    {
        QTest::addColumn<int>("world");
        QTest::addColumn<int>("dtype");
        for (int world : {1, 2, 4, 8})
            for (int dtype : {0, 1})
                QTest::addRow("world%d-%s", world, dtype ? "bf16" : "f16") << world << dtype;
    }

    void roundTripIsByteExact()
    {
        QFETCH(int, world);
        QFETCH(int, dtype);
        const auto type = dtype ? ParamDtype::BF16 : ParamDtype::F16;
        const uint64_t numel = 100'003; // prime: no world size divides it
        const auto states = random_state(numel, world, type, 1234u + static_cast<uint32_t>(world));
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const Manifest saved = save_sharded(states, dir, 77);
        QCOMPARE(saved.world_size, world);
        QCOMPARE(saved.param_numel_total, numel);

        const LoadedCheckpoint loaded = load_sharded(dir, world);
        QCOMPARE(loaded.manifest.step, uint64_t(77));
        QCOMPARE(loaded.manifest.param_dtype, type);
        QCOMPARE(int(loaded.ranks.size()), world);
        for (int r = 0; r < world; ++r) {
            const auto& a = states[static_cast<std::size_t>(r)];
            const auto& b = loaded.ranks[static_cast<std::size_t>(r)];
            QCOMPARE(b.rank, r);
            QCOMPARE(b.param_shard_offset, a.param_shard_offset);
            QVERIFY2(same_bytes(a.param, b.param), "param differs");
            QVERIFY2(same_bytes(a.master, b.master), "master differs");
            QVERIFY2(same_bytes(a.exp_avg, b.exp_avg), "exp_avg differs");
            QVERIFY2(same_bytes(a.exp_avg_sq, b.exp_avg_sq), "exp_avg_sq differs");
        }
        // Nothing but the shards and the manifest is left behind.
        int files = 0;
        for (const auto& entry : fs::directory_iterator(dir)) {
            QVERIFY2(entry.path().extension() != ".tmp", entry.path().c_str());
            ++files;
        }
        QCOMPARE(files, world + 1);
    }

    void shardIsStandardSafetensors()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const auto states = make_demo_state(5, 1001, 2, ParamDtype::BF16);
        const Manifest m = save_sharded(states, dir, 3);
        const fs::path file = dir / m.shards[1].path;
        QCOMPARE(fs::file_size(file), m.shards[1].bytes);
        auto fd = fsutil::open_beneath_for_read(fsutil::open_directory(dir).get(), m.shards[1].path);
        QVERIFY(fd.status == fsutil::OpenStatus::ok);
        const SafetensorsHeader header =
            read_safetensors_header(storage::FileReader(fd.fd.get()), fd.size, file.string());
        QCOMPARE(header.data_start() % 8, uint64_t(0)); // data aligned, as the reference writer does
        QCOMPARE(header.tensors.size(), std::size_t(4));
        QCOMPARE(header.find("param")->dtype, std::string("BF16"));
        QCOMPARE(header.find("exp_avg_sq")->dtype, std::string("F32"));
        QCOMPARE(header.find("master")->shape, std::vector<uint64_t>{states[1].numel()});
        QCOMPARE(header.metadata.at("rank"), std::string("1"));
        QCOMPARE(header.metadata.at("param_shard_offset"), std::to_string(states[1].param_shard_offset));
        // The recorded hash is the hash of the bytes on disk (computed while writing).
        std::ifstream in(file, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), {});
        QCOMPARE(sha256_hex(std::as_bytes(std::span(bytes))), m.shards[1].sha256);
    }

    void digestsIgnoreSharding()
    {
        const auto four = make_demo_state(42, 50'001, 4, ParamDtype::F16);
        const auto eight = make_demo_state(42, 50'001, 8, ParamDtype::F16);
        const auto other_seed = make_demo_state(43, 50'001, 4, ParamDtype::F16);
        QCOMPARE(flat_state_digests(four), flat_state_digests(eight));
        QVERIFY(flat_state_digests(four).param != flat_state_digests(other_seed).param);
        QVERIFY(flat_state_digests(four).exp_avg_sq != flat_state_digests(other_seed).exp_avg_sq);
    }

    void refusesToOverwriteCompleteCheckpoint()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const Manifest first = save_sharded(make_demo_state(1, 4096, 2, ParamDtype::F16), dir, 1);
        try {
            save_sharded(make_demo_state(2, 4096, 2, ParamDtype::F16), dir, 2);
            QFAIL("a second save into a complete checkpoint must be refused");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::already_exists);
        }
        QVERIFY(verify_checkpoint(dir).ok()); // the first checkpoint is untouched
        QCOMPARE(read_manifest(dir).step, uint64_t(1));
    }

    void twoPhaseSaveComposesAcrossCallers()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const auto states = make_demo_state(9, 30'000, 3, ParamDtype::F16);
        std::vector<ShardRecord> records;
        for (const auto& s : states) // as three separate processes would
            records.push_back(write_rank_shard(dir, s, 3));
        QVERIFY(!fs::exists(dir / "manifest.json"));
        CheckpointMeta meta;
        meta.world_size = 3;
        meta.step = 5;
        meta.param_numel_total = 30'000;

        // A coordinator that did not hear from every rank must not commit.
        std::vector<ShardRecord> missing(records.begin(), records.end() - 1);
        try {
            commit(dir, missing, meta);
            QFAIL("commit with a missing rank must fail");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::shard_count_mismatch);
        }
        QVERIFY(!fs::exists(dir / "manifest.json"));

        std::reverse(records.begin(), records.end()); // gathering order does not matter
        const Manifest m = commit(dir, records, meta);
        QCOMPARE(m.shards[0].rank, 0);
        QCOMPARE(flat_state_digests(load_sharded(dir, 3).ranks), flat_state_digests(states));
    }

    void commitRefusesATruncatedShard()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const auto states = make_demo_state(9, 3000, 2, ParamDtype::F16);
        std::vector<ShardRecord> records;
        for (const auto& s : states)
            records.push_back(write_rank_shard(dir, s, 2));
        fs::resize_file(dir / records[1].path, records[1].bytes - 10);
        CheckpointMeta meta;
        meta.world_size = 2;
        meta.param_numel_total = 3000;
        try {
            commit(dir, records, meta);
            QFAIL("commit must refuse a shard that is not fully in place");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::partial_write);
            QCOMPARE(e.problem().rank, 1);
        }
        QVERIFY(!fs::exists(dir / "manifest.json"));
    }

    void cancelledSaveLeavesNoManifest()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        std::atomic<bool> cancel{false};
        SaveOptions options;
        options.cancel = &cancel;
        options.progress = [&](uint64_t done, uint64_t) {
            if (done > (4u << 20))
                cancel = true;
        };
        try {
            save_sharded(make_demo_state(3, 3'000'000, 2, ParamDtype::F16), dir, 1, options);
            QFAIL("the save should have been cancelled");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cancelled);
        }
        QVERIFY(!fs::exists(dir / "manifest.json"));
        for (const auto& entry : fs::directory_iterator(dir))
            QVERIFY2(entry.path().extension() != ".tmp", entry.path().c_str());
    }

    void verifyReportsProgressPerShard()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const Manifest m = save_sharded(make_demo_state(11, 2'000'000, 4, ParamDtype::F16), dir, 9);
        std::mutex mutex;
        uint64_t last_done = 0, last_total = 0;
        std::vector<int> done_calls(4, 0);
        VerifyOptions options;
        options.threads = 2;
        options.callbacks.progress = [&](uint64_t done, uint64_t total) {
            std::lock_guard lock(mutex);
            last_done = std::max(last_done, done);
            last_total = total;
        };
        options.callbacks.shard_done = [&](std::size_t index, const ShardCheck& check) {
            std::lock_guard lock(mutex);
            QCOMPARE(check.status, ShardStatus::ok);
            ++done_calls[index];
        };
        const VerifyReport report = verify_checkpoint(dir, options);
        QVERIFY(report.ok());
        QCOMPARE(last_total, m.total_bytes());
        QCOMPARE(last_done, m.total_bytes());
        QCOMPARE(done_calls, std::vector<int>(4, 1));
        for (const auto& s : report.shards)
            QCOMPARE(s.actual_digest, m.shard_for_rank(s.rank)->sha256);

        VerifyOptions fast;
        fast.fast = true;
        const VerifyReport quick = verify_checkpoint(dir, fast);
        QVERIFY(quick.ok());
        QCOMPARE(quick.shards[0].actual_digest, m.shards[0].xxh3);
    }

    void verifyCanBeCancelled()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        save_sharded(make_demo_state(11, 3'000'000, 2, ParamDtype::F16), dir, 9);
        std::atomic<bool> cancel{false};
        VerifyOptions options;
        options.threads = 1;
        options.cancel = &cancel;
        options.callbacks.progress = [&](uint64_t, uint64_t) { cancel = true; };
        const VerifyReport report = verify_checkpoint(dir, options);
        QVERIFY(report.cancelled);
        QVERIFY(!report.ok());
        QVERIFY(report.problems.empty()); // cancelling is not a finding about the checkpoint
    }

    void rootWithLatestResolvesToStep()
    {
        QTemporaryDir tmp;
        const fs::path root(tmp.path().toStdString());
        save_sharded(make_demo_state(1, 1000, 2, ParamDtype::F16), root / "step-000010", 10);
        save_sharded(make_demo_state(1, 1000, 2, ParamDtype::F16), root / "step-000020", 20);
        testutil::write_text(root / "latest", "step-000020\n");
        QCOMPARE(resolve_checkpoint_dir(root), root / "step-000020");
        const VerifyReport report = verify_checkpoint(root);
        QVERIFY(report.ok());
        QCOMPARE(report.manifest->step, uint64_t(20));
        QCOMPARE(load_sharded(root, 2).manifest.step, uint64_t(20));
    }

    void emptyShardsAreLegal()
    {
        // More ranks than parameters: some ranks own nothing, and that still round-trips.
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        const auto states = make_demo_state(4, 3, 8, ParamDtype::F16);
        save_sharded(states, dir, 1);
        QVERIFY(verify_checkpoint(dir).ok());
        QCOMPARE(flat_state_digests(load_sharded(dir, 8).ranks), flat_state_digests(states));
    }

    // check_save runs before save_sharded creates anything: states that cannot form a checkpoint
    // leave no directory behind (and so nothing a later save or a crash scan would trip over).
    void badLayoutIsRefusedBeforeAnythingIsWritten_data()
    {
        QTest::addColumn<int>("shift");
        QTest::addColumn<int>("kind");
        QTest::addRow("gap") << 5 << int(ProblemKind::layout_gap);
        QTest::addRow("overlap") << -5 << int(ProblemKind::layout_overlap);
    }

    void badLayoutIsRefusedBeforeAnythingIsWritten()
    {
        QFETCH(int, shift);
        QFETCH(int, kind);
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        auto states = make_demo_state(3, 4000, 2, ParamDtype::F16);
        states[1].param_shard_offset =
            static_cast<uint64_t>(static_cast<int64_t>(states[1].param_shard_offset) + shift);
        QCOMPARE(save_error(states, dir), kind);
        QVERIFY(!fs::exists(dir));
    }

    void duplicateRankIsRefusedBeforeAnythingIsWritten()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        auto states = make_demo_state(3, 4000, 3, ParamDtype::F16);
        states[2].rank = 1;
        QCOMPARE(save_error(states, dir), int(ProblemKind::duplicate_rank));
        QVERIFY(!fs::exists(dir));
    }

    // save.h: the check of the states comes first, so bad states aimed at a complete checkpoint
    // report their own problem, not already_exists — and the checkpoint is untouched either way.
    void badStatesOverACompleteCheckpointReportTheirOwnProblem()
    {
        QTemporaryDir tmp;
        const fs::path dir = dir_of(tmp);
        save_sharded(make_demo_state(1, 4000, 2, ParamDtype::F16), dir, 1);
        auto states = make_demo_state(2, 4000, 2, ParamDtype::F16);
        states[1].param_shard_offset += 5;
        QCOMPARE(save_error(states, dir), int(ProblemKind::layout_gap));
        QCOMPARE(save_error(make_demo_state(2, 4000, 2, ParamDtype::F16), dir), int(ProblemKind::already_exists));
        QVERIFY(verify_checkpoint(dir).ok());
        QCOMPARE(read_manifest(dir).step, uint64_t(1));
    }

    // What the Python module does: views over memory the caller owns (here plain heap arrays
    // that no RankState knows about) write the same bytes as the RankState path.
    void viewOverCallerMemorySavesTheSameBytes()
    {
        const auto states = random_state(10'007, 3, ParamDtype::BF16, 99u);
        std::vector<std::unique_ptr<uint16_t[]>> params;
        std::vector<std::unique_ptr<float[]>> floats;
        std::vector<RankStateView> views;
        for (const RankState& s : states) {
            const std::size_t n = s.param.size();
            params.push_back(std::make_unique<uint16_t[]>(n));
            std::memcpy(params.back().get(), s.param.data(), n * sizeof(uint16_t));
            const float* copied[3];
            for (int t = 0; t < 3; ++t) {
                const std::vector<float>& from = t == 0 ? s.master : t == 1 ? s.exp_avg : s.exp_avg_sq;
                floats.push_back(std::make_unique<float[]>(n));
                std::memcpy(floats.back().get(), from.data(), n * sizeof(float));
                copied[t] = floats.back().get();
            }
            views.push_back({.rank = s.rank,
                             .dtype = s.dtype,
                             .param_shard_offset = s.param_shard_offset,
                             .param = {params.back().get(), n},
                             .master = {copied[0], n},
                             .exp_avg = {copied[1], n},
                             .exp_avg_sq = {copied[2], n}});
        }
        QTemporaryDir tmp;
        const Manifest a = save_sharded(states, dir_of(tmp, "from-state"), 4);
        const Manifest b = save_sharded(views, dir_of(tmp, "from-view"), 4);
        QCOMPARE(b.shards.size(), a.shards.size());
        for (std::size_t i = 0; i < a.shards.size(); ++i) {
            QCOMPARE(b.shards[i].sha256, a.shards[i].sha256);
            QCOMPARE(b.shards[i].xxh3, a.shards[i].xxh3);
            QCOMPARE(b.shards[i].bytes, a.shards[i].bytes);
            QVERIFY(file_bytes(dir_of(tmp, "from-view") / b.shards[i].path) ==
                    file_bytes(dir_of(tmp, "from-state") / a.shards[i].path));
        }
        QCOMPARE(flat_state_digests(load_sharded(dir_of(tmp, "from-view"), 3).ranks), flat_state_digests(states));
    }
};

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "tst_checkpoint.moc"
