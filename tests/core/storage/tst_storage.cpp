// Locations, SigV4, the XML reader and ordered reads ahead without a server: the signatures are
// those AWS publishes as worked examples in the S3 API reference ("Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk"), for its example credentials.

#include "core/storage/internal/xml.h"
#include "core/storage/location.h"
#include "core/storage/s3.h"
#include "core/storage/sequential_read.h"
#include "core/storage/sigv4.h"
#include "core/util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <fcntl.h>
#include <fstream>
#include <thread>

using namespace shardscope;
using namespace shardscope::storage;

namespace {

const Credentials kExample{.access_key_id = "AKIAIOSFODNN7EXAMPLE",
                           .secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
const std::string kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const std::string kDate = "20130524T000000Z";

std::string signature_of(const std::string& authorization)
{
    return authorization.substr(authorization.rfind('=') + 1);
}

QString refusal(const std::string& text)
{
    try {
        (void)parse_location(text);
    } catch (const Error& e) {
        if (e.kind() != ProblemKind::invalid_argument)
            return QStringLiteral("wrong kind");
        return QString::fromStdString(e.what());
    }
    return {};
}

} // namespace

class TestStorage : public QObject {
    Q_OBJECT
private slots:
    void getObjectWithRange()
    {
        const SigningRequest r{.method = "GET",
                               .path = "/test.txt",
                               .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                                           {"Range", "bytes=0-9"},
                                           {"x-amz-content-sha256", kEmpty},
                                           {"x-amz-date", kDate}},
                               .payload_sha256 = kEmpty};
        QCOMPARE(canonical_request(r),
                 "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                 "x-amz-content-sha256:" +
                     kEmpty + "\nx-amz-date:" + kDate + "\n\nhost;range;x-amz-content-sha256;x-amz-date\n" + kEmpty);
        const std::string auth = authorization(r, kExample, kDate, "us-east-1");
        QVERIFY(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                                 "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature="));
        QCOMPARE(signature_of(auth), "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    }

    void putObjectWithAnEncodedKey()
    {
        const std::string body_hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
        const SigningRequest r{.method = "PUT",
                               .path = "/" + uri_encode("test$file.text", true),
                               .headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                           {"Host", "examplebucket.s3.amazonaws.com"},
                                           {"x-amz-date", kDate},
                                           {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                                           {"x-amz-content-sha256", body_hash}},
                               .payload_sha256 = body_hash};
        QCOMPARE(r.path, "/test%24file.text");
        QCOMPARE(signature_of(authorization(r, kExample, kDate, "us-east-1")),
                 "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    }

    void aBareSubresourceIsSignedWithItsEqualsSign()
    {
        // `?lifecycle` (like `?uploads`) has no value; it is signed as "lifecycle=".
        const SigningRequest r{.method = "GET",
                               .path = "/",
                               .query = {{"lifecycle", ""}},
                               .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                                           {"x-amz-date", kDate},
                                           {"x-amz-content-sha256", kEmpty}},
                               .payload_sha256 = kEmpty};
        QVERIFY(canonical_request(r).starts_with("GET\n/\nlifecycle=\n"));
        QCOMPARE(signature_of(authorization(r, kExample, kDate, "us-east-1")),
                 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    }

    void theQueryIsSortedBeforeSigning()
    {
        const SigningRequest r{.method = "GET",
                               .path = "/",
                               .query = {{"prefix", "J"}, {"max-keys", "2"}},
                               .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                                           {"x-amz-date", kDate},
                                           {"x-amz-content-sha256", kEmpty}},
                               .payload_sha256 = kEmpty};
        QVERIFY(canonical_request(r).starts_with("GET\n/\nmax-keys=2&prefix=J\n"));
        QCOMPARE(signature_of(authorization(r, kExample, kDate, "us-east-1")),
                 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    }

    void uriEncoding()
    {
        QCOMPARE(uri_encode("a b/c~d_e-f.g", true), "a%20b/c~d_e-f.g");
        QCOMPARE(uri_encode("a b/c", false), "a%20b%2Fc");
        QCOMPARE(uri_encode("\xc3\xa9+=", false), "%C3%A9%2B%3D");
        QCOMPARE(encoded_query({{"uploadId", "x/y+z"}, {"partNumber", "3"}}), "partNumber=3&uploadId=x%2Fy%2Bz");
        // Values with the same name sort by value; header values are trimmed and runs of blanks collapsed.
        const SigningRequest r{.method = "GET",
                               .path = "/",
                               .headers = {{"X-B", "  two   words "}, {"x-a", "1"}},
                               .payload_sha256 = kEmpty};
        QCOMPARE(canonical_request(r), "GET\n/\n\nx-a:1\nx-b:two words\n\nx-a;x-b\n" + kEmpty);
    }

    void locations()
    {
        const Location s3 = parse_location("s3://ckpt-bucket/runs/llama/");
        QCOMPARE(int(s3.scheme), int(Scheme::s3));
        QCOMPARE(s3.bucket, "ckpt-bucket");
        QCOMPARE(s3.prefix, "runs/llama");
        QCOMPARE(to_string(s3.child("step-00000010")), "s3://ckpt-bucket/runs/llama/step-00000010");
        QCOMPARE(parse_location("s3://ckpt-bucket").prefix, "");
        const Location web = parse_location("https://models.example.org:8443/org/model");
        QCOMPARE(int(web.scheme), int(Scheme::https));
        QCOMPARE(web.authority, "models.example.org:8443");
        QCOMPARE(web.prefix, "org/model");
        // A scheme is case-insensitive; the bucket, host and key keep their case rules.
        const Location upper = parse_location("S3://ckpt-bucket/Runs");
        QCOMPARE(int(upper.scheme), int(Scheme::s3));
        QCOMPARE(to_string(upper), "s3://ckpt-bucket/Runs");
        QCOMPARE(int(parse_location("HTTPS://models.example.org/Org").scheme), int(Scheme::https));
        QCOMPARE(int(parse_location("Http://models.example.org/Org").scheme), int(Scheme::http));
        // Up: a prefix shortened, never above the bucket's or the server's root.
        QCOMPARE(to_string(s3.above()), "s3://ckpt-bucket/runs");
        QCOMPARE(to_string(s3.above(2)), "s3://ckpt-bucket");
        QCOMPARE(to_string(s3.above(3)), "s3://ckpt-bucket");
        QCOMPARE(s3.above().bucket, "ckpt-bucket");
        QCOMPARE(to_string(web.above(2)), "https://models.example.org:8443");
        QCOMPARE(Location(std::filesystem::path("/runs/llama/")).above().path, std::filesystem::path("/runs"));
        QCOMPARE(Location(std::filesystem::path("/runs/llama")).above(2).path, std::filesystem::path("/"));
        QCOMPARE(Location(std::filesystem::path("/")).above().path, std::filesystem::path("/"));
        // A mistyped URL is not a local path either; written ./ it is one.
        const Location local = parse_location("./s3:/ckpt/run");
        QVERIFY(local.is_local());
        QCOMPARE(local.path, std::filesystem::path("./s3:/ckpt/run"));
        QVERIFY(is_url("s3://x") && is_url("gs://bucket/x") && is_url("file:///tmp") && !is_url("/tmp/s3://x"));
        QVERIFY(is_url("s3:/ckpt/run") && is_url("s3:ckpt") && is_url("S3:/ckpt") && is_url("file:run") &&
                is_url(" s3://ckpt/run") && is_url("\ts3:/x"));
        QVERIFY(!is_url("C:/x") && !is_url("run:1") && !is_url("") && !is_url("ckpt-12:30") && !is_url(" run"));
    }

    void badLocationsAreRefusedWithASentence()
    {
        QVERIFY(refusal("gs://bucket/run").contains(QStringLiteral("unknown URL scheme \"gs\"")));
        for (const char* typo : {"s3:/ckpt/run", "s3:ckpt/run", "file:run", "https:/host/x"})
            QVERIFY2(refusal(typo).contains(QStringLiteral("not a URL")) &&
                         refusal(typo).contains(QStringLiteral("written ./")),
                     typo);
        QVERIFY(refusal(" s3://ckpt/run").contains(QStringLiteral("begins with blanks")));
        QVERIFY(parse_location("./r2:run").is_local() && !is_url("r2:run"));
        QVERIFY(refusal("s3://Bad_Bucket/run").contains(QStringLiteral("not a valid S3 bucket name")));
        QVERIFY(refusal("s3://ab/run").contains(QStringLiteral("not a valid S3 bucket name")));
        QVERIFY(refusal("s3://bucket/run/../other").contains(QStringLiteral("\"..\" component")));
        QVERIFY(refusal("s3://bucket/a//b").contains(QStringLiteral("empty")));
        QVERIFY(refusal("s3://bucket/a\x1b[2Jb").contains(QStringLiteral("\\x1b")));
        QVERIFY(refusal("https://host/x?token=1").contains(QStringLiteral("query")));
        for (const char* host : {"https://[::1", "http://[::1]x/m", "http://host:/m", "http://host:99999/m",
                                 "http://host:8080:1/m", "http://ho%20st/m", "http://[]/m", "https://[fe80::g]/m"})
            QVERIFY2(refusal(host).contains(QStringLiteral("the URL's host is not a host name or address")),
                     qPrintable(refusal(host)));
        for (const char* host : {"http://[::1]:8080/m", "https://[2001:db8::1]/m", "http://127.0.0.1:9000/m",
                                 "https://models.example.org/m", "http://my_host.local:1/m"})
            QCOMPARE(int(parse_location(host).scheme) != int(Scheme::local), true);
        try {
            (void)S3Client(S3Config{.endpoint = "http://[::1"});
            QFAIL("an endpoint that is no host was accepted");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::invalid_argument));
        }
        const QString secret = refusal("https://user:hunter2@host/x");
        QVERIFY(secret.contains(QStringLiteral("credentials")));
        QVERIFY2(!secret.contains(QStringLiteral("hunter2")), qPrintable(secret));
    }

    void anEndpointWithCredentialsIsRefusedWithoutThem()
    {
        try {
            (void)S3Client(S3Config{.endpoint = "https://AKID:hunter2@store.example"});
            QFAIL("an endpoint with credentials was accepted");
        } catch (const Error& e) {
            QVERIFY(!QString::fromStdString(e.what()).contains(QStringLiteral("hunter2")));
            QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("without a path or credentials")));
        }
        try {
            (void)S3Client(S3Config{.endpoint = "ftp://x"});
            QFAIL("a bad endpoint was accepted");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::invalid_argument));
        }
    }

    void xmlElementsAndText()
    {
        const std::string doc = "<?xml version=\"1.0\"?><ListBucketResult><KeyCount>2</KeyCount>"
                                "<Contents><Key>a&amp;b &#x263A;</Key><Size>10</Size></Contents>"
                                "<Contents><Key>c&lt;d</Key><Size>0</Size><ETag/></Contents>"
                                "<IsTruncated>false</IsTruncated></ListBucketResult>";
        QVERIFY(xml_acceptable(doc));
        const auto contents = xml_elements(doc, "Contents");
        QCOMPARE(contents.size(), std::size_t(2));
        QCOMPARE(xml_text(contents[0], "Key").value(), "a&b \xe2\x98\xba");
        QCOMPARE(xml_text(contents[1], "Key").value(), "c<d");
        QCOMPARE(xml_text(contents[1], "ETag").value(), "");
        QCOMPARE(xml_text(doc, "KeyCount").value(), "2");
        QVERIFY(!xml_text(doc, "NextContinuationToken"));
        QVERIFY(!xml_text("<Key>&bogus;</Key>", "Key"));
        QVERIFY(!xml_text("<Key>&#0;</Key>", "Key"));
        QVERIFY(!xml_acceptable("<!DOCTYPE lolz [<!ENTITY lol \"lol\">]><Key>&lol;</Key>"));
    }

    // Ahead or not, the consumer sees every byte once and in order, a stop ends the read where it
    // was asked to, and a read that fails is reported at its own offset, never at a later one.
    void readInOrderReadsAheadInOrder()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("object")).toStdString();
        std::string contents(100'003, '\0');
        for (std::size_t i = 0; i < contents.size(); ++i)
            contents[i] = static_cast<char>((i * 7919) >> 3);
        std::ofstream(path, std::ios::binary).write(contents.data(), static_cast<std::streamsize>(contents.size()));
        const FileReader reader(fsutil::UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)));
        for (const int depth : {1, 2, 5, 40}) {
            std::string seen;
            std::vector<std::thread::id> consumers;
            const SequentialReadEnd end = read_in_order(reader, contents.size(), {.chunk = 4096, .depth = depth},
                                                        [&](const char* p, std::size_t n) {
                                                            seen.append(p, n);
                                                            consumers.push_back(std::this_thread::get_id());
                                                            return true;
                                                        });
            QVERIFY(!end.failed);
            QCOMPARE(end.done, contents.size());
            QVERIFY2(seen == contents, qPrintable(QStringLiteral("depth %1").arg(depth)));
            QCOMPARE(consumers.size(), std::size_t(25)); // 24 full chunks and 1699 bytes
            for (const auto& id : consumers)
                QCOMPARE(id, std::this_thread::get_id()); // the consumer never runs on a helper

            int calls = 0;
            const SequentialReadEnd stopped = read_in_order(reader, contents.size(), {.chunk = 4096, .depth = depth},
                                                            [&](const char*, std::size_t) { return ++calls < 3; });
            QCOMPARE(calls, 3);
            QCOMPARE(stopped.done, uint64_t(3 * 4096));
            QVERIFY(!stopped.failed);

            // Told the file is longer than it is: the chunk past its end fails, after every byte before it.
            uint64_t consumed = 0;
            const SequentialReadEnd short_file =
                read_in_order(reader, 120'000, {.chunk = 4096, .depth = depth}, [&](const char*, std::size_t n) {
                    consumed += n;
                    return true;
                });
            QVERIFY(short_file.failed);
            QCOMPARE(short_file.done, uint64_t(24 * 4096));
            QCOMPARE(consumed, short_file.done);
        }
    }

    void remoteReadDepthKeepsTheReadsInFlight()
    {
        QCOMPARE(remote_read_depth(1), kRemoteReadsAtOnce);
        QCOMPARE(remote_read_depth(2), 1); // several objects at once: one stream each
        QCOMPARE(remote_read_depth(kRemoteReadsAtOnce), 1);
        QCOMPARE(remote_read_depth(64), 1);
        for (int workers = 1; workers <= 16; ++workers)
            QVERIFY(workers * remote_read_depth(workers) <= std::max(workers, kRemoteReadsAtOnce));
    }
};

QTEST_GUILESS_MAIN(TestStorage)
#include "tst_storage.moc"
