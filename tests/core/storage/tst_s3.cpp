// The S3 client against a real server: Ceph's RADOS Gateway started for this test run
// (scripts/s3-test-server.sh). Every request here is signed by sigv4.cpp and checked by the
// server, payload hashes and Content-MD5 included.

#include "s3_server.h"

#include "core/storage/folder.h"
#include "core/storage/location.h"
#include "core/storage/s3.h"
#include "core/util/error.h"
#include "core/util/md5_reference.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <array>
#include <atomic>
#include <random>
#include <mutex>
#include <thread>

using namespace shardscope;
using namespace shardscope::storage;

namespace {

std::vector<std::byte> pattern(std::size_t n, uint32_t seed)
{
    std::vector<std::byte> out(n);
    std::mt19937 rng(seed);
    for (auto& b : out)
        b = static_cast<std::byte>(rng());
    return out;
}

std::span<const std::byte> bytes_of(const std::string& s)
{
    return std::as_bytes(std::span(s.data(), s.size()));
}

} // namespace

class TestS3 : public QObject {
    Q_OBJECT
    S3Config m_config;
    std::string m_bucket;

private slots:
    void initTestCase()
    {
        m_config = s3test::server_config();
        QVERIFY2(!m_config.endpoint.empty(), "no S3 server: SHARDSCOPE_S3_ENV names no env.sh with an endpoint");
        m_bucket = s3test::fresh_bucket("tst-s3");
        S3Client(m_config).create_bucket(m_bucket);
        S3Client(m_config).create_bucket(m_bucket); // owning it already is not an error
    }

    void objectsRoundTrip()
    {
        const S3Client s3(m_config);
        const auto body = pattern(100000, 1);
        s3.put(m_bucket, "run/step 1/rank-0000.safetensors", body); // a space: encoded and signed
        const auto info = s3.head(m_bucket, "run/step 1/rank-0000.safetensors");
        QVERIFY(info);
        QCOMPARE(info->size, uint64_t(body.size()));
        std::vector<std::byte> part(1000);
        s3.read(m_bucket, "run/step 1/rank-0000.safetensors", 54321, part);
        QVERIFY(std::equal(part.begin(), part.end(), body.begin() + 54321));
        const auto whole = s3.get(m_bucket, "run/step 1/rank-0000.safetensors", 1 << 20);
        QVERIFY(whole && whole->size() == body.size() && std::memcmp(whole->data(), body.data(), body.size()) == 0);
        QVERIFY(!s3.head(m_bucket, "run/none"));
        QVERIFY(!s3.get(m_bucket, "run/none", 100));
        try { // a range past the end, and an object larger than the caller allows
            std::vector<std::byte> past(10);
            s3.read(m_bucket, "run/step 1/rank-0000.safetensors", 100000, past);
            QFAIL("a range past the end was read");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::range_outside_file));
            QCOMPARE(e.problem().path, "s3://" + m_bucket + "/run/step 1/rank-0000.safetensors");
        }
        try { // a range of no object: the error names the object a JSON reader looks for
            std::vector<std::byte> none(10);
            s3.read(m_bucket, "run/none", 0, none);
            QFAIL("a range of a missing object was read");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::missing_file));
            QCOMPARE(e.problem().path, "s3://" + m_bucket + "/run/none");
        }
        try {
            (void)s3.get(m_bucket, "run/step 1/rank-0000.safetensors", 1000);
            QFAIL("an object larger than allowed was read");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::remote_error));
            QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("more than the 1000 bytes")));
        }
        s3.remove(m_bucket, "run/step 1/rank-0000.safetensors");
        s3.remove(m_bucket, "run/step 1/rank-0000.safetensors"); // gone already: not an error
        QVERIFY(!s3.head(m_bucket, "run/step 1/rank-0000.safetensors"));
    }

    void keysWithAnyCharacterAreSignedAndRead()
    {
        // Everything SigV4 encodes differently from a URL library: reserved characters, UTF-8,
        // a '~', a key ending in a space.
        const S3Client s3(m_config);
        const std::vector<std::string> names = {"odd/a+b%c=d&e~f", "odd/\xc3\xa9t\xc3\xa9 ü/x", "odd/semi;colon,comma",
                                                "odd/star*paren(1)!'", "odd/trailing "};
        for (const auto& key : names) {
            s3.put(m_bucket, key, bytes_of(key));
            QCOMPARE(s3.get(m_bucket, key, 1000).value(), key);
        }
        const auto listed = s3.list(m_bucket, "odd/", 100);
        QCOMPARE(listed.size(), names.size());
        for (const auto& key : names)
            s3.remove(m_bucket, key);
        QVERIFY(s3.list(m_bucket, "odd/", 100).empty());
    }

    void listingsPageThroughAThousandKeys()
    {
        // S3 answers at most 1000 keys a page: 1003 keys need the continuation token.
        const S3Client s3(m_config);
        std::atomic<int> next{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                for (int i = next++; i < 1003; i = next++)
                    s3.put(m_bucket, "many/k" + std::to_string(100000 + i), bytes_of(std::to_string(i)));
            });
        for (auto& t : threads)
            t.join();
        s3.put(m_bucket, "manyother", bytes_of("x"));
        const auto listed = s3.list(m_bucket, "many/", 5000);
        QCOMPARE(listed.size(), std::size_t(1003));
        QCOMPARE(listed.front().key, "many/k100000");
        QCOMPARE(listed.back().key, "many/k101002");
        QCOMPARE(listed.back().size, uint64_t(4));
        try {
            (void)s3.list(m_bucket, "many/", 1002);
            QFAIL("a listing above the limit was accepted");
        } catch (const Error& e) {
            QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("more than 1002 objects")));
        }
    }

    void multipartUploadCompletesAndLeavesNothingBehind()
    {
        const S3Client s3(m_config);
        const std::size_t first = 5 << 20, second = 700000;
        const auto body = pattern(first + second, 2);
        const std::string key = "mp/rank-0001.safetensors";
        // Each part is read as it is sent, in the pieces curl asks for (its 64 KiB send buffer),
        // from where the part begins: never whole.
        std::size_t largest = 0;
        const auto part = [&](std::size_t from, std::size_t size) {
            return std::pair{
                [&body, &largest, from, size](uint64_t at, std::span<std::byte> into) {
                    QVERIFY(at + into.size() <= size);
                    largest = std::max(largest, into.size());
                    std::memcpy(into.data(), body.data() + from + at, into.size());
                },
                openssl_md5({body.begin() + std::ptrdiff_t(from), body.begin() + std::ptrdiff_t(from + size)})};
        };
        const std::string id = s3.create_multipart(m_bucket, key);
        std::vector<std::string> etags;
        const auto [read1, md5_1] = part(0, first);
        const auto [read2, md5_2] = part(first, second);
        etags.push_back(s3.upload_part(m_bucket, key, id, 1, first, read1, md5_1));
        QVERIFY(largest > 0 && largest <= (64u << 10));
        // A part whose bytes are not those its MD5 was worked out from is refused by the server.
        try {
            (void)s3.upload_part(m_bucket, key, id, 2, second, read2, md5_1);
            QFAIL("a part that does not match its MD5 was accepted");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::hash_mismatch);
        }
        // What the reading throws comes out of the upload, not through curl.
        try {
            (void)s3.upload_part(
                m_bucket, key, id, 2, second,
                [](uint64_t, std::span<std::byte>) { throw Error(ProblemKind::unreadable, "gone"); }, md5_2);
            QFAIL("a part that could not be read was sent");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::unreadable);
        }
        etags.push_back(s3.upload_part(m_bucket, key, id, 2, second, read2, md5_2));
        QCOMPARE(s3.list_multipart_uploads(m_bucket, "mp/").size(), std::size_t(1));
        s3.complete_multipart(m_bucket, key, id, etags);
        QCOMPARE(s3.head(m_bucket, key)->size, uint64_t(body.size()));
        std::vector<std::byte> across(4096); // across the part boundary
        s3.read(m_bucket, key, first - 2048, across);
        QVERIFY(std::equal(across.begin(), across.end(), body.begin() + (first - 2048)));
        // An upload that is given up is aborted: ListMultipartUploads is empty after it.
        const std::string dropped = s3.create_multipart(m_bucket, "mp/dropped");
        const auto [read3, md5_3] = part(0, 1000);
        (void)s3.upload_part(m_bucket, "mp/dropped", dropped, 1, 1000, read3, md5_3);
        s3.abort_multipart(m_bucket, "mp/dropped", dropped);
        QVERIFY(s3.list_multipart_uploads(m_bucket, "mp/").empty());
        QVERIFY(!s3.head(m_bucket, "mp/dropped"));
    }

    void openUploadsPageThroughAThousand()
    {
        // ListMultipartUploads answers at most 1000 uploads a page: a run that left 1003 open (a
        // crashed uploader's) has them all found, and all aborted.
        const S3Client s3(m_config);
        std::atomic<int> next{0};
        std::vector<std::thread> threads;
        std::mutex lock;
        std::vector<MultipartUpload> made;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                for (int i = next++; i < 1003; i = next++) {
                    const std::string key = "open/k" + std::to_string(100000 + i);
                    const std::string id = s3.create_multipart(m_bucket, key);
                    const std::lock_guard hold(lock);
                    made.push_back({key, id});
                }
            });
        for (auto& t : threads)
            t.join();
        const std::string other = s3.create_multipart(m_bucket, "openother");
        auto listed = s3.list_multipart_uploads(m_bucket, "open/");
        const auto by_key = [](const MultipartUpload& a, const MultipartUpload& b) { return a.key < b.key; };
        std::sort(listed.begin(), listed.end(), by_key);
        std::sort(made.begin(), made.end(), by_key);
        QCOMPARE(listed.size(), made.size());
        for (std::size_t i = 0; i < made.size(); ++i)
            QVERIFY(listed[i].key == made[i].key && listed[i].upload_id == made[i].upload_id);
        next = 0;
        threads.clear();
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                for (std::size_t i = next++; i < listed.size(); i = next++)
                    s3.abort_multipart(m_bucket, listed[i].key, listed[i].upload_id);
            });
        for (auto& t : threads)
            t.join();
        QVERIFY(s3.list_multipart_uploads(m_bucket, "open/").empty());
        s3.abort_multipart(m_bucket, "openother", other);
    }

    void refusedCredentialsAreSaidWithoutTheSecret()
    {
        S3Config wrong = m_config;
        wrong.credentials.secret_access_key = "not-the-secret-7f3a9c";
        try {
            (void)S3Client(wrong).head(m_bucket, "anything");
            QFAIL("a request with a wrong secret was answered");
        } catch (const Error& e) {
            const QString what = QString::fromStdString(e.what());
            QCOMPARE(int(e.kind()), int(ProblemKind::remote_error));
            QVERIFY2(what.contains(QStringLiteral("HTTP 403")), qPrintable(what));
            QVERIFY(!what.contains(QStringLiteral("not-the-secret")));
            QVERIFY(!what.contains(QString::fromStdString(m_config.credentials.secret_access_key)));
            // The object it was about is the error's path, for a caller that acts on it.
            QCOMPARE(e.problem().path, "s3://" + m_bucket + "/anything");
        }
    }

    // Temporary credentials: AWS_SESSION_TOKEN is read with the keys and travels as
    // x-amz-security-token among the signed headers. RGW without STS ignores the token but checks
    // the signature over every signed header, so a request carrying it is answered only when it was
    // signed with it; and no error repeats it.
    void aSessionTokenIsSignedAndNeverShown()
    {
        const auto keep = [](const char* name) { return std::pair(name, qgetenv(name)); };
        const std::array kept = {keep("AWS_SESSION_TOKEN"), keep("AWS_ACCESS_KEY_ID"), keep("AWS_SECRET_ACCESS_KEY")};
        const auto back = qScopeGuard([&] {
            for (const auto& [name, value] : kept)
                value.isEmpty() ? qunsetenv(name) : qputenv(name, value);
        });
        qputenv("AWS_ACCESS_KEY_ID", QByteArray::fromStdString(m_config.credentials.access_key_id));
        qputenv("AWS_SECRET_ACCESS_KEY", QByteArray::fromStdString(m_config.credentials.secret_access_key));
        qputenv("AWS_SESSION_TOKEN", "session-token-5d1e7b");
        S3Config with_token = s3_config_from_environment(m_config.endpoint);
        QCOMPARE(with_token.credentials.session_token, std::string("session-token-5d1e7b"));
        S3Client(with_token).put(m_bucket, "with-token", bytes_of("signed with its token"));
        QVERIFY(S3Client(with_token).head(m_bucket, "with-token"));
        with_token.credentials.secret_access_key = "not-the-secret-7f3a9c";
        try {
            (void)S3Client(with_token).head(m_bucket, "with-token");
            QFAIL("a request with a wrong secret was answered");
        } catch (const Error& e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.contains(QStringLiteral("HTTP 403")), qPrintable(what));
            QVERIFY(!what.contains(QStringLiteral("session-token")));
            QVERIFY(!what.contains(QStringLiteral("not-the-secret")));
        }
    }

    // Virtual-hosted addressing (bucket.host), as AWS itself is reached: the gateway knows its name
    // (`rgw dns name = localhost`), and *.localhost is loopback. A request that reached the gateway
    // without the bucket in its host would name no bucket and fail.
    void virtualHostedAddressingNamesTheBucketInTheHost()
    {
        S3Config virtual_hosted = m_config;
        const std::size_t host = virtual_hosted.endpoint.find("127.0.0.1");
        QVERIFY(host != std::string::npos);
        virtual_hosted.endpoint.replace(host, std::strlen("127.0.0.1"), "localhost");
        virtual_hosted.path_style = false;
        const S3Client s3(virtual_hosted);
        const auto body = pattern(3000, 7);
        s3.put(m_bucket, "virtual/hosted key", body);
        std::vector<std::byte> back(1000);
        s3.read(m_bucket, "virtual/hosted key", 1500, back);
        QVERIFY(std::equal(back.begin(), back.end(), body.begin() + 1500));
        const auto listed = s3.list(m_bucket, "virtual/", 10);
        QCOMPARE(listed.size(), std::size_t(1));
        QCOMPARE(listed[0].key, std::string("virtual/hosted key"));
        s3.remove(m_bucket, "virtual/hosted key");
        QVERIFY(!S3Client(m_config).head(m_bucket, "virtual/hosted key"));

        // SHARDSCOPE_S3_ADDRESSING=virtual asks for it with any endpoint (credentials from the
        // profile file here: the environment of this suite holds none).
        QTemporaryDir dir;
        QFile credentials(dir.filePath(QStringLiteral("credentials")));
        QVERIFY(credentials.open(QIODevice::WriteOnly));
        credentials.write(("[default]\naws_access_key_id = " + m_config.credentials.access_key_id +
                           "\naws_secret_access_key = " + m_config.credentials.secret_access_key + "\n")
                              .c_str());
        credentials.close();
        qputenv("AWS_SHARED_CREDENTIALS_FILE", credentials.fileName().toUtf8());
        qputenv("SHARDSCOPE_S3_ADDRESSING", "virtual");
        const bool chosen = !s3_config_from_environment(m_config.endpoint).path_style;
        qunsetenv("SHARDSCOPE_S3_ADDRESSING");
        qunsetenv("AWS_SHARED_CREDENTIALS_FILE");
        QVERIFY(chosen);
    }

    void anUnreachableServerIsRetriedThenNamed()
    {
        S3Config down = m_config;
        down.endpoint = "http://127.0.0.1:9"; // discard port: nothing listens
        down.retry = {.attempts = 3, .first_delay_ms = 20, .max_delay_ms = 40};
        QElapsedTimer timer;
        timer.start();
        try {
            (void)S3Client(down).head(m_bucket, "x");
            QFAIL("an unreachable server answered");
        } catch (const Error& e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.contains(QStringLiteral("no answer from http://127.0.0.1:9 after 3 attempts")),
                     qPrintable(what));
        }
        QVERIFY(timer.elapsed() < 5000);
        // A listing is named by the prefix listed, not by the bucket's root it is sent to.
        try {
            (void)S3Client(down).list(m_bucket, "run/", 10);
            QFAIL("an unreachable server listed");
        } catch (const Error& e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.startsWith(QString::fromStdString("LIST s3://" + m_bucket + "/run/: no answer")),
                     qPrintable(what));
            QCOMPARE(e.problem().path, "s3://" + m_bucket + "/run/");
        }
    }

    void credentialsComeFromTheProfileFile()
    {
        const QByteArray keep_id = qgetenv("AWS_ACCESS_KEY_ID"), keep_secret = qgetenv("AWS_SECRET_ACCESS_KEY");
        qunsetenv("AWS_ACCESS_KEY_ID");
        qunsetenv("AWS_SECRET_ACCESS_KEY");
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("credentials"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[ckpt]\n"
                 "aws_access_key_id = " +
                 m_config.credentials.access_key_id +
                 "\naws_secret_access_key = " + m_config.credentials.secret_access_key + "\n")
                    .c_str());
        f.close();
        qputenv("AWS_SHARED_CREDENTIALS_FILE", file.toUtf8());
        qputenv("AWS_PROFILE", "ckpt");
        qputenv("AWS_REGION", QByteArray::fromStdString(m_config.region));
        const S3Config from_profile = s3_config_from_environment(m_config.endpoint);
        QCOMPARE(from_profile.credentials.access_key_id, m_config.credentials.access_key_id);
        QVERIFY(from_profile.path_style); // an explicit endpoint: path-style, as Ceph and MinIO want
        S3Client(from_profile).put(m_bucket, "from-profile", bytes_of("ok"));
        qputenv("AWS_PROFILE", "missing");
        try {
            (void)s3_config_from_environment(m_config.endpoint);
            QFAIL("a profile without credentials was accepted");
        } catch (const Error& e) {
            QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("profile \"missing\" has none")));
        }
        qunsetenv("AWS_SHARED_CREDENTIALS_FILE");
        qunsetenv("AWS_PROFILE");
        qunsetenv("AWS_REGION");
        if (!keep_id.isEmpty())
            qputenv("AWS_ACCESS_KEY_ID", keep_id);
        if (!keep_secret.isEmpty())
            qputenv("AWS_SECRET_ACCESS_KEY", keep_secret);
    }

    void faultsAreRetriedWithBoundedBackoff()
    {
        // scripts/s3-fault-proxy.py between the client and the gateway: 503 SlowDown, a reset
        // connection, a truncated body and a stalled answer are each retried until they pass;
        // an outage that lasts is named after the last attempt.
        const s3test::FaultProxy proxy(m_config.endpoint);
        QVERIFY2(!proxy.endpoint().empty(), "the fault proxy did not start");
        S3Config via = m_config;
        via.endpoint = proxy.endpoint();
        via.stall_timeout_s = 1;
        via.retry = {.attempts = 4, .first_delay_ms = 20, .max_delay_ms = 80};
        const S3Client s3(via);
        const auto body = pattern(300000, 3);
        s3.put(m_bucket, "faults/object", body);
        std::vector<std::byte> got(body.size());
        for (const char* query : {"mode=503&count=3", "mode=reset&count=2&method=GET",
                                  "mode=truncate&count=2&method=GET", "mode=slow&seconds=3&count=1&method=GET"}) {
            QVERIFY(proxy.fault(query));
            std::fill(got.begin(), got.end(), std::byte{0});
            s3.read(m_bucket, "faults/object", 0, got);
            QVERIFY2(std::equal(got.begin(), got.end(), body.begin()), query);
        }
        QVERIFY(proxy.fault("mode=503&count=-1"));
        try {
            s3.read(m_bucket, "faults/object", 0, got);
            QFAIL("a lasting 503 was not reported");
        } catch (const Error& e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.contains(QStringLiteral("still answers HTTP 503 SlowDown")) &&
                         what.contains(QStringLiteral("after 4 attempts")),
                     qPrintable(what));
        }
        QVERIFY(proxy.fault("mode=none"));
        QVERIFY(s3.head(m_bucket, "faults/object"));
    }

    void aHostileServerGetsOneSentenceEach()
    {
        QProcess server;
        server.start(QStringLiteral("python3"),
                     {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/core/storage/hostile_s3_server.py")});
        QVERIFY(server.waitForStarted());
        const auto stop = qScopeGuard([&] {
            server.kill();
            server.waitForFinished(5000);
        });
        QTRY_VERIFY_WITH_TIMEOUT(server.canReadLine(), 10000);
        S3Config hostile = m_config;
        hostile.endpoint = "http://127.0.0.1:" + server.readLine().trimmed().toStdString();
        hostile.retry = {.attempts = 2, .first_delay_ms = 10, .max_delay_ms = 20};
        hostile.stall_timeout_s = 2;
        const S3Client s3(hostile);
        const auto said = [&](const std::function<void()>& call) -> QString {
            try {
                call();
            } catch (const Error& e) {
                return e.kind() == ProblemKind::remote_error || e.kind() == ProblemKind::missing_file
                    ? QString::fromStdString(e.what())
                    : QStringLiteral("wrong kind");
            }
            return QStringLiteral("accepted");
        };
        std::vector<std::byte> ten(10);
        { // a server that takes the request and says nothing is asked twice, not six times
            S3Config patient = hostile;
            patient.retry = {.attempts = 6, .first_delay_ms = 10, .max_delay_ms = 20};
            patient.stall_timeout_s = 1;
            QElapsedTimer waited;
            waited.start();
            const QString silent = said([&] { (void)S3Client(patient).get("b", "silent", 1000); });
            QVERIFY2(silent.contains(QStringLiteral("no answer from")) &&
                         silent.contains(QStringLiteral("after 2 attempts (nothing at all to the last 2)")),
                     qPrintable(silent));
            QVERIFY2(waited.elapsed() < 4500, qPrintable(QString::number(waited.elapsed())));
        }
        const QString redirect = said([&] { (void)s3.get("b", "redirect", 1000); });
        QVERIFY2(redirect.contains(QStringLiteral("GET s3://b/redirect: HTTP 301")) &&
                     redirect.contains(QStringLiteral("not followed")) && !redirect.contains(QStringLiteral("invalid")),
                 qPrintable(redirect));
        QVERIFY(said([&] { s3.read("b", "longer", 0, ten); }).contains(QStringLiteral("more than the 10 bytes")));
        for (const uint64_t offset : {uint64_t(0), uint64_t(50)}) {
            const QString norange = said([&] { s3.read("b", "norange", offset, ten); });
            QVERIFY2(norange.contains(QStringLiteral("GET s3://b/norange")) &&
                         norange.contains(QStringLiteral("the server ignores the Range header")),
                     qPrintable(norange));
        }
        QVERIFY(said([&] { (void)s3.get("b", "endless", 1 << 20); }).contains(QStringLiteral("more than the 1048576")));
        // Ten bytes, as many as asked, but another ten: not taken for those asked.
        const QString elsewhere = said([&] { s3.read("b", "wrongrange", 50, ten); });
        QVERIFY2(elsewhere.contains(QStringLiteral("GET s3://b/wrongrange (bytes=50-59): the server answered HTTP 206 "
                                                   "with the bytes \"bytes 0-9/100\" to a request for bytes=50-59")),
                 qPrintable(elsewhere));
        // A streamed read hands on no byte it did not ask for, and says the same sentences.
        uint64_t handed = 0;
        const auto count = [&](const char*, std::size_t n) {
            handed += n;
            return true;
        };
        for (const char* object : {"longer", "wrongrange"}) // 0-19 or 0-9 of 100 where 50-59 was asked
            QVERIFY(said([&] {
                        (void)s3.stream("b", object, 50, 10, count);
                    }).contains(QStringLiteral("to a request for bytes=50-59")));
        for (const uint64_t offset : {uint64_t(0), uint64_t(50)})
            QVERIFY(said([&] {
                        (void)s3.stream("b", "norange", offset, 10, count);
                    }).contains(QStringLiteral("the server ignores the Range header")));
        QVERIFY(said([&] {
                    (void)s3.stream("b", "endless", 0, 1 << 20, count);
                }).contains(QStringLiteral("the server ignores the Range header")));
        QCOMPARE(handed, uint64_t(0)); // none of those bodies is taken for the range
        // Cut short every time: resumed from the byte reached, then given up, in one sentence.
        const QString lost = said([&] { (void)s3.stream("b", "shortrange", 0, 100, count); });
        QVERIFY2(lost.contains(QStringLiteral("GET s3://b/shortrange (bytes=10-99)")) &&
                     lost.contains(QStringLiteral("the connection was lost part-way 2 times in a row")),
                 qPrintable(lost));
        QCOMPARE(handed, uint64_t(20));
        // An object whose answer gives it another size than it was listed with is not read as it:
        // a store without ETags (or ignoring If-Match) replaced it since the listing.
        handed = 0;
        for (const auto& read :
             std::vector<std::function<void()>>{[&] { s3.read("b", "shortrange", 0, ten, {}, 200); },
                                                [&] { (void)s3.stream("b", "shortrange", 0, 10, count, {}, 200); }}) {
            const QString resized = said(read);
            QVERIFY2(resized.startsWith(QStringLiteral("GET s3://b/shortrange")) &&
                         resized.endsWith(QStringLiteral(
                             ": the object changed since it was listed (listed with 200 bytes, now 100)")),
                     qPrintable(resized));
        }
        QCOMPARE(handed, uint64_t(0));
        // The bytes of the range asked, answered 200 as if they were the whole object, which was
        // listed larger: the server ignored the Range header.
        for (const auto& read :
             std::vector<std::function<void()>>{[&] { s3.read("b", "slice200", 0, ten, {}, 100); },
                                                [&] { (void)s3.stream("b", "slice200", 0, 10, count, {}, 100); }}) {
            const QString ignored = said(read);
            QVERIFY2(ignored.contains(QStringLiteral("the server ignores the Range header")), qPrintable(ignored));
        }
        QCOMPARE(handed, uint64_t(0));
        s3.read("b", "shortrange", 0, ten, {}, 100); // as listed: taken
        QCOMPARE(s3.stream("b", "shortrange", 0, 10, count, {}, 100), uint64_t(10));
        QCOMPARE(handed, uint64_t(10));
        // A whole object answered with 200 where the whole object was asked for is taken.
        handed = 0;
        QCOMPARE(s3.stream("b", "norange", 0, 100, count), uint64_t(100));
        QCOMPARE(handed, uint64_t(100));
        QVERIFY(said([&] { (void)s3.stream("b", "none", 0, 10, count); }).contains(QStringLiteral("no such object")));
        QVERIFY(said([&] { (void)s3.get("b", "shortlength", 1000); }).contains(QStringLiteral("no answer")));
        const QString garbage = said([&] { (void)s3.list("b", "garbage/", 100); });
        QVERIFY2(garbage.contains(QStringLiteral("LIST s3://b/garbage/: the answer is not a listing")),
                 qPrintable(garbage));
        const QString bomb = said([&] { (void)s3.list("b", "bomb", 100); });
        QVERIFY2(bomb.contains(QStringLiteral("document type")), qPrintable(bomb));
        const QString escape = said([&] { (void)s3.list("b", "run/", 100); });
        QVERIFY2(escape.contains(QStringLiteral("run/../../etc/passwd, which is not a plain name under the prefix")),
                 qPrintable(escape));
        const QString scheme = said([&] { (void)s3.get("b", "scheme-redirect", 1000); });
        QVERIFY2(scheme.contains(QStringLiteral("GET s3://b/scheme-redirect: HTTP 302")) &&
                     scheme.contains(QStringLiteral("not followed")) && !scheme.contains(QStringLiteral("ftp:")),
                 qPrintable(scheme));
        const QString no_length = said([&] { (void)s3.head("b", "nolength"); });
        QVERIFY2(no_length.contains(QStringLiteral("HEAD s3://b/nolength: the answer has no valid Content-Length")),
                 qPrintable(no_length));
        // Answers that are not valid HTTP are the server's fault: said at once, not retried and
        // called "no answer", nor waited on for bytes a second Content-Length promised.
        QElapsedTimer malformed;
        malformed.start();
        handed = 0;
        for (const auto& [call, why] : std::vector<std::pair<std::function<void()>, QString>>{
                 {[&] { (void)s3.head("b", "minuslength"); }, QStringLiteral("HEAD s3://b/minuslength: the answer")},
                 {[&] { (void)s3.get("b", "minuslength", 1000); },
                  QStringLiteral("GET s3://b/minuslength: the answer")},
                 {[&] { (void)s3.get("b", "twolengths", 1000); },
                  QStringLiteral("GET s3://b/twolengths: the answer from http://127.0.0.1:")},
                 {[&] { (void)s3.stream("b", "twolengths", 0, 100, count); },
                  QStringLiteral("GET s3://b/twolengths: the answer")}}) {
            const QString said_now = said(call);
            QVERIFY2(said_now.startsWith(why) && said_now.contains(QStringLiteral(" is not valid HTTP (")) &&
                         !said_now.contains(QStringLiteral("attempts")),
                     qPrintable(said_now));
        }
        QVERIFY(said([&] { (void)s3.get("b", "twolengths", 1000); }).contains(QStringLiteral("Content-Length")));
        QVERIFY(said([&] {
                    (void)s3.head("b", "minuslength");
                }).endsWith(QStringLiteral("(an invalid Content-Length header)")));
        QVERIFY2(malformed.elapsed() < 1900, qPrintable(QString::number(malformed.elapsed()))); // no stall waited out
        QCOMPARE(handed, uint64_t(0)); // none of the two-length body was taken
        const QString partial = said([&] { (void)s3.get("b", "partial", 1000); });
        QVERIFY2(partial ==
                     QStringLiteral("GET s3://b/partial: the server answered HTTP 206 (part of an object, "
                                    "\"bytes 0-9/100\") to a request that asked for no range"),
                 qPrintable(partial));
        const QString loop = said([&] { (void)s3.list("b", "loop/", 100); });
        QVERIFY2(loop.contains(QStringLiteral("a truncated listing without a new continuation token")),
                 qPrintable(loop));
        const QString uploads = said([&] { (void)s3.list_multipart_uploads("b", "back/"); });
        QVERIFY2(uploads.contains(QStringLiteral("a truncated listing whose markers do not move forward")),
                 qPrintable(uploads));
        // Uploads a reader's credentials may not list are none to it; a server that fails is not.
        QVERIFY(!s3.list_multipart_uploads_if_allowed("b", "refused/"));
        const QString refused = said([&] { (void)s3.list_multipart_uploads("b", "refused/"); });
        QVERIFY2(refused.contains(QStringLiteral("LIST uploads s3://b/refused/: HTTP 403 AccessDenied")),
                 qPrintable(refused));
        const QString broken = said([&] { (void)s3.list_multipart_uploads_if_allowed("b", "broken/"); });
        QVERIFY2(broken.contains(QStringLiteral("still answers HTTP 500")), qPrintable(broken));
        const QString endless = said([&] { (void)s3.list("b", "endless/", 100); });
        QVERIFY2(endless.contains(QStringLiteral("the listing does not end")), qPrintable(endless));
        // A web server that answers for every Megatron rank folder: the probe gives up after a
        // bounded number of requests, in one sentence, rather than asking for every rank of a
        // grid thousands wide.
        QElapsedTimer probing;
        probing.start();
        const QString ranks = said([&] { (void)storage::Folder::open(parse_location(hostile.endpoint + "/ranks/x")); });
        QVERIFY2(ranks.endsWith(QStringLiteral("asked for); not read as a checkpoint folder")), qPrintable(ranks));
        qInfo("the probe of a folder answering for every rank gave up after %lld ms", probing.elapsed());
        const QString missing = said([&] { s3.read("b", "none", 0, ten); });
        QVERIFY2(missing.contains(QStringLiteral("s3://b/none: no such object")), qPrintable(missing));
        QVERIFY(!missing.contains(QChar(0x1b)));
    }

    void cleanupTestCase()
    {
        if (m_bucket.empty()) // no server: initTestCase said so
            return;
        const S3Client s3(m_config);
        for (const auto& o : s3.list(m_bucket, "", 10000))
            s3.remove(m_bucket, o.key);
    }
};

QTEST_GUILESS_MAIN(TestS3)
#include "tst_s3.moc"
