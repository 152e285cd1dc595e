// core/run/internal/piece_digests.h: the digests are OpenSSL's MD5 of each piece, asked for from
// several threads; a piece that cannot be opened fails the pieces from its batch on, not those
// before; the thread keeps within kLead pieces of what was asked; and the object can be destroyed
// with its thread waiting or in the middle of a piece.

#include "core/run/internal/piece_digests.h"

#include "core/util/md5_reference.h"

#include <QTest>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace shardscope;

namespace {

struct Pieces {
    std::vector<std::vector<std::byte>> data;
    std::vector<uint64_t> sizes;
    std::atomic<std::size_t> opened{0}; // how many pieces the thread has opened

    explicit Pieces(std::size_t count, std::size_t max_size = 700'000)
    {
        std::mt19937_64 rng(count);
        for (std::size_t j = 0; j < count; ++j) {
            std::vector<std::byte> piece(j % 7 == 0 ? j % 3 : rng() % max_size);
            for (auto& b : piece)
                b = static_cast<std::byte>(rng());
            sizes.push_back(piece.size());
            data.push_back(std::move(piece));
        }
    }
    PieceDigests::Open opener(std::size_t failing = SIZE_MAX)
    {
        return [this, failing](std::size_t j) -> PieceDigests::Read {
            ++opened;
            if (j == failing)
                throw std::runtime_error("piece " + std::to_string(j) + " cannot be opened");
            return [this, j](uint64_t at, std::span<std::byte> into) {
                if (at + into.size() > data[j].size()) // on the digests' thread: no QVERIFY there
                    throw std::logic_error("a read past piece " + std::to_string(j) + "'s end");
                std::memcpy(into.data(), data[j].data() + at, into.size());
            };
        };
    }
};

bool wait_for(const std::function<bool()>& done)
{
    for (int i = 0; i < 1000 && !done(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
}

} // namespace

class TestPieceDigests : public QObject {
    Q_OBJECT

private slots:
    void digestsAreEachPiecesMd5FromAnyThread()
    {
        Pieces pieces(53); // three full batches and a short one; empty pieces among them
        PieceDigests digests(pieces.sizes, pieces.opener());
        std::atomic<std::size_t> next{0};
        std::atomic<int> wrong{0};
        std::vector<std::thread> senders;
        for (int t = 0; t < 4; ++t)
            senders.emplace_back([&] {
                for (std::size_t j = next++; j < pieces.data.size(); j = next++)
                    if (digests.get(j) != openssl_md5(pieces.data[j]))
                        ++wrong;
            });
        for (auto& t : senders)
            t.join();
        QCOMPARE(wrong.load(), 0);
        QCOMPARE(pieces.opened.load(), std::size_t(53));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, digests.get(53));
    }

    // Piece 20 (in the second batch of sixteen) cannot be opened: the first batch's digests are
    // given, every later piece's get() and check() throw what the opener threw.
    void aFailedPieceFailsItsBatchOnward()
    {
        Pieces pieces(40);
        PieceDigests digests(pieces.sizes, pieces.opener(20));
        for (std::size_t j = 0; j < 16; ++j)
            QVERIFY(digests.get(j) == openssl_md5(pieces.data[j]));
        for (std::size_t j : {16, 20, 39}) {
            try {
                (void)digests.get(j);
                QFAIL("a piece after the failed one was given a digest");
            } catch (const std::runtime_error& e) {
                QCOMPARE(std::string(e.what()), std::string("piece 20 cannot be opened"));
            }
        }
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, digests.check());
    }

    // Nothing asked for yet: two batches (kLead pieces) are worked out, then the thread waits;
    // asking for piece 31 lets it go on to piece 63. Destroyed while it waits, it stops.
    void keepsWithinItsLead()
    {
        static_assert(PieceDigests::kLead == 32);
        Pieces pieces(100, 4096);
        {
            PieceDigests digests(pieces.sizes, pieces.opener());
            QVERIFY(wait_for([&] { return pieces.opened >= 32; }));
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            QCOMPARE(pieces.opened.load(), std::size_t(32));
            digests.check(); // no failure to throw
            QVERIFY(digests.get(31) == openssl_md5(pieces.data[31]));
            QVERIFY(wait_for([&] { return pieces.opened >= 64; }));
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            QCOMPARE(pieces.opened.load(), std::size_t(64));
        }
        QCOMPARE(pieces.opened.load(), std::size_t(64));
        PieceDigests none({}, pieces.opener()); // no pieces: the thread ends at once
    }

    // Destroyed in the middle of a batch whose reading would take seconds: it returns promptly.
    void stopsInTheMiddleOfAPiece()
    {
        std::vector<uint64_t> sizes(16, 64 << 20); // 256 reads of each piece's 256 KiB
        std::atomic<int> reads{0};
        const auto started = std::chrono::steady_clock::now();
        {
            PieceDigests digests(sizes, [&](std::size_t) -> PieceDigests::Read {
                return [&](uint64_t, std::span<std::byte> into) {
                    std::memset(into.data(), 0, into.size());
                    ++reads;
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                };
            });
            QVERIFY(wait_for([&] { return reads > 0; }));
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        QVERIFY2(reads < 16 * 256, "every piece was read to its end");
        QVERIFY2(seconds < 2.0, std::to_string(seconds).c_str());
    }
};

QTEST_GUILESS_MAIN(TestPieceDigests)
#include "tst_piece_digests.moc"
