// Single-file and sharded (index) safetensors through verify_checkpoint, as shardctl and the app
// see them: per-file status, typed problems, the tensor list and the summary rows.

#include "foreign_fixtures.h"
#include "problemcheck.h"
#include "streaming_reference.h"

#include "core/open/verify.h"
#include "core/foreign/safetensors_index.h"
#include "core/open/detect.h"
#include "core/foreign/safetensors_listing.h"
#include "core/foreign/summary_json.h"
#include "core/checkpoint/verify_json.h"
#include "core/checkpoint/safetensors.h"

#include <sstream>

#include <QTemporaryDir>
#include <cstring>
#include <QTest>
#include <nlohmann/json.hpp>

using namespace shardscope;
namespace fs = std::filesystem;
using fixtures::write_file;
using problemcheck::has_problem;
using problemcheck::problems_text;

namespace {

// A safetensors file written by hand from the format description: u64 header length, JSON, data.
std::string safetensors(const std::string& json, std::size_t data_bytes)
{
    std::string out;
    fixtures::put_le(out, json.size(), 8);
    return out + json + std::string(data_bytes, '\x11');
}

std::string two_tensors(const std::string& a = "a", const std::string& b = "b")
{
    return safetensors(R"({"__metadata__":{"format":"pt"},")" + a +
                           R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},")" + b +
                           R"(":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})",
                       24);
}

} // namespace

class TestForeignSafetensors : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

    fs::path index_folder(const std::string& name, const nlohmann::json& weight_map, uint64_t total_size)
    {
        const fs::path dir = root() / name;
        write_file(dir / "model-00001-of-00002.safetensors", two_tensors("a", "b"));
        write_file(dir / "model-00002-of-00002.safetensors", two_tensors("c", "d"));
        write_file(dir / "model.safetensors.index.json",
                   nlohmann::json{{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}}.dump());
        return dir;
    }
    static nlohmann::json good_map()
    {
        return {{"a", "model-00001-of-00002.safetensors"},
                {"b", "model-00001-of-00002.safetensors"},
                {"c", "model-00002-of-00002.safetensors"},
                {"d", "model-00002-of-00002.safetensors"}};
    }

private slots:
    void singleFileListsTensorsAndMetadata()
    {
        const fs::path file = root() / "single" / "model.safetensors";
        write_file(file, two_tensors());
        QCOMPARE(detect_format(file).format, CheckpointFormat::safetensors);
        const VerifyReport r = verify_checkpoint(file);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("safetensors"));
        QVERIFY(r.foreign.has_value());
        QCOMPARE(r.shards.size(), std::size_t(1));
        QCOMPARE(r.shards[0].status, ShardStatus::ok);
        QCOMPARE(r.foreign->tensors_total, uint64_t(2));
        const ForeignTensor a = r.foreign->tensors[0].copy();
        QCOMPARE(a.name, std::string("a"));
        QCOMPARE(a.dtype, std::string("F32"));
        QCOMPARE(a.shape, (std::vector<uint64_t>{2, 2}));
        QCOMPARE(a.bytes, uint64_t(16));
        const uint64_t header = 8 + (fs::file_size(file) - 8 - 24);
        QCOMPARE(a.offset, header); // absolute file offset of the first tensor
        QCOMPARE(r.foreign->tensors[1].offset, header + 16);
        bool metadata = false;
        for (const auto& [k, v] : r.foreign->rows)
            metadata = metadata || (k == "metadata.format" && v == "pt");
        QVERIFY(metadata);
    }

    void brokenSingleFiles_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        const std::string good = two_tensors();
        QTest::newRow("truncated") << QByteArray::fromStdString(good.substr(0, good.size() - 5));
        std::string long_header(8, '\0');
        const uint64_t huge = (100ull << 20) + 1;
        std::memcpy(long_header.data(), &huge, 8);
        QTest::newRow("header too long") << QByteArray::fromStdString(long_header + "{}");
        std::string past(8, '\0');
        const uint64_t beyond = 1000;
        std::memcpy(past.data(), &beyond, 8);
        QTest::newRow("header past end") << QByteArray::fromStdString(past + "{}");
        QTest::newRow("overlapping ranges") << QByteArray::fromStdString(safetensors(
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            12));
        QTest::newRow("unknown dtype") << QByteArray::fromStdString(
            safetensors(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8));
        QTest::newRow("duplicate name") << QByteArray::fromStdString(safetensors(
            R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
            2));
        QTest::newRow("NUL in the header") << QByteArray::fromStdString(
            safetensors(std::string(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})") + '\0' + "xx", 1));
        QTest::newRow("reversed offsets")
            << QByteArray::fromStdString(safetensors(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4));
        QTest::newRow("non-string metadata") << QByteArray::fromStdString(
            safetensors(R"({"__metadata__":{"k":1},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
    }
    void brokenSingleFiles()
    {
        QFETCH(QByteArray, bytes);
        const fs::path file = root() / ("broken-" + std::string(QTest::currentDataTag())) / "x.safetensors";
        write_file(file, bytes.toStdString());
        const VerifyReport r = verify_checkpoint(file);
        QVERIFY(!r.ok());
        QCOMPARE(r.shards.at(0).status, ShardStatus::invalid);
        QVERIFY2(has_problem(r, ProblemKind::invalid_shard), problems_text(r).c_str());
        QVERIFY(r.problems[0].message.find("x.safetensors") != std::string::npos);
        const std::string tag = QTest::currentDataTag();
        if (tag == "NUL in the header")
            QVERIFY2(r.problems[0].message.find("holds a NUL byte at byte 53") != std::string::npos,
                     r.problems[0].message.c_str());
        if (tag == "reversed offsets")
            QVERIFY2(r.problems[0].message.find("data_offsets that end (0) before they begin (4)") != std::string::npos,
                     r.problems[0].message.c_str());
    }

    void indexFolderVerifies()
    {
        const fs::path dir = index_folder("index-ok", good_map(), 48);
        QCOMPARE(detect_format(dir).format, CheckpointFormat::safetensors_index);
        const VerifyReport r = verify_checkpoint(dir);
        QVERIFY2(r.ok(), problems_text(r).c_str());
        QCOMPARE(r.format, std::string("safetensors-index"));
        QCOMPARE(r.shards.size(), std::size_t(2));
        for (const auto& s : r.shards)
            QCOMPARE(s.status, ShardStatus::ok);
        QCOMPARE(r.foreign->tensors_total, uint64_t(4));
    }

    void indexProblems()
    {
        {
            auto map = good_map();
            map.erase("d"); // file 2 holds d, which the index does not map
            const VerifyReport r = verify_checkpoint(index_folder("unmapped", map, 40));
            QVERIFY2(has_problem(r, ProblemKind::unmapped_tensor), problems_text(r).c_str());
            QCOMPARE(r.shards[1].status, ShardStatus::invalid);
            QCOMPARE(r.shards[0].status, ShardStatus::ok);
        }
        {
            auto map = good_map();
            map["e"] = "model-00001-of-00002.safetensors"; // mapped but absent
            const VerifyReport r = verify_checkpoint(index_folder("missing-tensor", map, 48));
            QVERIFY2(has_problem(r, ProblemKind::missing_tensor), problems_text(r).c_str());
        }
        {
            const VerifyReport r = verify_checkpoint(index_folder("total-size", good_map(), 49));
            QVERIFY2(has_problem(r, ProblemKind::size_mismatch), problems_text(r).c_str());
        }
        {
            const fs::path dir = index_folder("missing-shard", good_map(), 48);
            fs::remove(dir / "model-00002-of-00002.safetensors");
            const VerifyReport r = verify_checkpoint(dir);
            QVERIFY(has_problem(r, ProblemKind::missing_file));
            QCOMPARE(r.shards[1].status, ShardStatus::missing);
            QVERIFY(!has_problem(r, ProblemKind::size_mismatch)); // no total with a file absent
        }
        {
            const fs::path dir = index_folder("truncated-shard", good_map(), 48);
            fs::resize_file(dir / "model-00001-of-00002.safetensors", 30);
            const VerifyReport r = verify_checkpoint(dir);
            QCOMPARE(r.shards[0].status, ShardStatus::invalid);
            QVERIFY(has_problem(r, ProblemKind::invalid_shard));
        }
    }

    void indexParserRejectsBadInput_data()
    {
        QTest::addColumn<QString>("json");
        QTest::newRow("not json") << QStringLiteral("{");
        QTest::newRow("array") << QStringLiteral("[]");
        QTest::newRow("no weight_map") << QStringLiteral(R"({"metadata":{}})");
        QTest::newRow("non-string file") << QStringLiteral(R"({"weight_map":{"a":1}})");
        QTest::newRow("escaping path") << QStringLiteral(R"({"weight_map":{"a":"../x.safetensors"}})");
        QTest::newRow("absolute path") << QStringLiteral(R"({"weight_map":{"a":"/etc/passwd"}})");
        QTest::newRow("duplicate tensor") << QStringLiteral(R"({"weight_map":{"a":"x","a":"y"}})");
        QTest::newRow("negative total") << QStringLiteral(R"({"metadata":{"total_size":-1},"weight_map":{}})");
        // A JSON parser stops at a NUL and would take what follows for padding.
        QTest::newRow("NUL then text") << (QStringLiteral(R"({"weight_map":{"a":"x.safetensors"}})") + QChar(0) +
                                           QStringLiteral("{{{"));
    }
    void indexParserRejectsBadInput()
    {
        QFETCH(QString, json);
        try {
            parse_safetensors_index(json.toStdString(), "idx.json");
            QFAIL("accepted a bad index");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_manifest);
            QVERIFY(std::string(e.what()).starts_with("idx.json: "));
        }
    }

    // The streaming index parser against the DOM parser it replaced: the same result, or the same
    // sentence (syntax errors included: both read nlohmann's SAX events).
    void indexParserMatchesDomParser_data()
    {
        QTest::addColumn<std::string>("json");
        for (const auto& [name, json] : reference::index_cases())
            QTest::newRow(name.c_str()) << json;
    }
    void indexParserMatchesDomParser()
    {
        QFETCH(std::string, json);
        std::string old_error, new_error;
        reference::Index old_index;
        SafetensorsIndex new_index;
        try {
            old_index = reference::parse_index(json, "idx.json");
        } catch (const Error& e) {
            old_error = e.what();
        }
        try {
            new_index = parse_safetensors_index(json, "idx.json");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_manifest);
            new_error = e.what();
        }
        QCOMPARE(new_error, old_error);
        if (!old_error.empty())
            return;
        QCOMPARE(new_index.total_size, old_index.total_size);
        QCOMPARE(new_index.metadata, old_index.metadata);
        QCOMPARE(new_index.files, old_index.files);
        std::map<std::string, std::string> mapped;
        for (std::size_t i = 0; i < new_index.weight_map.size(); ++i) {
            const std::string name(new_index.weight_map.name(i));
            QCOMPARE(new_index.weight_map.find(name), std::optional<std::size_t>(i));
            mapped.emplace(name, new_index.files.at(new_index.weight_map.file(i)));
        }
        QCOMPARE(mapped, old_index.weight_map);
        QVERIFY(!new_index.weight_map.find("no such tensor"));
    }

    // The streaming header listing against parse_safetensors_header (DOM), on the same file sizes.
    void headerListingMatchesDomParser_data()
    {
        QTest::addColumn<std::string>("json");
        QTest::addColumn<quint64>("file_size");
        for (const auto& c : reference::header_cases())
            QTest::newRow(c.name.c_str()) << c.json << quint64(8 + c.json.size() + c.data_bytes);
        // Headers the project's own writer makes, every dtype and a metadata map.
        std::vector<SafetensorsTensor> tensors;
        uint64_t at = 0;
        for (const std::string_view dtype : safetensors_dtype_names()) {
            const uint64_t bytes = *safetensors_dtype_size(dtype) * 6;
            tensors.push_back({.name = "t." + std::string(dtype),
                               .dtype = std::string(dtype),
                               .shape = {2, 3},
                               .begin = at,
                               .end = at + bytes});
            at += bytes;
        }
        const std::string written = make_safetensors_header(tensors, {{"format", "pt"}, {"k", "v"}});
        QTest::newRow("written") << written.substr(8) << quint64(written.size() + at);
    }
    void headerListingMatchesDomParser()
    {
        QFETCH(std::string, json);
        QFETCH(quint64, file_size);
        std::string old_error, new_error;
        SafetensorsHeader old_header;
        SafetensorsListing listing;
        try {
            old_header = parse_safetensors_header(json, file_size, "f.safetensors", 3);
        } catch (const Error& e) {
            old_error = e.what();
        }
        try {
            listing = list_safetensors_header(json, file_size, "f.safetensors", 3);
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_shard);
            new_error = e.what();
        }
        QCOMPARE(new_error, old_error);
        if (!old_error.empty())
            return;
        QCOMPARE(listing.data_start(), old_header.data_start());
        QCOMPARE(listing.tensors.size(), old_header.tensors.size());
        for (std::size_t i = 0; i < listing.tensors.size(); ++i) {
            const auto& t = listing.tensors[i];
            const auto& o = old_header.tensors[i];
            QCOMPARE(std::string(listing.name(t)), o.name);
            QCOMPARE(std::string(listing.dtype(t)), o.dtype);
            QCOMPARE(std::vector<uint64_t>(listing.shape(t).begin(), listing.shape(t).end()), o.shape);
            QCOMPARE(t.begin, o.begin);
            QCOMPARE(t.end, o.end);
        }
        const std::map<std::string, std::string> metadata(listing.metadata.begin(), listing.metadata.end());
        QCOMPARE(metadata, old_header.metadata);
    }

    // info --json streams the tensor list: the text must be what the DOM builder dumps to.
    void streamedTensorsMatchDom()
    {
        ForeignSummary summary;
        summary.tensors.push_back(
            {.name = "plain", .dtype = "F16", .shape = {4, 8}, .file = "a.safetensors", .offset = 72, .bytes = 64});
        summary.tensors.push_back({.name = "q\"uote\\ \n\t\x01\x7f \u00e9 \xf0\x9f\x98\x80", .dtype = "BF16"});
        summary.tensors.push_back({.name = std::string("bad \xff\xfe utf-8 \xc0\x80 \xed\xa0\x80 \xe2\x82"),
                                   .dtype = "bytes",
                                   .detail = "pickled object"});
        summary.tensors.push_back(
            {.name = "chunked",
             .dtype = "float32",
             .shape = {4, 2},
             .bytes = 32,
             .detail = "2 chunks",
             .chunks = {{.offsets = {0, 0}, .sizes = {2, 2}, .file = "__0_0.distcp", .offset = 0, .length = 16},
                        {.offsets = {2, 0}, .sizes = {2, 2}}}});
        const nlohmann::json dom = foreign_summary_json(summary);
        for (const int depth : {0, 1, 3}) {
            std::ostringstream streamed;
            write_tensors_json(streamed, summary.tensors, 2, depth);
            nlohmann::json wrapped = dom["tensors"];
            for (int d = 0; d < depth; ++d)
                wrapped = nlohmann::json::array({wrapped});
            std::string expected = wrapped.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
            for (int d = 0; d < depth; ++d) { // unwrap the text: drop "[\n" + indent and "\n" + indent + "]"
                expected = expected.substr(2 + 2 * (d + 1));
                expected = expected.substr(0, expected.size() - 2 - 2 * d);
            }
            QCOMPARE(streamed.str(), expected);
        }
        std::ostringstream empty;
        write_tensors_json(empty, {}, 2, 1);
        QCOMPARE(empty.str(), std::string("[]"));
    }

    void nativePartialWriteStaysNative()
    {
        // rank0.safetensors without a manifest is an interrupted ShardScope save, not a foreign file.
        const fs::path dir = root() / "native-partial";
        write_file(dir / "rank0.safetensors", two_tensors());
        const VerifyReport r = verify_checkpoint(dir);
        QVERIFY(!r.foreign.has_value());
        QCOMPARE(r.format, std::string("shardscope"));
        QVERIFY(!r.ok());
    }
};

QTEST_GUILESS_MAIN(TestForeignSafetensors)
#include "tst_foreign_safetensors.moc"
