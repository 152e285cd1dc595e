#include "core/run/demo.h"
#include "core/checkpoint/manifest.h"

#include <QTest>

using namespace shardscope;

class TestManifest : public QObject {
    Q_OBJECT
private slots:
    void serializeParseRoundTrip()
    {
        Manifest m;
        m.world_size = 2;
        m.step = 1234;
        m.wall_clock_seconds = 4521.5;
        m.param_dtype = ParamDtype::BF16;
        m.param_numel_total = 300;
        m.shards = {{0, "rank0.safetensors", std::string(64, 'a'), "0123456789abcdef", 1000, 0, 150},
                    {1, "rank1.safetensors", std::string(64, 'b'), "", 1000, 150, 150}};
        m.tensors = demo_tensor_layout(300);
        m.training_state = {{"optimizer", {{"lr", 0.001}}}};
        m.extra = {{"written_by", "a newer ShardScope"}};
        const Manifest back = parse_manifest(serialize_manifest(m), "manifest.json");
        QCOMPARE(back.world_size, 2);
        QCOMPARE(back.step, uint64_t(1234));
        QCOMPARE(back.wall_clock_seconds, 4521.5);
        QCOMPARE(back.param_dtype, ParamDtype::BF16);
        QCOMPARE(back.shards.size(), std::size_t(2));
        QCOMPARE(back.shards[0].xxh3, std::string("0123456789abcdef"));
        QCOMPARE(back.shards[1].param_shard_offset, uint64_t(150));
        QCOMPARE(back.tensors.size(), m.tensors.size());
        QCOMPARE(back.tensors.back().name, m.tensors.back().name);
        QVERIFY(back.training_state == m.training_state);
        QVERIFY(back.extra == m.extra); // unknown fields survive a rewrite
        QVERIFY(check_manifest(back, 2, "manifest.json").empty());
    }

    void originalDesignFieldsSuffice()
    {
        // A manifest with exactly the fields of the original design (no dtype, no total).
        const char* text = R"({"schema_version": 1, "world_size": 2, "step": 5, "wall_clock_seconds": 9,
            "shards": [{"rank": 1, "path": "b", "sha256": "%s", "bytes": 1, "param_shard_offset": 7, "param_shard_numel": 5},
                       {"rank": 0, "path": "a", "sha256": "%s", "bytes": 1, "param_shard_offset": 0, "param_shard_numel": 7}]})";
        std::string filled = text;
        for (int i = 0; i < 2; ++i)
            filled.replace(filled.find("%s"), 2, std::string(64, '0'));
        const Manifest m = parse_manifest(filled, "manifest.json");
        QCOMPARE(m.param_numel_total, uint64_t(12));
        QVERIFY(check_manifest(m, 2, "manifest.json").empty());
    }

    void evenOffsetsTileExactly()
    {
        for (uint64_t total : {0ull, 1ull, 7ull, 100003ull, (1ull << 50) + 3}) {
            for (int world : {1, 2, 3, 8, 1000}) {
                QCOMPARE(even_shard_offset(total, world, 0), uint64_t(0));
                QCOMPARE(even_shard_offset(total, world, world), total);
                for (int r = 0; r < world; ++r) {
                    const uint64_t size = even_shard_offset(total, world, r + 1) - even_shard_offset(total, world, r);
                    QVERIFY(size == total / world || size == total / world + 1);
                }
            }
        }
    }

    void tensorLayoutCoversEverything()
    {
        for (uint64_t total : {1ull, 10ull, 123457ull}) {
            const auto tensors = demo_tensor_layout(total);
            uint64_t at = 0;
            for (const auto& t : tensors) {
                QCOMPARE(t.offset, at);
                QVERIFY(t.numel > 0);
                at += t.numel;
            }
            QCOMPARE(at, total);
        }
    }
};

QTEST_GUILESS_MAIN(TestManifest)
#include "tst_manifest.moc"
