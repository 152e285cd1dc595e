// The checkpoint root over a run's lifetime: `latest`, rotation, async saves, the mirror tier,
// leftovers of crashes, and an injected failure at every write, fsync and rename of a save.

#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/util/fsutil.h"
#include "core/util/internal/fault_injection.h"
#include "core/run/lifecycle.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cerrno>
#include <thread>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

std::vector<RankState> state(uint64_t seed, uint64_t numel = 20'000, int world = 2)
{
    return make_demo_state(seed, numel, world, ParamDtype::F16);
}

std::vector<uint64_t> complete_steps(const fs::path& root, StepTier tier = StepTier::local)
{
    std::vector<uint64_t> out;
    for (const auto& s : list_steps(root, tier == StepTier::mirror ? std::optional<fs::path>(root) : std::nullopt))
        if (s.complete && s.tier == StepTier::local)
            out.push_back(s.step);
    return out;
}

ManagerOptions options(const fs::path& root, int keep, std::optional<fs::path> mirror = std::nullopt, int threads = 0)
{
    ManagerOptions o;
    o.root = root;
    o.keep_last = keep;
    o.mirror = std::move(mirror);
    o.mirror_keep_last = 3;
    o.threads = threads;
    return o;
}

} // namespace

class TestLifecycle : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    int m_counter = 0;
    fs::path fresh(const char* name)
    {
        return fs::path(m_tmp.path().toStdString()) / (std::string(name) + "-" + std::to_string(++m_counter));
    }

private slots:
    void stepNames()
    {
        QCOMPARE(step_dir_name(1234), std::string("step-00001234"));
        QCOMPARE(parse_step_dir_name("step-00001234"), std::optional<uint64_t>(1234));
        QCOMPARE(parse_step_dir_name(step_dir_name(123456789012ull)), std::optional<uint64_t>(123456789012ull));
        QVERIFY(!parse_step_dir_name("step-"));
        QVERIFY(!parse_step_dir_name("step-12a"));
        QVERIFY(!parse_step_dir_name("global_step12"));
    }

    void rotationKeepsLastK_data()
    {
        QTest::addColumn<int>("keep");
        for (int k = 1; k <= 5; ++k)
            QTest::addRow("keep %d", k) << k;
    }

    void rotationKeepsLastK()
    {
        QFETCH(int, keep);
        const fs::path root = fresh("rotate");
        CheckpointManager manager(options(root, keep));
        for (uint64_t step = 10; step <= 80; step += 10) {
            manager.save(state(step), step);
            QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(step)));
            const auto kept = complete_steps(root);
            QVERIFY(!kept.empty() && kept.back() == step); // latest is never rotated away
            QCOMPARE(kept.size(), std::min<std::size_t>(std::size_t(keep), step / 10));
        }
        std::size_t directories = 0;
        for (const auto& entry : fs::directory_iterator(root))
            directories += entry.is_directory();
        QCOMPARE(directories, std::size_t(keep)); // rotated steps are gone entirely
    }

    void asyncSaveSnapshotsAndNeverRunsAhead()
    {
        const fs::path root = fresh("async");
        CheckpointManager manager(options(root, 2));
        std::atomic<bool> stop{false};
        std::atomic<int> observed{0};
        std::string violation;
        // A reader polls `latest` the whole time: whatever it names must already be committed.
        std::thread poller([&] {
            while (!stop) {
                try {
                    if (const auto latest = read_latest(root)) {
                        if (!fs::exists(root / *latest / "manifest.json") && violation.empty())
                            violation = "latest named " + *latest + " before its manifest existed";
                        ++observed;
                    }
                } catch (const Error&) {
                    // the step latest named was rotated away between two reads: not a violation
                }
            }
        });
        std::vector<RankState> live = state(7, 200'000);
        std::vector<StateDigests> expected;
        for (uint64_t step = 1; step <= 6; ++step) {
            manager.save_async(live, step);
            expected.push_back(flat_state_digests(live));
            for (auto& r : live) // the loop goes on training: the saved copy must not change
                for (auto& m : r.master)
                    m += 1.0f;
        }
        manager.wait();
        stop = true;
        poller.join();
        QVERIFY2(violation.empty(), violation.c_str());
        QVERIFY(observed > 0);
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(6)));
        QCOMPARE(flat_state_digests(load_sharded(root / step_dir_name(6), 2).ranks), expected[5]);
        QCOMPARE(flat_state_digests(load_sharded(root / step_dir_name(5), 2).ranks), expected[4]);
    }

    void asyncErrorsSurfaceOnTheNextCall()
    {
        const fs::path root = fresh("async-error");
        CheckpointManager manager(options(root, 3));
        manager.save(state(1), 1);
        fsutil::inject_fault(fsutil::IoOp::write, 2, ENOSPC);
        manager.save_async(state(2), 2); // returns at once; the write fails in the background
        try {
            manager.wait();
            fsutil::reset_io_counts();
            QFAIL("the background failure must be reported by wait()");
        } catch (const Error& e) {
            fsutil::reset_io_counts();
            QCOMPARE(e.kind(), ProblemKind::io_error);
            QVERIFY(std::string(e.what()).find("No space left") != std::string::npos);
        }
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(1)));
        manager.save_async(state(3), 3); // the manager is usable again
        manager.wait();
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(3)));
        QVERIFY(!fs::exists(root / step_dir_name(2))); // the failed step's leftovers are gone
    }

    void failureAtEveryOperationKeepsThePreviousStep_data()
    {
        QTest::addColumn<int>("op");
        QTest::newRow("write") << int(fsutil::IoOp::write);
        QTest::newRow("fsync") << int(fsutil::IoOp::fsync);
        QTest::newRow("rename") << int(fsutil::IoOp::rename);
    }

    void failureAtEveryOperationKeepsThePreviousStep()
    {
        QFETCH(int, op);
        const auto io = static_cast<fsutil::IoOp>(op);
        // Count this kind of operation in one save, then fail each of them in turn.
        int count = 0;
        {
            const fs::path root = fresh("count");
            CheckpointManager manager(options(root, 2, std::nullopt, 1));
            manager.save(state(1), 1);
            fsutil::reset_io_counts();
            manager.save(state(2), 2);
            count = fsutil::io_operations(io);
        }
        QVERIFY(count >= 3);
        for (int k = 1; k <= count; ++k) {
            const fs::path root = fresh("fault");
            CheckpointManager manager(options(root, 2, std::nullopt, 1));
            manager.save(state(1), 1);
            fsutil::inject_fault(io, k, io == fsutil::IoOp::write ? ENOSPC : EIO);
            bool failed = false;
            try {
                manager.save(state(2), 2);
            } catch (const Error& e) {
                failed = true;
                QCOMPARE(e.kind(), ProblemKind::io_error);
            }
            fsutil::reset_io_counts();
            QVERIFY2(failed, qPrintable(QStringLiteral("failing operation %1 of %2 went unnoticed").arg(k).arg(count)));
            QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(1)));
            QVERIFY(verify_checkpoint(root).ok());
            QCOMPARE(flat_state_digests(load_sharded(root, 2).ranks), flat_state_digests(state(1)));
            manager.save(state(3), 3); // and the next save works and sweeps the debris
            QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(3)));
            for (const auto& s : list_steps(root))
                QVERIFY2(s.complete, s.name.c_str());
        }
    }

    void leftoversAreReportedThenCleaned()
    {
        const fs::path root = fresh("leftover");
        CheckpointManager manager(options(root, 3));
        manager.save(state(1), 1);
        // What a crash in the middle of a save leaves: a step directory without a manifest.
        fs::create_directories(root / step_dir_name(2));
        testutil::write_text(root / step_dir_name(2) / "rank0.safetensors.tmp", "partial");
        const auto steps = list_steps(root);
        QCOMPARE(steps.size(), std::size_t(2));
        QVERIFY(steps[0].complete && steps[0].is_latest);
        QVERIFY(!steps[1].complete);
        QCOMPARE(steps[1].leftover_tmp_files, std::vector<std::string>{"rank0.safetensors.tmp"});
        const VerifyReport leftover = verify_checkpoint(root / step_dir_name(2));
        QVERIFY(!leftover.problems.empty() && leftover.problems[0].kind == ProblemKind::partial_write);
        QVERIFY(verify_checkpoint(root).ok()); // resume ignores it: `latest` names step 1
        manager.save(state(3), 3);
        QVERIFY(!fs::exists(root / step_dir_name(2)));
    }

    // A link planted under a step's name is moved aside, not written through: the step lands in
    // the root, and what the link points to stays as it was.
    void aLinkUnderAStepsNameIsMovedAsideNotWrittenThrough()
    {
        const fs::path root = fresh("linked"), elsewhere = fresh("elsewhere");
        fs::create_directories(root);
        fs::create_directories(elsewhere);
        fs::create_symlink(elsewhere, root / step_dir_name(5));
        std::vector<std::string> warnings;
        ManagerOptions o = options(root, 3);
        o.on_warning = [&](const std::string& m) { warnings.push_back(m); };
        CheckpointManager manager(o);
        manager.save(state(5), 5);
        QVERIFY(fs::is_empty(elsewhere));
        QVERIFY(!fs::is_symlink(root / step_dir_name(5)));
        QVERIFY(verify_checkpoint(root).ok());
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(5)));
        QCOMPARE(warnings.size(), std::size_t(1));
        QVERIFY2(warnings[0].find("was a symbolic link; moved aside") != std::string::npos, warnings[0].c_str());
        int aside = 0;
        for (const auto& entry : fs::directory_iterator(root))
            aside += entry.is_symlink() && fs::equivalent(entry.path(), elsewhere);
        QCOMPARE(aside, 1);
    }

    // The mirror's retention deletes what it does not hold: the root itself, a folder inside it or
    // one holding it is refused as a mirror before anything is created or deleted.
    void aMirrorOverlappingTheRootIsRefused()
    {
        const fs::path root = fresh("overlap");
        {
            CheckpointManager manager(options(root, 3));
            manager.save(state(1), 1);
        }
        const fs::path link = fresh("overlap-link");
        fs::create_symlink(root, link);
        for (const fs::path& mirror : {root, root / "", root / "mirror", root.parent_path(), link}) {
            try {
                CheckpointManager manager(options(root, 3, mirror));
                QFAIL(("accepted the mirror " + mirror.string()).c_str());
            } catch (const Error& e) {
                QCOMPARE(int(e.kind()), int(ProblemKind::invalid_argument));
                QVERIFY2(std::string(e.what()).find("the mirror must be a folder apart from the root") !=
                             std::string::npos,
                         e.what());
            }
        }
        QVERIFY(!fs::exists(root / "mirror"));
        QVERIFY(verify_checkpoint(root).ok());
        CheckpointManager beside(options(root, 3, fresh("overlap-mirror"))); // a sibling is a mirror
    }

    void mirrorTierUploadsVerifiesAndFallsBack()
    {
        const fs::path root = fresh("local"), mirror = fresh("mirror");
        {
            CheckpointManager manager(options(root, 1, mirror));
            for (uint64_t step = 1; step <= 5; ++step)
                manager.save(state(step), step);
            manager.wait();
            manager.save(state(6), 6); // rotation now also sees the finished uploads
            manager.wait();
        }
        const auto steps = list_steps(root, mirror);
        std::vector<uint64_t> local, remote;
        for (const auto& s : steps) {
            if (!s.complete)
                continue;
            (s.tier == StepTier::local ? local : remote).push_back(s.step);
            if (s.tier == StepTier::local)
                QVERIFY2(s.uploaded, s.name.c_str());
        }
        QVERIFY(local.size() <= 2 && local.back() == 6);
        QCOMPARE(remote, (std::vector<uint64_t>{4, 5, 6})); // the mirror's own, longer retention
        QVERIFY(fs::exists(mirror / step_dir_name(6) / kUploadManifest));
        QVERIFY(verify_checkpoint(mirror).ok());
        QCOMPARE(read_latest(mirror), std::optional<std::string>(step_dir_name(6)));

        // The local copy of the latest step rots: resume falls back to the mirror's copy.
        testutil::flip_byte(root / step_dir_name(6) / "rank1.safetensors", 3000);
        CheckpointManager manager(options(root, 1, mirror));
        const ResumePoint point = manager.load_resume_point({.expected_world_size = 2});
        const LoadedCheckpoint& loaded = point.checkpoint;
        QVERIFY(point.used_mirror);
        QCOMPARE(loaded.manifest.step, uint64_t(6));
        QCOMPARE(flat_state_digests(loaded.ranks), flat_state_digests(state(6)));
    }

    // `latest` names a step whose local folder is gone (a disk swapped, a careless rm): with a
    // mirror the resume still looks no further back than that step, takes the mirror's copy of it
    // when there is one and the newest older step when the mirror lags, and says the loss.
    void aLostLatestStepIsTakenFromTheMirror()
    {
        const fs::path root = fresh("lost"), mirror = fresh("lost-mirror");
        {
            CheckpointManager manager(options(root, 3, mirror));
            for (uint64_t step = 1; step <= 3; ++step)
                manager.save(state(step), step);
            manager.wait();
        }
        fs::remove_all(root / step_dir_name(3));
        const auto resumed = [&] {
            return load_resume_point(root, storage::Location(mirror), {.expected_world_size = 2});
        };
        const ResumePoint from_mirror = resumed();
        QVERIFY(from_mirror.used_mirror);
        QCOMPARE(from_mirror.checkpoint.manifest.step, uint64_t(3));
        QCOMPARE(flat_state_digests(from_mirror.checkpoint.ranks), flat_state_digests(state(3)));
        QCOMPARE(from_mirror.skipped.size(), std::size_t(1));
        QVERIFY2(from_mirror.skipped[0].starts_with(step_dir_name(3) + ": the local copy did not verify"),
                 from_mirror.skipped[0].c_str());

        // The mirror lags (its step 3 and its `latest` are not there yet): step 2, the newest
        // before the lost one, not the mirror's older `latest`; from the mirror, as after any
        // local copy that failed (format.md 6.4).
        fs::remove_all(mirror / step_dir_name(3));
        write_latest(mirror, step_dir_name(1));
        const ResumePoint lagging = resumed();
        QVERIFY(lagging.used_mirror);
        QCOMPARE(lagging.checkpoint.manifest.step, uint64_t(2));
        QVERIFY(!lagging.skipped.empty() && lagging.skipped[0].starts_with(step_dir_name(3) + ":"));

        // Without a mirror, the lost step is the error it always was.
        try {
            (void)load_resume_point(root, std::nullopt, {.expected_world_size = 2});
            QFAIL("a lost latest step was passed over without a mirror");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::partial_write));
            QVERIFY2(std::string(e.what()).find("which does not exist") != std::string::npos, e.what());
        }
    }

    void localStepsWaitForTheirUpload()
    {
        // While the mirror has no verified copy, rotation keeps the local one even beyond K; a
        // copy the mirror lost is uploaded again by the next save, and only then does it go.
        const fs::path root = fresh("pending"), mirror = fresh("pending-mirror");
        CheckpointManager manager(options(root, 1, mirror));
        manager.save(state(1), 1);
        manager.wait();
        fs::remove(mirror / step_dir_name(1) / kUploadManifest); // as if that upload never finished
        manager.save(state(2), 2);
        manager.wait();
        QVERIFY(fs::exists(mirror / step_dir_name(1) / kUploadManifest)); // uploaded again
        QVERIFY(verify_checkpoint(mirror / step_dir_name(1)).ok());
    }
};

QTEST_GUILESS_MAIN(TestLifecycle)
#include "tst_lifecycle.moc"
