// The restricted pickle reader: what it builds from protocols 2-5 opcodes, and what it refuses.

#include "foreign_fixtures.h"

#include "core/util/error.h"
#include "core/foreign/dcp.h"
#include "core/foreign/io/pickle_reader.h"

#include <QTest>
#include <filesystem>

using namespace shardscope;
using fixtures::PickleWriter;

// Binary literals may hold NUL bytes: take the literal's full length.
#define B(literal) QByteArray(literal, sizeof(literal) - 1)

namespace {

ProblemKind kind_of(const std::string& data, const PickleLimits& limits = {})
{
    try {
        parse_pickle(data, "test.pkl", limits);
    } catch (const Error& e) {
        return e.kind();
    }
    return ProblemKind::cancelled; // "no error" marker
}

std::string message_of(const std::string& data)
{
    try {
        parse_pickle(data, "test.pkl");
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

} // namespace

class TestForeignPickle : public QObject {
    Q_OBJECT
private slots:
    void scalarsAndContainers()
    {
        PickleWriter w;
        w.proto(4).op('}').memoize().mark();
        w.str("a").integer(-5).str("b").integer(70000).str("big").integer(int64_t(1) << 40);
        w.str("t").mark().none().boolean(true).op(0x8c).op(1).out += "x";
        w.op('t');
        w.str("l").op(']').mark().integer(1).integer(2).op('e');
        w.op('u').stop();
        const auto doc = parse_pickle(w.out, "t.pkl");
        QCOMPARE(doc.protocol(), 4);
        const uint32_t root = doc.root();
        QVERIFY(doc.is(root, PickleKind::dict));
        QCOMPARE(doc.as_int(doc.dict_get(root, "a")).value(), int64_t(-5));
        QCOMPARE(doc.as_int(doc.dict_get(root, "b")).value(), int64_t(70000));
        QCOMPARE(doc.as_int(doc.dict_get(root, "big")).value(), int64_t(1) << 40);
        const auto t = doc.as_sequence(doc.dict_get(root, "t"));
        QVERIFY(t && t->size() == 3);
        QVERIFY(doc.is((*t)[0], PickleKind::none));
        QCOMPARE(std::string(doc.at((*t)[2]).text), std::string("x"));
        QCOMPARE(doc.as_sequence(doc.dict_get(root, "l"))->size(), std::size_t(2));
        QCOMPARE(doc.dict_get(root, "absent"), kNoPickleValue);
    }

    void globalsReduceAndBuildAreInert()
    {
        // os.system('touch <marker>') must be recorded, never called.
        const auto marker = std::filesystem::temp_directory_path() / "shardscope-pickle-marker";
        std::filesystem::remove(marker);
        PickleWriter w;
        w.proto(2).global("os", "system").mark().str("touch " + marker.string()).op('t').op('R');
        w.mark().str("x").integer(1).op('d').op('b').stop();
        const auto doc = parse_pickle(w.out, "evil.pkl");
        QVERIFY(!std::filesystem::exists(marker));
        QCOMPARE(doc.class_name(doc.root()), std::string("os.system"));
        QCOMPARE(doc.as_int(doc.attribute(doc.root(), "x")).value(), int64_t(1));
        // DCP decoding rejects it as not-a-Metadata rather than trusting it.
        try {
            decode_dcp_metadata(w.out, "evil.pkl");
            QFAIL("decoded a non-Metadata pickle");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_manifest);
        }
    }

    void memoAndSharedReferences()
    {
        PickleWriter w;
        w.proto(4).stack_global("torch", "Size"); // memo 0..2
        w.op(']').memoize(); // memo 3: a list
        w.get(3).op('a'); // the list appends itself: a cycle, harmless
        w.op(0x86).stop(); // (torch.Size, list)
        const auto doc = parse_pickle(w.out, "memo.pkl");
        const auto items = doc.as_sequence(doc.root());
        QVERIFY(items && items->size() == 2);
        QCOMPARE(doc.class_name((*items)[0]), std::string("torch.Size"));
        QCOMPARE(doc.at((*items)[1]).items.front(), (*items)[1]);
        QVERIFY(!doc.describe(doc.root()).empty()); // bounded even for a cycle
    }

    // Found in review of the compact document: a STACK_GLOBAL whose strs were made long before (the text arena grows
    // between them) names exactly those strs; globals whose names differ only in where a
    // newline falls are different globals.
    void stackGlobalNamesItsOwnStrings()
    {
        PickleWriter w;
        w.proto(4).str(std::string(20, 'M')).memoize().op('0'); // memo 0, popped
        w.str(std::string(10, 'N')); // grows the arena past the first
        w.get(0).op(0x93).stop(); // STACK_GLOBAL(memo 0, "NNN…")?
        // The stack is (…"NNNNNNNNNN", memo 0): the module is the str pushed first.
        const auto doc = parse_pickle(w.out, "uaf.pkl");
        QCOMPARE(doc.class_name(doc.root()), std::string(10, 'N') + "." + std::string(20, 'M'));

        PickleWriter c;
        c.proto(4).str("a\nb").str("c").op(0x93).str("a").str("b\nc").op(0x93).op(0x86).stop();
        const auto pair = parse_pickle(c.out, "keys.pkl");
        const auto items = pair.as_sequence(pair.root());
        QVERIFY(items && items->size() == 2);
        QCOMPARE(pair.class_name((*items)[0]), std::string("a\nb.c"));
        QCOMPARE(pair.class_name((*items)[1]), std::string("a.b\nc"));
    }

    // For big checkpoints: values are compact and immutable ones shared; nothing a reader sees may change.
    void compactDocument()
    {
        PickleWriter w;
        w.proto(4).op('}').memoize();
        for (int batch = 0; batch < 30; ++batch) { // SETITEMS batches between other containers
            w.op(']').mark().integer(batch).op('e').op('0'); // a list made and dropped in between
            w.mark();
            for (int i = 0; i < 40; ++i) {
                w.str("k" + std::to_string(batch * 40 + i));
                w.mark().str("offsets").none().boolean(true).integer(7).integer(100000 + i);
                w.global("torch", "Size").op(')').op('t');
            }
            w.op('u');
        }
        w.stop();
        const auto doc = parse_pickle(w.out, "big.pkl");
        const PickleValue root = doc.at(doc.root());
        QCOMPARE(root.kind, PickleKind::dict);
        QCOMPARE(root.items.size(), std::size_t(2 * 1200));
        for (std::size_t e = 0; e < 1200; ++e) {
            QCOMPARE(std::string(doc.at(root.items[2 * e]).text), "k" + std::to_string(e));
            const auto t = doc.as_sequence(root.items[2 * e + 1]);
            QVERIFY(t && t->size() == 7);
            QCOMPARE(doc.as_string((*t)[0]).value(), std::string_view("offsets"));
            QVERIFY(doc.is((*t)[1], PickleKind::none));
            QCOMPARE(doc.as_int((*t)[2]).value(), int64_t(1));
            QCOMPARE(doc.as_int((*t)[3]).value(), int64_t(7));
            QCOMPARE(doc.as_int((*t)[4]).value(), int64_t(100000 + e % 40));
            QCOMPARE(doc.class_name((*t)[5]), std::string("torch.Size"));
            QVERIFY(doc.is((*t)[6], PickleKind::tuple) && doc.at((*t)[6]).items.empty());
        }
        QCOMPARE(doc.dict_get(doc.root(), "k1199"), root.items[2 * 1199 + 1]);
        // The repeated str, None, True, 7, the global and () are one node each: what remains is a
        // node per key, per tuple and per large int (3 x 1200), 30 lists, 30 small ints, the dict
        // and the shared six; unshared it would be 9 x 1200 and more.
        QVERIFY2(doc.size() <= 3 * 1200 + 30 + 30 + 1 + 6, std::to_string(doc.size()).c_str());
    }

    void memoSparseAndDense()
    {
        PickleWriter w;
        w.proto(4).str("a").op('r'); // LONG_BINPUT 2^31: kept outside the dense memo
        fixtures::put_le(w.out, 1u << 31, 4);
        w.op('0').str("b").memoize(); // MEMOIZE numbers by entry count: index 1
        w.op('0').op('j');
        fixtures::put_le(w.out, 1u << 31, 4);
        w.get(1).op(0x86).stop();
        const auto doc = parse_pickle(w.out, "memo.pkl");
        const auto items = doc.as_sequence(doc.root());
        QVERIFY(items && items->size() == 2);
        QCOMPARE(std::string(doc.at((*items)[0]).text), std::string("a"));
        QCOMPARE(std::string(doc.at((*items)[1]).text), std::string("b"));
        // APPENDS whose target would be below the mark before it: refused, as before.
        QCOMPARE(kind_of(std::string("\x80\x02(K\x01(K\x02"
                                     "e.")),
                 ProblemKind::invalid_pickle); // "\x02e" would be one byte
        QCOMPARE(kind_of(std::string("\x80\x02(K\x01u.")), ProblemKind::invalid_pickle);
    }

    void forbiddenOpcodes_data()
    {
        QTest::addColumn<QByteArray>("data");
        QTest::newRow("INST") << B("\x80\x02(i os\nsystem\n.");
        QTest::newRow("OBJ") << B("\x80\x02(o.");
        QTest::newRow("EXT1") << B("\x80\x02\x82\x01.");
        QTest::newRow("protocol 0 STRING") << B("\x80\x02S'x'\n.");
        QTest::newRow("out-of-band buffer") << B("\x80\x05\x97.");
        QTest::newRow("unknown 0xff") << B("\x80\x02\xff.");
    }
    void forbiddenOpcodes()
    {
        QFETCH(QByteArray, data);
        QCOMPARE(kind_of(data.toStdString()), ProblemKind::forbidden_pickle_opcode);
    }

    void malformed_data()
    {
        QTest::addColumn<QByteArray>("data");
        QTest::newRow("empty") << QByteArray();
        QTest::newRow("no STOP") << B("\x80\x02K\x01");
        QTest::newRow("truncated string") << B("\x80\x04\x8c\x10"
                                               "abc");
        QTest::newRow("stack underflow") << B("\x80\x02R.");
        QTest::newRow("APPEND to int") << B("\x80\x02K\x01K\x02"
                                            "a.");
        QTest::newRow("GET unknown memo") << B("\x80\x02h\x07.");
        QTest::newRow("two values at STOP") << B("\x80\x02K\x01K\x02.");
        QTest::newRow("REDUCE non-tuple") << B("\x80\x02"
                                               "cos\nsystem\nK\x01R.");
        QTest::newRow("protocol 6") << B("\x80\x06N.");
        QTest::newRow("frame past end") << B("\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00N.");
    }
    void malformed()
    {
        QFETCH(QByteArray, data);
        QCOMPARE(kind_of(data.toStdString()), ProblemKind::invalid_pickle);
        QVERIFY(message_of(data.toStdString()).starts_with("test.pkl: pickle byte "));
    }

    void limits()
    {
        PickleWriter w;
        w.proto(2).op(']').mark();
        for (int i = 0; i < 100; ++i)
            w.integer(i);
        w.op('e').stop();
        QCOMPARE(kind_of(w.out), ProblemKind::cancelled); // fine by default
        PickleLimits few;
        few.max_nodes = 50;
        QCOMPARE(kind_of(w.out, few), ProblemKind::invalid_pickle);
        PickleLimits shallow;
        shallow.max_stack = 20;
        QCOMPARE(kind_of(w.out, shallow), ProblemKind::invalid_pickle);
        PickleLimits short_strings;
        short_strings.max_string_bytes = 3;
        PickleWriter s;
        s.proto(4).str("four").stop();
        QCOMPARE(kind_of(s.out, short_strings), ProblemKind::invalid_pickle);
        PickleLimits small_memo;
        small_memo.max_memo = 2;
        PickleWriter m;
        m.proto(4).op(']').memoize().op(']').memoize().op('0').op(']').memoize().op('0').stop();
        QCOMPARE(kind_of(m.out, small_memo), ProblemKind::invalid_pickle);
    }
};

QTEST_GUILESS_MAIN(TestForeignPickle)
#include "tst_foreign_pickle.moc"
