// The per-rank halves put back together: a report gathered from checks made rank by rank, in any
// order, is the one verify_native makes (shardctl-mpi verify prints what shardctl verify prints).

#include "core/checkpoint/rankio.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify_json.h"
#include "core/run/demo.h"

#include <QTemporaryDir>
#include <QTest>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// The verify object as text, less the one figure two runs never share.
std::string without_seconds(const VerifyReport& report)
{
    nlohmann::json object = verify_report_json(report);
    object.erase("seconds");
    return object.dump(2);
}

// Every rank checked on its own, last rank first; the first problem found is the agreed one.
VerifyReport gathered(const fs::path& dir, const Manifest& m)
{
    std::vector<ShardCheck> checks;
    std::optional<Problem> first;
    for (auto s = m.shards.rbegin(); s != m.shards.rend(); ++s) {
        std::optional<Problem> problem;
        checks.push_back(check_rank_shard(dir, m, *s, false, problem));
        if (problem && (!first || problem->rank < first->rank))
            first = problem;
    }
    return gathered_verify_report(dir, m, std::move(checks), first, false, 0.5);
}

} // namespace

class TestRankIo : public QObject {
    Q_OBJECT
private slots:
    void gatheredReportIsVerifyNatives()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        const Manifest m = save_sharded(make_demo_state(3, 10'001, 4, ParamDtype::F16), dir, 7);
        std::ofstream(dir / "rank9.safetensors.tmp") << "left over";

        const VerifyReport report = gathered(dir, m);
        QCOMPARE(report.shards.size(), std::size_t(4));
        QCOMPARE(report.shards[0].rank, 0); // manifest order, whatever order the checks came in
        QCOMPARE(report.seconds, 0.5);
        QCOMPARE(without_seconds(report), without_seconds(verify_native(dir)));
    }

    void gatheredReportCarriesTheAgreedProblem()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        const Manifest m = save_sharded(make_demo_state(3, 10'001, 3, ParamDtype::F16), dir, 7);
        {
            std::fstream file(dir / m.shards[1].path, std::ios::in | std::ios::out | std::ios::binary);
            file.seekp(-1, std::ios::end);
            file.put('\x55');
        }
        const VerifyReport report = gathered(dir, m);
        QVERIFY(!report.ok());
        QCOMPARE(report.problems.size(), std::size_t(1));
        QCOMPARE(report.problems.front().rank, 1);
        QCOMPARE(report.shards[1].status, ShardStatus::hash_mismatch);
        QCOMPARE(without_seconds(report), without_seconds(verify_native(dir)));
    }
};

QTEST_GUILESS_MAIN(TestRankIo)
#include "tst_rankio.moc"
