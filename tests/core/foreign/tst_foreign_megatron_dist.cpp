// Megatron-LM's torch_dist iterations: a DCP folder whose Metadata carries mcore_data, with
// metadata.json, common.pt and integrity.json beside it. Fixtures are written here as Megatron
// lays them out; integrity.json's digests come from Qt's SHA-256, not the code under test.

#include "foreign_fixtures.h"
#include "megatron_dist_fixture.h"
#include "problemcheck.h"

#include "core/foreign/dcp.h"
#include "core/foreign/megatron.h"
#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/open/detect.h"
#include "core/open/verify.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;
using namespace problemcheck;

namespace {

std::string row(const VerifyReport& r, const std::string& key)
{
    for (const auto& [k, v] : r.foreign->rows)
        if (k == key)
            return v;
    return "<no row " + key + ">";
}

const ShardCheck* shard(const VerifyReport& r, const std::string& path)
{
    for (const auto& s : r.shards)
        if (s.path == path)
            return &s;
    return nullptr;
}

// The problems of `kind` whose path is `path` and whose sentence names it.
std::size_t problems_naming(const VerifyReport& r, ProblemKind kind, const std::string& path)
{
    std::size_t n = 0;
    for (const auto& p : r.problems)
        n += p.kind == kind && p.path == path && p.message.find(path) != std::string::npos;
    return n;
}

void flip_byte(const fs::path& file, std::size_t at)
{
    std::string bytes = read_file(file);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x20);
    write_file(file, bytes);
}

} // namespace

class TestForeignMegatronDist : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    int m_n = 0;
    fs::path fresh() { return fs::path(m_tmp.path().toStdString()) / ("case" + std::to_string(++m_n)); }

private slots:
    // The Metadata pickle with an attribute DCP does not define is read, and the attribute shown.
    void mcoreDataIsTolerated()
    {
        std::vector<DcpTensorSpec> tensors = {{"model.bias", {6}, {{{0}, {6}, "__0_0.distcp", 0, 24}}}};
        for (bool like_cpython : {false, true}) {
            const DcpMetadata meta = decode_dcp_metadata(dcp_metadata(tensors, true, {}, {}, like_cpython, mcore_data));
            QCOMPARE(meta.tensors.size(), std::size_t(1));
            QCOMPARE(meta.tensors[0].fqn, std::string("model.bias"));
            QCOMPARE(meta.info.at("mcore_data"),
                     std::string("2 entries, 1 with nd_reformulated_orig_global_shape (Megatron torch_dist)"));
        }
        // Without it, no row.
        QVERIFY(!decode_dcp_metadata(dcp_metadata(tensors)).info.contains("mcore_data"));
    }

    void rootAndIterationVerify()
    {
        const fs::path root = fresh();
        const fs::path iter = write_torch_dist(root);
        QCOMPARE(detect_format(root).format, CheckpointFormat::megatron);
        // The iteration folder alone is Megatron too, not plain DCP: its other files get checked.
        QCOMPARE(detect_format(iter).format, CheckpointFormat::megatron);
        auto size = [&](const char* name) { return uint64_t(fs::file_size(iter / name)); };
        const uint64_t dcp_bytes = size("__0_0.distcp") + size("__1_0.distcp");
        const uint64_t hashed_bytes = dcp_bytes + size("common.pt") + size(".metadata") + size("metadata.json");
        for (const fs::path& path : {root, iter}) {
            VerifyOptions options;
            options.threads = 3;
            // The overall progress runs on through common.pt and the hashing, to all of it.
            std::mutex mutex;
            uint64_t most_done = 0, most_total = 0;
            options.callbacks.progress = [&](uint64_t done, uint64_t total) {
                std::lock_guard lock(mutex);
                most_done = std::max(most_done, done);
                most_total = std::max(most_total, total);
            };
            const VerifyReport r = verify_checkpoint(path, options);
            QCOMPARE(most_total, dcp_bytes + size("common.pt") + hashed_bytes);
            QCOMPARE(most_done, most_total);
            QVERIFY2(r.ok(), problems_text(r).c_str());
            QCOMPARE(r.format, std::string("megatron"));
            QVERIFY2(row(r, "layout").starts_with("torch_dist"), row(r, "layout").c_str());
            QCOMPARE(row(r, "metadata.json sharded_backend"), std::string("torch_dist"));
            QCOMPARE(row(r, "mcore_data"),
                     std::string("2 entries, 1 with nd_reformulated_orig_global_shape (Megatron torch_dist)"));
            QCOMPARE(row(r, "integrity.json"), std::string("5 files (SHA-256): all match"));
            QCOMPARE(row(r, "tensors"), std::string("2"));
            // Every file checked once: the two data files, then common.pt, .metadata, metadata.json.
            QCOMPARE(r.shards.size(), std::size_t(5));
            for (const char* name : {"__0_0.distcp", "__1_0.distcp", "common.pt", ".metadata", "metadata.json"}) {
                const ShardCheck* s = shard(r, name);
                QVERIFY2(s && s->status == ShardStatus::ok, name);
                QCOMPARE(s->actual_digest, sha256_of(read_file(iter / name)));
            }
            QVERIFY2(row(r, "common.pt").find("1 tensor") != std::string::npos, row(r, "common.pt").c_str());
        }
        // shardctl info (no data pass) parses integrity.json but hashes nothing.
        const VerifyReport info = verify_checkpoint(detect_format(root), VerifyOptions{}, false);
        QVERIFY2(info.ok(), problems_text(info).c_str());
        QCOMPARE(row(info, "integrity.json"), std::string("5 files listed (not hashed)"));
    }

    // One byte changed where only integrity.json can tell (metadata.json is still valid JSON),
    // then one inside a data file (its range's bytes are raw: the DCP checks alone cannot tell).
    void corruptedByteNamesTheFile()
    {
        const fs::path root = fresh();
        const fs::path iter = write_torch_dist(root);
        std::string config = read_file(iter / "metadata.json");
        const auto at = config.find("\"sharded_backend_version\": 1");
        QVERIFY(at != std::string::npos);
        config[at + std::strlen("\"sharded_backend_version\": ")] = '2';
        write_file(iter / "metadata.json", config);
        VerifyReport r = verify_checkpoint(root);
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(problems_naming(r, ProblemKind::hash_mismatch, "metadata.json"), std::size_t(1));
        QCOMPARE(shard(r, "metadata.json")->status, ShardStatus::hash_mismatch);
        QCOMPARE(row(r, "integrity.json"), std::string("5 files (SHA-256): 1 differ, missing or unusable"));

        write_torch_dist(root);
        flip_byte(iter / "__1_0.distcp", 17);
        r = verify_checkpoint(root);
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(problems_naming(r, ProblemKind::hash_mismatch, "__1_0.distcp"), std::size_t(1));
        QCOMPARE(shard(r, "__1_0.distcp")->status, ShardStatus::hash_mismatch);
        QCOMPARE(shard(r, "__0_0.distcp")->status, ShardStatus::ok);

        // common.pt's CRC catches its own damage too: both say so, each naming it.
        write_torch_dist(root);
        const std::string common = read_file(iter / "common.pt");
        const auto data = common.find("common/data/0");
        QVERIFY(data != std::string::npos);
        // The storage's bytes start at the first multiple of 64 after its name and the 4-byte pad
        // field (torch.save aligns them so).
        const std::size_t bytes_at = (data + 13 + 4 + 63) / 64 * 64;
        flip_byte(iter / "common.pt", bytes_at + 2);
        r = verify_checkpoint(root);
        QVERIFY2(problems_naming(r, ProblemKind::hash_mismatch, "common.pt") == 1, problems_text(r).c_str());
        QVERIFY2(problems_naming(r, ProblemKind::crc_mismatch, "common.pt") == 1, problems_text(r).c_str());
    }

    void missingFiles()
    {
        const fs::path root = fresh();
        const fs::path iter = write_torch_dist(root);
        // Listed in integrity.json and required by metadata.json: said once.
        fs::remove(iter / "common.pt");
        VerifyReport r = verify_checkpoint(root);
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(problems_naming(r, ProblemKind::missing_file, "common.pt"), std::size_t(1));

        // A file only integrity.json knows of.
        write_torch_dist(root);
        write_file(iter / "train_notes.txt", "lr 3e-4");
        write_integrity(iter);
        fs::remove(iter / "train_notes.txt");
        r = verify_checkpoint(root);
        QCOMPARE(r.problems.size(), std::size_t(1));
        QCOMPARE(problems_naming(r, ProblemKind::missing_file, "train_notes.txt"), std::size_t(1));
        QVERIFY(r.problems[0].message.ends_with("(listed in integrity.json)"));

        // A file integrity.json does not list is not its concern.
        write_torch_dist(root);
        write_integrity(iter, {"common.pt"});
        r = verify_checkpoint(root);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(row(r, "integrity.json"), std::string("4 files (SHA-256): all match"));
    }

    void hostileIntegrityJson_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<int>("kind");
        QTest::addColumn<QByteArray>("said");
        const QByteArray ok(64, 'a');
        QTest::newRow("not json") << QByteArray("{\"files\": {") << int(ProblemKind::invalid_manifest)
                                  << QByteArray("not valid JSON");
        QTest::newRow("array") << QByteArray("[1, 2]") << int(ProblemKind::invalid_manifest)
                               << QByteArray("not a JSON object");
        QTest::newRow("no files") << QByteArray(R"({"algorithm": "sha256"})") << int(ProblemKind::invalid_manifest)
                                  << QByteArray("`files`");
        QTest::newRow("md5") << QByteArray(R"({"algorithm": "md5", "files": {}})")
                             << int(ProblemKind::unsupported_schema) << QByteArray("is not sha256");
        QTest::newRow("short digest") << QByteArray(R"({"files": {"common.pt": "abc"}})")
                                      << int(ProblemKind::invalid_manifest) << QByteArray("'common.pt' is not 64");
        QTest::newRow("deep") << QByteArray(R"({"files": {"a": {"b": {"c": 1}}}})")
                              << int(ProblemKind::invalid_manifest) << QByteArray("nested");
        QTest::newRow("twice") << QByteArray(R"({"files": {}, "files": {}})") << int(ProblemKind::invalid_manifest)
                               << QByteArray("names 'files' twice");
        QTest::newRow("dot dot") << QByteArray("{\"files\": {\"../outside.pt\": \"") + ok + "\"}}"
                                 << int(ProblemKind::path_outside_checkpoint) << QByteArray("../outside.pt");
        QTest::newRow("absolute") << QByteArray("{\"files\": {\"/etc/passwd\": \"") + ok + "\"}}"
                                  << int(ProblemKind::path_outside_checkpoint) << QByteArray("/etc/passwd");
        QTest::newRow("inner dot dot") << QByteArray("{\"files\": {\"sub/../../x\": \"") + ok + "\"}}"
                                       << int(ProblemKind::path_outside_checkpoint) << QByteArray("sub/../../x");
    }
    void hostileIntegrityJson()
    {
        QFETCH(QByteArray, text);
        QFETCH(int, kind);
        QFETCH(QByteArray, said);
        const fs::path root = fresh();
        const fs::path iter = write_torch_dist(root);
        write_file(root / "outside.pt", "not part of the checkpoint");
        write_file(iter / "integrity.json", text.toStdString());
        const VerifyReport r = verify_checkpoint(root);
        QCOMPARE(r.problems.size(), std::size_t(1));
        const Problem& p = r.problems[0];
        QCOMPARE(int(p.kind), kind);
        QVERIFY2(p.message.find(said.toStdString()) != std::string::npos, p.message.c_str());
        // One sentence naming the file: integrity.json itself, or the name it lists.
        QVERIFY2(p.message.find("integrity.json") != std::string::npos ||
                     p.kind == ProblemKind::path_outside_checkpoint,
                 p.message.c_str());
        // The rest of the checkpoint was still checked.
        QCOMPARE(shard(r, "__1_0.distcp")->status, ShardStatus::ok);
    }

    void malformedMetadataJson()
    {
        const fs::path root = fresh();
        const fs::path iter = write_torch_dist(root);
        for (const char* text : {R"({"sharded_backend": )", R"({"common_backend": "torch"})"}) {
            write_file(iter / "metadata.json", text);
            write_integrity(iter);
            const VerifyReport r = verify_checkpoint(root);
            QCOMPARE(r.problems.size(), std::size_t(1));
            QCOMPARE(r.problems[0].kind, ProblemKind::invalid_manifest);
            QCOMPARE(r.problems[0].path, std::string("metadata.json"));
            QVERIFY2(r.problems[0].message.starts_with((iter / "metadata.json").string() + ": "),
                     r.problems[0].message.c_str());
            QCOMPARE(r.format, std::string("megatron"));
        }
    }

    // stats and diff read the DCP tensors of the chosen iteration (common.pt is not a tensor file).
    void statsAndDiffReadTheTensors()
    {
        const fs::path a = fresh(), b = fresh();
        write_torch_dist(a);
        write_torch_dist(b, 2.0f);
        const ContentReport r = inspect_content(a);
        QVERIFY2(r.ok(), r.problems.empty() ? "cancelled" : r.problems[0].message.c_str());
        QCOMPARE(r.format, std::string("megatron"));
        QCOMPARE(r.tensors.size(), std::size_t(2));
        const TensorContent& weight = r.tensors[0];
        QCOMPARE(weight.name, std::string("model.weight"));
        QCOMPARE(weight.parts.size(), std::size_t(2));
        QCOMPARE(weight.stats.numel, uint64_t(24));
        QCOMPARE(weight.stats.max, 23.0 / 4.0);
        QCOMPARE(weight.stats.mean, 11.5 / 4.0);
        QCOMPARE(r.tensors[1].stats.mean, 3.5);

        const DiffReport d = diff_checkpoints(a, b);
        QCOMPARE(d.tensors.size(), std::size_t(2));
        QCOMPARE(d.tensors[0].status, DiffStatus::changed);
        QCOMPARE(d.tensors[0].sums.changed, uint64_t(23)); // all but the 0
        QCOMPARE(d.tensors[1].status, DiffStatus::identical);
    }
};

QTEST_GUILESS_MAIN(TestForeignMegatronDist)
#include "tst_foreign_megatron_dist.moc"
