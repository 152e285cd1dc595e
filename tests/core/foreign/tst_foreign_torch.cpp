// Zip archives (torch.save .pt files) and the DeepSpeed / Megatron folders built from them:
// CRC-32 and size checks without unpickling, tensor listing, rank sequences, hostile data.pkl.

#include "foreign_fixtures.h"
#include "problemcheck.h"

#include "core/open/verify.h"
#include "core/open/detect.h"
#include "core/foreign/torch_archive.h"
#include "core/foreign/io/zip_reader.h"

#include <QTemporaryDir>
#include <map>
#include <QTest>
#include <zlib.h>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;
using namespace problemcheck;

namespace {

std::string raw_deflate(const std::string& data)
{
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    std::string out(compressBound(static_cast<uLong>(data.size())) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

std::string model_states(const std::string& prefix)
{
    return torch_archive(prefix, {{"module.embed.weight", {4, 3}}, {"module.head.bias", {5}}});
}

fs::path deepspeed_folder(const fs::path& root, int dp)
{
    write_file(root / "latest", "global_step10\n");
    const fs::path tag = root / "global_step10";
    write_file(tag / "mp_rank_00_model_states.pt", model_states("mp_rank_00_model_states"));
    for (int d = 0; d < dp; ++d) {
        const std::string name = "bf16_zero_pp_rank_" + std::to_string(d) + "_mp_rank_00_optim_states";
        write_file(tag / (name + ".pt"), torch_archive(name, {{"optimizer_state_dict.fp32_flat", {16}}}));
    }
    return root;
}

} // namespace

class TestForeignTorch : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

private slots:
    void zipDirectoryAndCrc()
    {
        const std::string text(5000, 'q');
        ZipWriter zip;
        zip.add("a/stored", "hello world");
        zip.add("a/deflated", text, raw_deflate(text), 8, false);
        const std::string file = zip.finish();
        const ZipDirectory dir = parse_zip_directory(file, "t.zip");
        QCOMPARE(dir.entries.size(), std::size_t(2));
        QCOMPARE(dir.entries[1].method, uint16_t(8));
        const auto read = zip_read_memory(file);
        for (std::size_t i = 0; i < 2; ++i)
            QVERIFY2(check_zip_entry(read, file.size(), dir, i).ok,
                     check_zip_entry(read, file.size(), dir, i).problem.c_str());
        QCOMPARE(read_zip_entry(read, file.size(), dir, 1, 1 << 20, "t.zip"), text);
        QCOMPARE(zip.entries[0].data_offset % 64, uint64_t(0)); // torch-style alignment padding is skipped

        std::string corrupt = file;
        corrupt[zip.entries[0].data_offset + 1] ^= 0x20;
        const auto bad = check_zip_entry(zip_read_memory(corrupt), corrupt.size(), parse_zip_directory(corrupt), 0);
        QVERIFY(!bad.ok);
        QVERIFY(bad.crc_mismatch);
        std::string corrupt_deflate = file;
        corrupt_deflate[zip.entries[1].data_offset + 2] ^= 0x55;
        QVERIFY(!check_zip_entry(zip_read_memory(corrupt_deflate), corrupt_deflate.size(),
                                 parse_zip_directory(corrupt_deflate), 1)
                     .ok);
        try {
            read_zip_entry(zip_read_memory(corrupt), corrupt.size(), parse_zip_directory(corrupt), 0, 100, "c.zip");
            QFAIL("read a corrupt entry");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::crc_mismatch);
        }
    }

    void zipStructureErrors_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        ZipWriter zip;
        zip.add("x", std::string(100, 'x'));
        const std::string good = zip.finish();
        QTest::newRow("truncated") << QByteArray::fromStdString(good.substr(0, good.size() - 30));
        QTest::newRow("not a zip") << QByteArray("just some text, definitely not an archive");
        std::string past = good; // central directory offset past the end records
        past[past.size() - 3] = '\x7f';
        QTest::newRow("cd offset past end") << QByteArray::fromStdString(past);
        std::string entries = good; // claims 3 entries
        entries[entries.size() - 12] = 3;
        entries[entries.size() - 14] = 3;
        QTest::newRow("entry count") << QByteArray::fromStdString(entries);
    }
    void zipStructureErrors()
    {
        QFETCH(QByteArray, bytes);
        try {
            parse_zip_directory(bytes.toStdString(), "bad.zip");
            QFAIL("accepted a broken archive");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_archive);
            QVERIFY(std::string(e.what()).starts_with("bad.zip: "));
        }
    }

    void listsTorchArchiveTensors()
    {
        const TorchArchiveListing l = list_torch_archive(model_states("ms"), "ms.pt");
        QVERIFY(l.problems.empty());
        QCOMPARE(l.prefix, std::string("ms/"));
        QCOMPARE(l.storages.size(), std::size_t(2));
        QCOMPARE(l.storages[0].dtype, std::string("float32"));
        QCOMPARE(l.storages[0].numel, uint64_t(12));
        QCOMPARE(l.storages[0].entry_bytes, uint64_t(48));
        QCOMPARE(l.tensors_total, uint64_t(2));
        QCOMPARE(l.tensors[0].name, std::string("module.embed.weight"));
        QCOMPARE(l.tensors[0].shape, (std::vector<uint64_t>{4, 3}));
        QCOMPARE(l.tensors[1].bytes, uint64_t(20));
        // A storage whose recorded element count disagrees with its entry's size.
        const auto lying = list_torch_archive(torch_archive("x", {{"t", {4}}}, {}, 1), "x.pt");
        QCOMPARE(lying.problems.size(), std::size_t(1));
        QCOMPARE(lying.problems[0].kind, ProblemKind::size_mismatch);
    }

    void deepspeedFolder()
    {
        const fs::path dir = deepspeed_folder(root() / "ds-ok", 2);
        QCOMPARE(detect_format(dir).format, CheckpointFormat::deepspeed);
        const VerifyReport r = verify_checkpoint(dir);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("deepspeed"));
        QCOMPARE(r.dir, dir / "global_step10");
        QCOMPARE(r.shards.size(), std::size_t(3));
        for (const auto& s : r.shards)
            QCOMPARE(s.status, ShardStatus::ok);
        QCOMPARE(r.foreign->tensors_total, uint64_t(4));
        bool dp = false;
        for (const auto& [k, v] : r.foreign->rows)
            dp = dp || (k == "data-parallel size" && v == "2");
        QVERIFY(dp);
        // The step detection chose, and how, right after the format row.
        QVERIFY(r.foreign->rows.size() > 2);
        QCOMPARE(r.foreign->rows[1].first, std::string("tag"));
        QCOMPARE(r.foreign->rows[1].second, std::string("global_step10 (from `latest`)"));
        QCOMPARE(r.foreign->step, std::optional<int64_t>(10));

        // Without `latest`: the highest-numbered global_step folder, chosen once by detection.
        fs::remove(dir / "latest");
        fs::create_directories(dir / "global_step9");
        const DetectedFormat detected = detect_format(dir);
        QCOMPARE(detected.format, CheckpointFormat::deepspeed);
        QCOMPARE(detected.dir.path, dir / "global_step10");
        QVERIFY(detected.dir.has("mp_rank_00_model_states.pt"));
        QCOMPARE(detected.step, std::optional<int64_t>(10));
        const VerifyReport highest = verify_checkpoint(detected, VerifyOptions{});
        QVERIFY2(highest.ok(), problems_text(highest).c_str());
        QCOMPARE(highest.foreign->rows[1].second,
                 std::string("global_step10 (no `latest`: the highest global_step folder)"));
    }

    void deepspeedProblems()
    {
        {
            const fs::path dir = deepspeed_folder(root() / "ds-crc", 2);
            const fs::path file = dir / "global_step10" / "mp_rank_00_model_states.pt";
            std::string bytes = model_states("mp_rank_00_model_states");
            // The local header of storage 0 comes first; its data starts at the next 64-byte boundary
            // after the name and the 4-byte padding field header.
            const std::string name = "mp_rank_00_model_states/data/0";
            const std::size_t at = bytes.find(name);
            QVERIFY(at != std::string::npos);
            const std::size_t data = (at + name.size() + 4 + 63) / 64 * 64;
            bytes[data + 3] ^= 0x01;
            write_file(file, bytes);
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::crc_mismatch), problems_text(r).c_str());
        }
        {
            const fs::path dir = deepspeed_folder(root() / "ds-missing", 3);
            fs::remove(dir / "global_step10" / "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt");
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::missing_shard), problems_text(r).c_str());
            bool named = false;
            for (const auto& s : r.shards)
                named = named ||
                    (s.path == "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt" && s.status == ShardStatus::missing);
            QVERIFY(named);
        }
        {
            const fs::path dir = deepspeed_folder(root() / "ds-truncated", 1);
            fs::resize_file(dir / "global_step10" / "mp_rank_00_model_states.pt", 300);
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::invalid_archive), problems_text(r).c_str());
        }
        {
            const fs::path dir = deepspeed_folder(root() / "ds-evil-pickle", 1);
            PickleWriter evil;
            evil.proto(2).op('(').op('i');
            evil.out += "os\nsystem\n";
            evil.stop();
            write_file(dir / "global_step10" / "mp_rank_00_model_states.pt",
                       torch_archive("mp_rank_00_model_states", {{"w", {2}}}, evil.out));
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::forbidden_pickle_opcode), problems_text(r).c_str());
        }
        {
            const fs::path dir = root() / "ds-escape";
            write_file(dir / "latest", "../elsewhere\n");
            fs::create_directories(dir / "global_step1");
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::path_outside_checkpoint), problems_text(r).c_str());
        }
    }

    // Pipeline-parallel DeepSpeed saves one file per layer and model-parallel rank.
    void deepspeedPipelineLayers()
    {
        const fs::path dir = root() / "ds-pipe";
        const fs::path tag = dir / "global_step7";
        write_file(dir / "latest", "global_step7");
        for (const char* m : {"00", "01"})
            write_file(tag / ("mp_rank_" + std::string(m) + "_model_states.pt"),
                       model_states("mp_rank_" + std::string(m) + "_model_states"));
        // Layer 2 has no parameters and so no file; layer 1 of model-parallel rank 1 is missing.
        for (const char* name :
             {"layer_00-model_00", "layer_00-model_01", "layer_01-model_00", "layer_03-model_00", "layer_03-model_01"})
            write_file(tag / (std::string(name) + "-model_states.pt"),
                       torch_archive(std::string(name) + "-model_states", {{"weight", {2, 2}}}));
        VerifyReport r = verify_checkpoint(dir);
        QVERIFY2(has_problem(r, ProblemKind::missing_shard), problems_text(r).c_str());
        QCOMPARE(r.problems.size(), std::size_t(1));
        QVERIFY2(r.problems[0].message.find("layer_01-model_01-model_states.pt") != std::string::npos,
                 r.problems[0].message.c_str());
        QCOMPARE(r.problems[0].rank, 1);
        std::map<std::string, std::string> rows(r.foreign->rows.begin(), r.foreign->rows.end());
        QCOMPARE(rows["pipeline layers"], std::string("3 (0 to 3), 5 layer files, 2 tensor slices each"));
        QVERIFY2(rows["layer indices without a file"].starts_with("2 (1;"),
                 rows["layer indices without a file"].c_str());

        write_file(tag / "layer_01-model_01-model_states.pt", torch_archive("l", {{"weight", {2, 2}}}));
        r = verify_checkpoint(dir);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.shards.size(), std::size_t(8));

        // Pipeline stages count in mp_rank_XX (stage x tensor slice) but not in layer_NN-model_YY:
        // two stages of one slice each name only model_00 layer files, and nothing is missing.
        const fs::path stages = root() / "ds-pipe-stages" / "global_step2";
        for (const char* m : {"00", "01"})
            write_file(stages / ("mp_rank_" + std::string(m) + "_model_states.pt"),
                       model_states("mp_rank_" + std::string(m) + "_model_states"));
        for (const char* name : {"layer_00-model_00", "layer_01-model_00", "layer_02-model_00", "layer_03-model_00"})
            write_file(stages / (std::string(name) + "-model_states.pt"),
                       torch_archive(std::string(name) + "-model_states", {{"weight", {2}}}));
        r = verify_checkpoint(stages.parent_path());
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.shards.size(), std::size_t(6));

        // Rank numbers from hostile names are not enumerated: one problem, at once.
        const fs::path huge = root() / "ds-huge" / "global_step1";
        write_file(huge / "zero_pp_rank_999999_mp_rank_999999_optim_states.pt", torch_archive("z", {{"s", {2}}}));
        r = verify_checkpoint(huge.parent_path());
        QVERIFY2(has_problem(r, ProblemKind::missing_shard), problems_text(r).c_str());
        QVERIFY(r.problems[0].message.find("implausible rank number") != std::string::npos);
        QVERIFY(r.shards.empty());

        // Without model parallelism the names carry no model rank.
        const fs::path plain = root() / "ds-pipe-plain" / "global_step1";
        write_file(plain / "mp_rank_00_model_states.pt", model_states("mp_rank_00_model_states"));
        for (const char* name : {"layer_00-model_states", "layer_02-model_states"})
            write_file(plain / (std::string(name) + ".pt"), torch_archive(name, {{"weight", {3}}}));
        r = verify_checkpoint(plain.parent_path());
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.shards.size(), std::size_t(3));
    }

    void megatronFolders()
    {
        const fs::path dir = root() / "megatron";
        write_file(dir / "latest_checkpointed_iteration.txt", "20\n");
        const fs::path iter = dir / "iter_0000020";
        for (const char* rank : {"mp_rank_00", "mp_rank_01"})
            write_file(iter / rank / "model_optim_rng.pt",
                       torch_archive("model_optim_rng", {{"model.language_model.embedding.weight", {8, 2}}}));
        QCOMPARE(detect_format(dir).format, CheckpointFormat::megatron);
        QCOMPARE(detect_format(iter).format, CheckpointFormat::megatron);
        // What a viewer is shown before the files are checked already says Megatron.
        VerifyOptions options;
        std::string listed_format, listed_iteration;
        options.callbacks.files_listed = [&](const VerifyReport& listed) {
            listed_format = listed.format;
            for (const auto& [key, value] : listed.foreign->rows)
                if (key == "iteration")
                    listed_iteration = value;
        };
        VerifyReport r = verify_checkpoint(dir, options);
        QCOMPARE(listed_format, std::string("megatron"));
        QVERIFY2(listed_iteration.starts_with("20"), listed_iteration.c_str());
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("megatron"));
        QCOMPARE(r.shards.size(), std::size_t(2));
        QCOMPARE(r.shards[1].path, std::string("mp_rank_01/model_optim_rng.pt"));

        fs::remove(iter / "mp_rank_01" / "model_optim_rng.pt");
        r = verify_checkpoint(dir);
        QVERIFY(has_problem(r, ProblemKind::missing_shard));

        // A Megatron torch_dist iteration is a DCP folder with metadata.json.
        const fs::path dist = root() / "megatron-dist";
        write_file(dist / "latest_checkpointed_iteration.txt", "5");
        const fs::path it = dist / "iter_0000005";
        write_file(it / "metadata.json", R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1})");
        write_file(it / ".metadata", dcp_metadata({{"embedding.weight", {2}, {{{0}, {2}, "__0_0.distcp", 0, 8}}}}));
        write_file(it / "__0_0.distcp", std::string(8, 'z'));
        r = verify_checkpoint(dist);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("megatron"));
        bool backend = false;
        for (const auto& [k, v] : r.foreign->rows)
            backend = backend || (k == "metadata.json sharded_backend" && v == "torch_dist");
        QVERIFY(backend);

        // A tracker naming an iteration folder that is not there: the same kind as a native root's
        // `latest` naming a missing step (one confined tag-file check, core/checkpoint/directory.h).
        write_file(dist / "latest_checkpointed_iteration.txt", "7");
        r = verify_checkpoint(dist);
        QVERIFY2(has_problem(r, ProblemKind::partial_write), problems_text(r).c_str());
    }
};

QTEST_GUILESS_MAIN(TestForeignTorch)
#include "tst_foreign_torch.moc"
