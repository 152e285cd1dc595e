// shardctl status on roots other tools wrote (torchtitan's DCP steps, DeepSpeed, Megatron): their
// step folders, the one the tag file names and, with --content, where it is safe to resume.

// content_fixtures.h's write_safetensors is a non-inline helper this suite does not use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "content_fixtures.h"
#pragma GCC diagnostic pop
#include "core/checkpoint/directory.h"
#include "core/open/root_steps.h"
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <limits>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<std::string> names_of(const nlohmann::json& st)
{
    std::vector<std::string> out;
    for (const auto& s : st["steps"])
        out.push_back(s["name"].get<std::string>());
    return out;
}

} // namespace

class TestCliStatusForeign : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path m_root;

    testutil::Run status(const fs::path& root, QStringList extra = {})
    {
        extra.prepend(qs(root));
        extra.prepend(QStringLiteral("status"));
        return shardctl(extra);
    }

private slots:
    void initTestCase() { m_root = fs::path(m_tmp.path().toStdString()); }

    // The number rule every format's step names share, and the trailing number of a DCP folder.
    void stepNumbers()
    {
        using shardscope::number_after;
        using shardscope::trailing_step_number;
        QCOMPARE(number_after("global_step120", "global_step"), std::optional<uint64_t>(120));
        QCOMPARE(number_after("step-00000300", "step-"), std::optional<uint64_t>(300));
        QCOMPARE(number_after("step-9999999999999999999", "step-"), std::optional<uint64_t>(9999999999999999999ull));
        QVERIFY(!number_after("step-99999999999999999999", "step-")); // 20 digits
        QVERIFY(!number_after("global_step-1", "global_step"));
        QVERIFY(!number_after("global_step", "global_step"));
        QVERIFY(!number_after("iter_12a", "iter_"));
        QCOMPARE(trailing_step_number("epoch_3_step_100"), std::optional<uint64_t>(100));
        QCOMPARE(trailing_step_number("checkpoint-7"), std::optional<uint64_t>(7));
        QCOMPARE(trailing_step_number("step_5"), std::optional<uint64_t>(5));
        QVERIFY(!trailing_step_number("final"));
        QVERIFY(!trailing_step_number(""));
        QCOMPARE(shardscope::highest_numbered({"iter_0000010", "iter_0000020", "iter_x", "release"}, "iter_"),
                 std::string("iter_0000020"));
    }

    // torchtitan: step-10 and step-20 side by side, no tag file; step-20 diverged, so step-10 is
    // where to resume.
    void dcpRootNamesTheNewestHealthyStep()
    {
        const fs::path root = m_root / "titan";
        write_dcp_checkpoint(root / "step-10", "model.w", {0.5f, -1.0f, 2.0f, 3.0f});
        write_dcp_checkpoint(root / "step-20", "model.w", {0.5f, kNaN, 2.0f, 3.0f});

        auto run = status(root, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QCOMPARE(st["ok"].get<bool>(), true);
        QCOMPARE(st["format"].get<std::string>(), std::string("torch-dcp"));
        QVERIFY(st["latest"].is_null());
        QCOMPARE(names_of(st), (std::vector<std::string>{"step-10", "step-20"}));
        QCOMPARE(st["steps"][0]["step"].get<uint64_t>(), uint64_t(10));
        QCOMPARE(st["steps"][0]["health"].get<std::string>(), std::string("safe"));
        QCOMPARE(st["steps"][1]["step"].get<uint64_t>(), uint64_t(20));
        QCOMPARE(st["steps"][1]["health"].get<std::string>(), std::string("diverged"));
        QVERIFY2(st["steps"][1]["health_title"].get<std::string>().starts_with("Diverged"), run.out.constData());
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("step-10"));
        QVERIFY(!st.contains("lock") && !st.contains("next_rotation")); // ShardScope's own keys do not apply

        run = status(root, {QStringLiteral("--content")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("torch-dcp root"), run.out.constData());
        QVERIFY2(run.out.contains("step-20  step 20  health: diverged"), run.out.constData());
        QVERIFY2(run.out.contains("newest healthy step: step-10"), run.out.constData());

        // Without --content the steps are listed and no health is claimed.
        run = status(root, {QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(names_of(run.json()), (std::vector<std::string>{"step-10", "step-20"}));
        QVERIFY(!run.json().contains("newest_healthy"));
        QVERIFY(!run.json()["steps"][1].contains("health"));
        run = status(root);
        QVERIFY2(run.out.contains("  step-20  step 20\n"), run.out.constData());
        QVERIFY2(run.out.contains("health not read"), run.out.constData());
    }

    // Other DCP namings, newest last by their trailing number; folders without a .metadata or a
    // number are not steps.
    void dcpFolderNames()
    {
        const fs::path root = m_root / "dcp-names";
        for (const char* name : {"epoch_3_step_100", "checkpoint-7", "step_5"})
            write_dcp_checkpoint(root / name, "w", {1.0f});
        fs::create_directories(root / "step-300"); // a save that never wrote its .metadata
        write_dcp_checkpoint(root / "final", "w", {1.0f});
        const auto run = status(root, {QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json()["format"].get<std::string>(), std::string("torch-dcp"));
        QCOMPARE(names_of(run.json()), (std::vector<std::string>{"step_5", "checkpoint-7", "epoch_3_step_100"}));
    }

    // DeepSpeed: `latest` names global_step3, whose optimizer state holds Inf; global_step2 is
    // the newest step to resume from.
    void deepspeedRootFollowsLatest()
    {
        const fs::path root = m_root / "ds";
        write_deepspeed_step(root / "global_step2", {1, 2, 3, 4});
        write_deepspeed_step(root / "global_step3", {1, kInf, 3, 4});
        fixtures::write_file(root / "latest", "global_step3\n");

        auto run = status(root, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QCOMPARE(st["format"].get<std::string>(), std::string("deepspeed"));
        QCOMPARE(st["latest"].get<std::string>(), std::string("global_step3"));
        QCOMPARE(names_of(st), (std::vector<std::string>{"global_step2", "global_step3"}));
        QCOMPARE(st["steps"][0]["latest"].get<bool>(), false);
        QCOMPARE(st["steps"][1]["latest"].get<bool>(), true);
        QCOMPARE(st["steps"][0]["health"].get<std::string>(), std::string("safe"));
        QCOMPARE(st["steps"][1]["health"].get<std::string>(), std::string("diverged"));
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("global_step2"));

        run = status(root, {QStringLiteral("--content")});
        QVERIFY2(run.out.contains("deepspeed root, latest global_step3"), run.out.constData());
        QVERIFY2(run.out.contains("global_step3  step 3 (latest)  health: diverged"), run.out.constData());
        QVERIFY2(run.out.contains("newest healthy step: global_step2"), run.out.constData());

        // --mirror is ShardScope's second tier: refused, with one JSON object.
        run = status(root, {QStringLiteral("--mirror"), qs(m_root / "ds-mirror"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json()["error"]["kind"].get<std::string>(), std::string("invalid_argument"));
    }

    // Megatron: the tracker's iteration number names iter_0000020, which diverged.
    void megatronRootWithTracker()
    {
        const fs::path root = m_root / "megatron";
        write_megatron_iteration(root / "iter_0000010", {1, 2, 3, 4});
        write_megatron_iteration(root / "iter_0000020", {1, 2, kNaN, 4});
        fixtures::write_file(root / "latest_checkpointed_iteration.txt", "20\n");

        const auto run = status(root, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QCOMPARE(st["format"].get<std::string>(), std::string("megatron"));
        QCOMPARE(st["latest"].get<std::string>(), std::string("iter_0000020"));
        QCOMPARE(names_of(st), (std::vector<std::string>{"iter_0000010", "iter_0000020"}));
        QCOMPARE(st["steps"][1]["step"].get<uint64_t>(), uint64_t(20));
        QCOMPARE(st["steps"][1]["latest"].get<bool>(), true);
        QCOMPARE(st["steps"][0]["health"].get<std::string>(), std::string("safe"));
        QCOMPARE(st["steps"][1]["health"].get<std::string>(), std::string("diverged"));
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("iter_0000010"));

        // A tracker that is no iteration number names no step, and says why.
        fixtures::write_file(root / "latest_checkpointed_iteration.txt", "twenty\n");
        const auto bad = status(root, {QStringLiteral("--json")}).json();
        QVERIFY(bad["latest"].is_null());
        QCOMPARE(bad["latest_problem"]["kind"].get<std::string>(), std::string("invalid_manifest"));
        QCOMPARE(bad["steps"].size(), std::size_t(2));
        QCOMPARE(bad["steps"][1]["latest"].get<bool>(), false);
    }

    // A step-named symlink to a checkpoint outside the root is not a step, a `latest` naming one
    // is a problem, and a hostile folder name is skipped: nothing outside the root is read.
    void symlinksAndHostileNamesAreNotFollowed()
    {
        const fs::path outside = m_root / "outside";
        write_dcp_checkpoint(outside / "step-99", "model.w", {1.0f, 2.0f});
        const fs::path root = m_root / "linked";
        write_dcp_checkpoint(root / "step-10", "model.w", {1.0f, 2.0f});
        fs::create_directory_symlink(outside / "step-99", root / "step-99");
        write_dcp_checkpoint(root / "evil\x1b]0;x\x07_50", "model.w", {1.0f});
        write_dcp_checkpoint(root / "bad\xff_60", "model.w", {1.0f});

        auto run = status(root, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        auto st = run.json();
        QCOMPARE(names_of(st), std::vector<std::string>{"step-10"});
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("step-10"));
        run = status(root, {QStringLiteral("--content")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(!run.out.contains("step-99") && !run.out.contains('\x1b'), run.out.constData());

        // DeepSpeed: `latest` names a symlink out of the root.
        const fs::path ds = m_root / "ds-linked";
        write_deepspeed_step(ds / "global_step1", {1, 2});
        write_deepspeed_step(outside / "global_step9", {1, 2});
        fs::create_directory_symlink(outside / "global_step9", ds / "global_step9");
        fixtures::write_file(ds / "latest", "global_step9\n");
        run = status(ds, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        st = run.json();
        QCOMPARE(st["format"].get<std::string>(), std::string("deepspeed"));
        QVERIFY(st["latest"].is_null());
        QCOMPARE(st["latest_problem"]["kind"].get<std::string>(), std::string("path_outside_checkpoint"));
        QCOMPARE(names_of(st), std::vector<std::string>{"global_step1"});
        QCOMPARE(st["newest_healthy"].get<std::string>(), std::string("global_step1"));

        // The listing itself, as the core gives it.
        const shardscope::RootSteps listed = shardscope::list_root_steps(root);
        QCOMPARE(listed.format, shardscope::CheckpointFormat::torch_dcp);
        QCOMPARE(listed.steps.size(), std::size_t(1));
        QCOMPARE(listed.steps[0].location.path, root / "step-10");
        fs::remove_all(root); // QTemporaryDir cannot remove a name that is not UTF-8
    }

    // A path that does not exist: one JSON object with the error, exit 2.
    void missingRootPrintsOneJsonObject()
    {
        for (const QStringList& extra : {QStringList{QStringLiteral("--json")},
                                         QStringList{QStringLiteral("--content"), QStringLiteral("--json")}}) {
            const auto run = status(m_root / "no-such-root", extra);
            QCOMPARE(run.exit_code, 2);
            const auto j = run.json();
            QCOMPARE(j["ok"].get<bool>(), false);
            QCOMPARE(j["error"]["kind"].get<std::string>(), std::string("cannot_open"));
            QCOMPARE(j["problems"].size(), std::size_t(1));
            QVERIFY2(run.err.contains("no-such-root"), run.err.constData());
        }
    }

    // A folder that is no root of any format keeps the native status (an empty root).
    void emptyFolderKeepsTheNativeStatus()
    {
        const fs::path root = m_root / "empty";
        fs::create_directories(root);
        const auto run = status(root, {QStringLiteral("--content"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        const auto st = run.json();
        QVERIFY(st.contains("lock") && st.contains("space") && !st.contains("format"));
        QVERIFY(st["steps"].empty());
        QVERIFY(st["newest_healthy"].is_null());
    }
};

QTEST_GUILESS_MAIN(TestCliStatusForeign)
#include "tst_cli_status_foreign.moc"
