// DCP written by torch 2.x's newer paths: items compressed through the ZStandard storage
// extension (transform_descriptors "stream.zstd/1") read, checked and refused like items stored
// as is; unknown extensions said once per checkpoint; relative_paths through sub-folders (S3
// prefix strategies) read under the same confinement as flat ones, never outside the checkpoint.

#include "foreign_fixtures.h"
#include "problemcheck.h"
#include "zstd_dcp_fixture.h"

#include "core/foreign/dcp.h"
#include "core/foreign/dcp_transform.h"
#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/open/verify.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <zstd.h>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;
using namespace problemcheck;

namespace {

std::string zstd(const std::string& bytes)
{
    std::string out(ZSTD_compressBound(bytes.size()), '\0');
    const std::size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
    out.resize(ZSTD_isError(n) ? 0 : n);
    return out;
}

std::string row(const VerifyReport& r, const std::string& key)
{
    for (const auto& [k, v] : r.foreign->rows)
        if (k == key)
            return v;
    return {};
}

} // namespace

class TestForeignDcpExtensions : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path root() const { return m_tmp.path().toStdString(); }

private slots:
    void descriptors()
    {
        QVERIFY(dcp_transform_known("stream.zstd/1"));
        QVERIFY(dcp_transform_known("stream.zstd/1.2"));
        QVERIFY(!dcp_transform_known("stream.zstd/2"));
        QVERIFY(!dcp_transform_known("stream.zstd/1,stream.zstd/1"));
        QVERIFY(!dcp_transform_known("zstd"));
    }

    void decodesFrames()
    {
        const std::string text = "the chunk's archive, twice: the chunk's archive";
        const auto read_of = [](const std::string& bytes) -> ZipReadAt {
            return [&bytes](void* buffer, std::size_t size, uint64_t offset) {
                if (offset > bytes.size() || size > bytes.size() - offset)
                    return false;
                std::memcpy(buffer, bytes.data() + offset, size);
                return true;
            };
        };
        for (const std::string& stored :
             {zstd(text), zstd_unsized(text), zstd_raw_frame(text), zstd_raw_frame(text, text.size()),
              zstd(text.substr(0, 10)) + zstd_raw_frame(text.substr(10))}) {
            const auto out = inflate_dcp_zstd(read_of(stored), 0, stored.size(), 1000, "f");
            QCOMPARE(std::string(reinterpret_cast<const char*>(out.data()), out.size()), text);
        }
        const std::string lying = zstd_raw_frame(text, 10);
        const auto p =
            error_of([&] { inflate_dcp_zstd(read_of(lying), 0, lying.size(), 1000, "dir/__0_0.distcp: x"); });
        QVERIFY(p);
        QCOMPARE(p->message,
                 std::string("dir/__0_0.distcp: x: its zstd frame at byte 0 expands past the 10 bytes "
                             "its header declares"));
        const std::string big = zstd_unsized(std::string(5000, 'a'));
        const auto bomb = error_of([&] { inflate_dcp_zstd(read_of(big), 0, big.size(), 1000, "f"); });
        QVERIFY(bomb);
        QCOMPARE(bomb->message, std::string("f: it decompresses past the 1000 bytes the item can take"));
        const std::string cut = zstd(text).substr(0, 12);
        QVERIFY(error_of([&] { inflate_dcp_zstd(read_of(cut), 0, cut.size(), 1000, "f"); }));
        QVERIFY(error_of([&] { inflate_dcp_zstd(read_of(text), 0, text.size(), 1000, "f"); }));
    }

    // Every item decompressed and checked like an archive stored as is: a folder of good ones is
    // OK, and a CRC broken inside a compressed archive is found (the items are really read).
    void verifiesCompressedItems()
    {
        const VerifyReport ok = verify_checkpoint(write_zstd_dcp(root() / "ok"));
        QVERIFY2(ok.ok(), problems_text(ok).c_str());
        QCOMPARE(row(ok, "storage extensions"), std::string("stream.zstd/1 (3 items)"));
        QVERIFY(ok.shards[0].detail.ends_with(", contents checked"));

        const VerifyReport crc = verify_checkpoint(write_zstd_dcp(root() / "crc", "stream.zstd/1", [](std::string a) {
            a[a.find("archive/data/0") + 40] ^= 0x01; // a byte of the storage entry's data
            return zstd(a);
        }));
        QCOMPARE(crc.problems.size(), std::size_t(1));
        QCOMPARE(crc.problems[0].kind, ProblemKind::crc_mismatch);
        QCOMPARE(crc.problems[0].rank, 1);
        QVERIFY2(crc.problems[0].message.find("__1_0.distcp (decompressed): 'model.weight' chunk [2, 0]") !=
                     std::string::npos,
                 crc.problems[0].message.c_str());
    }

    void hostileFrames()
    {
        { // a frame that writes more than its header declares
            const VerifyReport r =
                verify_checkpoint(write_zstd_dcp(root() / "lying", "stream.zstd/1",
                                                 [](const std::string& a) { return zstd_raw_frame(a, a.size() - 1); }));
            QCOMPARE(r.problems.size(), std::size_t(1));
            QCOMPARE(r.problems[0].kind, ProblemKind::invalid_archive);
            QCOMPARE(r.problems[0].path, std::string("__1_0.distcp"));
            QVERIFY2(r.problems[0].message.find("__1_0.distcp: 'model.weight' chunk [2, 0] (zstd-compressed,") !=
                             std::string::npos &&
                         r.problems[0].message.ends_with("expands past the " +
                                                         std::to_string(torch_tensor_archive({2, 6}).size() - 1) +
                                                         " bytes its header declares"),
                     r.problems[0].message.c_str());
        }
        { // a small frame that would fill memory: stopped at the chunk's size and an archive's room
            const VerifyReport r =
                verify_checkpoint(write_zstd_dcp(root() / "bomb", "stream.zstd/1", [](const std::string&) {
                    return zstd_unsized(std::string(std::size_t(kDcpArchiveOverhead) + 4096, '\0'));
                }));
            QCOMPARE(r.problems.size(), std::size_t(1));
            QVERIFY2(r.problems[0].message.ends_with("decompresses past the " +
                                                     std::to_string(48 + kDcpArchiveOverhead) +
                                                     " bytes the item can take"),
                     r.problems[0].message.c_str());
        }
        { // not zstd at all
            const VerifyReport r = verify_checkpoint(
                write_zstd_dcp(root() / "plain", "stream.zstd/1", [](const std::string& a) { return a; }));
            QCOMPARE(r.problems.size(), std::size_t(1));
            QVERIFY2(r.problems[0].message.ends_with("is not zstd-compressed (no zstd frame magic at its start) though "
                                                     "its transform_descriptors say stream.zstd"),
                     r.problems[0].message.c_str());
        }
    }

    // An extension ShardScope does not know: one sentence for the checkpoint, in verify and stats.
    void unknownExtensionOnce()
    {
        const fs::path dir = write_zstd_dcp(root() / "lz4", "stream.lz4/1");
        const VerifyReport r = verify_checkpoint(dir);
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(r.problems[0].kind, ProblemKind::unreadable);
        QVERIFY2(r.problems[0].message.ends_with("3 stored items are written through storage extension "
                                                 "'stream.lz4/1' (transform_descriptors), which ShardScope cannot "
                                                 "undo: their contents were not checked"),
                 r.problems[0].message.c_str());
        const ContentReport c = inspect_content(dir);
        QCOMPARE(c.problems.size(), std::size_t(1));
        QVERIFY2(c.problems[0].message.ends_with("3 chunks are written through storage extension 'stream.lz4/1' "
                                                 "(transform_descriptors), which ShardScope cannot undo: not read"),
                 c.problems[0].message.c_str());
    }

    // stats reads compressed chunks: the figures are those of the archives' elements (torch_zip's
    // storage pattern), decoded here by hand in float64.
    void statsOfCompressedChunks()
    {
        const ContentReport r = inspect_content(write_zstd_dcp(root() / "stats"));
        QVERIFY2(r.problems.empty(), r.problems.empty() ? "" : r.problems[0].message.c_str());
        QCOMPARE(r.tensors.size(), std::size_t(2));
        const TensorContent& w = r.tensors[0];
        QCOMPARE(w.parts.size(), std::size_t(2));
        QVERIFY(w.parts[1].zstd_length > 0);
        ValueStats want;
        for (int chunk = 0; chunk < 2; ++chunk)
            for (uint64_t e = 0; e < 12; ++e) {
                const double v = torch_zip_element(e);
                want.add(&v, 1);
            }
        QCOMPARE(w.stats.numel, uint64_t(24));
        QCOMPARE(w.stats.nan, want.nan);
        QCOMPARE(w.stats.finite, want.finite);
        QCOMPARE(w.stats.min, want.min);
        QCOMPARE(w.stats.max, want.max);
        QCOMPARE(w.stats.mean, want.mean);
    }

    // diff reads compressed chunks in the tensor's own order: the same archives stored as is are
    // identical, element for element; one compressed archive with other values is not.
    void diffOfCompressedChunks()
    {
        const fs::path zstd_dir = write_zstd_dcp(root() / "diff-zstd");
        const fs::path plain = write_plain_dcp(root() / "diff-plain");
        const DiffReport same = diff_checkpoints(zstd_dir, plain);
        QVERIFY2(same.problems.empty(), same.problems.empty() ? "" : same.problems[0].message.c_str());
        QCOMPARE(same.tensors.size(), std::size_t(2));
        QVERIFY(same.identical());
        const fs::path other = write_zstd_dcp(root() / "diff-other", "stream.zstd/1", [](std::string a) {
            std::string elements(48, '\0'); // torch_zip's storage pattern
            for (std::size_t i = 0; i < 48; ++i)
                elements[i] = static_cast<char>((i * 7) & (i % 4 == 3 ? 0x3f : 0xff));
            a[a.find(elements) + 47] ^= 0x40; // a bit of the last element
            return zstd_unsized(a);
        });
        const DiffReport d = diff_checkpoints(other, plain);
        QVERIFY(!d.identical());
        const TensorDiff* w = nullptr;
        for (const auto& t : d.tensors)
            if (t.name == "model.weight")
                w = &t;
        QVERIFY(w);
        QCOMPARE(w->sums.changed, uint64_t(1));
        QCOMPARE(*w->sums.first_changed, uint64_t(23)); // row 3, column 5: rank 1's chunk's last element
    }

    void nestedRelativePaths()
    {
        QCOMPARE(dcp_rank_of("__0_0/0.distcp"), 0);
        QCOMPARE(dcp_rank_of("a/b/__3_0.distcp"), 3);
        QCOMPARE(dcp_rank_of("__2_0/sub/0.distcp"), 2);
        QCOMPARE(dcp_rank_of("x/y.distcp"), -1);
        auto nested = [](const std::string& rank0, const std::string& rank1) {
            return std::vector<DcpTensorSpec>{
                {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, rank0}, {{2, 0}, {2, 6}, rank1}}},
                {"model.bias", {6}, {{{0}, {6}, rank0}}},
            };
        };
        // Writes the files inside the folder, all but rank 1's when it is meant to be outside.
        auto write = [](const fs::path& dir, std::vector<DcpTensorSpec> tensors, bool rank1_inside = true) {
            const std::string rank1 = tensors[0].chunks[1].file;
            const auto files = dcp_layout(tensors);
            write_file(dir / ".metadata", dcp_metadata(tensors));
            for (const auto& [name, content] : files)
                if (rank1_inside || name != rank1)
                    write_file(dir / name, content);
            return files;
        };
        const fs::path ok = root() / "nested";
        write(ok, nested("__0_0/0.distcp", "__1_0/0.distcp"));
        const VerifyReport r = verify_checkpoint(ok);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.shards.size(), std::size_t(2));
        QCOMPARE(r.shards[1].path, std::string("__1_0/0.distcp"));
        QCOMPARE(r.shards[1].rank, 1);
        QCOMPARE(r.foreign->world_size, int64_t(2));
        const ContentReport c = inspect_content(ok);
        QVERIFY2(c.problems.empty(), c.problems.empty() ? "" : c.problems[0].message.c_str());
        QCOMPARE(c.tensors[0].parts[1].rank, 1);
        QCOMPARE(c.tensors[0].stats.numel, uint64_t(24));

        // Outside the checkpoint, by '..', by an absolute path, through a symlinked folder: never
        // read, though a file with the right bytes waits there.
        const fs::path bait = root() / "bait";
        write(bait, nested("__0_0/0.distcp", "__1_0/0.distcp"));
        for (const std::string& escape :
             {std::string("__1_0/../../bait/__1_0/0.distcp"), (bait / "__1_0/0.distcp").string(),
              std::string("link/0.distcp"), std::string("__1_0//0.distcp")}) {
            const fs::path dir = root() / ("escape" + std::to_string(std::hash<std::string>()(escape) % 1000));
            write(dir, nested("__0_0/0.distcp", escape), false);
            if (escape.starts_with("link"))
                fs::create_directory_symlink(bait / "__1_0", dir / "link");
            const VerifyReport v = verify_checkpoint(dir);
            QVERIFY2(v.problems.size() == 1 && v.problems[0].kind == ProblemKind::path_outside_checkpoint,
                     (escape + ": " + problems_text(v)).c_str());
            QCOMPARE(v.problems[0].path, escape);
            const ContentReport s = inspect_content(dir);
            QVERIFY2(s.problems.size() == 1 && s.problems[0].message.find(escape) != std::string::npos,
                     s.problems.empty() ? escape.c_str() : s.problems[0].message.c_str());
            QCOMPARE(s.tensors[0].parts.size(), std::size_t(1)); // rank 1's chunk not read
        }
    }
};

QTEST_GUILESS_MAIN(TestForeignDcpExtensions)
#include "tst_foreign_dcp_extensions.moc"
