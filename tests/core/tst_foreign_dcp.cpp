// PyTorch DCP folders: .metadata decoded by the restricted reader, storage ranges, chunk tiling.

#include "foreign_fixtures.h"

#include "core/checkpoint.h"
#include "core/foreign_dcp.h"
#include "core/formats.h"

#include <QTemporaryDir>
#include <QTest>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;

namespace {

// model.weight [4, 6] split by rows over two ranks, model.bias [6] on rank 0.
std::vector<DcpTensorSpec> two_rank_layout()
{
    return {
        {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp", 0, 100}, {{2, 0}, {2, 6}, "__1_0.distcp", 0, 100}}},
        {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp", 100, 60}}},
    };
}

fs::path write_dcp(const fs::path& dir, const std::vector<DcpTensorSpec>& tensors, bool frame = true)
{
    write_file(dir / ".metadata", dcp_metadata(tensors, frame));
    write_file(dir / "__0_0.distcp", std::string(160, 'x'));
    write_file(dir / "__1_0.distcp", std::string(100, 'y'));
    return dir;
}

bool has_problem(const VerifyReport& r, ProblemKind kind)
{
    for (const auto& p : r.problems)
        if (p.kind == kind)
            return true;
    return false;
}

std::string problems_text(const VerifyReport& r)
{
    std::string out;
    for (const auto& p : r.problems)
        out += std::string(to_string(p.kind)) + ": " + p.message + "\n";
    return out;
}

} // namespace

class TestForeignDcp : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

private slots:
    void decodesMetadata()
    {
        const DcpMetadata m = decode_dcp_metadata(dcp_metadata(two_rank_layout()), "m");
        QCOMPARE(m.pickle_protocol, 4);
        QCOMPARE(m.tensors.size(), std::size_t(2));
        const DcpTensor& w = m.tensors[0];
        QCOMPARE(w.fqn, std::string("model.weight"));
        QCOMPARE(w.dtype, std::string("float32"));
        QCOMPARE(w.size, (std::vector<uint64_t>{4, 6}));
        QCOMPARE(w.chunks.size(), std::size_t(2));
        QCOMPARE(w.chunks[1].offsets, (std::vector<uint64_t>{2, 0}));
        QVERIFY(w.chunks[1].storage.present);
        QCOMPARE(w.chunks[1].storage.file, std::string("__1_0.distcp"));
        QCOMPARE(w.chunks[1].storage.length, uint64_t(100));
        QCOMPARE(m.tensors[1].chunks[0].storage.offset, uint64_t(100));
        QCOMPARE(m.files, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
        // Without the FRAME opcode (protocol 2/3 writers) the same structure decodes.
        QCOMPARE(decode_dcp_metadata(dcp_metadata(two_rank_layout(), false), "m").tensors.size(), std::size_t(2));
    }

    void verifiesFolder()
    {
        const fs::path dir = write_dcp(root() / "ok", two_rank_layout());
        QCOMPARE(detect_format(dir).format, CheckpointFormat::torch_dcp);
        const VerifyReport r = verify_checkpoint(dir);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("torch-dcp"));
        QCOMPARE(r.shards.size(), std::size_t(2));
        QCOMPARE(r.shards[0].rank, 0);
        QCOMPARE(r.shards[1].rank, 1);
        QCOMPARE(r.foreign->tensors_total, uint64_t(2));
        QCOMPARE(r.foreign->tensors[0].bytes, uint64_t(4 * 6 * 4));
        QCOMPARE(r.foreign->tensors[0].detail, std::string("2 chunks"));
        bool ranks = false;
        for (const auto& [k, v] : r.foreign->rows)
            ranks = ranks || (k == "ranks" && v == "2");
        QVERIFY(ranks);
    }

    void brokenFolders()
    {
        {
            const fs::path dir = write_dcp(root() / "missing", two_rank_layout());
            fs::remove(dir / "__1_0.distcp");
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY(has_problem(r, ProblemKind::missing_file));
            QCOMPARE(r.shards[1].status, ShardStatus::missing);
            QCOMPARE(r.shards[0].status, ShardStatus::ok);
        }
        {
            const fs::path dir = write_dcp(root() / "truncated", two_rank_layout());
            fs::resize_file(dir / "__0_0.distcp", 150); // the bias range [100, 160) no longer fits
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::range_outside_file), problems_text(r).c_str());
            QCOMPARE(r.shards[0].status, ShardStatus::invalid);
        }
        {
            auto layout = two_rank_layout();
            layout[0].chunks[1].offsets = {1, 0}; // rows 1..2 overlap rank 0's rows 0..1
            const VerifyReport r = verify_checkpoint(write_dcp(root() / "overlap", layout));
            QVERIFY2(has_problem(r, ProblemKind::layout_overlap), problems_text(r).c_str());
        }
        {
            auto layout = two_rank_layout();
            layout[0].chunks[1].sizes = {1, 6}; // row 3 is covered by nobody
            const VerifyReport r = verify_checkpoint(write_dcp(root() / "gap", layout));
            QVERIFY2(has_problem(r, ProblemKind::layout_gap), problems_text(r).c_str());
        }
        {
            auto layout = two_rank_layout();
            layout[1].chunks[0].offset = 50; // bias bytes overlap weight bytes in __0_0
            const VerifyReport r = verify_checkpoint(write_dcp(root() / "byte-overlap", layout));
            QVERIFY2(has_problem(r, ProblemKind::layout_overlap), problems_text(r).c_str());
        }
        {
            auto layout = two_rank_layout();
            layout[0].chunks[1].file = "../outside.distcp";
            const VerifyReport r = verify_checkpoint(write_dcp(root() / "escape", layout));
            QVERIFY2(has_problem(r, ProblemKind::path_outside_checkpoint), problems_text(r).c_str());
        }
    }

    void hostileMetadata()
    {
        {
            const fs::path dir = write_dcp(root() / "forbidden", two_rank_layout());
            std::string meta = dcp_metadata(two_rank_layout(), false);
            meta.insert(2, "(i"); // INST right after PROTO
            write_file(dir / ".metadata", meta);
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::forbidden_pickle_opcode), problems_text(r).c_str());
            QVERIFY(r.problems[0].message.find(".metadata") != std::string::npos);
        }
        {
            const fs::path dir = write_dcp(root() / "truncated-meta", two_rank_layout());
            const std::string meta = dcp_metadata(two_rank_layout(), false);
            write_file(dir / ".metadata", meta.substr(0, meta.size() / 2));
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY(has_problem(r, ProblemKind::invalid_pickle));
            QVERIFY(!r.ok());
        }
    }
};

QTEST_GUILESS_MAIN(TestForeignDcp)
#include "tst_foreign_dcp.moc"
