// PyTorch DCP folders: .metadata decoded by the restricted reader, storage ranges, chunk tiling.

#include "foreign_fixtures.h"
#include "problemcheck.h"

#include "core/open/verify.h"
#include "core/foreign/dcp.h"
#include "core/open/detect.h"
#include "core/foreign/io/pickle_reader.h"
#include "core/util/fsutil.h"

#include <QTemporaryDir>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <tuple>
#include <QTest>

using namespace shardscope;
namespace fs = std::filesystem;
using namespace fixtures;
using namespace problemcheck;

namespace {

// model.weight [4, 6] split by rows over two ranks, model.bias [6] on rank 0. Offsets and lengths
// are filled in by dcp_layout.
std::vector<DcpTensorSpec> two_rank_layout()
{
    return {
        {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}},
        {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp"}}},
    };
}

// Writes the folder as FileSystemWriter would; `edit` may then change the recorded layout (the
// metadata written) or the files' contents, to make broken variants.
using Edit = std::function<void(std::vector<DcpTensorSpec>&, std::map<std::string, std::string>&)>;
fs::path write_dcp(const fs::path& dir, std::vector<DcpTensorSpec> tensors, bool frame = true, const Edit& edit = {})
{
    auto files = dcp_layout(tensors);
    if (edit)
        edit(tensors, files);
    write_file(dir / ".metadata", dcp_metadata(tensors, frame));
    for (const auto& [name, content] : files)
        write_file(dir / name, content);
    return dir;
}
fs::path write_dcp(const fs::path& dir, std::vector<DcpTensorSpec> tensors, const Edit& edit)
{
    return write_dcp(dir, std::move(tensors), true, edit);
}

} // namespace

// `tensors` tensors of `rows` one-row chunks each over 8 files, with their storage laid out by
// hand (16 bytes a chunk): enough chunks for CPython's batches of 1000 to split the dicts.
std::vector<DcpTensorSpec> many_chunks(std::size_t tensors, std::size_t rows)
{
    std::vector<DcpTensorSpec> out;
    uint64_t offset = 0;
    for (std::size_t t = 0; t < tensors; ++t) {
        DcpTensorSpec spec{.fqn = "layers." + std::to_string(t) + ".weight", .size = {rows, 4}};
        for (std::size_t r = 0; r < rows; ++r) {
            spec.chunks.push_back(
                {.offsets = {r, 0}, .sizes = {1, 4}, .file = "__" + std::to_string(r % 8) + "_0.distcp"});
            spec.chunks.back().offset = offset;
            spec.chunks.back().length = 16;
            offset += 16;
        }
        out.push_back(std::move(spec));
    }
    return out;
}

// Every tensor, chunk and storage entry of `m` is the spec's.
void compare_to_spec(const DcpMetadata& m, const std::vector<DcpTensorSpec>& spec)
{
    QCOMPARE(m.tensors.size(), spec.size());
    for (std::size_t t = 0; t < spec.size(); ++t) {
        QCOMPARE(m.tensors[t].fqn, spec[t].fqn);
        QCOMPARE(m.tensors[t].size, spec[t].size);
        const auto chunks = m.chunks_of(m.tensors[t]);
        QCOMPARE(chunks.size(), spec[t].chunks.size());
        for (std::size_t c = 0; c < chunks.size(); ++c) {
            const auto offsets = m.offsets(chunks[c]), sizes = m.sizes(chunks[c]);
            QCOMPARE(std::vector<uint64_t>(offsets.begin(), offsets.end()), spec[t].chunks[c].offsets);
            QCOMPARE(std::vector<uint64_t>(sizes.begin(), sizes.end()), spec[t].chunks[c].sizes);
            const DcpStorage s = m.storage(chunks[c]);
            QVERIFY(s.present);
            QCOMPARE(s.file, spec[t].chunks[c].file);
            QCOMPARE(s.offset, spec[t].chunks[c].offset);
            QCOMPARE(s.length, spec[t].chunks[c].length);
        }
    }
}

std::vector<uint64_t> as_vector(std::span<const uint64_t> dims)
{
    return {dims.begin(), dims.end()};
}

// A crafted .metadata's beginning: one ChunkStorageMetadata, and a memoized
// TensorStorageMetadata state whose chunks are that one 1,000 times, with the memo indices of the
// state and of the class, from which the tests build many tensors.
struct SharedChunkList {
    PickleWriter p;
    int state = 0, cls = 0;
};
SharedChunkList shared_chunk_list()
{
    const std::string meta = "torch.distributed.checkpoint.metadata";
    PickleWriter p;
    p.proto(4);
    const int chunk = p.memo + 3; // after the class's module, name and global
    p.dataclass(meta, "ChunkStorageMetadata",
                [](PickleWriter& g) { g.str("offsets").torch_size({0}).str("sizes").torch_size({1}); });
    p.op('0');
    const int state = p.memo;
    p.op('}').memoize().mark();
    p.str("properties").dataclass(meta, "TensorProperties", [](PickleWriter& g) {
        g.str("dtype").stack_global("torch", "float32");
    });
    p.str("size").torch_size({1}).str("chunks").op(']').mark();
    for (int i = 0; i < 1000; ++i)
        p.get(chunk);
    p.op('e').op('u').op('0');
    p.stack_global(meta, "TensorStorageMetadata");
    const int cls = p.memo - 1;
    p.op('0');
    return {std::move(p), state, cls};
}

class TestForeignDcp : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

private slots:
    void decodesMetadata()
    {
        auto layout = two_rank_layout();
        layout[0].chunks[0].length = 100;
        layout[0].chunks[1].length = 100;
        layout[1].chunks[0].offset = 100;
        layout[1].chunks[0].length = 60;
        const DcpMetadata m = decode_dcp_metadata(dcp_metadata(layout), "m");
        QCOMPARE(m.pickle_protocol, 4);
        QCOMPARE(m.tensors.size(), std::size_t(2));
        const DcpTensor& w = m.tensors[0];
        QCOMPARE(w.fqn, std::string("model.weight"));
        QCOMPARE(w.dtype, std::string("float32"));
        QCOMPARE(w.size, (std::vector<uint64_t>{4, 6}));
        const auto chunks = m.chunks_of(w);
        QCOMPARE(chunks.size(), std::size_t(2));
        QCOMPARE(as_vector(m.offsets(chunks[1])), (std::vector<uint64_t>{2, 0}));
        QCOMPARE(as_vector(m.sizes(chunks[1])), (std::vector<uint64_t>{2, 6}));
        const DcpStorage second = m.storage(chunks[1]);
        QVERIFY(second.present);
        QCOMPARE(second.file, std::string("__1_0.distcp"));
        QCOMPARE(second.length, uint64_t(100));
        QCOMPARE(m.chunks_of(m.tensors[1])[0].offset, uint64_t(100));
        QVERIFY(!second.transformed);
        QCOMPARE(m.files, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
        // Without the FRAME opcode (protocol 2/3 writers) the same structure decodes.
        QCOMPARE(decode_dcp_metadata(dcp_metadata(layout, false), "m").tensors.size(), std::size_t(2));
    }

    // storage_data is a dict keyed by (fqn, offsets): a key written twice keeps its last value,
    // as Python's dict would; files are those of the surviving entries (also of keys no tensor
    // has); a bytes item's key has no offsets, and a tensor's key with offsets never matches it.
    void storageDataKeysAsADict()
    {
        auto layout = two_rank_layout();
        layout[0].chunks[0].length = layout[0].chunks[1].length = layout[1].chunks[0].length = 10;
        const std::vector<DcpStorageEntry> extra{
            {.fqn = "model.weight",
             .offsets = std::vector<uint64_t>{0, 0},
             .file = "__7_0.distcp",
             .offset = 3,
             .length = 9},
            {.fqn = "step", .offsets = std::nullopt, .file = "__0_1.distcp", .offset = 0, .length = 5},
            {.fqn = "model.bias", .offsets = std::nullopt, .file = "__9_0.distcp", .length = 1}, // no such bytes item
            {.fqn = "gone", .offsets = std::vector<uint64_t>{0}, .file = "__8_0.distcp", .length = 1},
        };
        const DcpMetadata m = decode_dcp_metadata(dcp_metadata(layout, true, {"step"}, extra), "m");
        const DcpStorage first = m.storage(m.chunks_of(m.tensors[0])[0]);
        QCOMPARE(first.file, std::string("__7_0.distcp")); // the last entry of its key
        QCOMPARE(first.offset, uint64_t(3));
        QCOMPARE(m.storage(m.chunks_of(m.tensors[0])[1]).file, std::string("__1_0.distcp"));
        QCOMPARE(m.storage(m.chunks_of(m.tensors[1])[0]).file, std::string("__0_0.distcp")); // bias: its offsets key
        QCOMPARE(m.bytes.size(), std::size_t(1));
        QCOMPARE(m.bytes[0].fqn, std::string("step"));
        QVERIFY(m.bytes[0].storage.present);
        QCOMPARE(m.bytes[0].storage.file, std::string("__0_1.distcp"));
        QCOMPARE(m.bytes[0].storage.length, uint64_t(5));
        // __0_0 (still the bias's), __0_1 (the item), __1_0, __7_0, and the files of the keys no
        // tensor or item has: __8_0, __9_0.
        QCOMPARE(m.files,
                 (std::vector<std::string>{"__0_0.distcp", "__0_1.distcp", "__1_0.distcp", "__7_0.distcp",
                                           "__8_0.distcp", "__9_0.distcp"}));
        // Only the overwritten entry's file goes: rank 0's weight chunk moved to __7_0, and
        // nothing else is in __0_0 once the bias is elsewhere too.
        auto moved = extra;
        moved.push_back(
            {.fqn = "model.bias", .offsets = std::vector<uint64_t>{0}, .file = "__7_0.distcp", .length = 1});
        const DcpMetadata n = decode_dcp_metadata(dcp_metadata(layout, true, {"step"}, moved), "m");
        QCOMPARE(
            n.files,
            (std::vector<std::string>{"__0_1.distcp", "__1_0.distcp", "__7_0.distcp", "__8_0.distcp", "__9_0.distcp"}));
    }

    // The sentences of a malformed storage_data entry name the key and the field.
    void storageDataErrorsNameTheKey()
    {
        const auto problem = error_of([] {
            decode_dcp_metadata(dcp_metadata(two_rank_layout(), true, {},
                                             {{.fqn = "model.weight", .file = "__0_0.distcp", .offset_is_text = true}}),
                                "m");
        });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_manifest);
        QVERIFY2(problem->message.starts_with("m: unexpected DCP metadata: storage_data['model.weight'].offset is "),
                 problem->message.c_str());
        QVERIFY2(problem->message.ends_with(", not a torch.Size or tuple"), problem->message.c_str());
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
        QCOMPARE(r.foreign->tensors[0].detail, std::string_view("2 chunks"));
        bool ranks = false;
        for (const auto& [k, v] : r.foreign->rows)
            ranks = ranks || (k == "ranks" && v == "2");
        QVERIFY(ranks);
        QVERIFY(r.shards[1].detail.starts_with("1 stored item ("));

        // Who holds what: weight rows 0-1 on rank 0, rows 2-3 on rank 1, then the bias on rank 0.
        QVERIFY(r.foreign->layout);
        const ForeignLayout& layout = *r.foreign->layout;
        QCOMPARE(layout.total, uint64_t(30));
        QCOMPARE(layout.holders.size(), std::size_t(3));
        const std::vector<std::tuple<uint64_t, uint64_t, int>> holders = {{0, 12, 0}, {12, 12, 1}, {24, 6, 0}};
        for (std::size_t i = 0; i < holders.size(); ++i)
            QCOMPARE(std::make_tuple(layout.holders[i].offset, layout.holders[i].numel, layout.holders[i].id),
                     holders[i]);
        QCOMPARE(layout.tensor_names, (std::vector<std::string>{"model.weight", "model.bias"}));
        QCOMPARE(layout.tensors[1].offset, uint64_t(24));
        QCOMPARE(layout.tensors[1].numel, uint64_t(6));
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
            fs::resize_file(dir / "__0_0.distcp", fs::file_size(dir / "__0_0.distcp") - 10); // the bias no longer fits
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
            const VerifyReport r =
                verify_checkpoint(write_dcp(root() / "byte-overlap", two_rank_layout(), [](auto& layout, auto&) {
                    layout[1].chunks[0].offset = 50; // inside the weight's bytes
                }));
            QVERIFY2(has_problem(r, ProblemKind::layout_overlap), problems_text(r).c_str());
        }
        {
            const VerifyReport r =
                verify_checkpoint(write_dcp(root() / "escape", two_rank_layout(), [](auto& layout, auto&) {
                    layout[0].chunks[1].file = "../outside.distcp";
                }));
            QVERIFY2(has_problem(r, ProblemKind::path_outside_checkpoint), problems_text(r).c_str());
        }
    }

    // Each range holds a torch.save archive of its chunk (FileSystemWriter's layout): its CRC-32s
    // are checked and its storage must hold exactly the chunk's elements.
    void chunkContent()
    {
        {
            // One flipped byte inside rank 1's stored elements.
            const fs::path dir = write_dcp(root() / "bad-crc", two_rank_layout(), [](auto&, auto& files) {
                std::string& bytes = files["__1_0.distcp"];
                const std::size_t at = bytes.find("archive/data/0");
                QVERIFY(at != std::string::npos);
                bytes[(at + 14 + 4 + 63) / 64 * 64 + 5] ^= 0x20; // 64-aligned data after the local header
            });
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::crc_mismatch), problems_text(r).c_str());
            QCOMPARE(r.shards[0].status, ShardStatus::ok);
            QCOMPARE(r.shards[1].status, ShardStatus::invalid);
            const Problem& p = r.problems.at(0);
            QCOMPARE(p.rank, 1);
            QCOMPARE(p.path, std::string("__1_0.distcp"));
            QVERIFY2(p.message.find("'model.weight' chunk [2, 0]") != std::string::npos, p.message.c_str());
            // shardctl info reads the structure only: the damaged data is not looked at.
            VerifyOptions options;
            QVERIFY2(verify_dcp(storage::Folder(fsutil::open_listed(dir)), options, /*check_data=*/false).ok(),
                     "info must not read the data");
        }
        {
            // The archive is intact but holds 10 elements where the chunk [2, 6] has 12.
            const fs::path dir = write_dcp(root() / "short-chunk", two_rank_layout(), [](auto& layout, auto& files) {
                const std::string archive = torch_tensor_archive({2, 6}, 10);
                files["__1_0.distcp"] = archive;
                layout[0].chunks[1].length = archive.size();
            });
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::size_mismatch), problems_text(r).c_str());
            QVERIFY2(r.problems.at(0).message.find("40 bytes but the 12 float32 elements of the chunk need 48") !=
                         std::string::npos,
                     r.problems.at(0).message.c_str());
        }
        {
            // A range that is not an archive must be the raw elements: 12 float32 = 48 bytes.
            auto raw = [](std::size_t bytes) {
                return [bytes](std::vector<DcpTensorSpec>& layout, std::map<std::string, std::string>& files) {
                    files["__1_0.distcp"] = std::string(bytes, '\x11');
                    layout[0].chunks[1].length = bytes;
                };
            };
            VerifyReport r = verify_checkpoint(write_dcp(root() / "raw-ok", two_rank_layout(), raw(48)));
            QVERIFY2(r.ok(), problems_text(r).c_str());
            // Raw elements that happen to begin like a zip archive are still raw elements.
            r = verify_checkpoint(write_dcp(root() / "raw-pk", two_rank_layout(), [](auto& layout, auto& files) {
                files["__1_0.distcp"] = std::string("PK\x03\x04") + std::string(44, '\x11');
                layout[0].chunks[1].length = 48;
            }));
            QVERIFY2(r.ok(), problems_text(r).c_str());
            r = verify_checkpoint(write_dcp(root() / "raw-short", two_rank_layout(), raw(44)));
            QVERIFY2(has_problem(r, ProblemKind::size_mismatch), problems_text(r).c_str());
            QVERIFY(r.problems.at(0).message.find("neither a torch.save archive nor the 48 raw bytes") !=
                    std::string::npos);
        }
        {
            // 25 damaged chunks in one file: 20 problems named, then one line counting the rest.
            DcpTensorSpec t{"big", {25, 4}, {}};
            for (uint64_t i = 0; i < 25; ++i)
                t.chunks.push_back({{i, 0}, {1, 4}, "__0_0.distcp"});
            const fs::path dir = write_dcp(root() / "many-bad", {t}, [](auto&, auto& files) {
                std::string& bytes = files["__0_0.distcp"];
                // In each archive the elements end where the next entry's local header starts.
                for (std::size_t at = bytes.find("archive/data/0"); at != std::string::npos;
                     at = bytes.find("archive/data/0", at + 1))
                    if (bytes.compare(at - 30, 4, "PK\x03\x04") == 0) // a local header, not the directory
                        bytes[bytes.find("PK\x03\x04", at) - 1] ^= 0x01;
            });
            const VerifyReport r = verify_checkpoint(dir);
            QCOMPARE(r.problems.size(), std::size_t(21));
            QCOMPARE(r.problems[0].kind, ProblemKind::crc_mismatch);
            QVERIFY2(r.problems[20].message.find("5 more problems") != std::string::npos,
                     r.problems[20].message.c_str());
            QCOMPARE(r.problems[20].kind, ProblemKind::crc_mismatch);
        }
        {
            // A range an unknown storage extension rewrote cannot be looked into: said once for the
            // checkpoint, never "OK" (tst_foreign_dcp_extensions reads zstd).
            const fs::path dir = write_dcp(root() / "transformed", two_rank_layout(), [](auto& layout, auto& files) {
                files["__1_0.distcp"] = std::string(30, '\x5a');
                layout[0].chunks[1].length = 30;
                layout[0].chunks[1].transform = "zstd";
            });
            const VerifyReport r = verify_checkpoint(dir);
            QCOMPARE(r.problems.size(), std::size_t(1));
            QCOMPARE(r.problems[0].kind, ProblemKind::unreadable);
            QVERIFY2(r.problems[0].message.find("1 stored items are written through storage extension 'zstd'") !=
                         std::string::npos,
                     r.problems[0].message.c_str());
            auto layout = two_rank_layout();
            dcp_layout(layout);
            layout[0].chunks[1].transform = "zstd";
            const DcpMetadata m = decode_dcp_metadata(dcp_metadata(layout), "m");
            QVERIFY(m.chunks_of(m.tensors[0])[1].transformed);
            QVERIFY(!m.chunks_of(m.tensors[0])[0].transformed);
        }
        {
            // An archive cut short inside its range: the zip's end record is gone.
            const fs::path dir = write_dcp(root() / "cut-archive", two_rank_layout(), [](auto& layout, auto& files) {
                std::string& bytes = files["__1_0.distcp"];
                bytes.resize(bytes.size() - 30);
                layout[0].chunks[1].length = bytes.size();
            });
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY2(has_problem(r, ProblemKind::invalid_archive), problems_text(r).c_str());
        }
    }

    // A cancelled verification leaves files unchecked (pending), never ok.
    void cancelledFilesStayPending()
    {
        const fs::path dir = write_dcp(root() / "cancelled", two_rank_layout());
        std::atomic<bool> cancel{true};
        VerifyOptions options;
        options.cancel = &cancel;
        int done = 0;
        options.callbacks.shard_done = [&](std::size_t, const ShardCheck&) { ++done; };
        const VerifyReport r = verify_checkpoint(dir, options);
        QVERIFY(r.cancelled);
        QCOMPARE(done, 0);
        for (const auto& check : r.shards)
            QCOMPARE(check.status, ShardStatus::pending);
    }

    // The file list reaches a viewer before any result, so that rows show while being checked.
    void filesListedFirst()
    {
        const fs::path dir = write_dcp(root() / "listed", two_rank_layout());
        std::vector<std::string> listed;
        bool summary = false;
        int results_before_list = 0, results = 0;
        VerifyOptions options;
        options.threads = 2;
        std::mutex mutex;
        options.callbacks.files_listed = [&](const VerifyReport& partial) {
            std::lock_guard lock(mutex);
            for (const auto& check : partial.shards) {
                listed.push_back(check.path);
                QCOMPARE(check.status, ShardStatus::pending);
            }
            summary = partial.foreign && !partial.foreign->rows.empty();
        };
        options.callbacks.shard_done = [&](std::size_t, const ShardCheck&) {
            std::lock_guard lock(mutex);
            ++results;
            if (listed.empty())
                ++results_before_list;
        };
        const VerifyReport r = verify_checkpoint(dir, options);
        QVERIFY(r.ok());
        QCOMPARE(listed, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp"}));
        QVERIFY(summary);
        QCOMPARE(results, 2);
        QCOMPARE(results_before_list, 0);
    }

    // The first kDcpFirstTensors tensors of a long .metadata reach a viewer while the rest is
    // read (as CPython pickles it and without the memo): the same names, dtypes, sizes and chunks
    // as the finished decode's first ones, without storage yet. Fewer tensors: no early list. In
    // verify, they come before the files are listed.
    void firstTensorsListedEarly()
    {
        const auto spec = many_chunks(kDcpFirstTensors + 44, 2);
        for (const bool cpython : {false, true}) {
            const std::string bytes = dcp_metadata(spec, true, {"step"}, {}, cpython);
            std::optional<DcpMetadata> first;
            int calls = 0;
            const DcpMetadata all = decode_dcp_metadata(bytes, "m", {}, [&](const DcpMetadata& m) {
                ++calls;
                first = m;
            });
            QCOMPARE(calls, 1);
            QCOMPARE(first->tensors.size(), kDcpFirstTensors);
            QVERIFY(first->files.empty() && first->bytes.empty());
            for (std::size_t t = 0; t < kDcpFirstTensors; ++t) {
                const DcpTensor &a = first->tensors[t], &b = all.tensors[t];
                QCOMPARE(a.fqn, spec[t].fqn);
                QCOMPARE(a.dtype, b.dtype);
                QCOMPARE(a.size, b.size);
                QCOMPARE(a.chunk_count, b.chunk_count);
                for (uint32_t c = 0; c < a.chunk_count; ++c) {
                    const DcpChunk &x = first->chunks[a.first_chunk + c], &y = all.chunks[b.first_chunk + c];
                    QCOMPARE(as_vector(first->offsets(x)), as_vector(all.offsets(y)));
                    QCOMPARE(as_vector(first->sizes(x)), as_vector(all.sizes(y)));
                    QCOMPARE(x.file, -1);
                }
            }
            compare_to_spec(all, spec);
        }
        // Early: from a file cut where storage_data begins, which cannot be decoded, the first
        // tensors were listed all the same (written without a FRAME, whose length would be
        // refused at once).
        {
            const std::string bytes = dcp_metadata(spec, false, {"step"}, {}, true);
            const std::size_t cut = bytes.find("storage_data");
            QVERIFY(cut != std::string::npos && cut > bytes.size() / 4);
            std::size_t listed = 0;
            const auto problem = error_of([&] {
                decode_dcp_metadata(bytes.substr(0, cut), "m", {},
                                    [&](const DcpMetadata& m) { listed = m.tensors.size(); });
            });
            QVERIFY(problem);
            QCOMPARE(listed, kDcpFirstTensors);
        }
        const auto few = many_chunks(kDcpFirstTensors - 1, 2);
        int calls = 0;
        decode_dcp_metadata(dcp_metadata(few, true, {}, {}, true), "m", {}, [&](const DcpMetadata&) { ++calls; });
        QCOMPARE(calls, 0);

        const fs::path dir = root() / "first-tensors";
        fs::create_directories(dir);
        write_file(dir / ".metadata", dcp_metadata(spec, true, {}, {}, true));
        VerifyOptions options;
        std::vector<std::string> order;
        options.callbacks.first_tensors = [&](const ForeignSummary& s) {
            order.push_back("first");
            QCOMPARE(s.tensors.size(), kDcpFirstTensors);
            QCOMPARE(std::string(s.tensors[0].name), spec[0].fqn);
            QCOMPARE(s.tensors[0].chunks.size(), std::size_t(2));
        };
        options.callbacks.files_listed = [&](const VerifyReport& r) {
            order.push_back("files");
            QCOMPARE(r.foreign->tensors.size(), spec.size());
        };
        verify_checkpoint(dir, options); // (its data files are missing: not what is looked at here)
        QCOMPARE(order, (std::vector<std::string>{"first", "files"}));
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

    // CPython's pickler fetches every repeated str and class from the memo and batches dict and
    // list items by 1000; the same metadata decodes to the same thing either way.
    void cpythonPickleDecodesAlike()
    {
        const auto spec = many_chunks(3, 700); // 2100 storage entries: three SETITEMS batches
        const std::string plain = dcp_metadata(spec);
        const std::string cpython = dcp_metadata(spec, true, {"step"}, {}, true);
        QVERIFY(cpython.size() < plain.size() / 2); // the memo at work
        compare_to_spec(decode_dcp_metadata(plain, "m"), spec);
        const DcpMetadata m = decode_dcp_metadata(cpython, "m");
        compare_to_spec(m, spec);
        QCOMPARE(m.files.size(), std::size_t(8));
        QCOMPARE(m.bytes.size(), std::size_t(1));
        QCOMPARE(m.bytes[0].fqn, std::string("step"));
    }

    // The reader folds each DCP object as BUILD completes it and gives its subtree back: the
    // values it holds at once follow the chunks, not the opcodes. The tree of the same pickle
    // (parse_pickle) needs many times more, and the limit is real: too few values is an error.
    void foldsAsItReads()
    {
        const auto spec = many_chunks(4, 1000);
        for (const bool cpython : {false, true}) {
            const std::string bytes = dcp_metadata(spec, true, {}, {}, cpython);
            PickleLimits enough;
            enough.max_nodes = 8 * 4000; // kept: 3 tuples and 3 records a chunk, a few strs
            const std::size_t tree = parse_pickle(bytes, "m").size();
            QVERIFY2(tree > 2 * enough.max_nodes, std::to_string(tree).c_str());
            compare_to_spec(decode_dcp_metadata(bytes, "m", enough), spec);
            PickleLimits too_few;
            too_few.max_nodes = 2 * 4000;
            const auto problem = error_of([&] { decode_dcp_metadata(bytes, "m", too_few); });
            QVERIFY(problem);
            QVERIFY2(problem->message.find("values (limit)") != std::string::npos, problem->message.c_str());
        }
    }

    // Objects reached again through the memo or DUP are kept, not given back: a chunk appended
    // twice (its second time a GET), TensorProperties shared by two tensors, a DUP of a list.
    // And an object cannot be built again once folded: a clear error, not a crash.
    void sharedObjectsStay()
    {
        const std::string meta = "torch.distributed.checkpoint.metadata";
        int properties = -1;
        auto write = [&](bool build_twice) {
            PickleWriter p;
            p.proto(4).dataclass(meta, "Metadata", [&](PickleWriter& w) {
                w.str("state_dict_metadata").op('}').memoize().mark();
                w.str("w").dataclass(meta, "TensorStorageMetadata", [&](PickleWriter& f) {
                    f.str("properties");
                    properties = f.memo + 3; // after the class's module, name and global
                    f.dataclass(meta, "TensorProperties",
                                [](PickleWriter& g) { g.str("dtype").stack_global("torch", "bfloat16"); });
                    f.str("size").torch_size({2, 4});
                    f.str("chunks").op(']').memoize().op('2').op('0').mark(); // DUP, POP
                    const int chunk = f.memo + 3;
                    f.dataclass(meta, "ChunkStorageMetadata", [](PickleWriter& g) {
                        g.str("offsets").torch_size({0, 0}).str("sizes").torch_size({2, 4});
                    });
                    if (build_twice)
                        f.op('}').op('b');
                    f.get(chunk).op('e');
                });
                w.str("v").dataclass(meta, "TensorStorageMetadata", [&](PickleWriter& f) {
                    f.str("properties").get(properties).str("size").torch_size({0}).str("chunks").op(']');
                });
                w.op('u').str("storage_data").op('}');
            });
            return p.stop().out;
        };
        const DcpMetadata m = decode_dcp_metadata(write(false), "m");
        QCOMPARE(m.tensors.size(), std::size_t(2));
        QCOMPARE(m.tensors[0].dtype, std::string("bfloat16"));
        QCOMPARE(m.tensors[1].dtype, std::string("bfloat16"));
        const auto chunks = m.chunks_of(m.tensors[0]);
        QCOMPARE(chunks.size(), std::size_t(2));
        for (const DcpChunk& c : chunks) {
            QCOMPARE(as_vector(m.offsets(c)), (std::vector<uint64_t>{0, 0}));
            QCOMPARE(as_vector(m.sizes(c)), (std::vector<uint64_t>{2, 4}));
            QVERIFY(!m.storage(c).present);
        }
        const auto problem = error_of([&] { decode_dcp_metadata(write(true), "m"); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_pickle);
        QVERIFY2(problem->message.find("second BUILD") != std::string::npos, problem->message.c_str());
    }

    // A .metadata larger than the reader's 1 MiB window, with a name longer than the window, is
    // read from the file as it is from memory; a file cut short says so and names it.
    void readsTheFileThroughAWindow()
    {
        auto spec = many_chunks(8, 1200);
        spec[3].fqn = std::string(1536 * 1024, 'x');
        for (auto& c : spec[3].chunks)
            c.file = "__0_0.distcp";
        const std::string bytes = dcp_metadata(spec, true, {}, {}, true);
        QVERIFY(bytes.size() > (2u << 20));
        const fs::path dir = root() / "window";
        fs::create_directories(dir);
        write_file(dir / ".metadata", bytes);
        compare_to_spec(decode_dcp_metadata_file(storage::Folder(fsutil::open_listed(dir)), ".metadata", "w/.metadata"),
                        spec);
        write_file(dir / ".metadata", bytes.substr(0, bytes.size() - 100));
        const auto problem = error_of(
            [&] { decode_dcp_metadata_file(storage::Folder(fsutil::open_listed(dir)), ".metadata", "w/.metadata"); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_pickle);
        QVERIFY2(problem->message.starts_with("w/.metadata: pickle byte "), problem->message.c_str());
    }

    // Memo indices need not come in order (BINPUT names any): one stored far ahead, then passed
    // by the ones that follow, is still found by its GET.
    void memoIndicesOutOfOrder()
    {
        const std::string meta = "torch.distributed.checkpoint.metadata";
        PickleWriter p;
        p.proto(4).str("model.w").op('r');
        put_le(p.out, 6000, 4); // LONG_BINPUT 6000: far past the entries so far
        p.op('0');
        for (int i = 0; i < 1000; ++i)
            p.none().memoize().op('0');
        p.none().op('r');
        put_le(p.out, 6001, 4); // beside it, where the entries now reach
        p.op('0');
        p.dataclass(meta, "Metadata", [&](PickleWriter& w) {
            w.str("state_dict_metadata").op('}').memoize().mark();
            w.op('j');
            put_le(w.out, 6000, 4); // LONG_BINGET 6000: "model.w"
            w.dataclass(meta, "TensorStorageMetadata", [&](PickleWriter& f) {
                f.str("properties").dataclass(meta, "TensorProperties", [](PickleWriter& g) {
                    g.str("dtype").stack_global("torch", "float16");
                });
                f.str("size").torch_size({3}).str("chunks").op(']');
            });
            w.op('u');
        });
        const DcpMetadata m = decode_dcp_metadata(p.stop().out, "m");
        QCOMPARE(m.tensors.size(), std::size_t(1));
        QCOMPARE(m.tensors[0].fqn, std::string("model.w"));
        QCOMPARE(m.tensors[0].dtype, std::string("float16"));
    }

    // A tensor's state shared through the memo and built again and again copies its chunk list
    // each time: bounded in all, so a few kilobytes cannot make gigabytes.
    void repeatedBuildsAreBounded()
    {
        SharedChunkList shared = shared_chunk_list();
        PickleWriter& p = shared.p;
        const int state = shared.state, cls = shared.cls;
        for (int i = 0; i < 5000; ++i) // 5 M chunks copied, past the 4 Mi limit
            p.get(cls).op(')').op(0x81).get(state).op('b').op('0');
        p.none().stop();
        QVERIFY(p.out.size() < 64 * 1024);
        const auto problem = error_of([&] { decode_dcp_metadata(p.out, "m"); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_manifest);
        QVERIFY2(problem->message.find("chunks in the tensors built (limit)") != std::string::npos,
                 problem->message.c_str());
    }

    // A crafted file whose tensors share one list of 1,000 chunks, each pickled right after a
    // str (as a dict's value is): the early list stops at kDcpFirstChunks chunks, the tensors that
    // fit whole, rather than copying 256,000.
    void firstTensorsAreBounded()
    {
        SharedChunkList shared = shared_chunk_list();
        PickleWriter& p = shared.p;
        const int state = shared.state, cls = shared.cls;
        const int key = p.memo;
        p.str("w").memoize().op('0');
        for (int i = 0; i < 300; ++i)
            p.get(key).get(cls).op(')').op(0x81).get(state).op('b').op('0').op('0');
        p.none().stop();
        std::size_t tensors = 0, chunks = 0;
        const auto problem = error_of([&] {
            decode_dcp_metadata(p.out, "m", {}, [&](const DcpMetadata& first) {
                tensors = first.tensors.size();
                chunks = first.chunks.size();
                QCOMPARE(first.tensors[0].fqn, std::string("w"));
            });
        });
        QVERIFY(problem); // (its root is None)
        QCOMPARE(tensors, kDcpFirstChunks / 1000);
        QCOMPARE(chunks, tensors * 1000);
    }
};

QTEST_GUILESS_MAIN(TestForeignDcp)
#include "tst_foreign_dcp.moc"
