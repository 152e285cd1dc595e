// shardctl info / verify on checkpoints ShardScope did not write: the format name, per-file
// status, typed problems and the same exit codes as for native checkpoints.

#include "foreign_fixtures.h"
#include "megatron_dist_fixture.h"
#include "testutil.h"
#include "zstd_dcp_fixture.h"

#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <QTest>

using testutil::qs;
using testutil::shardctl;
namespace fs = std::filesystem;
using namespace fixtures;

class TestCliForeign : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path m_root;

    static bool has_kind(const nlohmann::json& j, const std::string& kind)
    {
        for (const auto& p : j["problems"])
            if (p["kind"] == kind)
                return true;
        return false;
    }

private slots:
    void initTestCase()
    {
        m_root = fs::path(m_tmp.path().toStdString());
        // DCP: two ranks.
        write_file(m_root / "dcp" / ".metadata",
                   dcp_metadata({{"w", {4}, {{{0}, {2}, "__0_0.distcp", 0, 8}, {{2}, {2}, "__1_0.distcp", 0, 8}}}}));
        write_file(m_root / "dcp" / "__0_0.distcp", std::string(8, 'a'));
        write_file(m_root / "dcp" / "__1_0.distcp", std::string(8, 'b'));
        // DeepSpeed: one model file, two ZeRO ranks.
        write_file(m_root / "ds" / "latest", "global_step3");
        write_file(m_root / "ds" / "global_step3" / "mp_rank_00_model_states.pt",
                   torch_archive("mp_rank_00_model_states", {{"module.w", {3, 3}}}));
        for (int d = 0; d < 2; ++d) {
            const std::string name = "zero_pp_rank_" + std::to_string(d) + "_mp_rank_00_optim_states";
            write_file(m_root / "ds" / "global_step3" / (name + ".pt"), torch_archive(name, {{"state", {4}}}));
        }
        // Sharded safetensors.
        std::string st;
        const std::string header = R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
        put_le(st, header.size(), 8);
        st += header + "abcd";
        write_file(m_root / "hf" / "model-00001-of-00001.safetensors", st);
        write_file(m_root / "hf" / "model.safetensors.index.json",
                   R"({"metadata":{"total_size":4},"weight_map":{"x":"model-00001-of-00001.safetensors"}})");
    }

    void infoNamesFormats_data()
    {
        QTest::addColumn<QString>("dir");
        QTest::addColumn<QString>("format");
        QTest::addColumn<int>("tensors");
        QTest::addColumn<int>("worldSize"); // -1: the format does not say
        QTest::addColumn<int>("step");
        QTest::addColumn<int>("fileCount");
        QTest::newRow("dcp") << QStringLiteral("dcp") << QStringLiteral("torch-dcp") << 1 << 2 << -1 << 2;
        QTest::newRow("deepspeed") << QStringLiteral("ds") << QStringLiteral("deepspeed") << 3 << 2 << 3 << 3;
        QTest::newRow("index") << QStringLiteral("hf") << QStringLiteral("safetensors-index") << 1 << -1 << -1 << 1;
    }
    void infoNamesFormats()
    {
        QFETCH(QString, dir);
        QFETCH(QString, format);
        QFETCH(int, tensors);
        QFETCH(int, worldSize);
        QFETCH(int, step);
        QFETCH(int, fileCount);
        const auto run = shardctl({QStringLiteral("info"), qs(m_root / dir.toStdString()), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const auto j = run.json();
        QCOMPARE(QString::fromStdString(j["format"].get<std::string>()), format);
        QCOMPARE(j["tensor_count"].get<int>(), tensors);
        // Typed numbers beside the display strings of `summary`.
        QCOMPARE(j.contains("world_size") ? j["world_size"].get<int>() : -1, worldSize);
        QCOMPARE(j.contains("step") ? j["step"].get<int>() : -1, step);
        QVERIFY2(j["file_count"].get<int>() == fileCount, j["files"].dump().c_str());
        uint64_t bytes = 0;
        for (const auto& f : j["files"])
            bytes += f["bytes"].get<uint64_t>();
        QCOMPARE(j["total_bytes"].get<uint64_t>(), bytes);
        QVERIFY(j["summary"].is_object());
        QVERIFY(!j["files"].empty());
        if (format == QStringLiteral("torch-dcp")) { // every chunk and where it is stored
            const auto& chunks = j["tensors"][0]["chunks"];
            QCOMPARE(chunks.size(), std::size_t(2));
            QVERIFY2(chunks[1]["offsets"] == nlohmann::json::array({2}), chunks.dump().c_str());
            QVERIFY(chunks[1]["sizes"] == nlohmann::json::array({2}));
            QVERIFY(chunks[1]["storage"] == nlohmann::json({{"file", "__1_0.distcp"}, {"offset", 0}, {"length", 8}}));
        }
        // The human form names the format too.
        const auto text = shardctl({QStringLiteral("info"), qs(m_root / dir.toStdString())});
        QCOMPARE(text.exit_code, 0);
        QVERIFY(text.out.contains(format.toUtf8()));
    }

    // The exported report shows the format's own summary and each file's detail, not the
    // manifest-only columns.
    void reportOfAForeignCheckpoint()
    {
        const QString out = qs(m_root / "ds-report.md");
        const auto run = shardctl({QStringLiteral("report"), qs(m_root / "ds"), QStringLiteral("--format"),
                                   QStringLiteral("md"), QStringLiteral("--out"), out});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const std::string md = testutil::read_text(m_root / "ds-report.md");
        QVERIFY2(md.find("| data-parallel size | 2 |") != std::string::npos, md.c_str());
        QVERIFY2(md.find("| Rank | File | Bytes | Status | Detail |") != std::string::npos, md.c_str());
        QVERIFY2(md.find("✓ ok | 4 entries, 1 storage") != std::string::npos, md.c_str());
        QVERIFY(md.find("Manifest | missing") == std::string::npos);
    }

    void verifyExitCodes()
    {
        for (const char* dir : {"dcp", "ds", "hf"}) {
            const auto run = shardctl({QStringLiteral("verify"), qs(m_root / dir), QStringLiteral("--json")});
            QVERIFY2(run.exit_code == 0, (std::string(dir) + ": " + run.err.toStdString()).c_str());
            QVERIFY(run.json()["ok"].get<bool>());
        }
        // Text: a DeepSpeed folder's CRC-32s were read and checked; a safetensors index's data has no
        // checksum and is not read, which the summary says instead of "verified".
        auto text = shardctl({QStringLiteral("verify"), qs(m_root / "ds")});
        QVERIFY2(text.out.contains("OK: 3 shards verified"), text.out.constData());
        text = shardctl({QStringLiteral("verify"), qs(m_root / "hf")});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("OK: 1 file's header and byte ranges checked (") &&
                     text.out.contains("; the tensor data is not read: safetensors-index records no checksum of it; "
                                       "--content reads every value)"),
                 text.out.constData());
        QVERIFY(!text.out.contains("verified"));
        // Bad CRC in a DeepSpeed archive: exit 1, crc_mismatch, the file's status invalid.
        const fs::path file = m_root / "ds" / "global_step3" / "zero_pp_rank_1_mp_rank_00_optim_states.pt";
        std::string bytes = testutil::read_text(file);
        const std::string entry = "zero_pp_rank_1_mp_rank_00_optim_states/data/0";
        const std::size_t at = bytes.find(entry);
        QVERIFY(at != std::string::npos);
        bytes[(at + entry.size() + 4 + 63) / 64 * 64] ^= 0x40; // first data byte (64-aligned)
        write_file(file, bytes);
        auto run = shardctl({QStringLiteral("verify"), qs(m_root / "ds"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        auto j = run.json();
        QVERIFY2(has_kind(j, "crc_mismatch"), j.dump().c_str());
        QCOMPARE(j["format"].get<std::string>(), std::string("deepspeed"));
        bool invalid = false;
        for (const auto& s : j["shards"])
            invalid = invalid || (s["path"] == "zero_pp_rank_1_mp_rank_00_optim_states.pt" && s["status"] == "invalid");
        QVERIFY(invalid);
        QVERIFY(run.err.contains("zero_pp_rank_1_mp_rank_00_optim_states.pt"));

        // A missing DCP data file: exit 1, missing_file.
        fs::remove(m_root / "dcp" / "__1_0.distcp");
        run = shardctl({QStringLiteral("verify"), qs(m_root / "dcp"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QVERIFY(has_kind(run.json(), "missing_file"));

        // A single .safetensors file may be verified directly.
        run = shardctl({QStringLiteral("verify"), qs(m_root / "hf" / "model-00001-of-00001.safetensors"),
                        QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(run.json()["format"].get<std::string>(), std::string("safetensors"));
        // A path that does not exist stays a usage/environment error.
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(m_root / "nope")}).exit_code, 2);
    }

    // torch's Hugging Face storage saved per rank (torchtitan's sharded/ folder): one checkpoint of
    // whole tensors through every command, not one tensor per file, with statistics equal to a
    // float64 reference of the same values and a diff that pairs it with the same model split
    // over 2 ranks.
    void torchHfStorageThroughTheCommandLine()
    {
        // w [8, 6] = 0..47 and b [8] = 100..107, rows split over `world` rank files.
        const auto append_f32 = [](std::string& out, float v) {
            char bytes[4];
            std::memcpy(bytes, &v, 4);
            out.append(bytes, 4);
        };
        const auto write = [&](const fs::path& dir, int world, float nudge) {
            const uint64_t rows = 8 / uint64_t(world);
            for (int r = 0; r < world; ++r) {
                std::vector<DcpHfChunkSpec> chunks(2);
                const uint64_t at = uint64_t(r) * rows;
                chunks[0] = {.fqn = "b", .offsets = {at}, .sizes = {rows}};
                chunks[1] = {.fqn = "w", .offsets = {at, 0}, .sizes = {rows, 6}};
                for (uint64_t i = 0; i < rows; ++i)
                    append_f32(chunks[0].bytes, 100.0f + float(at + i));
                for (uint64_t i = 0; i < rows * 6; ++i)
                    append_f32(chunks[1].bytes, float(at * 6 + i) + (at * 6 + i == 47 ? nudge : 0.0f));
                write_file(dir / dcp_hf_shard_name(r), dcp_hf_shard(chunks));
            }
        };
        const fs::path four = m_root / "titan" / "step-10" / "sharded", two = m_root / "titan2" / "sharded",
                       nudged = m_root / "titan3" / "sharded";
        write(four, 4, 0.0f);
        write(two, 2, 0.0f);
        write(nudged, 2, 0.5f);

        testutil::Run run = shardctl({QStringLiteral("info"), qs(four.parent_path()), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        nlohmann::json j = run.json();
        QCOMPARE(j["format"].get<std::string>(), std::string("torch-dcp-hf"));
        QCOMPARE(j["tensor_count"].get<int>(), 2);
        run = shardctl({QStringLiteral("verify"), qs(four.parent_path()), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(run.json()["shards"].size(), std::size_t(4));

        run = shardctl({QStringLiteral("stats"), qs(four), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        j = run.json();
        QCOMPARE(j["tensors"].size(), std::size_t(2));
        for (const auto& t : j["tensors"]) {
            const bool w = t["name"] == "w";
            // The float64 reference: the values written above.
            std::vector<double> values;
            for (int i = 0; i < (w ? 48 : 8); ++i)
                values.push_back(w ? double(i) : 100.0 + i);
            double sum = 0, squares = 0;
            for (double v : values) {
                sum += v;
                squares += v * v;
            }
            QCOMPARE(t["numel"].get<std::size_t>(), values.size());
            QVERIFY(t["shape"] == (w ? nlohmann::json::array({8, 6}) : nlohmann::json::array({8})));
            QCOMPARE(t["min"].get<double>(), values.front());
            QCOMPARE(t["max"].get<double>(), values.back());
            QVERIFY(std::abs(t["mean"].get<double>() - sum / double(values.size())) < 1e-12);
            QVERIFY(std::abs(t["l2"].get<double>() - std::sqrt(squares)) < 1e-9);
            QCOMPARE(t["parts"].size(), std::size_t(4)); // one per rank file, ranks 0-3
            QCOMPARE(t["parts"][3]["rank"].get<int>(), 3);
        }

        run = shardctl({QStringLiteral("diff"), qs(four), qs(two), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(run.json()["summary"]["identical"].get<int>(), 2);
        run = shardctl({QStringLiteral("diff"), qs(four), qs(nudged), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        bool found = false;
        const nlohmann::json tensors = run.json()["tensors"]; // not a temporary's member in range-for
        for (const auto& t : tensors)
            if (t["status"] == "changed") {
                QCOMPARE(t["name"].get<std::string>(), std::string("w"));
                QCOMPARE(t["changed_elements"].get<int>(), 1);
                QCOMPARE(t["first_changed_element"].get<int>(), 47);
                QCOMPARE(t["max_abs_diff"].get<double>(), 0.5);
                found = true;
            }
        QVERIFY(found);
    }

    // A DCP whose items went through torch's ZStandard extension: every command reads the items
    // (not "OK" over unread bytes, not a warning per chunk), the statistics are those of the
    // stored values (a float64 reference of the bytes the archives hold) and diff finds it
    // identical to the same items stored as is.
    void zstdCompressedDcpThroughTheCommandLine()
    {
        const fs::path zstd_dir = write_zstd_dcp(m_root / "zstd"), plain = write_plain_dcp(m_root / "plain");
        testutil::Run run = shardctl({QStringLiteral("verify"), qs(zstd_dir), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QVERIFY(run.json()["ok"].get<bool>());
        run = shardctl({QStringLiteral("stats"), qs(zstd_dir)});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QVERIFY2(run.err.isEmpty(), run.err.constData());
        run = shardctl({QStringLiteral("stats"), qs(zstd_dir), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const nlohmann::json tensors = run.json()["tensors"];
        QCOMPARE(tensors.size(), std::size_t(2));
        for (const auto& t : tensors) {
            if (t["name"] != "model.weight")
                continue;
            // Each 12-element chunk holds torch_zip's storage pattern.
            double lo = INFINITY, hi = -INFINITY, sum = 0;
            int finite = 0;
            for (int chunk = 0; chunk < 2; ++chunk)
                for (int e = 0; e < 12; ++e) {
                    const float f = torch_zip_element(uint64_t(e));
                    if (!std::isfinite(f))
                        continue;
                    lo = std::min(lo, double(f));
                    hi = std::max(hi, double(f));
                    sum += f;
                    ++finite;
                }
            QCOMPARE(t["numel"].get<int>(), 24);
            QCOMPARE(t["min"].get<double>(), lo);
            QCOMPARE(t["max"].get<double>(), hi);
            QVERIFY(std::abs(t["mean"].get<double>() - sum / finite) <= 1e-12 * std::max(1.0, std::abs(sum / finite)));
        }
        run = shardctl({QStringLiteral("diff"), qs(zstd_dir), qs(plain), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(run.json()["summary"]["identical"].get<int>(), 2);
    }

    // Megatron's torch_dist (a DCP with mcore_data, metadata.json, common.pt, integrity.json)
    // through the command line: one checkpoint from the root, integrity.json checked (a changed
    // byte named by file), statistics equal to a float64 reference, diff finding a rescaled copy.
    void megatronTorchDistThroughTheCommandLine()
    {
        const fs::path root = m_root / "megatron", scaled = m_root / "megatron-scaled";
        const fs::path iter = write_torch_dist(root);
        write_torch_dist(scaled, 2.0f);
        testutil::Run run = shardctl({QStringLiteral("info"), qs(root), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        QCOMPARE(run.json()["tensor_count"].get<int>(), 2);
        run = shardctl({QStringLiteral("verify"), qs(root), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());

        run = shardctl({QStringLiteral("stats"), qs(root), QStringLiteral("--json")});
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const nlohmann::json tensors = run.json()["tensors"];
        bool weight = false;
        for (const auto& t : tensors)
            if (t["name"] == "model.weight") {
                double sum = 0;
                for (int i = 0; i < 24; ++i)
                    sum += i / 4.0;
                QCOMPARE(t["numel"].get<int>(), 24);
                QCOMPARE(t["min"].get<double>(), 0.0);
                QCOMPARE(t["max"].get<double>(), 23 / 4.0);
                QVERIFY(std::abs(t["mean"].get<double>() - sum / 24) < 1e-12);
                weight = true;
            }
        QVERIFY(weight);
        run = shardctl({QStringLiteral("diff"), qs(root), qs(scaled), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.json()["summary"]["identical"].get<int>(), 1); // model.bias is not scaled

        std::string bytes = read_file(iter / "__1_0.distcp");
        bytes[5] ^= 0x01;
        write_file(iter / "__1_0.distcp", bytes);
        run = shardctl({QStringLiteral("verify"), qs(root), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QVERIFY2(run.err.contains("__1_0.distcp"), run.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCliForeign)
#include "tst_cli_foreign.moc"
