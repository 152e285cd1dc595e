// The mirror tier on a real S3 server (Ceph's RADOS Gateway, scripts/s3-test-server.sh): uploads
// of every step as multipart objects read back before its manifest, the bucket's own retention,
// resume from the bucket when the local copy is lost or rots, and outages (503 SlowDown from a
// fault proxy, a gateway killed mid-upload) that never stop the run and leave no multipart upload
// behind.

#include "../storage/s3_server.h"

#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "core/run/lifecycle.h"
#include "core/run/mirror_tier.h"
#include "core/run/root_lock.h"
#include "core/run/root_status.h"
#include "core/storage/s3.h"
#include "testutil.h"

#include <QFile>
#include <QProcess>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QThread>
#include <QTest>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// 700,000 elements a rank: about 9.8 MB per rank file, above the 8 MiB part size, so every rank
// goes up as a multipart upload of two parts.
std::vector<RankState> state(uint64_t seed, uint64_t numel = 1'400'000)
{
    return make_demo_state(seed, numel, 2, ParamDtype::BF16);
}

// The fault proxy in front of a gateway, and the managers' store (which they read from the
// environment, as a training job would) pointed at it while it lives; then at `gateway` again.
struct ProxiedStore {
    explicit ProxiedStore(const std::string& upstream, const std::string& restored = {})
        : proxy(upstream), gateway(restored.empty() ? upstream : restored)
    {
        qputenv("AWS_ENDPOINT_URL", QByteArray::fromStdString(proxy.endpoint()));
    }
    ~ProxiedStore() { qputenv("AWS_ENDPOINT_URL", QByteArray::fromStdString(gateway)); }
    ProxiedStore(const ProxiedStore&) = delete;
    ProxiedStore& operator=(const ProxiedStore&) = delete;
    const s3test::FaultProxy proxy;
    const std::string gateway;
};

long peak_rss_kib()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmHWM:"))
            return std::stol(line.substr(6));
    return -1;
}

} // namespace

class TestMirrorS3 : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    storage::S3Config m_config;
    std::string m_bucket;
    int m_counter = 0;

    fs::path fresh(const char* name)
    {
        return fs::path(m_tmp.path().toStdString()) / (std::string(name) + "-" + std::to_string(++m_counter));
    }
    ManagerOptions options(const fs::path& root, const std::string& prefix)
    {
        ManagerOptions o;
        o.root = root;
        o.keep_last = 1;
        o.mirror = storage::parse_location("s3://" + m_bucket + "/" + prefix);
        o.mirror_keep_last = 2;
        o.durable = false;
        return o;
    }
    // A run that saved steps 1 and 2 and sent both to the bucket, then ended: the options for the
    // next run on that root (three steps kept on each tier, warnings not printed).
    ManagerOptions two_steps_sent(const fs::path& root, const std::string& prefix)
    {
        ManagerOptions o = options(root, prefix);
        o.keep_last = 3;
        o.mirror_keep_last = 3;
        o.on_warning = [](const std::string&) {};
        CheckpointManager manager(o);
        for (uint64_t step = 1; step <= 2; ++step)
            manager.save(state(step, 20'000), step);
        manager.wait();
        return o;
    }
    std::vector<std::string> keys(const std::string& prefix)
    {
        std::vector<std::string> out;
        for (const auto& o : storage::S3Client(m_config).list(m_bucket, prefix, 10000))
            out.push_back(o.key);
        return out;
    }

private slots:
    void initTestCase()
    {
        m_config = s3test::server_config();
        QVERIFY2(!m_config.endpoint.empty(), "no S3 server: SHARDSCOPE_S3_ENV names no env.sh with an endpoint");
        // The manager reads its store from the environment, as a training job would.
        qputenv("AWS_ENDPOINT_URL", QByteArray::fromStdString(m_config.endpoint));
        qputenv("AWS_REGION", QByteArray::fromStdString(m_config.region));
        qputenv("AWS_ACCESS_KEY_ID", QByteArray::fromStdString(m_config.credentials.access_key_id));
        qputenv("AWS_SECRET_ACCESS_KEY", QByteArray::fromStdString(m_config.credentials.secret_access_key));
        m_bucket = s3test::fresh_bucket("tst-mirror");
        storage::S3Client(m_config).create_bucket(m_bucket);
    }

    void stepsAreUploadedReadBackAndRotatedOnTheBucket()
    {
        const fs::path root = fresh("local");
        {
            CheckpointManager manager(options(root, "runs/a"));
            for (uint64_t step = 1; step <= 3; ++step) {
                manager.save(state(step), step);
                manager.wait();
            }
            manager.save(state(4), 4); // rotation now also sees the finished uploads
            manager.wait();
            for (const UploadStatus& u : manager.upload_status())
                QVERIFY2(u.state == UploadState::uploaded, u.error.c_str());
        }
        const MirrorTier bucket(storage::parse_location("s3://" + m_bucket + "/runs/a"));
        std::vector<uint64_t> remote;
        for (const StepInfo& s : bucket.scan())
            if (s.complete)
                remote.push_back(s.step);
        QCOMPARE(remote, (std::vector<uint64_t>{3, 4})); // the mirror's own retention, on the bucket
        QCOMPARE(bucket.read_latest(), std::optional<std::string>(step_dir_name(4)));
        QVERIFY(keys("runs/a/" + step_dir_name(1) + "/").empty());
        // The upload record names every rank object with the SHA-256 the manifest promised.
        const storage::S3Client s3(m_config);
        const auto record = nlohmann::json::parse(*s3.get(m_bucket, "runs/a/step-00000004/upload.json", 1 << 20));
        const auto manifest = nlohmann::json::parse(*s3.get(m_bucket, "runs/a/step-00000004/manifest.json", 1 << 20));
        QCOMPARE(record["files"].size(), std::size_t(2));
        for (std::size_t i = 0; i < 2; ++i) {
            QCOMPARE(record["files"][i]["sha256"].get<std::string>(),
                     manifest["shards"][i]["sha256"].get<std::string>());
            const auto head =
                s3.head(m_bucket, "runs/a/step-00000004/" + record["files"][i]["path"].get<std::string>());
            QVERIFY(head && head->size > (8u << 20));
            QVERIFY2(head->etag.ends_with("-2"), head->etag.c_str()); // two parts: a multipart upload
        }
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/a/").empty());
        // How long the sending and the read-back took, for whoever asks why the mirror lags.
        for (const char* phase : {"copy", "read_back"}) {
            QVERIFY2(record["seconds"][phase].is_number(), phase);
            QVERIFY(record["seconds"][phase].get<double>() >= 0 && record["seconds"][phase].get<double>() < 60);
        }
        // status reads the same from the bucket.
        const RootStatus st = root_status(root, storage::parse_location("s3://" + m_bucket + "/runs/a"), 1, 2);
        QCOMPARE(st.mirror_latest, std::optional<std::string>(step_dir_name(4)));

        // The local copy is lost: resume fetches the bucket's, verifies it and loads it.
        fs::remove_all(root / step_dir_name(4));
        fs::remove(root / "latest");
        const ResumePoint lost = load_resume_point(root, options(root, "runs/a").mirror, {.expected_world_size = 2});
        QVERIFY(lost.used_mirror);
        QCOMPARE(lost.checkpoint.manifest.step, uint64_t(4));
        QCOMPARE(flat_state_digests(lost.checkpoint.ranks), flat_state_digests(state(4)));
        QCOMPARE(lost.checkpoint.dir.string(), "s3://" + m_bucket + "/runs/a/step-00000004");
        for (const auto& entry : fs::directory_iterator(root)) // the scratch copy is gone
            QVERIFY2(!entry.path().filename().string().starts_with(".mirror-fetch"), entry.path().c_str());
    }

    void aRottenLocalCopyFallsBackToTheBucket()
    {
        const fs::path root = fresh("rot");
        {
            CheckpointManager manager(options(root, "runs/rot"));
            manager.save(state(7, 20'000), 7);
            manager.wait();
        }
        testutil::flip_byte(root / step_dir_name(7) / "rank1.safetensors", 3000);
        const ResumePoint point = load_resume_point(root, options(root, "runs/rot").mirror, {.expected_world_size = 2});
        QVERIFY(point.used_mirror);
        QCOMPARE(flat_state_digests(point.checkpoint.ranks), flat_state_digests(state(7, 20'000)));
        // The bucket's copy rots too (a rank object replaced): the load refuses it by its hash.
        const storage::S3Client s3(m_config);
        auto bytes = *s3.get(m_bucket, "runs/rot/step-00000007/rank1.safetensors", 64 << 20);
        bytes[3000] ^= 1;
        s3.put(m_bucket, "runs/rot/step-00000007/rank1.safetensors",
               std::as_bytes(std::span(bytes.data(), bytes.size())));
        try {
            (void)load_resume_point(root, options(root, "runs/rot").mirror, {.expected_world_size = 2});
            QFAIL("a rotten bucket copy was loaded");
        } catch (const Error& e) {
            QVERIFY2(e.kind() == ProblemKind::hash_mismatch, e.what());
        }
    }

    // The bucket's `latest` was read, then its listing failed: nothing of the bucket is used, and
    // the empty local root has nothing to resume from; said with why the bucket was not read.
    void aMirrorLostAfterItsLatestIsNoResumePoint()
    {
        const fs::path root = fresh("lost-listing");
        {
            CheckpointManager manager(options(root, "runs/lost-listing"));
            manager.save(state(5, 20'000), 5);
            manager.wait();
        }
        fs::remove_all(root);
        fs::create_directories(root);
        const ProxiedStore store(m_config.endpoint);
        QVERIFY2(!store.proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(store.proxy.fault("mode=503&count=-1&method=GET&path=list-type"));
        try {
            (void)load_resume_point(root, options(root, "runs/lost-listing").mirror, {.expected_world_size = 2});
            QFAIL("a resume point came from a bucket that could not be listed");
        } catch (const Error& e) {
            QVERIFY2(e.kind() == ProblemKind::cannot_open &&
                         std::string_view(e.what()).find("the mirror could not be read") != std::string_view::npos,
                     e.what());
        }
    }

    void anOutageNeverStopsTheRunAndLeavesNoUploadBehind()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");

        const fs::path root = fresh("outage");
        std::vector<std::string> warnings;
        ManagerOptions o = options(root, "runs/outage");
        o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
        CheckpointManager manager(o);
        // The store fails every part upload: the step commits locally, the upload fails and is
        // aborted, and training goes on.
        QVERIFY(proxy.fault("mode=503&count=-1&path=partNumber"));
        manager.save(state(1), 1);
        manager.wait();
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(1)));
        const auto failed = manager.upload_status();
        QCOMPARE(failed.size(), std::size_t(1));
        QCOMPARE(int(failed[0].state), int(UploadState::failed));
        QVERIFY2(failed[0].error.find("503") != std::string::npos, failed[0].error.c_str());
        QVERIFY(!warnings.empty());
        const storage::S3Client s3(m_config);
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/outage/").empty());
        QVERIFY(keys("runs/outage/step-00000001/manifest.json").empty()); // nothing claims to be complete
        // The store is back: the retry uploads it.
        QVERIFY(proxy.fault("mode=none"));
        manager.retry_uploads();
        manager.wait();
        QCOMPARE(int(manager.upload_status()[0].state), int(UploadState::uploaded));
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/outage/").empty());
    }

    // The answer to the request that begins a multipart upload is lost (the connection reset
    // after the server began it): the client's retry begins another. The first is aborted before
    // the step is published, so no upload stays open behind a complete step.
    void aLostAnswerLeavesNoUploadOpen()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const fs::path root = fresh("lost");
        ManagerOptions o = options(root, "runs/lost");
        o.on_warning = [](const std::string&) {};
        CheckpointManager manager(o);
        QVERIFY(proxy.fault("mode=reset&count=1&method=POST&path=uploads"));
        manager.save(state(1), 1);
        manager.wait();
        QVERIFY2(manager.upload_status()[0].state == UploadState::uploaded, manager.upload_status()[0].error.c_str());
        QCOMPARE(proxy.injected(), 1); // the answer was lost once: the server began two uploads
        QVERIFY(!keys("runs/lost/step-00000001/manifest.json").empty());
        QVERIFY(storage::S3Client(m_config).list_multipart_uploads(m_bucket, "runs/lost/").empty());
    }

    // Every completion of a multipart upload refused (503 until the store recovers): the parts
    // are all up, the completions run at once and each gives up after its retries; none is left
    // open, the step is not published, and the retry, once the store answers, completes it.
    void failedCompletionsLeaveNoUploadOpen()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const storage::S3Client s3(m_config);
        const fs::path root = fresh("complete");
        ManagerOptions o = options(root, "runs/complete");
        o.on_warning = [](const std::string&) {};
        CheckpointManager manager(o);
        QVERIFY(proxy.fault("mode=503&count=-1&method=POST&path=uploadId="));
        manager.save(state(1), 1);
        manager.wait();
        const auto failed = manager.upload_status();
        QCOMPARE(failed.size(), std::size_t(1));
        QVERIFY(failed[0].state == UploadState::failed);
        QVERIFY2(failed[0].error.find("503") != std::string::npos, failed[0].error.c_str());
        QVERIFY(proxy.injected() >= 6); // one completion's every attempt at least
        QVERIFY(keys("runs/complete/step-00000001/manifest.json").empty());
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/complete/").empty());
        QVERIFY(proxy.fault("mode=none"));
        manager.retry_uploads();
        manager.wait();
        QVERIFY2(manager.upload_status()[0].state == UploadState::uploaded, manager.upload_status()[0].error.c_str());
        QVERIFY(!keys("runs/complete/step-00000001/manifest.json").empty());
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/complete/").empty());
    }

    // The read-back reads each rank object in one streamed GET, hashed as it arrives: two
    // multipart objects of two parts each cost the gateway two GETs, not one a part.
    void eachObjectIsReadBackInOneStream()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const fs::path root = fresh("stream");
        CheckpointManager manager(options(root, "runs/stream"));
        // A zero-second hold: a counter of the GETs of rank objects, nothing more.
        QVERIFY(proxy.fault("mode=slow&seconds=0&count=-1&method=GET&path=step-00000001/rank"));
        manager.save(state(1), 1);
        manager.wait();
        QVERIFY2(manager.upload_status()[0].state == UploadState::uploaded, manager.upload_status()[0].error.c_str());
        QCOMPARE(proxy.injected(), 2);
        QVERIFY(proxy.fault("mode=none"));
        for (const auto& k : keys("runs/stream/step-00000001/rank")) {
            const auto head = storage::S3Client(m_config).head(m_bucket, k);
            QVERIFY(head && head->size > (8u << 20)); // each a multipart upload of two parts
        }
    }

    // Bytes changed on the way, which no status code shows: a part whose body is flipped on its
    // way up is refused by the server against the part's Content-MD5, an object whose bytes are
    // flipped on their way back fails the read-back's SHA-256. Either way the step is not published
    // on the bucket (no manifest), the run goes on, and the retry uploads it whole.
    void changedBytesAreCaughtByPartChecksumsAndTheReadBack()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const storage::S3Client s3(m_config);
        struct Case {
            const char* fault;
            const char* prefix;
            const char* error; // what the failed upload's error says
        };
        for (const Case& c : {Case{"mode=corrupt-request&count=1&method=PUT&path=partNumber=2", "runs/flipped-up",
                                   "): changed while it was uploaded, or changed on the way (PUT s3://"},
                              Case{"mode=corrupt&count=1&method=GET&path=rank1", "runs/flipped-down", "SHA-256"}}) {
            const fs::path root = fresh("flipped");
            ManagerOptions o = options(root, c.prefix);
            o.on_warning = [](const std::string&) {};
            CheckpointManager manager(o);
            QVERIFY(proxy.fault(c.fault));
            manager.save(state(1), 1);
            manager.wait();
            const auto failed = manager.upload_status();
            QCOMPARE(failed.size(), std::size_t(1));
            QVERIFY2(failed[0].state == UploadState::failed, c.fault);
            QVERIFY2(failed[0].error.find(c.error) != std::string::npos, failed[0].error.c_str());
            QVERIFY2(failed[0].error.find("(rank ") != std::string::npos, failed[0].error.c_str());
            const std::string step = std::string(c.prefix) + "/step-00000001/";
            QVERIFY(keys(step + "manifest.json").empty());
            QVERIFY(s3.list_multipart_uploads(m_bucket, std::string(c.prefix) + "/").empty());
            QVERIFY(proxy.fault("mode=none"));
            manager.retry_uploads();
            manager.wait();
            QVERIFY2(manager.upload_status()[0].state == UploadState::uploaded,
                     manager.upload_status()[0].error.c_str());
            QVERIFY(!keys(step + "manifest.json").empty());
        }
    }

    // The outage as it happens: the gateway the job writes through is killed (SIGKILL) in the middle
    // of a multipart upload. The step stays committed locally, the run goes on, and once a
    // gateway answers again the retry leaves the bucket with the whole step and no upload behind.
    // The kill lands mid-upload for certain: a proxy holds the answer to the second part for 5 s.
    void aGatewayKilledMidUploadLeavesNoUploadBehind()
    {
        s3test::ExtraGateway gateway;
        QVERIFY2(!gateway.endpoint().empty(), "the extra gateway did not start");
        const ProxiedStore store(gateway.endpoint(), m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(proxy.fault("mode=slow&seconds=5&count=1&method=PUT&path=partNumber=2"));

        const fs::path root = fresh("killed");
        std::vector<std::string> warnings;
        ManagerOptions o = options(root, "runs/killed");
        o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
        CheckpointManager manager(o);
        // Two rank files of about 48 MiB: six parts each.
        manager.save(state(1, 7'200'000), 1);
        QElapsedTimer waited;
        waited.start();
        while (proxy.injected() < 1 && waited.elapsed() < 30000)
            QThread::msleep(10);
        QCOMPARE(proxy.injected(), 1); // a part's answer is held: the upload is in progress
        const storage::S3Client s3(m_config); // the first gateway: the same cluster, still up
        QVERIFY(!s3.list_multipart_uploads(m_bucket, "runs/killed/").empty());
        gateway.kill();
        manager.wait();
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(1)));
        const auto failed = manager.upload_status();
        QCOMPARE(failed.size(), std::size_t(1));
        QCOMPARE(int(failed[0].state), int(UploadState::failed));
        QVERIFY2(failed[0].error.find("127.0.0.1") != std::string::npos, failed[0].error.c_str());
        QVERIFY(!warnings.empty());
        QVERIFY(keys("runs/killed/step-00000001/manifest.json").empty()); // nothing claims to be complete

        // Training goes on while the store is down.
        manager.save(state(2, 20'000), 2);
        QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(2)));
        manager.wait();

        // A gateway answers again: the retry uploads what is missing and aborts what the kill left.
        QVERIFY2(gateway.restart(), "the gateway did not come back");
        manager.retry_uploads();
        manager.wait();
        for (const UploadStatus& u : manager.upload_status())
            QVERIFY2(u.state == UploadState::uploaded, (u.name + ": " + u.error).c_str());
        QVERIFY(!keys("runs/killed/step-00000002/manifest.json").empty());
        QVERIFY(s3.list_multipart_uploads(m_bucket, "runs/killed/").empty());
    }

    void aStoreThatDoesNotAnswerDeletesNothing()
    {
        // A complete step on the bucket, then a store whose GETs of manifests fail: the next
        // upload's sweep and the mirror's rotation must not take the step for a leftover.
        const fs::path root = fresh("flaky");
        {
            CheckpointManager manager(options(root, "runs/flaky"));
            manager.save(state(1, 20'000), 1);
            manager.wait();
        }
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(proxy.fault("mode=503&count=-1&method=GET&path=manifest.json"));
        {
            ManagerOptions o = options(root, "runs/flaky");
            o.mirror_keep_last = 1; // the next rotation would remove step 1 if it could read the bucket
            o.on_warning = [](const std::string&) {};
            CheckpointManager manager(o);
            // Step 2's upload moves the bucket's `latest` on, so step 1 is protected by nothing but
            // the rule that an unanswered request proves nothing; step 3's sweep then meets it.
            for (uint64_t step = 2; step <= 3; ++step) {
                manager.save(state(step, 20'000), step);
                manager.wait();
            }
            QCOMPARE(read_latest(root), std::optional<std::string>(step_dir_name(3)));
        }
        QVERIFY(!keys("runs/flaky/step-00000001/manifest.json").empty());
        QVERIFY(!keys("runs/flaky/step-00000001/upload.json").empty());
        QVERIFY(!keys("runs/flaky/step-00000001/rank0.safetensors").empty());
    }

    // A store that answers every request seconds late: the saves go on at their own pace. What
    // the bucket holds is known from the uploads, never asked for on a save's thread (where each
    // step's LIST and manifest GET would hold the save for the store's delay, retries and all).
    void aSlowStoreNeverHoldsUpASave()
    {
        const ProxiedStore store(m_config.endpoint);
        const s3test::FaultProxy& proxy = store.proxy;
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        const fs::path root = fresh("slow");
        ManagerOptions o = options(root, "runs/slow");
        o.mirror_keep_last = 3;
        o.on_warning = [](const std::string&) {};
        CheckpointManager manager(o);
        for (uint64_t step = 1; step <= 2; ++step) {
            manager.save(state(step, 20'000), step);
            manager.wait();
        }
        QVERIFY(proxy.fault("mode=slow&seconds=3&count=-1"));
        for (uint64_t step = 3; step <= 4; ++step) {
            QElapsedTimer saving;
            saving.start();
            manager.save(state(step, 20'000), step);
            QVERIFY2(saving.elapsed() < 2500,
                     qPrintable(
                         QStringLiteral("save %1 took %2 ms with the store 3 s late").arg(step).arg(saving.elapsed())));
        }
        QVERIFY(proxy.fault("mode=none"));
        manager.wait();
        manager.retry_uploads();
        manager.wait();
        for (const UploadStatus& u : manager.upload_status())
            QVERIFY2(u.state == UploadState::uploaded, u.name.c_str());
        QVERIFY(storage::S3Client(m_config).list_multipart_uploads(m_bucket, "runs/slow/").empty());
    }

    // An earlier run's complete copy, whose manifest the store fails to give for a while: the
    // next run's upload of it fails and is retried later; the copy is not taken for missing and
    // deleted to be sent again.
    void anEarlierRunsCopyIsNotDeletedOnAFailedRequest()
    {
        const ManagerOptions o = two_steps_sent(fresh("earlier"), "runs/earlier");
        const ProxiedStore store(m_config.endpoint);
        QVERIFY2(!store.proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(store.proxy.fault("mode=503&count=-1&method=GET&path=step-00000001/manifest.json"));
        {
            CheckpointManager manager(o);
            manager.save(state(3, 20'000), 3);
            manager.wait();
            bool step1_failed = false;
            for (const UploadStatus& u : manager.upload_status()) {
                if (u.name == step_dir_name(1))
                    step1_failed = u.state == UploadState::failed;
                else
                    QVERIFY2(u.state == UploadState::uploaded, u.name.c_str());
            }
            QVERIFY(step1_failed);
        }
        for (const char* file : {"upload.json", "manifest.json", "rank0.safetensors", "rank1.safetensors"})
            QVERIFY2(!keys(std::string("runs/earlier/step-00000001/") + file).empty(), file);
    }

    // A run killed after a step's upload was recorded but before the bucket's `latest` named it:
    // the next run finds the copy whole, does not send it again, and moves `latest` on to it
    // (here while the newer step's upload fails, so nothing else moves it).
    void aCopyFoundWholeMovesTheBucketsLatestOn()
    {
        const ManagerOptions o = two_steps_sent(fresh("behind"), "runs/behind");
        const storage::S3Client s3(m_config);
        const std::string behind = step_dir_name(1) + "\n";
        s3.put(m_bucket, "runs/behind/latest", std::as_bytes(std::span(behind)));
        const ProxiedStore store(m_config.endpoint);
        QVERIFY2(!store.proxy.endpoint().empty(), "the fault proxy did not start");
        QVERIFY(store.proxy.fault("mode=503&count=-1&method=PUT&path=step-00000003"));
        {
            CheckpointManager manager(o);
            manager.save(state(3, 20'000), 3);
            manager.wait();
        }
        QCOMPARE(s3.get(m_bucket, "runs/behind/latest", 100).value_or(""), step_dir_name(2) + "\n");
    }

    // A run killed while a step's parts went up leaves a multipart upload under a step that no
    // object listing shows (none of its objects was completed): the next run's upload aborts it.
    void anUploadLeftByAKilledRunIsAborted()
    {
        const storage::S3Client s3(m_config);
        const std::string orphan =
            s3.create_multipart(m_bucket, "runs/orphaned/" + step_dir_name(1) + "/rank0.safetensors");
        QVERIFY(!orphan.empty());
        // Not a step's: another program's upload beside the steps, which is left alone.
        const std::string other = s3.create_multipart(m_bucket, "runs/orphaned/notes/step-00000001.bin");
        QCOMPARE(s3.list_multipart_uploads(m_bucket, "runs/orphaned/").size(), std::size_t(2));
        // Until then the step is the incomplete copy it is, and where a run holds the root whose
        // step it is, that step's upload is under way (a part sent, none of its objects whole).
        {
            const fs::path local = fresh("killed-local");
            ManagerOptions local_only = options(local, "runs/orphaned");
            local_only.mirror.reset();
            CheckpointManager(local_only).save(state(1, 20'000), 1);
            const auto steps = list_steps(local, storage::parse_location("s3://" + m_bucket + "/runs/orphaned"));
            const auto copy =
                std::find_if(steps.begin(), steps.end(), [](const StepInfo& s) { return s.tier == StepTier::mirror; });
            QVERIFY(copy != steps.end());
            QCOMPARE(copy->name, step_dir_name(1));
            QVERIFY(!copy->complete);
            QVERIFY2(copy->problem.find("being sent in parts") != std::string::npos, copy->problem.c_str());
            QCOMPARE(
                std::count_if(steps.begin(), steps.end(), [](const StepInfo& s) { return s.tier == StepTier::mirror; }),
                1L); // the other program's upload is no step
            const RootLock lock = RootLock::acquire(local, {});
            QCOMPARE(int(upload_states_on_disk(steps, read_lock_holder(local), 2).at(step_dir_name(1))),
                     int(UploadState::uploading));
        }
        const fs::path root = fresh("killed");
        CheckpointManager manager(options(root, "runs/orphaned"));
        manager.save(state(2, 20'000), 2);
        manager.wait();
        QCOMPARE(int(manager.upload_status().back().state), int(UploadState::uploaded));
        const auto open = s3.list_multipart_uploads(m_bucket, "runs/orphaned/");
        QCOMPARE(open.size(), std::size_t(1));
        QCOMPARE(open[0].key, std::string("runs/orphaned/notes/step-00000001.bin"));
        s3.abort_multipart(m_bucket, open[0].key, other);
    }

    // Each part is read from its file as it is sent, never into a buffer of its own: a step of
    // ten parts, four in flight, goes up without the process's peak memory growing by even one
    // part per transfer (32 MiB). Measured in a process of its own (ctest tst_mirror_s3_memory):
    // after the other slots the upload reuses the heap they left, and passes whatever it holds.
    // Under AddressSanitizer freed memory is kept in quarantine, so only the upload is checked.
    void partsAreSentWithoutBeingHeldInMemory()
    {
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_MEASURE_ALONE"))
            QSKIP("measured in a process of its own: ctest -R tst_mirror_s3_memory");
        const fs::path dir = fresh("memory");
        Manifest m;
        {
            // 2.6 million elements a rank, 14 bytes each: two rank files of about 35 MiB, five
            // 8 MiB parts each.
            auto ranks = make_demo_state(3, 5'200'000, 2, ParamDtype::BF16);
            m = save_sharded(ranks, dir, 1, {.durable = false});
        }
        std::ifstream in(dir / "manifest.json", std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        const MirrorTier tier(storage::parse_location("s3://" + m_bucket + "/runs/memory"));
        {
            std::ofstream reset("/proc/self/clear_refs");
            reset << "5" << std::flush; // the peak resident size, from now (Linux 4.0)
            if (!reset)
                QSKIP("this kernel does not reset the peak resident size (/proc/self/clear_refs)");
        }
        const long before = peak_rss_kib();
        tier.upload(dir, step_dir_name(1), m, text, false);
        const long grown = peak_rss_kib() - before;
        QVERIFY(keys("runs/memory/" + step_dir_name(1) + "/rank1").size() == 1);
#ifndef __SANITIZE_ADDRESS__
        QVERIFY2(grown < 24 * 1024, (std::to_string(grown / 1024) + " MiB more at the peak").c_str());
#else
        Q_UNUSED(grown);
#endif
    }

    void cleanupTestCase()
    {
        if (m_bucket.empty()) // no server: initTestCase said so
            return;
        const storage::S3Client s3(m_config);
        for (const auto& u : s3.list_multipart_uploads(m_bucket, ""))
            s3.abort_multipart(m_bucket, u.key, u.upload_id);
        for (const auto& o : s3.list(m_bucket, "", 100000))
            s3.remove(m_bucket, o.key);
    }
};

QTEST_GUILESS_MAIN(TestMirrorS3)
#include "tst_mirror_s3.moc"
