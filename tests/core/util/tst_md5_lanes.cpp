// core/util/md5_lanes.h: every lane's digest is OpenSSL's MD5 of what the lane was given, whatever
// the lengths (the padding's one- and two-block cases), however the bytes were cut into pieces,
// with idle lanes, and again after finish(). Run twice by ctest: on the AVX2 copy and on the SSE2
// one (SHARDSCOPE_KERNELS=sse2).

#include "core/util/md5_lanes.h"

#include "core/util/md5_reference.h"

#include <QTest>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace shardscope;

namespace {

std::string hex(const Md5Digest& d)
{
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::byte b : d) {
        out += digits[std::to_integer<int>(b) >> 4];
        out += digits[std::to_integer<int>(b) & 15];
    }
    return out;
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n)
{
    std::vector<std::byte> out(n);
    for (auto& b : out)
        b = static_cast<std::byte>(rng());
    return out;
}

} // namespace

class TestMd5Lanes : public QObject {
    Q_OBJECT

private slots:
    // RFC 1321's own examples, one a lane, the other lanes idle (they hash the empty string).
    void rfcExamples()
    {
        const std::vector<std::pair<std::string, std::string>> examples = {
            {"", "d41d8cd98f00b204e9800998ecf8427e"},
            {"a", "0cc175b9c0f1b6a831c399e269772661"},
            {"abc", "900150983cd24fb0d6963f7d28e17f72"},
            {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
            {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
            {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
            {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
             "57edf4a22be3c955ac49da2e2107b67a"}};
        Md5Lanes md5;
        std::vector<std::span<const std::byte>> pieces;
        for (const auto& [text, digest] : examples)
            pieces.push_back(std::as_bytes(std::span(text.data(), text.size())));
        md5.update(pieces);
        const auto digests = md5.finish();
        for (std::size_t i = 0; i < examples.size(); ++i)
            QCOMPARE(hex(digests[i]), examples[i].second);
        for (std::size_t i = examples.size(); i < Md5Lanes::kLanes; ++i)
            QCOMPARE(hex(digests[i]), std::string("d41d8cd98f00b204e9800998ecf8427e"));
    }

    // Lengths around the padding's edges and beyond, cut into random pieces (empty ones too) that
    // differ from lane to lane; twice over, since finish() leaves the lanes empty for reuse.
    void anyLengthsAnyPieces()
    {
        std::mt19937_64 rng(20261205);
        const std::vector<std::size_t> lengths = {0,   1,   55,  56,  57,  63,   64,   65,
                                                  119, 120, 127, 128, 129, 1000, 4096, 70001};
        QCOMPARE(lengths.size(), Md5Lanes::kLanes);
        Md5Lanes md5;
        for (int pass = 0; pass < 2; ++pass) {
            std::vector<std::vector<std::byte>> data;
            for (std::size_t n : lengths)
                data.push_back(random_bytes(rng, n + pass * 3));
            std::vector<std::size_t> at(Md5Lanes::kLanes, 0);
            for (bool more = true; more;) {
                more = false;
                std::vector<std::span<const std::byte>> pieces;
                for (std::size_t i = 0; i < Md5Lanes::kLanes; ++i) {
                    const std::size_t left = data[i].size() - at[i];
                    const std::size_t n = std::min<std::size_t>(left, rng() % 200 == 0 ? 0 : rng() % 5000);
                    pieces.push_back(std::span(data[i]).subspan(at[i], n));
                    at[i] += n;
                    more = more || at[i] < data[i].size();
                }
                md5.update(pieces);
            }
            const auto digests = md5.finish();
            for (std::size_t i = 0; i < Md5Lanes::kLanes; ++i) {
                QVERIFY2(digests[i] == openssl_md5(data[i]),
                         ("lane " + std::to_string(i) + ", " + std::to_string(data[i].size()) + " bytes").c_str());
            }
        }
    }

    // Fewer pieces than lanes: the lanes without one are left as they were.
    void lanesWithoutPiecesKeepTheirState()
    {
        std::mt19937_64 rng(7);
        const std::vector<std::byte> a = random_bytes(rng, 3000), b = random_bytes(rng, 200);
        Md5Lanes md5;
        const std::span<const std::byte> first[2] = {std::span(a).first(1000), std::span(b)};
        md5.update(first);
        const std::span<const std::byte> second[1] = {std::span(a).subspan(1000)};
        md5.update(second);
        const auto digests = md5.finish();
        QVERIFY(digests[0] == openssl_md5(a));
        QVERIFY(digests[1] == openssl_md5(b));
        std::vector<std::span<const std::byte>> too_many(Md5Lanes::kLanes + 1);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, md5.update(too_many));
    }

    // What the lanes are for: sixteen parts of an S3 upload (2 MiB here, to keep the suite light)
    // against OpenSSL's MD5 of each, same data, same thread. Printed, not asserted (a shared
    // machine's timing); the digests are.
    void sixteenPartsAgainstOpenSsl()
    {
        std::mt19937_64 rng(1);
        std::vector<std::vector<std::byte>> parts;
        for (std::size_t i = 0; i < Md5Lanes::kLanes; ++i)
            parts.push_back(random_bytes(rng, 2 << 20));
        auto start = std::chrono::steady_clock::now();
        std::vector<Md5Digest> theirs;
        for (const auto& p : parts)
            theirs.push_back(openssl_md5(p));
        const double openssl_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        start = std::chrono::steady_clock::now();
        Md5Lanes md5;
        // 256 KiB of each part at a time, as the mirror's sender reads them.
        for (std::size_t at = 0; at < parts[0].size(); at += 256 << 10) {
            std::vector<std::span<const std::byte>> pieces;
            for (const auto& p : parts)
                pieces.push_back(std::span(p).subspan(at, 256 << 10));
            md5.update(pieces);
        }
        const auto ours = md5.finish();
        const double lanes_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (std::size_t i = 0; i < Md5Lanes::kLanes; ++i)
            QVERIFY(ours[i] == theirs[i]);
        const double mb = double(Md5Lanes::kLanes * parts[0].size()) / 1e6;
        qInfo("MD5 of 16 x 2 MiB: lanes %.0f MB/s, OpenSSL one at a time %.0f MB/s (%.1fx)", mb / lanes_s,
              mb / openssl_s, openssl_s / lanes_s);
    }
};

QTEST_GUILESS_MAIN(TestMd5Lanes)
#include "tst_md5_lanes.moc"
