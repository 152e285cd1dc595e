// torch's Hugging Face storage saved per rank: shard-<S>-model-<I>-of-<N>.safetensors files whose
// entries are chunks placed by DCP_SHARDING_INFO, read as one DCP checkpoint (with or without
// the sharded/ folder); files that disagree with themselves or each other refused in a sentence.

#include "foreign_fixtures.h"
#include "problemcheck.h"

#include "core/foreign/dcp_hf.h"
#include "core/open/detect.h"
#include "core/open/root_steps.h"
#include "core/open/verify.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cstring>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;
using namespace problemcheck;

namespace {

std::string floats(std::size_t n, float first)
{
    std::string out(n * 4, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        const float v = first + float(i);
        std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
}

// w [8, 6] split by rows over `world` ranks, b [8] likewise: each rank's file as torch writes it.
std::vector<std::vector<DcpHfChunkSpec>> by_rows(int world)
{
    std::vector<std::vector<DcpHfChunkSpec>> files(world);
    const uint64_t rows = 8 / uint64_t(world);
    for (int r = 0; r < world; ++r) {
        const uint64_t at = uint64_t(r) * rows;
        files[r].push_back({.fqn = "b", .offsets = {at}, .sizes = {rows}, .bytes = floats(rows, float(at))});
        files[r].push_back(
            {.fqn = "w", .offsets = {at, 0}, .sizes = {rows, 6}, .bytes = floats(rows * 6, float(at * 6))});
    }
    return files;
}

fs::path write_shards(const fs::path& dir, const std::vector<std::vector<DcpHfChunkSpec>>& files,
                      const std::map<int, std::string>& info = {})
{
    for (std::size_t r = 0; r < files.size(); ++r) {
        const auto it = info.find(int(r));
        write_file(dir / dcp_hf_shard_name(int(r)),
                   dcp_hf_shard(files[r], it == info.end() ? std::nullopt : std::optional(it->second)));
    }
    return dir;
}

// The one problem of a report (fails the test when there are none or several).
Problem only_problem(const VerifyReport& r)
{
    if (r.problems.size() != 1)
        qWarning("%s", problems_text(r).c_str());
    return r.problems.empty() ? Problem{} : r.problems[0];
}

} // namespace

class TestForeignDcpHf : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path root() const { return m_tmp.path().toStdString(); }

private slots:
    void shardNames()
    {
        QCOMPARE(dcp_hf_shard_rank("shard-00001-model-00001-of-00002.safetensors"), 0);
        QCOMPARE(dcp_hf_shard_rank("shard-00012-model-00002-of-00002.safetensors"), 11);
        QCOMPARE(dcp_rank_of("sub/shard-00004-model-00001-of-00001.safetensors"), 3);
        QCOMPARE(dcp_hf_shard_rank("shard-00000-model-00001-of-00001.safetensors"), -1);
        QVERIFY(!is_dcp_hf_shard_name("model-00001-of-00002.safetensors"));
        QVERIFY(!is_dcp_hf_shard_name("shard-00001-model-00001-of-00001.safetensors.tmp"));
        QVERIFY(!is_dcp_hf_shard_name("shard--model-00001-of-00001.safetensors"));
    }

    void shardingInfo()
    {
        const auto info =
            parse_dcp_sharding_info(R"({"w": {"saved_offsets": [4, 0]}, "b": {"saved_offsets": [4]}})", "f");
        QCOMPARE(info.size(), std::size_t(2));
        QCOMPARE(info[0].first, std::string("w"));
        QCOMPARE(info[0].second, (std::vector<uint64_t>{4, 0}));
        for (const char* bad : {R"([1])", R"({"w": {"saved_offsets": [-1]}})", R"({"w": {}})", R"({"w": 3})",
                                R"({"w": {"saved_offsets": [1]}, "w": {"saved_offsets": [2]}})", "{"}) {
            const auto p = error_of([&] { parse_dcp_sharding_info(bad, "dir/shard.safetensors"); });
            QVERIFY2(p && p->kind == ProblemKind::invalid_shard, bad);
            QVERIFY2(p->message.starts_with("dir/shard.safetensors: DCP_SHARDING_INFO"), p->message.c_str());
        }
    }

    // Four ranks: two tensors of four chunks each, assembled to their full shapes.
    void oneCheckpoint()
    {
        const fs::path step = root() / "step-40";
        write_shards(step / "sharded", by_rows(4));
        for (const fs::path& path : {step, step / "sharded"}) {
            const DetectedFormat detected = detect_format(path);
            QCOMPARE(detected.format, CheckpointFormat::torch_dcp_hf);
            QCOMPARE(detected.dir.path, step / "sharded");
            const VerifyReport r = verify_checkpoint(detected, VerifyOptions{});
            QVERIFY2(r.ok(), problems_text(r).c_str());
            QCOMPARE(r.format, std::string("torch-dcp-hf"));
            QCOMPARE(r.shards.size(), std::size_t(4));
            for (int i = 0; i < 4; ++i)
                QCOMPARE(r.shards[std::size_t(i)].rank, i);
            QCOMPARE(r.foreign->tensors_total, uint64_t(2)); // not 8: one row per tensor
            QCOMPARE(r.foreign->tensors[0].name, std::string_view("b"));
            QVERIFY(std::ranges::equal(r.foreign->tensors[0].shape, std::vector<uint64_t>{8}));
            QVERIFY(std::ranges::equal(r.foreign->tensors[1].shape, std::vector<uint64_t>{8, 6}));
            QCOMPARE(r.foreign->tensors[1].detail, std::string_view("4 chunks"));
            QCOMPARE(r.foreign->world_size, int64_t(4));
            QVERIFY(r.foreign->layout);
            QCOMPARE(r.foreign->layout->total, uint64_t(8 + 48));
            QCOMPARE(r.foreign->layout->holders.back().id, 3);
        }
        QCOMPARE(detect_format(step).step, std::optional<int64_t>(40));

        // torchtitan's root: step-<N> folders, each with its sharded/ folder.
        write_shards(root() / "step-80" / "sharded", by_rows(2));
        const RootSteps steps = list_root_steps(root());
        QCOMPARE(steps.format, CheckpointFormat::torch_dcp_hf);
        QCOMPARE(steps.steps.size(), std::size_t(2));
        QCOMPARE(steps.steps[1].name, std::string("step-80"));
        QCOMPARE(steps.steps[1].step, uint64_t(80));
    }

    // A step saved with consolidation (torchtitan's last step): the index and model file beside
    // the sharded/ folder they were made from. The consolidated files are what verify checks;
    // the summary says the shards were not, and how to check them.
    void consolidatedBesideItsShards()
    {
        const fs::path step = root() / "step-120";
        write_shards(step / "sharded", by_rows(4));
        write_file(step / "model-00001-of-00001.safetensors",
                   dcp_hf_shard({{.fqn = "b", .offsets = {0}, .sizes = {8}, .bytes = floats(8, 0)},
                                 {.fqn = "w", .offsets = {0, 0}, .sizes = {8, 6}, .bytes = floats(48, 0)}}));
        write_file(step / "model.safetensors.index.json",
                   R"({"metadata": {"total_size": 224}, "weight_map": {"b": "model-00001-of-00001.safetensors", )"
                   R"("w": "model-00001-of-00001.safetensors"}})");
        const VerifyReport r = verify_checkpoint(step);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.shards.size(), std::size_t(1));
        QCOMPARE(r.shards[0].path, std::string("model-00001-of-00001.safetensors"));
        const auto& rows = r.foreign->rows;
        const auto row = std::find_if(rows.begin(), rows.end(), [](const auto& kv) { return kv.first == "sharded/"; });
        QVERIFY(row != rows.end());
        QCOMPARE(row->second,
                 "4 per-rank shard files beside the consolidated ones, not read here (verify " +
                     (step / "sharded").string() + " checks them)");
        // Without the shards there is nothing to say.
        fs::remove_all(step / "sharded");
        const VerifyReport alone = verify_checkpoint(step);
        QVERIFY(std::none_of(alone.foreign->rows.begin(), alone.foreign->rows.end(),
                             [](const auto& kv) { return kv.first == "sharded/"; }));
    }

    // A shard without DCP_SHARDING_INFO is the whole tensor at offset 0 (as torch reads it).
    void withoutShardingInfo()
    {
        const fs::path dir = root() / "plain";
        std::vector<DcpHfChunkSpec> one = {{.fqn = "x", .offsets = {0}, .sizes = {3}, .bytes = floats(3, 1)}};
        std::string file = dcp_hf_shard(one);
        // Drop the whole __metadata__ by rewriting the header by hand.
        const std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
        std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
        std::string bytes;
        put_le(bytes, padded.size(), 8);
        write_file(dir / dcp_hf_shard_name(0), bytes + padded + floats(3, 1));
        const VerifyReport r = verify_checkpoint(dir);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QVERIFY(std::ranges::equal(r.foreign->tensors[0].shape, std::vector<uint64_t>{3}));
    }

    void hostileShards()
    {
        { // two ranks claim the same rows
            auto files = by_rows(2);
            files[1][1].offsets = {0, 0};
            const Problem p = only_problem(verify_checkpoint(write_shards(root() / "overlap", files)));
            QCOMPARE(p.kind, ProblemKind::layout_overlap);
            // Named by the file that holds the later chunk, and the other file: no one file describes it.
            QCOMPARE(p.path, dcp_hf_shard_name(1));
            QCOMPARE(p.rank, 1);
            QVERIFY2(p.message.ends_with(dcp_hf_shard_name(1) +
                                         ": tensor 'w': its chunk at [0, 0] overlaps the chunk "
                                         "at [0, 0] in " +
                                         dcp_hf_shard_name(0)),
                     p.message.c_str());
        }
        { // rows 4-5 of w saved nowhere: the shape reaches row 8, the chunks cover 6 of them
            auto files = by_rows(4);
            files[2].erase(files[2].begin() + 1);
            const Problem p = only_problem(verify_checkpoint(write_shards(root() / "hole", files)));
            QCOMPARE(p.kind, ProblemKind::layout_gap);
            QVERIFY2(p.message.ends_with("tensor 'w' [8, 6] has 48 elements but its chunks in " + dcp_hf_shard_name(0) +
                                         ", " + dcp_hf_shard_name(1) + " and " + dcp_hf_shard_name(3) +
                                         " cover only 36"),
                     p.message.c_str());
        }
        { // a chunk placed where no tensor of its shape can reach
            auto files = by_rows(2);
            files[1][0].offsets = {UINT64_MAX - 1};
            const Problem p = only_problem(verify_checkpoint(write_shards(root() / "outside", files)));
            QCOMPARE(p.kind, ProblemKind::invalid_shard);
            QCOMPARE(p.rank, 1);
            QVERIFY2(p.message.find(dcp_hf_shard_name(1) + ": tensor 'b' has a chunk at") != std::string::npos &&
                         p.message.ends_with("outside any tensor it could belong to"),
                     p.message.c_str());
        }
        { // offsets of another rank than the header's shape
            const fs::path dir = write_shards(root() / "rank-mismatch", by_rows(2),
                                              {{1, R"({"b": {"saved_offsets": [4]}, "w": {"saved_offsets": [4]}})"}});
            const Problem p = only_problem(verify_checkpoint(dir));
            QCOMPARE(p.kind, ProblemKind::invalid_shard);
            QVERIFY2(p.message.ends_with("DCP_SHARDING_INFO places tensor 'w' with 1 offsets, but the header gives it "
                                         "2 dimensions"),
                     p.message.c_str());
        }
        { // DCP_SHARDING_INFO names a tensor the header does not hold
            const fs::path dir = write_shards(
                root() / "extra", by_rows(2),
                {{0, R"({"b": {"saved_offsets": [0]}, "w": {"saved_offsets": [0, 0]}, "v": {"saved_offsets": [0]}})"}});
            // One problem: the file left out is not also the hole it leaves in 'b' and 'w'.
            const VerifyReport r = verify_checkpoint(dir);
            QCOMPARE(r.problems.size(), std::size_t(1));
            const Problem p = only_problem(r);
            QCOMPARE(p.kind, ProblemKind::invalid_shard);
            QCOMPARE(p.path, dcp_hf_shard_name(0));
            QVERIFY2(p.message.ends_with("DCP_SHARDING_INFO places tensor 'v', which the header does not hold"),
                     p.message.c_str());
        }
        { // ... or lacks one it holds
            const fs::path dir =
                write_shards(root() / "lacking", by_rows(2), {{1, R"({"b": {"saved_offsets": [4]}})"}});
            const VerifyReport r = verify_checkpoint(dir);
            QCOMPARE(r.problems.size(), std::size_t(1));
            const Problem p = only_problem(r);
            QVERIFY2(p.message.ends_with("DCP_SHARDING_INFO has no saved_offsets for tensor 'w', which the header "
                                         "holds"),
                     p.message.c_str());
        }
        { // two ranks disagree about a tensor's dtype
            auto files = by_rows(2);
            files[1][0].dtype = "I32";
            const Problem p = only_problem(verify_checkpoint(write_shards(root() / "dtype", files)));
            QCOMPARE(p.kind, ProblemKind::invalid_shard);
            QVERIFY2(p.message.ends_with("tensor 'b' is int32 with 1 dimensions here but float32 with 1 in an "
                                         "earlier file"),
                     p.message.c_str());
        }
        { // a truncated shard: its header's ranges run past the file
            const fs::path dir = write_shards(root() / "cut", by_rows(2));
            fs::resize_file(dir / dcp_hf_shard_name(1), fs::file_size(dir / dcp_hf_shard_name(1)) - 4);
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY(!r.ok());
            QVERIFY2(r.problems[0].message.find(dcp_hf_shard_name(1)) != std::string::npos, problems_text(r).c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestForeignDcpHf)
#include "tst_foreign_dcp_hf.moc"
