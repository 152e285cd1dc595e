// One verdict from the bytes and the values together, on real checkpoints: intact and finite is
// safe, intact with NaN is diverged (never safe), damaged bytes are corrupt whatever the values
// say, a world-size change of intact shards is needs_reshard, values not read are unchecked.

#include "core/checkpoint/save.h"
#include "core/inspect/content.h"
#include "core/open/verify.h"
#include "core/report/verdict.h"
#include "core/run/demo.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>
#include <limits>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

bool mentions(const std::vector<std::string>& lines, const std::string& text)
{
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != l.npos; });
}

} // namespace

class TestVerdict : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

    fs::path save(const std::string& name, float poison = 0, bool poisoned = false)
    {
        auto states = make_demo_state(7, 6001, 2, ParamDtype::BF16);
        if (poisoned)
            states[1].exp_avg_sq[17] = poison;
        const fs::path dir = root() / name;
        save_sharded(states, dir, 40);
        return dir;
    }

    static ResumeVerdict judge(const fs::path& dir, bool read_values, int expected = -1)
    {
        VerifyOptions options;
        options.expected_world_size = expected;
        const VerifyReport verify = verify_checkpoint(dir, options);
        if (!read_values)
            return resume_verdict(verify, nullptr, expected);
        const ContentReport content = inspect_content(dir);
        return resume_verdict(verify, &content, expected);
    }

private slots:
    void intactAndFiniteIsSafe()
    {
        const ResumeVerdict v = judge(save("good"), true);
        QCOMPARE(v.state, ResumeState::safe);
        QVERIFY(v.safe());
        QVERIFY2(v.title.starts_with("Safe to resume: all 2 shards verified"), v.title.c_str());
        QVERIFY(v.reasons.empty());
        QVERIFY(mentions(v.checked, "SHA-256 against the manifest"));
        QVERIFY(mentions(v.checked, "no NaN or Inf"));
        QVERIFY(v.not_checked.empty());
        const auto json = verdict_json(v);
        QCOMPARE(json.at("state").get<std::string>(), std::string("safe"));
    }

    void valuesNotReadAreUnchecked()
    {
        const ResumeVerdict v = judge(save("unread"), false);
        QCOMPARE(v.state, ResumeState::unchecked);
        QVERIFY(!v.safe());
        QVERIFY(mentions(v.not_checked, "values were not read"));
        QCOMPARE(verdict_json(v).at("state").get<std::string>(), std::string("unchecked"));
    }

    void nanInIntactFilesIsDiverged()
    {
        const fs::path dir = save("nan", std::numeric_limits<float>::quiet_NaN(), true);
        QVERIFY(verify_checkpoint(dir).ok()); // the bytes are what was written
        const ResumeVerdict v = judge(dir, true);
        QCOMPARE(v.state, ResumeState::diverged);
        QVERIFY2(v.title.starts_with("Diverged: 1 of "), v.title.c_str());
        QVERIFY(v.meaning.find("do not resume") != std::string::npos);
        QCOMPARE(v.reasons.size(), std::size_t(1));
        QCOMPARE(v.reasons[0].kind, ProblemKind::nonfinite_values);
        QCOMPARE(v.reasons[0].rank, 1);

        // Inf counts as divergence too; a negative second moment is an inconsistent state.
        QCOMPARE(judge(save("inf", std::numeric_limits<float>::infinity(), true), true).state, ResumeState::diverged);
        const ResumeVerdict negative = judge(save("negative", -1.0f, true), true);
        QCOMPARE(negative.state, ResumeState::corrupt);
        QCOMPARE(negative.reasons[0].kind, ProblemKind::negative_second_moment);
    }

    void damagedBytesAreCorruptWhateverTheValues()
    {
        const fs::path dir = save("flipped");
        {
            std::fstream f(dir / "rank0.safetensors", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-9, std::ios::end);
            f.put('\x42');
        }
        const ResumeVerdict v = judge(dir, true);
        QCOMPARE(v.state, ResumeState::corrupt);
        QVERIFY2(v.title.starts_with("Corruption: rank 0's shard"), v.title.c_str());
        QCOMPARE(v.reasons.front().kind, ProblemKind::hash_mismatch);
        // the values were read from a file that failed verification: said so
        QVERIFY(mentions(v.not_checked, "rank0.safetensors, which failed verification"));
        QCOMPARE(v.failed_files, std::vector<std::string>{"rank0.safetensors"});
        QVERIFY(judge(dir, false).failed_files.empty()); // no values read from it, nothing to disown
    }

    void missingShardIsIncomplete()
    {
        const fs::path dir = save("missing");
        fs::remove(dir / "rank1.safetensors");
        QCOMPARE(judge(dir, false).state, ResumeState::incomplete);
        // Reading the values of a missing file fails too; that is the same missing file, not more.
        const ResumeVerdict read = judge(dir, true);
        QCOMPARE(read.state, ResumeState::incomplete);
        QVERIFY2(read.title.starts_with("Partial write: rank 1's shard"), read.title.c_str());
        for (const Problem& p : read.reasons)
            QVERIFY2(p.kind == ProblemKind::missing_shard, p.message.c_str()); // the bytes' finding, once
        fs::remove(dir / "manifest.json");
        const ResumeVerdict v = judge(dir, false);
        QCOMPARE(v.state, ResumeState::incomplete);
        QVERIFY2(v.title.starts_with("Missing manifest"), v.title.c_str());
        QVERIFY(v.checked.empty()); // nothing was checked against a manifest that is not there
        QVERIFY(mentions(v.not_checked, "no manifest could be read"));
    }

    void titleNamesWhatDecided()
    {
        // Damaged bytes at another world size: corrupt, and headlined as corruption, not as a
        // world-size change to be resharded.
        const fs::path dir = save("flipped-eight");
        {
            std::fstream f(dir / "rank1.safetensors", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-5, std::ios::end);
            f.put('\x13');
        }
        const ResumeVerdict v = judge(dir, true, 4);
        QCOMPARE(v.state, ResumeState::corrupt);
        QVERIFY2(v.title.starts_with("Corruption: rank 1's shard"), v.title.c_str());
        QVERIFY(v.meaning.find("Reshard") == std::string::npos);
        QVERIFY(!verdict_json(v).contains("reshard_to"));
    }

    void valuesNotReallyReadAreNotSafe()
    {
        const fs::path dir = save("nothing-read");
        const VerifyReport verified = verify_checkpoint(dir);
        ContentReport empty; // a format stats reads nothing of: no tensor, no problem
        empty.format = "shardscope";
        QCOMPARE(resume_verdict(verified, &empty).state, ResumeState::unchecked);
        // A reading that could not start (the step rotated away, say) leaves the values unchecked.
        ContentReport failed;
        failed.problems.push_back({.kind = ProblemKind::cannot_open, .message = "step-9: no such file or directory"});
        const ResumeVerdict v = resume_verdict(verified, &failed);
        QCOMPARE(v.state, ResumeState::unchecked);
        QVERIFY(mentions(v.not_checked, "no such file"));
        QVERIFY(v.reasons.empty());
        // Beside a finding, a reading failure is set aside: the verdict quotes the finding.
        failed.tensors.push_back({.name = "w"});
        failed.problems.push_back(
            {.kind = ProblemKind::nonfinite_values, .message = "'w' (exp_avg) has 3 NaN", .rank = 1});
        const ResumeVerdict nan = resume_verdict(verified, &failed);
        QCOMPARE(nan.state, ResumeState::diverged);
        QVERIFY2(nan.meaning.find("'w' (exp_avg) has 3 NaN") != std::string::npos, nan.meaning.c_str());
        QVERIFY(nan.meaning.find("no such file") == std::string::npos);
    }

    void worldSizeChangeNeedsReshardUnlessDiverged()
    {
        const ResumeVerdict v = judge(save("eight"), true, 4);
        QCOMPARE(v.state, ResumeState::needs_reshard);
        QVERIFY(v.meaning.find("Reshard") != std::string::npos);
        QCOMPARE(verdict_json(v).at("reshard_to").get<int>(), 4);
        // A diverged run is not worth resharding.
        const ResumeVerdict nan = judge(save("eight-nan", std::numeric_limits<float>::quiet_NaN(), true), true, 4);
        QCOMPARE(nan.state, ResumeState::diverged);
    }

    void cancelledReadingIsUnchecked()
    {
        const fs::path dir = save("cancel");
        std::atomic<bool> cancel{true};
        ContentOptions options;
        options.cancel = &cancel;
        ContentReport content = inspect_content(dir, options);
        QVERIFY(content.cancelled);
        const ResumeVerdict v = resume_verdict(verify_checkpoint(dir), &content);
        QCOMPARE(v.state, ResumeState::unchecked);
        QVERIFY(v.cancelled);
        QVERIFY(mentions(v.not_checked, "cancelled"));
        // NaN found before the cancel still counts: cancelling only keeps a step from being safe.
        content.problems.push_back({.kind = ProblemKind::nonfinite_values, .message = "'x' has 1 NaN", .rank = 0});
        content.tensors.push_back({.name = "x"});
        QCOMPARE(resume_verdict(verify_checkpoint(dir), &content).state, ResumeState::diverged);
        // A verification cancelled after the manifest's checks shows nothing intact.
        VerifyReport stopped = verify_checkpoint(dir, VerifyOptions{.expected_world_size = 4});
        stopped.cancelled = true;
        QCOMPARE(resume_verdict(stopped, nullptr, 4).state, ResumeState::unchecked);
        QVERIFY(resume_verdict(stopped, nullptr, 4).cancelled);
        QVERIFY(!judge(dir, false).cancelled);
    }

    void formatWithoutDigestsSaysSo()
    {
        // One rank file on its own is an ordinary safetensors file: no manifest, no hash.
        const fs::path file = save("single") / "rank0.safetensors";
        const ResumeVerdict v = judge(file, true);
        QCOMPARE(v.state, ResumeState::safe);
        QVERIFY2(v.title.starts_with("Safe to resume: its file is intact"), v.title.c_str());
        QVERIFY(mentions(v.not_checked, "records no digest"));
        QVERIFY(v.meaning.find("Not checked: safetensors records no digest") != std::string::npos);
        QVERIFY(!mentions(v.checked, "SHA-256"));
    }
};

QTEST_GUILESS_MAIN(TestVerdict)
#include "tst_verdict.moc"
