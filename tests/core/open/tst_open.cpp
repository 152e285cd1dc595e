// The one way in: detection lists a folder and chooses a root's step once, and verification reads
// that same step through the same descriptor, whatever a running job does to the root meanwhile.

#include "core/checkpoint/save.h"
#include "core/open/nearby.h"
#include "core/open/verify.h"
#include "core/report/report.h"
#include "core/run/demo.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text)
{
    std::ofstream(path) << text;
}

std::string problems_text(const VerifyReport& report)
{
    std::string out;
    for (const auto& p : report.problems)
        out += std::string(to_string(p.kind)) + ": " + p.message + "\n";
    return out;
}

} // namespace

class TestOpen : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

    void save_step(const fs::path& dir, uint64_t step, uint64_t seed)
    {
        save_sharded(make_demo_state(seed, 4001, 2, ParamDtype::BF16), dir, step);
    }

private slots:
    void rootStepChosenOnce()
    {
        const fs::path run = root() / "run";
        save_step(run / "step-00000001", 1, 1);
        write_text(run / "latest", "step-00000001\n");
        const DetectedFormat detected = detect_format(run);
        QCOMPARE(detected.format, CheckpointFormat::shardscope);
        QCOMPARE(detected.dir.path, run / "step-00000001");
        QVERIFY(detected.dir.has("manifest.json"));
        QVERIFY(detected.dir.has("rank1.safetensors"));
        QVERIFY(!detected.problem);

        // A running job commits step 2, moves `latest` on and rotates step 1 out of the way (here:
        // renamed, so its files still exist) between detection and verification.
        save_step(run / "step-00000002", 2, 2);
        write_text(run / "latest", "step-00000002\n");
        fs::rename(run / "step-00000001", run / "rotated");

        const VerifyReport report = verify_checkpoint(detected, VerifyOptions{});
        QVERIFY2(report.ok(), problems_text(report).c_str());
        QVERIFY(report.manifest);
        QCOMPARE(report.manifest->step, uint64_t(1)); // the step detection chose, all of it
        QCOMPARE(report.shards.size(), std::size_t(2));
        for (const auto& shard : report.shards)
            QCOMPARE(shard.status, ShardStatus::ok);

        // A new detection sees the new step.
        const VerifyReport now = verify_checkpoint(run);
        QVERIFY2(now.ok(), problems_text(now).c_str());
        QCOMPARE(now.manifest->step, uint64_t(2));
    }

    void badTagFileIsTheCheckpointsProblem()
    {
        const fs::path run = root() / "bad-latest";
        save_step(run / "step-00000003", 3, 3);
        write_text(run / "latest", "../elsewhere\n");
        const DetectedFormat detected = detect_format(run);
        QVERIFY(detected.problem);
        QCOMPARE(detected.problem->kind, ProblemKind::path_outside_checkpoint);
        // verify reports it (verify --json prints a report), it does not throw
        const VerifyReport report = verify_checkpoint(run);
        QVERIFY(!report.ok());
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(report.problems[0].kind, ProblemKind::path_outside_checkpoint);
        QCOMPARE(report.dir, run);

        write_text(run / "latest", "step-00000009\n"); // committed name, folder never made
        const VerifyReport missing = verify_checkpoint(run);
        QCOMPARE(missing.problems.size(), std::size_t(1));
        QCOMPARE(missing.problems[0].kind, ProblemKind::partial_write);
    }

    void unusablePathThrows()
    {
        QVERIFY_THROWS_EXCEPTION(Error, detect_format(root() / "no-such-folder"));
        try {
            verify_checkpoint(root() / "no-such-folder");
            QFAIL("a missing path must throw");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cannot_open);
        }
    }

    void unfinishedSaveStaysNative()
    {
        // rank<N>.safetensors without a manifest is a ShardScope save that did not finish, not a
        // folder of safetensors files.
        const fs::path dir = root() / "unfinished";
        save_step(dir, 4, 4);
        fs::remove(dir / "manifest.json");
        const DetectedFormat detected = detect_format(dir);
        QVERIFY(!is_foreign(detected));
        const VerifyReport report = verify_checkpoint(dir);
        QCOMPARE(report.format, std::string("shardscope"));
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(report.problems[0].kind, ProblemKind::partial_write);
        QVERIFY(!no_checkpoint_found(report)); // an interrupted save, not "no checkpoint"

        // One rank file on its own is an ordinary safetensors file.
        const DetectedFormat single = detect_format(dir / "rank0.safetensors");
        QCOMPARE(single.format, CheckpointFormat::safetensors);
        QVERIFY(is_foreign(single));
        QCOMPARE(single.dir.names, std::vector<std::string>{"rank0.safetensors"});
        const VerifyReport file = verify_checkpoint(single, VerifyOptions{});
        QVERIFY2(file.ok(), problems_text(file).c_str());
        QCOMPARE(file.format, std::string("safetensors"));
        QCOMPARE(file.shards.size(), std::size_t(1));
    }

    void noCheckpointIsSaidAsSuch()
    {
        // A folder of notes: not a save that never committed, but no checkpoint at all.
        const fs::path dir = root() / "nothing" / "here";
        fs::create_directories(dir / "sub");
        write_text(dir / "notes.txt", "hi\n");
        const VerifyReport report = verify_checkpoint(dir);
        QVERIFY(no_checkpoint_found(report));
        QCOMPARE(report.format, std::string("unknown"));
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(report.problems[0].kind, ProblemKind::invalid_manifest); // the exit status stays 1
        QVERIFY2(report.problems[0].message.find("no checkpoint found") != std::string::npos,
                 report.problems[0].message.c_str());
        const FailureSummary failure = classify_failure(report);
        QCOMPARE(failure.title, "No checkpoint found in " + dir.string());
        QCOMPARE(failure.meaning, std::string(kWhatShardScopeOpens));
        const ResumeVerdict verdict = resume_verdict(report, nullptr);
        QVERIFY(verdict.no_checkpoint);
        QCOMPARE(verdict.title, failure.title);
        QVERIFY(!nearby_checkpoint(dir)); // neither "nothing" nor "sub" is one

        // Leftover .tmp files are an interrupted ShardScope save: still a partial write.
        const fs::path tmp = root() / "tmp-only";
        fs::create_directories(tmp);
        write_text(tmp / "rank0.safetensors.tmp", "partial");
        const VerifyReport interrupted = verify_checkpoint(tmp);
        QVERIFY(!no_checkpoint_found(interrupted));
        QCOMPARE(interrupted.format, std::string("shardscope"));
        QCOMPARE(classify_failure(interrupted).mode, FailureMode::partial_write);
        QVERIFY(!resume_verdict(interrupted, nullptr).no_checkpoint);
    }

    void nearbyCheckpointIsFound()
    {
        // The run's folder opened instead of its step: the step inside it.
        const fs::path run = root() / "near" / "run";
        save_step(run / "step-00000001", 1, 5);
        fs::create_directories(run / "logs");
        write_text(run / "notes.txt", "hi\n");
        QVERIFY(no_checkpoint_found(verify_checkpoint(run)));
        auto nearby = nearby_checkpoint(run);
        QVERIFY(nearby);
        QCOMPARE(nearby->location.path, run / "step-00000001");
        QCOMPARE(nearby->format, CheckpointFormat::shardscope);
        QVERIFY(!nearby->parent);
        QVERIFY(describe_nearby(*nearby).find("inside it") != std::string::npos);

        // A folder inside a step: the step above it.
        const fs::path extra = run / "step-00000001" / "extra";
        fs::create_directories(extra);
        nearby = nearby_checkpoint(extra);
        QVERIFY(nearby);
        QCOMPARE(nearby->location.path, run / "step-00000001");
        QVERIFY(nearby->parent);
        QVERIFY(describe_nearby(*nearby).starts_with("its parent folder "));
        // "extra/" names the same folder.
        nearby = nearby_checkpoint(fs::path(extra.string() + "/"));
        QVERIFY(nearby && nearby->parent);
        QCOMPARE(nearby->location.path, run / "step-00000001");

        // A root whose `latest` names this very (empty) folder only leads back here: not offered.
        const fs::path back = root() / "leads-back";
        fs::create_directories(back / "step-00000002");
        write_text(back / "latest", "step-00000002\n");
        QCOMPARE(detect_format(back).format, CheckpointFormat::shardscope);
        QVERIFY(!nearby_checkpoint(back / "step-00000002"));

        // A symlinked sub-folder is not followed.
        const fs::path linked = root() / "linked" / "here";
        fs::create_directories(linked);
        fs::create_directory_symlink(run / "step-00000001", linked / "step");
        QVERIFY(!nearby_checkpoint(linked));
    }
};

QTEST_GUILESS_MAIN(TestOpen)
#include "tst_open.moc"
