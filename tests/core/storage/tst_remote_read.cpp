// Reading checkpoints where they live: folders copied byte for byte into a bucket of the real S3
// server of this test run, then detected, verified, scanned and diffed through storage::Folder,
// and compared with what the same commands say about the local copy.

#include "s3_server.h"

#include "big_foreign.h"
#include "content_fixtures.h"
#include "foreign_fixtures.h"
#include "megatron_dist_fixture.h"
#include "range_server.h"
#include "testutil.h"

#include "core/checkpoint/save.h"
#include "core/convert/convert.h"
#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/open/detect.h"
#include "core/open/nearby.h"
#include "core/open/verify.h"
#include "core/run/demo.h"
#include "core/storage/folder.h"
#include "core/storage/s3.h"
#include "core/storage/sequential_read.h"
#include "core/util/error.h"
#include "core/util/hashing.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QDir>
#include <QTest>
#include <thread>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <limits>
#include <sstream>

using namespace shardscope;
using namespace shardscope::storage;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::span<const std::byte> bytes_of(const std::string& s)
{
    return std::as_bytes(std::span(s.data(), s.size()));
}

// Every field of two statistics, which must be equal: the same bytes in the same order.
bool same_stats(const ValueStats& a, const ValueStats& b)
{
    return a.numel == b.numel && a.nan == b.nan && a.posinf == b.posinf && a.neginf == b.neginf && a.zeros == b.zeros &&
        a.finite == b.finite && a.min == b.min && a.max == b.max && a.mean == b.mean && a.m2 == b.m2 &&
        a.histogram == b.histogram;
}

// What tests/core/storage/range_http_server.py at `base` was asked so far, one request a line
// ("GET /hf/model.safetensors.index.json bytes=0-65535").
QList<QByteArray> requests_of(const std::string& base)
{
    QProcess fetch;
    fetch.start(QStringLiteral("curl"), {QStringLiteral("-s"), QString::fromStdString(base + "/__requests__")});
    fetch.waitForFinished(10000);
    QList<QByteArray> requests = fetch.readAllStandardOutput().trimmed().split('\n');
    requests.removeIf([](const QByteArray& r) { return r.contains("__requests__") || r.isEmpty(); });
    return requests;
}

} // namespace

class TestRemoteRead : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    std::optional<S3Client> m_s3;
    std::string m_bucket;

    fs::path root() const { return fs::path(m_tmp.path().toStdString()); }

    // Copies every file beneath `dir` to s3://bucket/prefix/..., as a trainer's uploader would.
    void upload(const fs::path& dir, const std::string& prefix)
    {
        for (const auto& entry : fs::recursive_directory_iterator(dir))
            if (entry.is_regular_file())
                m_s3->put(m_bucket, prefix + "/" + fs::relative(entry.path(), dir).generic_string(),
                          bytes_of(read_all(entry.path())));
    }
    Location url(const std::string& prefix) const { return parse_location("s3://" + m_bucket + "/" + prefix); }

private slots:
    void initTestCase()
    {
        const auto env = s3test::server_env();
        QVERIFY2(env.contains("SHARDSCOPE_S3_ENDPOINT"), "the test S3 server is not running (SHARDSCOPE_S3_ENV)");
        // What a user's shell holds: the readers find the server the way the AWS tools do.
        qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str());
        qputenv("AWS_ACCESS_KEY_ID", env.at("AWS_ACCESS_KEY_ID").c_str());
        qputenv("AWS_SECRET_ACCESS_KEY", env.at("AWS_SECRET_ACCESS_KEY").c_str());
        qputenv("AWS_DEFAULT_REGION", env.at("AWS_DEFAULT_REGION").c_str());
        m_s3.emplace(s3test::server_config());
        m_bucket = s3test::fresh_bucket("remote-read");
        m_s3->create_bucket(m_bucket);
    }

    void nativeRootVerifiesLikeItsLocalCopy()
    {
        const fs::path run = root() / "run";
        save_sharded(make_demo_state(7, 30001, 3, ParamDtype::BF16), run / "step-00000005", 5);
        std::ofstream(run / "latest") << "step-00000005\n";
        upload(run, "run");

        const DetectedFormat detected = detect_format(url("run"));
        QCOMPARE(detected.format, CheckpointFormat::shardscope);
        QCOMPARE(detected.dir.path.string(), "s3://" + m_bucket + "/run/step-00000005");
        QVERIFY(!detected.dir.is_local());

        const VerifyReport local = verify_checkpoint(run);
        const VerifyReport remote = verify_checkpoint(url("run"));
        QVERIFY2(remote.ok(), remote.problems.empty() ? "" : remote.problems[0].message.c_str());
        QCOMPARE(remote.shards.size(), std::size_t(3));
        for (std::size_t i = 0; i < 3; ++i) {
            QCOMPARE(remote.shards[i].status, ShardStatus::ok);
            QCOMPARE(remote.shards[i].actual_digest, local.shards[i].actual_digest);
            QCOMPARE(remote.shards[i].actual_bytes, local.shards[i].actual_bytes);
        }

        // The values too: statistics of every tensor equal to the local copy's, and no difference.
        const ContentReport a = inspect_content(run);
        const ContentReport b = inspect_content(url("run"));
        QVERIFY(b.ok());
        QCOMPARE(b.tensors.size(), a.tensors.size());
        for (std::size_t t = 0; t < a.tensors.size(); ++t)
            QVERIFY2(same_stats(a.tensors[t].stats, b.tensors[t].stats), a.tensors[t].name.c_str());
        const DiffReport diff = diff_checkpoints(run, url("run"));
        QVERIFY(diff.identical());
        QCOMPARE(diff.tensors.size(), a.tensors.size());

        // The step's manifest.json named instead of its folder: the folder, on a disk as in a bucket.
        const VerifyReport by_file = verify_checkpoint(run / "step-00000005" / "manifest.json");
        const VerifyReport by_url = verify_checkpoint(url("run/step-00000005/manifest.json"));
        QVERIFY(by_file.ok() && by_url.ok());
        QCOMPARE(by_file.dir, run / "step-00000005");
        QCOMPARE(by_url.dir.string(), "s3://" + m_bucket + "/run/step-00000005");
        QCOMPARE(by_file.shards.size(), by_url.shards.size());
    }

    void corruptTruncatedAndMissingObjectsAreNamed()
    {
        const fs::path step = root() / "bad";
        save_sharded(make_demo_state(8, 20000, 2, ParamDtype::BF16), step, 3);
        upload(step, "bad");
        std::string rank1 = read_all(step / "rank1.safetensors");
        rank1[rank1.size() - 3] ^= 0x40;
        m_s3->put(m_bucket, "bad/rank1.safetensors", bytes_of(rank1));
        VerifyReport report = verify_checkpoint(url("bad"));
        QCOMPARE(report.shards[1].status, ShardStatus::hash_mismatch);
        QCOMPARE(report.problems.size(), std::size_t(1));
        QVERIFY(report.problems[0].message.find("s3://" + m_bucket + "/bad/rank1.safetensors") != std::string::npos);

        m_s3->put(m_bucket, "bad/rank1.safetensors", bytes_of(rank1.substr(0, rank1.size() / 2)));
        report = verify_checkpoint(url("bad"));
        QCOMPARE(report.shards[1].status, ShardStatus::size_mismatch);
        QCOMPARE(report.problems[0].kind, ProblemKind::partial_write);

        m_s3->remove(m_bucket, "bad/rank1.safetensors");
        report = verify_checkpoint(url("bad"));
        QCOMPARE(report.shards[1].status, ShardStatus::missing);
        QCOMPARE(report.problems[0].kind, ProblemKind::missing_shard);

        // A `latest` naming a step that is not in the bucket: the save did not finish.
        m_s3->put(m_bucket, "orphan/latest", bytes_of(std::string("step-00000009\n")));
        m_s3->put(m_bucket, "orphan/step-00000008/manifest.json", bytes_of(std::string("{}")));
        report = verify_checkpoint(url("orphan"));
        QVERIFY(!report.problems.empty());
        QCOMPARE(report.problems[0].kind, ProblemKind::partial_write);
    }

    // One shard of several remote ranges, read alone: its ranges are fetched ahead on several
    // connections and hashed in order, so the digest is the local file's; a flipped byte in a
    // later range is found; progress counts every byte once, in order; a cancel stops it; and an
    // object gone after the listing is an Error raised on the reading thread, not on a helper.
    void oneBigShardIsStreamedInOrder()
    {
        const fs::path step = root() / "big";
        // 14 bytes an element: about 27 MiB, three and a bit of verify's 8 MiB chunks.
        save_sharded(make_demo_state(12, 2'000'000, 1, ParamDtype::BF16), step, 2);
        upload(step, "big");
        const VerifyReport local = verify_checkpoint(step);
        std::vector<uint64_t> progress;
        VerifyOptions options;
        options.callbacks.progress = [&](uint64_t done, uint64_t) { progress.push_back(done); };
        VerifyReport remote = verify_checkpoint(url("big"), options);
        QVERIFY2(remote.ok(), remote.problems.empty() ? "" : remote.problems[0].message.c_str());
        QCOMPARE(remote.shards[0].actual_digest, local.shards[0].actual_digest);
        const uint64_t size = local.shards[0].actual_bytes;
        QVERIFY(size > 3 * (uint64_t(8) << 20));
        // Handed on as it arrives: many small steps, in order, to the last byte.
        QVERIFY(progress.size() > 4);
        QVERIFY(std::is_sorted(progress.begin(), progress.end()));
        QCOMPARE(progress.back(), size);

        std::atomic<bool> cancel{false};
        VerifyOptions cancelling;
        cancelling.cancel = &cancel;
        cancelling.callbacks.progress = [&](uint64_t, uint64_t) { cancel = true; };
        const VerifyReport cancelled = verify_checkpoint(url("big"), cancelling);
        QVERIFY(cancelled.cancelled);
        QCOMPARE(cancelled.shards[0].status, ShardStatus::pending);

        const auto env = s3test::server_env();
        s3test::FaultProxy proxy(env.at("SHARDSCOPE_S3_ENDPOINT"));
        QVERIFY(!proxy.endpoint().empty());
        qputenv("AWS_ENDPOINT_URL", proxy.endpoint().c_str());
        const auto restore =
            qScopeGuard([&] { qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str()); });
        const auto read_through = [&](const SequentialRead& how, uint64_t& done) {
            const Folder folder = Folder::open(url("big")); // a listing: no GET of the object
            const OpenedObject object = folder.open("rank0.safetensors");
            Sha256 sha;
            done = read_in_order(*object.reader, object.size, how, [&](const char* b, std::size_t n) {
                       sha.update(b, n);
                       return true;
                   }).done;
            return sha.hex_digest();
        };
        {
            // A connection reset halfway through the stream, twice: it goes on from the byte it
            // reached (a range from there, If-Match its first ETag), and every byte is hashed once.
            QVERIFY(proxy.fault("mode=reset&count=2&method=GET&path=big/rank0"));
            uint64_t done = 0;
            QCOMPARE(read_through({.chunk = 8u << 20, .depth = 1}, done), local.shards[0].actual_digest);
            QCOMPARE(done, size);
            QCOMPARE(proxy.injected(), 2);
        }
        {
            // The object replaced between a cut and the resume: the resumed GET asks If-Match the
            // first answer's ETag, and the change is said as such, not hashed into a mismatch.
            m_s3->put(m_bucket, "changing/object", bytes_of(std::string(4 << 20, 'a')));
            QVERIFY(proxy.fault("mode=reset&count=1&method=GET&path=changing/object"));
            const Folder folder = Folder::open(url("changing"));
            const OpenedObject object = folder.open("object");
            bool replaced = false;
            try {
                (void)read_in_order(
                    *object.reader, object.size, {.chunk = 8u << 20, .depth = 1}, [&](const char*, std::size_t) {
                        if (!replaced) { // from another thread: this one is inside curl
                            std::thread([&] {
                                m_s3->put(m_bucket, "changing/object", bytes_of(std::string(4 << 20, 'b')));
                            }).join();
                            replaced = true;
                        }
                        return true;
                    });
                QFAIL("an object replaced while it was read was read to its end");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ProblemKind::remote_error);
                QVERIFY2(std::string(e.what()).find("changed while it was read") != std::string::npos, e.what());
            }
            QVERIFY(replaced);
        }
        {
            // A link that carries 3 MiB/s a connection, like a WAN link to a store: after the
            // probe (1 MiB chunks here, the 1st to the 8th) the consumer is seen waiting on the
            // connection, and the rest is read ahead on eight. One connection would take 9 s.
            QVERIFY(proxy.fault("mode=narrow&rate=3145728&count=-1&method=GET&path=big/rank0"));
            const int before = proxy.injected();
            QElapsedTimer timer;
            timer.start();
            uint64_t done = 0;
            QCOMPARE(read_through({.chunk = 1u << 20, .depth = 8}, done), local.shards[0].actual_digest);
            const double seconds = double(timer.elapsed()) / 1000;
            QCOMPARE(done, size);
            const int gets = proxy.injected() - before;
            QVERIFY2(gets > 8, std::to_string(gets).c_str()); // the stream, then a range a chunk
            QVERIFY2(seconds < 0.6 * double(size) / 3145728, std::to_string(seconds).c_str());
            QVERIFY(proxy.fault("mode=none"));
        }

        std::string rank0 = read_all(step / "rank0.safetensors");
        rank0[(uint64_t(8) << 20) * 2 + 12345] ^= 0x01; // in the third chunk
        m_s3->put(m_bucket, "big/rank0.safetensors", bytes_of(rank0));
        const VerifyReport flipped = verify_checkpoint(url("big"));
        QCOMPARE(flipped.shards[0].status, ShardStatus::hash_mismatch);

        const Folder folder = Folder::open(url("big"));
        const OpenedObject object = folder.open("rank0.safetensors");
        m_s3->remove(m_bucket, "big/rank0.safetensors");
        for (const int depth : {1, 4}) {
            try {
                (void)read_in_order(*object.reader, object.size, {.chunk = 8u << 20, .depth = depth},
                                    [](const char*, std::size_t) { return true; });
                QFAIL("reading an object deleted after the listing succeeded");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ProblemKind::missing_file);
                QVERIFY2(std::string(e.what()).find("rank0.safetensors") != std::string::npos, e.what());
            }
        }
    }

    // An object replaced after its folder was listed (same size, other bytes): every kind of read
    // asks for the listed ETag (If-Match), so a small read (through the block cache), a ranged
    // one (as a read widened to several connections makes) and the stream all say that it
    // changed; none reads the new bytes as the listed object's.
    void anObjectReplacedAfterTheListingIsSaidToHaveChanged()
    {
        m_s3->put(m_bucket, "replaced/object", bytes_of(std::string(3 << 20, 'a')));
        const Folder folder = Folder::open(url("replaced"));
        const OpenedObject object = folder.open("object");
        QCOMPARE(object.size, uint64_t(3) << 20);
        m_s3->put(m_bucket, "replaced/object", bytes_of(std::string(3 << 20, 'b')));
        const auto changed = [](const std::function<void()>& read) {
            try {
                read();
            } catch (const Error& e) {
                return e.kind() == ProblemKind::remote_error &&
                    std::string(e.what()).find("replaced/object") != std::string::npos &&
                    std::string(e.what()).find("changed while it was read") != std::string::npos;
            }
            return false;
        };
        std::vector<char> buffer(1 << 20);
        QVERIFY(changed([&] { (void)object.read(buffer.data(), 100, 5); })); // a block of the cache
        QVERIFY(changed([&] { (void)object.read(buffer.data(), buffer.size(), 1 << 20); })); // one range
        QVERIFY(changed([&] {
            (void)read_in_order(*object.reader, object.size, {.chunk = 1u << 20, .depth = 1},
                                [](const char*, std::size_t) { return true; });
        }));
        // Listed again, the object reads as it now is.
        const OpenedObject again = Folder::open(url("replaced")).open("object");
        QVERIFY(again.read(buffer.data(), 100, 5));
        QCOMPARE(buffer[0], 'b');

        // A store whose conditional reads misfire (412 to its own ETag, from the fault proxy): a
        // HEAD shows the object is the listed one, the read is asked again without the condition,
        // and the client asks no more; the answers' ETags still tell a replaced object.
        const auto env = s3test::server_env();
        s3test::FaultProxy proxy(env.at("SHARDSCOPE_S3_ENDPOINT"));
        QVERIFY(!proxy.endpoint().empty());
        qputenv("AWS_ENDPOINT_URL", proxy.endpoint().c_str());
        const auto restore =
            qScopeGuard([&] { qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str()); });
        QVERIFY(proxy.fault("mode=412&count=-1"));
        const OpenedObject misfiring = Folder::open(url("replaced")).open("object");
        QVERIFY(misfiring.read(buffer.data(), buffer.size(), 1 << 20));
        QCOMPARE(buffer[0], 'b');
        QCOMPARE(proxy.injected(), 1);
        uint64_t bytes = 0;
        QCOMPARE(read_in_order(*misfiring.reader, misfiring.size, {.chunk = 1u << 20, .depth = 1},
                               [&](const char*, std::size_t n) {
                                   bytes += n;
                                   return true;
                               })
                     .done,
                 misfiring.size);
        QCOMPARE(bytes, misfiring.size);
        QCOMPARE(proxy.injected(), 1);
        // Eight readers at once on a fresh listing all read. (A refusal that arrives after another
        // reader found the conditions misfire is asked again, not taken for the server's error;
        // whether a run interleaves so is up to the scheduler.)
        {
            const OpenedObject fresh = Folder::open(url("replaced")).open("object");
            std::atomic<int> read{0};
            std::vector<std::thread> readers;
            for (int r = 0; r < 8; ++r)
                readers.emplace_back([&, r] {
                    std::vector<char> part(384 << 10);
                    try {
                        if (fresh.read(part.data(), part.size(), uint64_t(r) * part.size()) && part[0] == 'b')
                            ++read;
                    } catch (const Error&) {
                    }
                });
            for (auto& t : readers)
                t.join();
            QCOMPARE(read.load(), 8);
            QVERIFY(proxy.injected() >= 2);
        }
        // A small object read whole (a root's `latest`) reads as it now is, longer or not.
        m_s3->put(m_bucket, "replaced/latest", bytes_of(std::string("global_step999")));
        const Folder listed = Folder::open(url("replaced"));
        m_s3->put(m_bucket, "replaced/latest", bytes_of(std::string("global_step1000")));
        QCOMPARE(listed.read_small("latest", 1024, "latest"), std::string("global_step1000"));

        m_s3->put(m_bucket, "replaced/object", bytes_of(std::string(3 << 20, 'c')));
        QVERIFY(changed([&] { (void)misfiring.read(buffer.data(), buffer.size(), 1 << 20); }));
        QVERIFY(changed([&] {
            (void)read_in_order(*misfiring.reader, misfiring.size, {.chunk = 1u << 20, .depth = 1},
                                [](const char*, std::size_t) { return true; });
        }));
    }

    void foreignFormatsReadByRanges()
    {
        // A safetensors index over two files, and a DCP folder.
        const fs::path hf = root() / "hf";
        fs::create_directories(hf);
        std::vector<float> w(4096), b(100);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = float(i) * 0.25f - 3.0f;
        for (std::size_t i = 0; i < b.size(); ++i)
            b[i] = float(i % 7);
        write_safetensors(hf / "model-00001-of-00002.safetensors",
                          {{{.name = "w", .dtype = "F32", .shape = {64, 64}}, bytes_of(w)}});
        write_safetensors(hf / "model-00002-of-00002.safetensors",
                          {{{.name = "b", .dtype = "F32", .shape = {100}}, bytes_of(b)}});
        std::ofstream(hf / "model.safetensors.index.json")
            << R"({"metadata":{"total_size":16784},"weight_map":{"w":"model-00001-of-00002.safetensors",)"
            << R"("b":"model-00002-of-00002.safetensors"}})";
        const fs::path dcp = root() / "dcp";
        write_dcp_checkpoint(dcp, "layer.weight", w);
        upload(hf, "hf");
        upload(dcp, "dcp");

        for (const auto& [local, prefix, format] :
             {std::tuple{hf, std::string("hf"), CheckpointFormat::safetensors_index},
              std::tuple{dcp, std::string("dcp"), CheckpointFormat::torch_dcp}}) {
            QCOMPARE(detect_format(url(prefix)).format, format);
            const VerifyReport remote = verify_checkpoint(url(prefix));
            QVERIFY2(remote.ok(), remote.problems.empty() ? "" : remote.problems[0].message.c_str());
            QCOMPARE(remote.shards.size(), verify_checkpoint(local).shards.size());
            const ContentReport a = inspect_content(local), r = inspect_content(url(prefix));
            QCOMPARE(r.tensors.size(), a.tensors.size());
            for (std::size_t t = 0; t < a.tensors.size(); ++t)
                QVERIFY(same_stats(a.tensors[t].stats, r.tensors[t].stats));
            QVERIFY(diff_checkpoints(local, url(prefix)).identical());
        }

        // Converted from the bucket to a local Hugging Face folder: the same values, bit for bit.
        ConvertOptions to_hf;
        to_hf.durable = false;
        const ConvertResult converted = convert_checkpoint(url("dcp"), root() / "dcp-as-hf", to_hf);
        QCOMPARE(converted.source.string(), "s3://" + m_bucket + "/dcp");
        QVERIFY(verify_checkpoint(root() / "dcp-as-hf").ok());
        QVERIFY(diff_checkpoints(dcp, root() / "dcp-as-hf").identical());

        // One object named by its URL: a single safetensors file.
        const DetectedFormat one = detect_format(url("hf/model-00002-of-00002.safetensors"));
        QCOMPARE(one.format, CheckpointFormat::safetensors);
        QCOMPARE(one.files, std::vector<std::string>{"model-00002-of-00002.safetensors"});
        QVERIFY(verify_checkpoint(url("hf/model-00002-of-00002.safetensors")).ok());
    }

    // torch.save checkpoints, which detection does not know, read by stats and diff where they
    // live as on a disk: one .pt file named by its URL, a folder with pytorch_model.bin, and one
    // with pytorch_model.bin.index.json over two files; in a bucket and on a web server.
    void torchSaveFilesAreReadWhereTheyLive()
    {
        std::vector<float> w(300), t(64);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = float(i) * 0.5f - 20.0f;
        for (std::size_t i = 0; i < t.size(); ++i)
            t[i] = float(i % 5) - 2.0f;
        const fs::path pt = root() / "pt";
        fixtures::write_file(pt / "one.pt", float_archive("one", "w", w));
        fixtures::write_file(pt / "bin" / "pytorch_model.bin", float_archive("archive", "w", w));
        fixtures::write_file(pt / "idx" / "pytorch_model-00001-of-00002.bin", float_archive("archive", "w", w));
        fixtures::write_file(pt / "idx" / "pytorch_model-00002-of-00002.bin", float_archive("archive", "t", t));
        fixtures::write_file(pt / "idx" / "pytorch_model.bin.index.json",
                             R"({"metadata": {}, "weight_map": {"w": "pytorch_model-00001-of-00002.bin",
                                 "t": "pytorch_model-00002-of-00002.bin"}})");
        upload(pt, "pt");
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/pt/";
        for (const auto& [name, format, tensors] :
             {std::tuple{"one.pt", "torch", 1}, std::tuple{"bin", "torch", 1}, std::tuple{"idx", "torch-index", 2},
              std::tuple{"idx/pytorch_model.bin.index.json", "torch-index", 2}}) {
            const ContentReport here = inspect_content(pt / name);
            QCOMPARE(here.format, std::string(format));
            QCOMPARE(here.tensors.size(), std::size_t(tensors));
            for (const Location& there : {url(std::string("pt/") + name), parse_location(base + name)}) {
                const ContentReport remote = inspect_content(there);
                QCOMPARE(remote.format, here.format);
                QCOMPARE(remote.tensors.size(), here.tensors.size());
                for (std::size_t i = 0; i < here.tensors.size(); ++i)
                    QVERIFY2(remote.tensors[i].name == here.tensors[i].name &&
                                 same_stats(remote.tensors[i].stats, here.tensors[i].stats),
                             (storage::to_string(there) + ": " + remote.tensors[i].name).c_str());
                QVERIFY(diff_checkpoints(pt / name, there).identical());
            }
        }
    }

    void objectUrlsAreReadWithTheirFolder()
    {
        // An index or DCP metadata object named by its URL: the files it names are beside it.
        const Location index = url("hf/model.safetensors.index.json");
        QCOMPARE(detect_format(index).format, CheckpointFormat::safetensors_index);
        const VerifyReport hf = verify_checkpoint(index);
        QVERIFY2(hf.ok(), hf.problems.empty() ? "" : hf.problems[0].message.c_str());
        QCOMPARE(hf.shards.size(), std::size_t(2));
        const VerifyReport dcp = verify_checkpoint(url("dcp/.metadata"));
        QVERIFY2(dcp.ok(), dcp.problems.empty() ? "" : dcp.problems[0].message.c_str());
    }

    void aRankFileStandsForItsStep()
    {
        // A DeepSpeed or Megatron rank file named instead of its step reads the step of every
        // rank, on a disk, in a bucket and on a web server alike: never the one file alone.
        const fs::path ds = root() / "rankfile" / "global_step3";
        write_deepspeed_step(ds, {1, 2, 3, 4});
        fs::copy_file(ds / "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                      ds / "zero_pp_rank_1_mp_rank_00_optim_states.pt");
        const fs::path mg = root() / "rankfile" / "iter_0000020";
        for (const char* rank : {"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"})
            write_megatron_iteration(mg / rank, {1, 2, 3, 4});
        for (const char* rank : {"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"})
            fs::rename(mg / rank / "mp_rank_00" / "model_optim_rng.pt", mg / rank / "model_optim_rng.pt");
        upload(root() / "rankfile", "rankfile");
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string http = "http://127.0.0.1:" + std::to_string(server.port()) + "/rankfile/";
        for (const auto& [step, file, shards] : {std::tuple<std::string, std::string, std::size_t>{
                                                     "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt", 3},
                                                 {"iter_0000020", "mp_rank_01_001/model_optim_rng.pt", 4}}) {
            const VerifyReport whole = verify_checkpoint(root() / "rankfile" / step);
            QVERIFY(whole.ok());
            QCOMPARE(whole.shards.size(), shards);
            for (const Location& there :
                 {Location(root() / "rankfile" / step / file), url("rankfile/" + step + "/" + file),
                  parse_location(http + step + "/" + file)}) {
                const VerifyReport read = verify_checkpoint(there);
                QVERIFY2(read.ok(),
                         (storage::to_string(there) + ": " + (read.problems.empty() ? "" : read.problems[0].message))
                             .c_str());
                QCOMPARE(read.format, whole.format);
                QCOMPARE(read.shards.size(), shards);
            }
        }
        // Named from inside its rank folder, the rank file's step is above the working directory.
        const QString before = QDir::currentPath();
        QVERIFY(QDir::setCurrent(QString::fromStdString((mg / "mp_rank_01_001").string())));
        const VerifyReport inside = verify_checkpoint(Location(fs::path("model_optim_rng.pt")));
        QVERIFY(QDir::setCurrent(before));
        QVERIFY(inside.ok());
        QCOMPARE(inside.shards.size(), std::size_t(4));
        QCOMPARE(levels_to_its_checkpoint("g/layer_01-model_00-model_states.pt"), 1); // the pipeline engine's
        QCOMPARE(levels_to_its_checkpoint("g/model_optim_rng.pt"), 0); // not in a rank folder
        QCOMPARE(levels_to_its_checkpoint("g/rank0.safetensors"), 0);
    }

    void anOutageIsNotAFinding()
    {
        // Every read of a rank's object answers 503 SlowDown: after the client's retries the
        // command stops, exit 2, naming the object; it does not call the checkpoint broken. It
        // stops at the first object given up: the others being read are cancelled and no more
        // are begun (the retries paid once, not once for each of the 24 ranks).
        const auto env = s3test::server_env();
        s3test::FaultProxy proxy(env.at("SHARDSCOPE_S3_ENDPOINT"));
        QVERIFY(!proxy.endpoint().empty());
        const fs::path step = root() / "outage";
        constexpr int kRanks = 3 * storage::kRemoteReadsAtOnce;
        save_sharded(make_demo_state(10, 4000, kRanks, ParamDtype::BF16), step, kRanks);
        upload(step, "outage");
        QVERIFY(proxy.fault("mode=503&count=-1&method=GET&path=outage/rank"));
        qputenv("AWS_ENDPOINT_URL", proxy.endpoint().c_str());
        const auto restore =
            qScopeGuard([&] { qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str()); });
        try {
            (void)verify_checkpoint(url("outage"));
            QFAIL("a server that keeps failing must stop verify");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::remote_error);
            QVERIFY2(std::string(e.what()).find("/outage/rank") != std::string::npos &&
                         std::string(e.what()).find(".safetensors") != std::string::npos,
                     e.what());
        }
        const int attempts = storage::S3Config{}.retry.attempts;
        QVERIFY2(proxy.injected() <= storage::kRemoteReadsAtOnce * attempts,
                 qPrintable(QStringLiteral("%1 GETs failed").arg(proxy.injected())));
        const QString where = QString::fromStdString("s3://" + m_bucket + "/outage");
        for (const char* command : {"verify", "stats"}) {
            const testutil::Run run =
                testutil::shardctl({QString::fromLatin1(command), where, QStringLiteral("--json")});
            QCOMPARE(run.exit_code, 2);
            QCOMPARE(run.json()["error"]["kind"].get<std::string>(), std::string("remote_error"));
            QCOMPARE(run.err.count('\n'), 1);
        }
    }

    // A server that holds every answer: cancelling the verify (the app's Cancel, or closing it)
    // stops the listing that waits on it within a second or so, not after the stall timeout and
    // the retries; and the stats scan the same.
    void aCancelStopsARequestThatHangs()
    {
        const auto env = s3test::server_env();
        s3test::FaultProxy proxy(env.at("SHARDSCOPE_S3_ENDPOINT"));
        QVERIFY(!proxy.endpoint().empty());
        QVERIFY(proxy.fault("mode=slow&seconds=60&count=-1"));
        qputenv("AWS_ENDPOINT_URL", proxy.endpoint().c_str());
        const auto restore = qScopeGuard([&] {
            qputenv("AWS_ENDPOINT_URL", env.at("SHARDSCOPE_S3_ENDPOINT").c_str());
            proxy.fault("mode=none");
        });
        for (const bool content : {false, true}) {
            std::atomic<bool> cancel{false};
            std::thread user([&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
                cancel = true;
            });
            QElapsedTimer timer;
            timer.start();
            try {
                if (content)
                    (void)inspect_content(url("run"), ContentOptions{.cancel = &cancel});
                else
                    (void)verify_checkpoint(url("run"), VerifyOptions{.cancel = &cancel});
                QFAIL("a request that is held answered");
            } catch (const Error& e) {
                QVERIFY2(e.kind() == ProblemKind::cancelled &&
                             std::string(e.what()).find("cancelled") != std::string::npos,
                         e.what());
            }
            user.join();
            QVERIFY2(timer.elapsed() < 5000, std::to_string(timer.elapsed()).c_str());
        }
    }

    void nothingThereIsOneSentence()
    {
        try {
            (void)detect_format(url("no-such-prefix"));
            QFAIL("an empty prefix must be refused");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cannot_open);
            QVERIFY(std::string(e.what()).find("s3://" + m_bucket + "/no-such-prefix") != std::string::npos);
        }
    }

    // A prefix that holds no checkpoint, next to one: the one a user most likely meant is offered,
    // a prefix down (the run's folder named instead of its step) or up (a folder in a step), as
    // for a local folder; a web server, which cannot list, only up. Never a local folder of the
    // URL's text ("s3:/bucket/…" in the working directory).
    void aCheckpointNextToThePrefixIsOffered()
    {
        const fs::path near = root() / "near";
        save_sharded(make_demo_state(3, 1000, 2, ParamDtype::BF16), near / "run" / "step-00000004", 4);
        fixtures::write_file(near / "run" / "notes" / "a.txt", "notes");
        fixtures::write_file(near / "run" / "step-00000004" / "extra" / "b.txt", "extra");
        upload(near, "near");
        const auto offered = [](const Location& where) {
            const auto nearby = nearby_checkpoint(where);
            return nearby ? storage::to_string(nearby->location) + (nearby->parent ? " up" : " down") : std::string();
        };
        const std::string bucket = "s3://" + m_bucket + "/near/run";
        QCOMPARE(offered(url("near/run")), bucket + "/step-00000004 down");
        QCOMPARE(offered(url("near/run/step-00000004/extra")), bucket + "/step-00000004 up");
        QCOMPARE(offered(url("near/run/notes")), std::string());
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string web = "http://127.0.0.1:" + std::to_string(server.port()) + "/near/run/step-00000004";
        QCOMPARE(offered(parse_location(web + "/extra")), web + " up");

        // The command line says it, after the sentence that nothing is there.
        // A local checkpoint where the URL's text would lead as a path, sorted first: not offered.
        const auto local_decoy = qScopeGuard([] { fs::remove_all("s3:"); });
        save_sharded(make_demo_state(3, 1000, 2, ParamDtype::BF16),
                     fs::path("s3:") / m_bucket / "near" / "run" / "step-00000001", 1);
        const testutil::Run run = testutil::shardctl({QStringLiteral("verify"), QString::fromStdString(bucket)});
        QCOMPARE(run.exit_code, 1);
        QVERIFY2(run.err.contains(QByteArray::fromStdString("did you mean the folder " + bucket +
                                                            "/step-00000004 inside it (a shardscope checkpoint)? "
                                                            "shardctl verify " +
                                                            bucket + "/step-00000004\n")),
                 run.err.constData());
        // Named with the endpoint it was read from: the command it suggests reads the same server.
        const std::string endpoint = qgetenv("AWS_ENDPOINT_URL").toStdString();
        const testutil::Run named =
            testutil::shardctl({QStringLiteral("verify"), QString::fromStdString(bucket), QStringLiteral("--endpoint"),
                                QString::fromStdString(endpoint)});
        QVERIFY2(named.err.contains(QByteArray::fromStdString("? shardctl verify " + bucket +
                                                              "/step-00000004 --endpoint " + endpoint + "\n")),
                 named.err.constData());
    }

    void httpServersAnsweringRangesAreRead()
    {
        // The folders the tests above wrote, now served as a model host serves files.
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
        const Location index = parse_location(base + "hf/model.safetensors.index.json");
        QCOMPARE(detect_format(index).format, CheckpointFormat::safetensors_index);
        const VerifyReport hf = verify_checkpoint(index);
        QVERIFY2(hf.ok(), hf.problems.empty() ? "" : hf.problems[0].message.c_str());
        QCOMPARE(hf.shards.size(), std::size_t(2));
        QVERIFY(diff_checkpoints(root() / "hf", index).identical());

        // A folder URL: found by its entry files; a root's `latest` followed to its step.
        const VerifyReport run = verify_checkpoint(parse_location(base + "run"));
        QVERIFY2(run.ok(), run.problems.empty() ? "" : run.problems[0].message.c_str());
        QCOMPARE(run.dir.string(), base + "run/step-00000005");
        QCOMPARE(run.shards.size(), std::size_t(3));

        // info reads the index and each file's header: a handful of requests, not the data.
        testutil::RangeServer counted(root());
        const QString url = QString::fromStdString("http://127.0.0.1:" + std::to_string(counted.port()) +
                                                   "/hf/model.safetensors.index.json");
        const testutil::Run info = testutil::shardctl({QStringLiteral("info"), url, QStringLiteral("--json")});
        QCOMPARE(info.exit_code, 0);
        QCOMPARE(info.json()["format"].get<std::string>(), std::string("safetensors-index"));
        const QList<QByteArray> requests = requests_of("http://127.0.0.1:" + std::to_string(counted.port()));
        // HEAD + GET of the index, then HEAD + one ranged GET of each data file's header.
        QVERIFY2(requests.size() <= 6, requests.join('\n').constData());
        for (const QByteArray& r : requests)
            QVERIFY2(!r.startsWith("GET") || r.contains("index.json") || r.contains("bytes=0-"), r.constData());
    }

    void aBigIndexIsReadWithAHandfulOfRequestsAFile()
    {
        // 20,000 tensors over 50 files, as a large model's index lists them: info asks for the
        // index, then each file's size and header, never a tensor's data.
        constexpr std::size_t kTensors = 20000, kFiles = 50;
        bigforeign::write_index(root() / "big", kTensors, kFiles);
        testutil::RangeServer counted(root());
        QVERIFY(counted.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(counted.port());
        const testutil::Run info = testutil::shardctl(
            {QStringLiteral("info"), QString::fromStdString(base + "/big/model.safetensors.index.json"),
             QStringLiteral("--json")});
        QVERIFY2(info.exit_code == 0, info.err.constData());
        QCOMPARE(info.json()["tensors"].size(), kTensors);
        const QList<QByteArray> requests = requests_of(base);
        // The index: HEAD + GET; each file: HEAD + one ranged GET of its first bytes.
        QVERIFY2(requests.size() <= 2 + 2 * int(kFiles), QByteArray::number(requests.size()).constData());
        std::map<QByteArray, int> gets;
        for (const QByteArray& r : requests)
            if (r.startsWith("GET ") && r.contains(".safetensors ")) {
                QVERIFY2(r.contains("bytes=0-"), r.constData());
                ++gets[r.split(' ').at(1)];
            }
        QCOMPARE(gets.size(), kFiles);
        for (const auto& [file, n] : gets)
            QVERIFY2(n == 1, file.constData());
    }

    // 100,000 tensors in a bucket, over 4 files as a large model's index lists them: `info` lists
    // the prefix, reads the index and each file's header, and nothing else. Requests are counted
    // by a proxy in front of the gateway.
    void aHundredThousandTensorIndexInABucketInAHandfulOfRequests()
    {
        constexpr std::size_t kTensors = 100000, kFiles = 4;
        bigforeign::write_index(root() / "big100k", kTensors, kFiles);
        upload(root() / "big100k", "big100k");
        const s3test::FaultProxy proxy(s3test::server_config().endpoint);
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const int before = proxy.forwarded();
        const QString where = QString::fromStdString("s3://" + m_bucket + "/big100k");
        QElapsedTimer timer;
        timer.start();
        const testutil::Run info =
            testutil::shardctl({QStringLiteral("info"), where, QStringLiteral("--endpoint"),
                                QString::fromStdString(proxy.endpoint()), QStringLiteral("--json")});
        const qint64 ms = timer.elapsed();
        QVERIFY2(info.exit_code == 0, info.err.constData());
        QCOMPARE(info.json()["tensor_count"].get<std::size_t>(), kTensors);
        const int requests = proxy.forwarded() - before;
        // One listing, the index, and per file at most two ranged GETs of its header (the first
        // 64 KiB tells the header's length; a 2.6 MB header needs one more).
        qInfo("info of a %zu-tensor index in a bucket: %d requests, %lld ms", kTensors, requests, ms);
        QVERIFY2(requests >= 1 + 1 + int(kFiles) && requests <= 2 + 2 * int(kFiles), QByteArray::number(requests));
    }

    // A torch.save file of 2000 small tensors (a DeepSpeed step's model file) and a DCP of as many
    // items: every zip entry is a few small reads (local header, name, data), which over a bucket
    // must not each be a GET. verify (every entry's CRC) and stats (every value) of each in a
    // bounded number of requests: one listing, and a few per file and per 256 KiB read.
    void manySmallTensorsInAFewRequests()
    {
        constexpr std::size_t kTensors = 2000;
        std::vector<fixtures::TorchTensor> tensors;
        for (std::size_t i = 0; i < kTensors; ++i)
            tensors.push_back({"module.layers." + std::to_string(i) + ".weight", {4, 4}});
        const fs::path ds = root() / "ds-many" / "global_step1";
        fixtures::write_file(ds / "mp_rank_00_model_states.pt",
                             fixtures::torch_archive("mp_rank_00_model_states", tensors));
        fixtures::write_file(root() / "ds-many" / "latest", "global_step1");
        upload(root() / "ds-many", "ds-many");
        std::vector<fixtures::DcpTensorSpec> items;
        for (std::size_t i = 0; i < kTensors; ++i)
            items.push_back({"layers." + std::to_string(i) + ".weight", {4, 4}, {{{0, 0}, {4, 4}, "__0_0.distcp"}}});
        std::string distcp;
        for (auto& t : items) {
            const std::string archive = fixtures::torch_tensor_archive({4, 4});
            t.chunks[0].offset = distcp.size();
            t.chunks[0].length = archive.size();
            distcp += archive;
        }
        fixtures::write_file(root() / "dcp-many" / ".metadata", fixtures::dcp_metadata(items));
        fixtures::write_file(root() / "dcp-many" / "__0_0.distcp", distcp);
        upload(root() / "dcp-many", "dcp-many");

        const s3test::FaultProxy proxy(s3test::server_config().endpoint);
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        for (const char* prefix : {"ds-many", "dcp-many"})
            for (const char* command : {"verify", "stats"}) {
                const fs::path local = root() / prefix;
                uint64_t bytes = 0;
                for (const auto& f : fs::recursive_directory_iterator(local))
                    if (f.is_regular_file())
                        bytes += f.file_size();
                const int before = proxy.forwarded();
                const testutil::Run run = testutil::shardctl(
                    {QString::fromLatin1(command), QString::fromStdString("s3://" + m_bucket + "/" + prefix),
                     QStringLiteral("--endpoint"), QString::fromStdString(proxy.endpoint()), QStringLiteral("--json")});
                QVERIFY2(run.exit_code == 0, run.err.constData());
                const int requests = proxy.forwarded() - before;
                const int bound = 2 + 4 * 2 + 2 * int(bytes / (256 << 10) + 1) * 2;
                qInfo("%s of %s (%zu tensors, %llu bytes) in a bucket: %d requests", command, prefix, kTensors,
                      static_cast<unsigned long long>(bytes), requests);
                QVERIFY2(requests <= bound,
                         (std::string(command) + " " + prefix + ": " + std::to_string(requests) +
                          " requests, more than " + std::to_string(bound))
                             .c_str());
            }
    }

    // HTTP cannot list a folder: the files a format has beside its entry file are asked for by
    // name. A Megatron torch_dist iteration's metadata.json, common.pt and integrity.json are
    // checked as locally (a changed common.pt fails over HTTP too), and DeepSpeed's rank files and
    // a legacy Megatron iteration's rank folders are asked for rank by rank, so that one missing
    // among them is named.
    void httpFindsTheFilesAFormatImplies()
    {
        const fs::path iter = fixtures::write_torch_dist(root() / "tdist");
        write_deepspeed_step(root() / "ds-gap" / "global_step3", {1, 2, 3, 4});
        fs::copy_file(root() / "ds-gap" / "global_step3" / "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                      root() / "ds-gap" / "global_step3" / "zero_pp_rank_2_mp_rank_00_optim_states.pt");
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/";

        const VerifyReport local = verify_checkpoint(iter);
        const VerifyReport remote = verify_checkpoint(parse_location(base + "tdist/iter_0000120"));
        QVERIFY(local.ok());
        QVERIFY2(remote.ok(), remote.problems.empty() ? "" : remote.problems[0].message.c_str());
        QCOMPARE(remote.shards.size(), local.shards.size());
        std::string common = fixtures::read_file(iter / "common.pt");
        common[common.size() / 2] = char(common[common.size() / 2] ^ 1);
        fixtures::write_file(iter / "common.pt", common);
        const VerifyReport changed = verify_checkpoint(parse_location(base + "tdist/iter_0000120"));
        QVERIFY(!changed.ok());
        QVERIFY2(changed.problems[0].message.find("common.pt") != std::string::npos,
                 changed.problems[0].message.c_str());

        // A Megatron iteration of per-rank folders (tensor-parallel 2 x pipeline 2) and its root,
        // read through the tracker file: the rank folders are asked for by Megatron's names, and
        // a stage missing among present ranks is named; without stages, mp_rank_TT alone.
        const fs::path mg = root() / "mg-http" / "iter_0000020";
        write_megatron_iteration(mg, {1, 2, 3, 4});
        for (const char* rank : {"mp_rank_00_000", "mp_rank_01_000", "mp_rank_01_001"}) {
            fs::create_directories(mg / rank);
            fs::copy_file(mg / "mp_rank_00" / "model_optim_rng.pt", mg / rank / "model_optim_rng.pt");
        }
        fs::rename(mg / "mp_rank_00", root() / "mg-http-tp-only");
        fixtures::write_file(root() / "mg-http" / "latest_checkpointed_iteration.txt", "20");
        for (const char* url : {"mg-http", "mg-http/iter_0000020"}) {
            const VerifyReport stage = verify_checkpoint(parse_location(base + url));
            QCOMPARE(stage.format, std::string("megatron"));
            QCOMPARE(stage.shards.size(), std::size_t(4));
            QVERIFY(!stage.ok());
            QVERIFY2(stage.problems[0].message.find("mp_rank_00_001/model_optim_rng.pt") != std::string::npos,
                     stage.problems[0].message.c_str());
        }
        fs::create_directories(mg / "mp_rank_00_001");
        fs::copy_file(mg / "mp_rank_00_000" / "model_optim_rng.pt", mg / "mp_rank_00_001" / "model_optim_rng.pt");
        const VerifyReport whole = verify_checkpoint(parse_location(base + "mg-http"));
        QVERIFY2(whole.ok(), whole.problems.empty() ? "" : whole.problems[0].message.c_str());
        QCOMPARE(whole.shards.size(), verify_checkpoint(root() / "mg-http").shards.size());
        // A tensor-parallel rank missing on the first stage only: the last stage's ranks are
        // followed too, so that the one present beside the gap is not said to be missing.
        fs::rename(mg / "mp_rank_01_000", root() / "mg-http-gap");
        const VerifyReport gap_here = verify_checkpoint(root() / "mg-http");
        const VerifyReport gap = verify_checkpoint(parse_location(base + "mg-http"));
        QVERIFY(!gap.ok() && !gap_here.ok());
        QCOMPARE(gap.problems.size(), gap_here.problems.size());
        QVERIFY2(gap.problems[0].message.find("mp_rank_01_000/model_optim_rng.pt") != std::string::npos &&
                     gap.problems[0].message.find("mp_rank_01_001") == std::string::npos,
                 gap.problems[0].message.c_str());
        fs::rename(root() / "mg-http-gap", mg / "mp_rank_01_000");
        // Rank (0, 0) missing: named as locally, not taken for an iteration with no rank folders.
        fs::rename(mg / "mp_rank_00_000", root() / "mg-http-first");
        const VerifyReport first = verify_checkpoint(parse_location(base + "mg-http"));
        QVERIFY(!first.ok());
        QVERIFY2(first.problems[0].message.find("mp_rank_00_000/model_optim_rng.pt: missing") != std::string::npos,
                 first.problems[0].message.c_str());
        fs::rename(root() / "mg-http-first", mg / "mp_rank_00_000");
        // Tensor-parallel size 1, two stages, stage 0 lost: named too.
        const fs::path staged = root() / "mg-stages" / "iter_0000010";
        fs::create_directories(staged / "mp_rank_00_001");
        fs::copy_file(mg / "mp_rank_00_000" / "model_optim_rng.pt", staged / "mp_rank_00_001" / "model_optim_rng.pt");
        const VerifyReport stage_here = verify_checkpoint(staged);
        const VerifyReport stage_there = verify_checkpoint(parse_location(base + "mg-stages/iter_0000010"));
        QVERIFY(!stage_here.ok() && !stage_there.ok());
        QCOMPARE(stage_there.shards.size(), stage_here.shards.size());
        QVERIFY2(stage_there.problems[0].message.find("mp_rank_00_000/model_optim_rng.pt: missing") !=
                     std::string::npos,
                 stage_there.problems[0].message.c_str());
        const fs::path tp_only = root() / "mg-tp" / "iter_0000010";
        for (const char* rank : {"mp_rank_00", "mp_rank_01"}) {
            fs::create_directories(tp_only / rank);
            fs::copy_file(root() / "mg-http-tp-only" / "model_optim_rng.pt", tp_only / rank / "model_optim_rng.pt");
        }
        const VerifyReport tp = verify_checkpoint(parse_location(base + "mg-tp/iter_0000010"));
        QVERIFY2(tp.ok(), tp.problems.empty() ? "" : tp.problems[0].message.c_str());
        QCOMPARE(tp.shards.size(), std::size_t(2));

        // The step, the root whose `latest` names it (no listing shows its global_step folder),
        // and that `latest` named as a file.
        fixtures::write_file(root() / "ds-gap" / "latest", "global_step3");
        for (const char* url : {"ds-gap/global_step3", "ds-gap", "ds-gap/latest"}) {
            const VerifyReport gap = verify_checkpoint(parse_location(base + url));
            QCOMPARE(gap.format, std::string("deepspeed"));
            QVERIFY(!gap.ok());
            QCOMPARE(int(gap.problems[0].kind), int(ProblemKind::missing_shard));
            QVERIFY2(gap.problems[0].message.find("zero_pp_rank_1_mp_rank_00_optim_states.pt") != std::string::npos,
                     gap.problems[0].message.c_str());
        }
        // ZeRO rank 0's optimizer file missing, rank 1's there: named missing, never a step whose
        // optimizer state is simply absent (which verified as safe).
        const fs::path ds_first = root() / "ds-first" / "global_step3";
        write_deepspeed_step(ds_first, {1, 2, 3, 4});
        fs::rename(ds_first / "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                   ds_first / "zero_pp_rank_1_mp_rank_00_optim_states.pt");
        const VerifyReport ds_here = verify_checkpoint(ds_first);
        const VerifyReport ds_there = verify_checkpoint(parse_location(base + "ds-first/global_step3"));
        QVERIFY(!ds_here.ok() && !ds_there.ok());
        QCOMPARE(ds_there.shards.size(), ds_here.shards.size());
        QCOMPARE(int(ds_there.problems[0].kind), int(ProblemKind::missing_shard));
        QVERIFY2(ds_there.problems[0].message.find("zero_pp_rank_0_mp_rank_00_optim_states.pt: missing") !=
                     std::string::npos,
                 ds_there.problems[0].message.c_str());

        // The pipeline engine's steps: a layer file per layer (and tensor slice), indices skipping
        // the layers without state. Read over HTTP as locally: the same files, the same findings.
        const auto pipeline_step = [&](const fs::path& step, int slices, const std::vector<std::string>& layers) {
            for (int m = 0; m < std::max(slices, 1); ++m) {
                const std::string name = "mp_rank_0" + std::to_string(m) + "_model_states";
                fixtures::write_file(step / (name + ".pt"), fixtures::torch_archive(name, {{"module.step", {1}}}));
            }
            for (const std::string& layer : layers)
                fixtures::write_file(step / (layer + "-model_states.pt"),
                                     fixtures::torch_archive(layer, {{"weight", {2, 2}}}));
        };
        // Two slices; layer 2 has no state, and layers 5-6 none either, past which layer 7 does;
        // layer 3 lost its slice 0, layer 1 its slice 1.
        pipeline_step(root() / "ds-pipe" / "global_step4", 2,
                      {"layer_00-model_00", "layer_00-model_01", "layer_01-model_00", "layer_03-model_01",
                       "layer_04-model_00", "layer_04-model_01", "layer_07-model_00", "layer_07-model_01"});
        // No tensor slices: the names carry none, layer 0 has no state.
        pipeline_step(root() / "ds-pipe-plain" / "global_step1", 0, {"layer_01", "layer_02", "layer_04"});
        // The first stage's mp_rank file lost: the layers still show the step, and its loss is named.
        pipeline_step(root() / "ds-pipe-lost" / "global_step2", 2, {"layer_00-model_00", "layer_00-model_01"});
        fs::remove(root() / "ds-pipe-lost" / "global_step2" / "mp_rank_00_model_states.pt");
        for (const char* step : {"ds-pipe/global_step4", "ds-pipe-plain/global_step1", "ds-pipe-lost/global_step2"}) {
            const VerifyReport here = verify_checkpoint(root() / step);
            const VerifyReport there = verify_checkpoint(parse_location(base + step));
            QCOMPARE(there.format, std::string("deepspeed"));
            QCOMPARE(there.shards.size(), here.shards.size());
            QCOMPARE(there.problems.size(), here.problems.size());
            for (std::size_t i = 0; i < here.problems.size(); ++i) {
                std::string expected = here.problems[i].message;
                const std::string local = (root() / step).string();
                expected.replace(expected.find(local), local.size(), base + step);
                QCOMPARE(there.problems[i].message, expected);
            }
        }
        const VerifyReport gaps = verify_checkpoint(parse_location(base + "ds-pipe/global_step4"));
        QCOMPARE(gaps.shards.size(), std::size_t(2 + 5 * 2)); // two missing among them
        QCOMPARE(gaps.problems.size(), std::size_t(2));
        QVERIFY(verify_checkpoint(parse_location(base + "ds-pipe-plain/global_step1")).ok());
        const VerifyReport lost = verify_checkpoint(parse_location(base + "ds-pipe-lost/global_step2"));
        QVERIFY2(!lost.problems.empty() &&
                     lost.problems[0].message.find("mp_rank_00_model_states.pt") != std::string::npos,
                 lost.problems.empty() ? "no problem" : lost.problems[0].message.c_str());
    }

    // The command line's mirror on the bucket: `train --mirror s3://…` uploads every kept step,
    // `status` says so, and a run whose local steps are gone resumes from the bucket. Behind a
    // store that answers every PUT with 503 the run still ends well, warned, and no key appears in
    // anything it prints.
    void trainMirrorsToTheBucketFromTheCommandLine()
    {
        fs::path run = root() / "cli-run";
        QString mirror = QString::fromStdString("s3://" + m_bucket + "/cli-run");
        auto train = [&](int steps, const QStringList& extra) {
            return testutil::shardctl(QStringList{QStringLiteral("train"), QStringLiteral("--root"), testutil::qs(run),
                                                  QStringLiteral("--steps"), QString::number(steps),
                                                  QStringLiteral("--save-every"), QStringLiteral("3"),
                                                  QStringLiteral("--world-size"), QStringLiteral("2"),
                                                  QStringLiteral("--numel"), QStringLiteral("60000"),
                                                  QStringLiteral("--mirror"), mirror, QStringLiteral("--json")} +
                                      extra);
        };
        testutil::Run first = train(6, {});
        QVERIFY2(first.exit_code == 0, first.err.constData());
        QVERIFY(!m_s3->list(m_bucket, "cli-run/step-00000006/manifest.json", 10).empty());
        QVERIFY(!m_s3->list(m_bucket, "cli-run/latest", 10).empty());
        const testutil::Run status = testutil::shardctl({QStringLiteral("status"), testutil::qs(run),
                                                         QStringLiteral("--mirror"), mirror, QStringLiteral("--json")});
        QVERIFY2(status.exit_code == 0, status.err.constData());
        std::string uploads;
        const nlohmann::json steps = status.json()["steps"]; // a copy: the parsed object is a temporary
        for (const auto& step : steps)
            uploads += step["name"].get<std::string>() + ": " + step.value("upload", std::string("?")) + "; ";
        QVERIFY2(uploads.find("step-00000006: uploaded") != std::string::npos, uploads.c_str());

        fs::remove_all(run / "step-00000006"); // the local copy lost: the bucket's is resumed from
        fs::remove_all(run / "step-00000003");
        const testutil::Run resumed = train(9, {QStringLiteral("--resume")});
        QVERIFY2(resumed.exit_code == 0, resumed.err.constData());
        QCOMPARE(resumed.json()["resumed_from"]["step"].get<int>(), 6);
        QCOMPARE(resumed.json()["resumed_from"]["from_mirror"].get<bool>(), true);
        // A new root beside that mirror, without --resume, would begin a second run in it: refused
        // naming the mirror, and the new root not created.
        run = root() / "cli-run-beside";
        const testutil::Run beside = train(3, {});
        QCOMPARE(beside.exit_code, 2);
        QVERIFY2(beside.json()["error"]["message"].get<std::string>().starts_with(
                     "s3://" + m_bucket + "/cli-run (--mirror) already holds checkpoints of a run"),
                 beside.err.constData());
        QVERIFY(!fs::exists(run));

        const s3test::FaultProxy proxy(s3test::server_config().endpoint);
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(proxy.fault("mode=503&count=-1&method=PUT"));
        run = root() / "cli-run-503";
        mirror = QString::fromStdString("s3://" + m_bucket + "/cli-run-503");
        const testutil::Run refused =
            train(3, {QStringLiteral("--endpoint"), QString::fromStdString(proxy.endpoint())});
        // The mirror failing never stops training: every step trained and saved locally, exit 3
        // saying the mirror does not hold what it should.
        QVERIFY2(refused.exit_code == 3, refused.err.constData());
        QCOMPARE(refused.json()["steps"].get<int>(), 3);
        QCOMPARE(refused.json()["mirror"]["complete"].get<bool>(), false);
        QVERIFY2(refused.err.contains("503"), refused.err.constData());
        for (const char* key : {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"}) {
            const QByteArray secret = qgetenv(key);
            QVERIFY(!secret.isEmpty());
            QVERIFY(!refused.out.contains(secret) && !refused.err.contains(secret));
            QVERIFY(!first.out.contains(secret) && !first.err.contains(secret));
        }
    }

    void folderUrlsWithDotsAndEscapes()
    {
        // A folder whose name has a dot, and one whose name needs escaping in a URL.
        fs::copy(root() / "hf", root() / "Model-3.1-8B", fs::copy_options::recursive);
        fs::copy(root() / "hf", root() / "my model", fs::copy_options::recursive);
        testutil::RangeServer server(root());
        QVERIFY(server.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
        for (const std::string& folder : {base + "Model-3.1-8B", base + "my%20model/model.safetensors.index.json"}) {
            const VerifyReport report = verify_checkpoint(parse_location(folder));
            QVERIFY2(report.ok(),
                     (folder + ": " + (report.problems.empty() ? "" : report.problems[0].message)).c_str());
            QCOMPARE(report.shards.size(), std::size_t(2));
        }
    }

    void tlsIsCheckedByDefault()
    {
        QTemporaryDir keys;
        const QString cert = keys.filePath(QStringLiteral("cert.pem")), key = keys.filePath(QStringLiteral("key.pem"));
        QVERIFY(testutil::self_signed_certificate(cert, key));
        testutil::RangeServer server(root(), cert, key);
        QVERIFY(server.port() > 0);
        const QString url = QString::fromStdString("https://127.0.0.1:" + std::to_string(server.port()) +
                                                   "/hf/model.safetensors.index.json");
        const testutil::Run run = testutil::shardctl({QStringLiteral("verify"), url, QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 2);
        QVERIFY2(run.err.contains(url.left(url.indexOf(QStringLiteral("/hf"))).toUtf8()), run.err.constData());
        // Said as it is, at once: asking again would meet the same certificate.
        QVERIFY2(run.err.contains("the server's TLS certificate is not trusted") &&
                     run.err.contains("--no-verify-tls") && !run.err.contains("attempts"),
                 run.err.constData());
        QCOMPARE(run.err.count('\n'), 1);
        QCOMPARE(run.json()["ok"].get<bool>(), false);

        // Only when told: --no-verify-tls reads the same server, every shard checked.
        const testutil::Run unchecked = testutil::shardctl(
            {QStringLiteral("verify"), url, QStringLiteral("--json"), QStringLiteral("--no-verify-tls")});
        QVERIFY2(unchecked.exit_code == 0, unchecked.err.constData());
        QCOMPARE(unchecked.json()["ok"].get<bool>(), true);
        QCOMPARE(unchecked.json()["shards"].size(), std::size_t(2));
        const testutil::Run info = testutil::shardctl(
            {QStringLiteral("info"), url, QStringLiteral("--no-verify-tls"), QStringLiteral("--json")});
        QVERIFY2(info.exit_code == 0, info.err.constData());
        QCOMPARE(info.json()["format"].get<std::string>(), std::string("safetensors-index"));
        // The same in core: the location carries the choice to every reader beneath it.
        Location location = parse_location(url.toStdString());
        QVERIFY_THROWS_EXCEPTION(Error, (void)verify_checkpoint(location));
        location.verify_tls = false;
        const VerifyReport report = verify_checkpoint(location);
        QVERIFY2(report.ok(), report.problems.empty() ? "" : report.problems[0].message.c_str());
        QCOMPARE(report.shards.size(), std::size_t(2));
    }

    // A run root in a bucket is listed one folder level at a time: reading the step `latest`
    // names costs its own listing, whatever the other steps hold (here 2,100 objects in an old
    // step, which a listing of everything beneath the root would page through).
    void aRootIsListedALevelAtATime()
    {
        const fs::path run = root() / "levelrun";
        save_sharded(make_demo_state(5, 1001, 2, ParamDtype::BF16), run / "step-00000005", 5);
        std::ofstream(run / "latest") << "step-00000005\n";
        upload(run, "levelrun");
        std::atomic<int> next{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                for (int i = next++; i < 2100; i = next++)
                    m_s3->put(m_bucket, "levelrun/step-00000001/junk" + std::to_string(i), bytes_of("x"));
            });
        for (auto& t : threads)
            t.join();
        const s3test::FaultProxy proxy(s3test::server_config().endpoint);
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const int before = proxy.forwarded();
        const testutil::Run plan = testutil::shardctl(
            {QStringLiteral("plan-reshard"), QString::fromStdString("s3://" + m_bucket + "/levelrun"),
             QStringLiteral("--to"), QStringLiteral("3"), QStringLiteral("--endpoint"),
             QString::fromStdString(proxy.endpoint()), QStringLiteral("--json")});
        QVERIFY2(plan.exit_code == 0, plan.err.constData());
        QCOMPARE(plan.json()["source_world_size"].get<int>(), 2);
        // The root's level, `latest`, the step's level, its manifest.
        const int requests = proxy.forwarded() - before;
        QVERIFY2(requests <= 4, QByteArray::number(requests));
        // verify adds one GET a shard: each shard's header came in its first block, which the
        // hashing stream takes from memory (these shards fit in it), not from a second request.
        const int before_verify = proxy.forwarded();
        const testutil::Run verified = testutil::shardctl(
            {QStringLiteral("verify"), QString::fromStdString("s3://" + m_bucket + "/levelrun"),
             QStringLiteral("--endpoint"), QString::fromStdString(proxy.endpoint()), QStringLiteral("--json")});
        QVERIFY2(verified.exit_code == 0, verified.err.constData());
        QCOMPARE(verified.json()["shards"].size(), std::size_t(2));
        const int verify_requests = proxy.forwarded() - before_verify;
        QVERIFY2(verify_requests <= 4 + 2, QByteArray::number(verify_requests));
    }

    void statusAndPlanReshardOfABucketRoot()
    {
        // A root as a trainer leaves it: three steps, `latest` rolled back to the second (the
        // third diverged), and a save cut short (a rank file, no manifest); copied into the bucket.
        const fs::path run = root() / "statusrun";
        for (int step : {10, 20, 30})
            save_sharded(make_demo_state(step, 4001, 3, ParamDtype::BF16), run / ("step-000000" + std::to_string(step)),
                         step);
        std::ofstream(run / "latest") << "step-00000020\n";
        fs::create_directories(run / "step-00000040");
        std::ofstream(run / "step-00000040" / "rank0.safetensors") << "cut short";
        upload(run, "statusrun");
        const QString where = QString::fromStdString("s3://" + m_bucket + "/statusrun");

        for (const QStringList& extra : {QStringList{}, QStringList{QStringLiteral("--content")}}) {
            const QStringList args =
                QStringList{QStringLiteral("--keep"), QStringLiteral("1"), QStringLiteral("--json")} + extra;
            const testutil::Run local =
                testutil::shardctl(QStringList{QStringLiteral("status"), testutil::qs(run)} + args);
            const testutil::Run remote = testutil::shardctl(QStringList{QStringLiteral("status"), where} + args);
            QVERIFY2(local.exit_code == 0, local.err.constData());
            QVERIFY2(remote.exit_code == 0, remote.err.constData());
            const nlohmann::json a = local.json(), b = remote.json();
            QCOMPARE(b["root"].get<std::string>(), where.toStdString());
            QCOMPARE(b["latest"].get<std::string>(), std::string("step-00000020"));
            QCOMPARE(b["steps"].size(), std::size_t(4));
            QCOMPARE(b["steps"][3]["local"]["problem"].get<std::string>(),
                     std::string("no manifest.json: the save did not finish"));
            QVERIFY2(b["next_rotation"]["local"] == nlohmann::json::array({"step-00000010"}),
                     b["next_rotation"].dump().c_str());
            for (const char* key : {"latest", "steps", "next_rotation", "keep", "mirror"})
                QVERIFY2(a[key] == b[key], (std::string(key) + ": " + a[key].dump() + " vs " + b[key].dump()).c_str());
            QVERIFY(b["lock"].is_null());
            QVERIFY(b["space"].empty()); // a bucket's free space is not known
            if (!extra.isEmpty()) {
                QCOMPARE(b["newest_healthy"].get<std::string>(), std::string("step-00000020"));
                QCOMPARE(b["steps"][0]["health"].get<std::string>(), std::string("safe"));
                QVERIFY(a["newest_healthy"] == b["newest_healthy"]);
            }
        }
        const testutil::Run text = testutil::shardctl({QStringLiteral("status"), where});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains(": latest step-00000020"), text.out.constData());
        // The steps are the bucket's copy, and a bucket has no writer lock to say anything of.
        QVERIFY2(text.out.contains("step-00000020  bucket: complete (latest)") && !text.out.contains("local:") &&
                     text.out.contains("lock: none (a bucket holds no writer lock)"),
                 text.out.constData());
        // A `latest` naming a step that is not there names none, in a bucket as on a disk.
        const fs::path gone = root() / "latestgone";
        save_sharded(make_demo_state(5, 1001, 2, ParamDtype::BF16), gone / "step-00000005", 5);
        std::ofstream(gone / "latest") << "step-00000009\n";
        upload(gone, "latestgone");
        for (const QString& where_gone :
             {testutil::qs(gone), QString::fromStdString("s3://" + m_bucket + "/latestgone")}) {
            const testutil::Run gone_status =
                testutil::shardctl({QStringLiteral("status"), where_gone, QStringLiteral("--json")});
            QVERIFY2(gone_status.exit_code == 0, gone_status.err.constData());
            QVERIFY2(gone_status.json()["latest"].is_null(), gone_status.out.constData());
        }
        // A local root's mirror that cannot be read says nothing of the uploads: unknown, never
        // missing or failed.
        const testutil::Run unread = testutil::shardctl(
            {QStringLiteral("status"), testutil::qs(run), QStringLiteral("--mirror"),
             QString::fromStdString("s3://" + m_bucket + "-none/statusrun"), QStringLiteral("--json")});
        QVERIFY2(unread.exit_code == 0, unread.err.constData());
        const nlohmann::json unreadJson = unread.json();
        QVERIFY(unreadJson["mirror"]["error"].get<std::string>().find(m_bucket + "-none") != std::string::npos);
        QVERIFY(!unreadJson["steps"].empty());
        for (const auto& s : unreadJson["steps"]) {
            QCOMPARE(s["upload"].get<std::string>(), std::string("unknown"));
            QVERIFY(!s.contains("upload_state"));
        }

        // plan-reshard from the manifest `latest` names, from a step's own prefix, and from its
        // manifest.json named instead of the step.
        for (const std::string& step :
             {std::string(), std::string("/step-00000030"), std::string("/step-00000030/manifest.json")}) {
            const QStringList args = {QStringLiteral("--to"), QStringLiteral("5"), QStringLiteral("--json")};
            const testutil::Run local = testutil::shardctl(
                QStringList{QStringLiteral("plan-reshard"), testutil::qs(run.string() + step)} + args);
            const testutil::Run remote = testutil::shardctl(
                QStringList{QStringLiteral("plan-reshard"), where + QString::fromStdString(step)} + args);
            QVERIFY2(local.exit_code == 0, local.err.constData());
            QVERIFY2(remote.exit_code == 0, remote.err.constData());
            QCOMPARE(remote.json()["source_world_size"].get<int>(), 3);
            QCOMPARE(remote.json()["target_world_size"].get<int>(), 5);
            QVERIFY(local.json() == remote.json());
        }

        // On a web server: the entry files asked for, `latest` and the manifest read, no rank file.
        testutil::RangeServer counted(root());
        QVERIFY(counted.port() > 0);
        const std::string base = "http://127.0.0.1:" + std::to_string(counted.port());
        const testutil::Run web =
            testutil::shardctl({QStringLiteral("plan-reshard"), QString::fromStdString(base + "/statusrun"),
                                QStringLiteral("--to"), QStringLiteral("5"), QStringLiteral("--json")});
        QVERIFY2(web.exit_code == 0, web.err.constData());
        QCOMPARE(web.json()["target_world_size"].get<int>(), 5);
        const QList<QByteArray> requests = requests_of(base);
        QVERIFY2(requests.size() <= 24, requests.join('\n').constData());
        int gets = 0;
        for (const QByteArray& r : requests)
            if (r.startsWith("GET")) {
                QVERIFY2(r.contains("/statusrun/latest") || r.contains("/step-00000020/manifest.json"), r.constData());
                ++gets;
            }
        QCOMPARE(gets, 2);

        // What stays local: writing a reshard into (or from) a bucket, a mirror of a bucket root.
        const testutil::Run reshard =
            testutil::shardctl({QStringLiteral("reshard"), where, QStringLiteral("--to"), QStringLiteral("2"),
                                QStringLiteral("--out"), testutil::qs(root() / "resharded"), QStringLiteral("--json")});
        QCOMPARE(reshard.exit_code, 2);
        QCOMPARE(reshard.err.count('\n'), 1);
        QCOMPARE(reshard.json()["ok"].get<bool>(), false);
        QVERIFY(!fs::exists(root() / "resharded"));
        const testutil::Run mirrored = testutil::shardctl({QStringLiteral("status"), where, QStringLiteral("--mirror"),
                                                           testutil::qs(root() / "m"), QStringLiteral("--json")});
        QCOMPARE(mirrored.exit_code, 2);
        QCOMPARE(mirrored.err.count('\n'), 1);
        QCOMPARE(mirrored.json()["error"]["kind"].get<std::string>(), std::string("invalid_argument"));
        // Other tools' roots in a bucket: their step folders and health, as status says of the local
        // copy. DeepSpeed (its `latest` names the newer step, whose exp_avg_sq holds an Inf),
        // Megatron (tracker and iter_ folders) and torchtitan's DCP step-<N>.
        const fs::path ds = root() / "dsroot";
        write_deepspeed_step(ds / "global_step3", {1, 2, 3});
        write_deepspeed_step(ds / "global_step6", {1, std::numeric_limits<float>::infinity(), 3});
        std::ofstream(ds / "latest") << "global_step6";
        const fs::path mg = root() / "mgroot";
        write_megatron_iteration(mg / "iter_0000020", {1, 2, 3, 4});
        std::ofstream(mg / "latest_checkpointed_iteration.txt") << "20";
        const fs::path titan = root() / "titanroot";
        write_dcp_checkpoint(titan / "step-10", "model.w", {1, 2, 3});
        write_dcp_checkpoint(titan / "step-20", "model.w", {4, 5, 6});
        for (const auto& [dir, format, steps] :
             {std::tuple{ds, "deepspeed", 2}, std::tuple{mg, "megatron", 1}, std::tuple{titan, "torch-dcp", 2}}) {
            const std::string prefix = dir.filename().string();
            upload(dir, prefix);
            const QString remote_root = QString::fromStdString("s3://" + m_bucket + "/" + prefix);
            for (const QStringList& extra : {QStringList{}, QStringList{QStringLiteral("--content")}}) {
                const testutil::Run local = testutil::shardctl(
                    QStringList{QStringLiteral("status"), testutil::qs(dir), QStringLiteral("--json")} + extra);
                const testutil::Run remote = testutil::shardctl(
                    QStringList{QStringLiteral("status"), remote_root, QStringLiteral("--json")} + extra);
                QVERIFY2(local.exit_code == 0, local.err.constData());
                QVERIFY2(remote.exit_code == 0, remote.err.constData());
                nlohmann::json a = local.json(), b = remote.json();
                QCOMPARE(b["root"].get<std::string>(), remote_root.toStdString());
                QCOMPARE(b["format"].get<std::string>(), std::string(format));
                QCOMPARE(b["steps"].size(), std::size_t(steps));
                a.erase("root");
                b.erase("root");
                QVERIFY2(a == b, (a.dump() + " vs " + b.dump()).c_str());
            }
        }
        const testutil::Run deepspeed =
            testutil::shardctl({QStringLiteral("status"), QString::fromStdString("s3://" + m_bucket + "/dsroot"),
                                QStringLiteral("--content")});
        QCOMPARE(deepspeed.exit_code, 0);
        QVERIFY2(deepspeed.out.contains("deepspeed root, latest global_step6"), deepspeed.out.constData());
        QVERIFY2(deepspeed.out.contains("global_step6  step 6 (latest)  health: diverged"), deepspeed.out.constData());
        QVERIFY2(deepspeed.out.contains("newest healthy step: global_step3"), deepspeed.out.constData());
        // Nothing beneath the prefix: not an empty root, a location that is not there.
        const testutil::Run nothing =
            testutil::shardctl({QStringLiteral("status"), QString::fromStdString("s3://" + m_bucket + "/no-root"),
                                QStringLiteral("--json")});
        QCOMPARE(nothing.exit_code, 2);
        QCOMPARE(nothing.json()["error"]["kind"].get<std::string>(), std::string("cannot_open"));
    }

    void shardctlReadsBucketsAndKeepsSecrets()
    {
        const fs::path step = root() / "cli";
        save_sharded(make_demo_state(9, 5000, 2, ParamDtype::BF16), step, 11);
        upload(step, "cli");
        const QString where = QString::fromStdString("s3://" + m_bucket + "/cli");
        const testutil::Run info = testutil::shardctl({QStringLiteral("info"), where, QStringLiteral("--json")});
        QCOMPARE(info.exit_code, 0);
        QCOMPARE(info.json()["format"].get<std::string>(), std::string("shardscope"));
        const testutil::Run verify = testutil::shardctl({QStringLiteral("verify"), where, QStringLiteral("--json")});
        QCOMPARE(verify.exit_code, 0);
        QCOMPARE(verify.json()["ok"].get<bool>(), true);
        const testutil::Run stats = testutil::shardctl({QStringLiteral("stats"), where, QStringLiteral("--json")});
        QCOMPARE(stats.exit_code, 0);
        const testutil::Run diff =
            testutil::shardctl({QStringLiteral("diff"), testutil::qs(step), where, QStringLiteral("--json")});
        QCOMPARE(diff.exit_code, 0);
        const std::string secret = s3test::server_env().at("AWS_SECRET_ACCESS_KEY");
        for (const auto* run : {&info, &verify, &stats, &diff})
            QVERIFY(!run->out.contains(secret.c_str()) && !run->err.contains(secret.c_str()));

        // --endpoint wins over the environment's endpoint (here a port where nothing listens), in
        // every read a command makes: the bytes, then the values (verify --content, as status
        // --content reads them) and the copy (convert).
        const QByteArray env_endpoint = qgetenv("AWS_ENDPOINT_URL");
        qputenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
        const QStringList at_endpoint = {QStringLiteral("--endpoint"), QString::fromUtf8(env_endpoint),
                                         QStringLiteral("--json")};
        const testutil::Run given =
            testutil::shardctl(QStringList{QStringLiteral("verify"), where, QStringLiteral("--content")} + at_endpoint);
        const testutil::Run converted = testutil::shardctl(
            QStringList{QStringLiteral("convert"), where, QStringLiteral("--to"), QStringLiteral("hf"),
                        QStringLiteral("--out"), testutil::qs(root() / "cli-hf")} +
            at_endpoint);
        const testutil::Run unreachable =
            testutil::shardctl({QStringLiteral("info"), where, QStringLiteral("--json")}, 60000);
        const testutil::Run not_http = testutil::shardctl({QStringLiteral("info"), where, QStringLiteral("--endpoint"),
                                                           QStringLiteral("ftp://user:hunter2@127.0.0.1:21")});
        qputenv("AWS_ENDPOINT_URL", env_endpoint);
        QVERIFY2(given.exit_code == 0, given.err.constData());
        QCOMPARE(given.json()["shards"].size(), std::size_t(2));
        QVERIFY2(converted.exit_code == 0, converted.err.constData());
        QVERIFY(fs::exists(root() / "cli-hf" / "model.safetensors.index.json") ||
                fs::exists(root() / "cli-hf" / "model.safetensors"));
        QCOMPARE(unreachable.exit_code, 2);
        QVERIFY2(unreachable.err.contains("127.0.0.1:9"), unreachable.err.constData());
        QCOMPARE(not_http.exit_code, 2);
        QVERIFY2(not_http.err.contains("--endpoint: an S3 endpoint is an http:// or https:// URL"),
                 not_http.err.constData());
        QVERIFY(!not_http.err.contains("hunter2"));

        // Wrong credentials: one sentence naming the URL, exit 2, the key not echoed.
        qputenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-0123456789");
        const testutil::Run refused = testutil::shardctl({QStringLiteral("verify"), where, QStringLiteral("--json")});
        qputenv("AWS_SECRET_ACCESS_KEY", secret.c_str());
        QCOMPARE(refused.exit_code, 2);
        QVERIFY(refused.err.contains(where.toUtf8()));
        QVERIFY(!refused.err.contains("not-the-secret") && !refused.out.contains("not-the-secret"));
        QCOMPARE(refused.json()["ok"].get<bool>(), false);
    }
};

QTEST_GUILESS_MAIN(TestRemoteRead)
#include "tst_remote_read.moc"
