// Layer profiles: the bundled files load, defaults are applied, and every malformed input is
// rejected with invalid_profile and a message naming the file and the layer or line.
#include "problemcheck.h"

#include "core/util/error.h"
#include "core/pipeline/profile.h"

#include <QTest>
#include <cmath>
#include <optional>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

std::string profile_path(const char* name)
{
    return std::string(SHARDSCOPE_SOURCE_DIR) + "/resources/profiles/" + name;
}

bool near(double a, double b)
{
    return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

} // namespace

class TestPipelineProfile : public QObject {
    Q_OBJECT

private slots:
    void bundledProfilesLoad_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<int>("layers");
        QTest::newRow("uniform-16") << QStringLiteral("uniform-16.json") << 16;
        QTest::newRow("decoder-7b-32") << QStringLiteral("decoder-7b-32.json") << 34;
        QTest::newRow("uneven") << QStringLiteral("uneven.json") << 12;
        QTest::newRow("mixed-12 csv") << QStringLiteral("mixed-12.csv") << 12;
    }
    void bundledProfilesLoad()
    {
        QFETCH(QString, file);
        QFETCH(int, layers);
        const Profile profile = load_profile(profile_path(file.toStdString().c_str()));
        QCOMPARE(static_cast<int>(profile.layers.size()), layers);
        for (const Layer& layer : profile.layers) {
            QVERIFY(!layer.name.empty());
            QVERIFY(layer.fwd_ms >= 0 && layer.bwd_ms >= 0);
            QVERIFY(near(layer.bwd_input_ms + layer.bwd_weight_ms, layer.bwd_ms));
        }
        validate_profile(profile);
    }

    void decoderProfileHasTheAdvertisedShape()
    {
        // The case the planner is built to show: embedding = many params / little compute,
        // LM head = much compute. If someone "fixes" the numbers, the partition test loses its
        // meaning, so pin the shape here.
        const Profile p = load_profile(profile_path("decoder-7b-32.json"));
        const Layer& embed = p.layers.front();
        const Layer& head = p.layers.back();
        const Layer& block = p.layers[1];
        QVERIFY(embed.params > 2 * block.params);
        QVERIFY(embed.fwd_ms + embed.bwd_ms < 0.1 * (block.fwd_ms + block.bwd_ms));
        QVERIFY(head.fwd_ms + head.bwd_ms > 2 * (block.fwd_ms + block.bwd_ms));
        QCOMPARE(p.layers.size() - 2, std::size_t(32));
    }

    void defaultsAreApplied()
    {
        const Profile p = parse_profile_json(R"({"name": "t", "layers": [
            {"name": "a", "params": 1, "fwd_ms": 1.5, "activation_bytes": 8},
            {"name": "b", "params": 2, "fwd_ms": 1, "bwd_ms": 3, "activation_bytes": 8},
            {"name": "c", "params": 3, "fwd_ms": 1, "bwd_ms": 3, "bwd_input_ms": 1, "activation_bytes": 8},
            {"name": "d", "params": 4, "fwd_ms": 1, "bwd_input_ms": 0.5, "bwd_weight_ms": 2, "activation_bytes": 8},
            {"name": "e", "params": 5, "fwd_ms": 1, "bwd_ms": 3, "bwd_weight_ms": 0.5, "activation_bytes": 8}
        ]})",
                                             "t.json");
        QCOMPARE(p.name, std::string("t"));
        QVERIFY(near(p.layers[0].bwd_ms, 3.0));
        QVERIFY(near(p.layers[0].bwd_input_ms, 1.5) && near(p.layers[0].bwd_weight_ms, 1.5));
        QVERIFY(near(p.layers[1].bwd_input_ms, 1.5) && near(p.layers[1].bwd_weight_ms, 1.5));
        QVERIFY(near(p.layers[2].bwd_input_ms, 1.0) && near(p.layers[2].bwd_weight_ms, 2.0));
        QVERIFY(near(p.layers[3].bwd_ms, 2.5));
        QVERIFY(near(p.layers[4].bwd_input_ms, 2.5) && near(p.layers[4].bwd_weight_ms, 0.5));
        QCOMPARE(p.layers[4].params, std::int64_t(5));
    }

    void flopsAreConvertedWithDeviceThroughput()
    {
        const Profile p = parse_profile_json(
            R"({"device_tflops": 100, "layers": [{"name": "x", "params": 0,
                "fwd_flops": 2.5e12, "activation_bytes": 0}]})",
            "flops.json");
        QVERIFY(near(p.layers[0].fwd_ms, 25.0)); // 2.5 TFLOP at 100 TFLOP/s = 25 ms
        QVERIFY(near(p.layers[0].bwd_ms, 50.0));
        QCOMPARE(p.name, std::string("flops")); // file stem when the JSON has no name

        const Profile csv = load_profile(profile_path("mixed-12.csv"));
        QVERIFY(near(csv.layers[1].fwd_ms, 412316860416.0 / 150e9));
        QCOMPARE(csv.layers.back().name, std::string("head, with loss"));
        QVERIFY(near(csv.layers[0].bwd_input_ms, 0.0) && near(csv.layers[0].bwd_weight_ms, 0.3));
    }

    void csvParsesQuotesBomAndOptionalColumns()
    {
        const Profile p = parse_profile_csv("\xEF\xBB\xBFname,params,fwd_ms,bwd_ms,activation_bytes\r\n"
                                            "\"a, \"\"quoted\"\"\",10,1,,5\r\n"
                                            "\n"
                                            "b,20,2,3,6\r\n",
                                            "q.csv");
        QCOMPARE(p.layers.size(), std::size_t(2));
        QCOMPARE(p.layers[0].name, std::string("a, \"quoted\""));
        QVERIFY(near(p.layers[0].bwd_ms, 2.0));
        QVERIFY(near(p.layers[1].bwd_ms, 3.0));
        QCOMPARE(p.layers[1].activation_bytes, std::int64_t(6));
    }

    void memoryFieldsAndShape()
    {
        // JSON: the optional fields are read, absent ones stay absent and take the defaults.
        const Profile json = parse_profile_json(
            R"({"seq_len": 2048, "hidden_size": 1024, "attention_heads": 16, "micro_batch_size": 2,
                "layers": [{"name": "a", "params": 1, "fwd_ms": 1, "activation_bytes": 1000,
                            "selective_activation_bytes": 600, "input_bytes": 50, "output_bytes": 2000},
                           {"name": "b", "params": 1, "fwd_ms": 1, "activation_bytes": 1000}]})",
            "m.json");
        QVERIFY(json.shape.has_value());
        QCOMPARE(json.shape->seq_len, 2048);
        QCOMPARE(json.shape->hidden_size, 1024);
        QCOMPARE(json.shape->attention_heads, 16);
        QCOMPARE(json.micro_batch_size, std::optional<int>(2));
        const Layer& a = json.layers[0];
        QCOMPARE(layer_selective_bytes(json, a), std::int64_t(600));
        QCOMPARE(layer_input_bytes(json, a), std::int64_t(50));
        QCOMPARE(layer_output_bytes(json, a), std::int64_t(2000)); // may exceed (fp32 logits)
        QVERIFY(!json.layers[1].input_bytes && !json.layers[1].output_bytes);
        // Defaults: parts of s*b*h*(34 + 5as/h); here 5as/h = 5 * 16 * 2048 / 1024 = 160.
        QVERIFY(near(attention_term(json), 160.0));
        QCOMPARE(layer_selective_bytes(json, json.layers[1]), std::int64_t(std::llround(1000.0 * 34 / 194)));
        QCOMPARE(layer_output_bytes(json, json.layers[1]), std::int64_t(std::llround(1000.0 * 2 / 194)));
        QCOMPARE(layer_input_bytes(json, json.layers[1]), layer_output_bytes(json, json.layers[1]));
        // CSV: the same fields as columns, the shape as directives.
        const Profile csv = parse_profile_csv("# seq_len=2048\n# hidden_size: 1024\n# attention_heads=16\n"
                                              "# a comment that mentions seq_len is just a comment\n"
                                              "name,params,fwd_ms,activation_bytes,input_bytes,output_bytes\n"
                                              "a,1,1,1000,50,\n",
                                              "m.csv");
        QVERIFY(csv.shape.has_value() && csv.shape->hidden_size == 1024);
        QCOMPARE(csv.layers[0].input_bytes, std::optional<std::int64_t>(50));
        QVERIFY(!csv.layers[0].output_bytes);
        // Without a shape nothing is dropped and a block's output is 2 of its 34 parts.
        const Profile plain = parse_profile_json(
            R"({"layers": [{"name": "a", "params": 1, "fwd_ms": 1, "activation_bytes": 3400}]})", "p.json");
        QVERIFY(!plain.shape);
        QCOMPARE(layer_selective_bytes(plain, plain.layers[0]), std::int64_t(3400));
        QCOMPARE(layer_output_bytes(plain, plain.layers[0]), std::int64_t(200));
        QCOMPARE(layer_selective_recompute_ms(plain, plain.layers[0]), 0.0);
    }

    void malformedJsonIsRejected_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("mentions");
        const QString ok = QStringLiteral(R"({"name": "a", "params": 1, "fwd_ms": 1, "activation_bytes": 1})");
        QTest::newRow("negative cost")
            << QStringLiteral(R"({"layers": [%1, {"name": "b", "params": 1, "fwd_ms": -1, "activation_bytes": 1}]})")
                   .arg(ok)
            << QStringLiteral("layer 1 ('b'): 'fwd_ms' must be a finite number >= 0");
        QTest::newRow("negative bwd")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "bwd_ms": -2, "activation_bytes": 1}]})")
            << QStringLiteral("'bwd_ms' must be a finite number >= 0");
        QTest::newRow("missing fwd") << QStringLiteral(
                                            R"({"layers": [{"name": "b", "params": 1, "activation_bytes": 1}]})")
                                     << QStringLiteral("layer 0 ('b') has neither 'fwd_ms' nor 'fwd_flops'");
        QTest::newRow("missing params") << QStringLiteral(
                                               R"({"layers": [{"name": "b", "fwd_ms": 1, "activation_bytes": 1}]})")
                                        << QStringLiteral("layer 0 ('b') has no 'params'");
        QTest::newRow("missing activation_bytes")
            << QStringLiteral(R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1}]})")
            << QStringLiteral("has no 'activation_bytes'");
        QTest::newRow("missing name") << QStringLiteral(
                                             R"({"layers": [{"params": 1, "fwd_ms": 1, "activation_bytes": 1}]})")
                                      << QStringLiteral("layer 0 has no 'name'");
        QTest::newRow("empty list") << QStringLiteral(R"({"layers": []})") << QStringLiteral("has no layers");
        QTest::newRow("no layers key") << QStringLiteral(R"({"name": "x"})") << QStringLiteral("has no 'layers' list");
        QTest::newRow("layers not a list")
            << QStringLiteral(R"({"layers": 3})") << QStringLiteral("'layers' must be a list");
        QTest::newRow("non-number")
            << QStringLiteral(R"({"layers": [{"name": "b", "params": 1, "fwd_ms": "1.0", "activation_bytes": 1}]})")
            << QStringLiteral("'fwd_ms' must be a number, not string");
        QTest::newRow("fractional params")
            << QStringLiteral(R"({"layers": [{"name": "b", "params": 1.5, "fwd_ms": 1, "activation_bytes": 1}]})")
            << QStringLiteral("'params' must be a whole number");
        QTest::newRow("unknown key (typo)")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "bwd_weigth_ms": 1, "activation_bytes": 1}]})")
            << QStringLiteral("unknown field 'bwd_weigth_ms'");
        QTest::newRow("both fwd forms")
            << QStringLiteral(
                   R"({"device_tflops": 1, "layers": [{"name": "b", "params": 1, "fwd_ms": 1, "fwd_flops": 1, "activation_bytes": 1}]})")
            << QStringLiteral("both 'fwd_ms' and 'fwd_flops'");
        QTest::newRow("flops without throughput")
            << QStringLiteral(R"({"layers": [{"name": "b", "params": 1, "fwd_flops": 1e9, "activation_bytes": 1}]})")
            << QStringLiteral("no 'device_tflops'");
        QTest::newRow("split does not add up")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "bwd_ms": 2, "bwd_input_ms": 1, "bwd_weight_ms": 2, "activation_bytes": 1}]})")
            << QStringLiteral("must equal 'bwd_ms'");
        QTest::newRow("half larger than whole")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "bwd_ms": 2, "bwd_input_ms": 3, "activation_bytes": 1}]})")
            << QStringLiteral("larger than 'bwd_ms'");
        QTest::newRow("only one half")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "bwd_weight_ms": 1, "activation_bytes": 1}]})")
            << QStringLiteral("only one of");
        QTest::newRow("not json") << QStringLiteral("{\"layers\": [") << QStringLiteral("is not valid JSON");
        QTest::newRow("not an object") << QStringLiteral("[1, 2]") << QStringLiteral("must be a JSON object");
        QTest::newRow("layer not object")
            << QStringLiteral(R"({"layers": [1]})") << QStringLiteral("layer 0 must be an object");
        // The optional memory fields (profile.h).
        QTest::newRow("selective above activations")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "activation_bytes": 10, "selective_activation_bytes": 11}]})")
            << QStringLiteral("layer 0 ('b'): 'selective_activation_bytes' (11) is more than 'activation_bytes' (10)");
        QTest::newRow("negative input_bytes")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "activation_bytes": 10, "input_bytes": -1}]})")
            << QStringLiteral("'input_bytes' must be a finite number >= 0");
        QTest::newRow("fractional output_bytes")
            << QStringLiteral(
                   R"({"layers": [{"name": "b", "params": 1, "fwd_ms": 1, "activation_bytes": 10, "output_bytes": 0.5}]})")
            << QStringLiteral("'output_bytes' must be a whole number");
        QTest::newRow("half a shape")
            << QStringLiteral(R"({"seq_len": 4096, "hidden_size": 4096, "layers": [%1]})").arg(ok)
            << QStringLiteral("gives only some of 'seq_len', 'hidden_size', 'attention_heads'");
        QTest::newRow("zero heads")
            << QStringLiteral(R"({"seq_len": 4096, "hidden_size": 4096, "attention_heads": 0, "layers": [%1]})").arg(ok)
            << QStringLiteral("'attention_heads' must be a whole number from 1");
        QTest::newRow("micro batch not a number")
            << QStringLiteral(R"({"micro_batch_size": "1", "layers": [%1]})").arg(ok)
            << QStringLiteral("'micro_batch_size' must be a number, not string");
        QTest::newRow("bad device_tflops") << QStringLiteral(R"({"device_tflops": 0, "layers": [%1]})").arg(ok)
                                           << QStringLiteral("'device_tflops' must be a number > 0");
    }
    void malformedJsonIsRejected()
    {
        QFETCH(QString, text);
        QFETCH(QString, mentions);
        const auto problem = error_of([&] { parse_profile_json(text.toStdString(), "bad.json"); });
        QVERIFY2(problem.has_value(), "no error for a malformed profile");
        QCOMPARE(problem->kind, ProblemKind::invalid_profile);
        QVERIFY2(problem->message.find("profile bad.json: ") == 0, problem->message.c_str());
        QVERIFY2(problem->message.find(mentions.toStdString()) != std::string::npos, problem->message.c_str());
    }

    void malformedCsvIsRejected_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("bad header (unknown column)")
            << QStringLiteral("name,params,fwd,bwd_ms,activation_bytes\na,1,1,2,3\n")
            << QStringLiteral("bad CSV header: unknown column 'fwd'");
        QTest::newRow("bad header (missing column)") << QStringLiteral("name,fwd_ms,bwd_ms,activation_bytes\na,1,2,3\n")
                                                     << QStringLiteral("bad CSV header: no 'params' column");
        QTest::newRow("bad header (no fwd)") << QStringLiteral("name,params,bwd_ms,activation_bytes\na,1,2,3\n")
                                             << QStringLiteral("no 'fwd_ms' (or 'fwd_flops') column");
        QTest::newRow("duplicate column") << QStringLiteral("name,params,fwd_ms,fwd_ms,activation_bytes\na,1,1,1,3\n")
                                          << QStringLiteral("appears twice");
        QTest::newRow("non-number") << QStringLiteral(
                                           "name,params,fwd_ms,bwd_ms,activation_bytes\na,1,1,2,3\nb,1,fast,2,3\n")
                                    << QStringLiteral("line 3: 'fwd_ms' must be a number, not 'fast'");
        QTest::newRow("negative") << QStringLiteral("name,params,fwd_ms,bwd_ms,activation_bytes\na,1,1,-2,3\n")
                                  << QStringLiteral("line 2, layer 0 ('a'): 'bwd_ms' must be a finite number >= 0");
        QTest::newRow("missing value") << QStringLiteral("name,params,fwd_ms,bwd_ms,activation_bytes\na,,1,2,3\n")
                                       << QStringLiteral("line 2, layer 0 ('a') has no 'params'");
        QTest::newRow("field count") << QStringLiteral("name,params,fwd_ms,bwd_ms,activation_bytes\na,1,1,2\n")
                                     << QStringLiteral("line 2 has 4 fields, the header 5");
        QTest::newRow("empty file") << QString() << QStringLiteral("is empty");
        QTest::newRow("header only") << QStringLiteral("name,params,fwd_ms,bwd_ms,activation_bytes\n")
                                     << QStringLiteral("has no layers");
        // Each layer below 2^63, together past what a stage's bytes can be counted in.
        QTest::newRow("sums past 2^57") << QStringLiteral(
                                               "name,params,fwd_ms,bwd_ms,activation_bytes\na,72058693549555712,1,2,3\n"
                                               "b,72058693549555712,1,2,3\n")
                                        << QStringLiteral("add up to more than 2^57");
        QTest::newRow("unterminated quote")
            << QStringLiteral("name,params,fwd_ms,bwd_ms,activation_bytes\n\"a,1,1,2,3\n")
            << QStringLiteral("line 2 has an unterminated quote");
        QTest::newRow("bad directive") << QStringLiteral(
                                              "# device_tflops 5\nname,params,fwd_flops,activation_bytes\na,1,1,3\n")
                                       << QStringLiteral("'# device_tflops=<TFLOP/s>'");
        QTest::newRow("directive without value")
            << QStringLiteral("# seq_len=\nname,params,fwd_ms,activation_bytes\na,1,1,3\n")
            << QStringLiteral("line 1: 'seq_len' has no value");
        QTest::newRow("input above activations")
            << QStringLiteral("name,params,fwd_ms,activation_bytes,input_bytes\na,1,1,3,4\n")
            << QStringLiteral("line 2, layer 0 ('a'): 'input_bytes' (4) is more than 'activation_bytes' (3)");
    }
    void malformedCsvIsRejected()
    {
        QFETCH(QString, text);
        QFETCH(QString, mentions);
        const auto problem = error_of([&] { parse_profile_csv(text.toStdString(), "bad.csv"); });
        QVERIFY2(problem.has_value(), "no error for a malformed CSV profile");
        QCOMPARE(problem->kind, ProblemKind::invalid_profile);
        QVERIFY2(problem->message.find("profile bad.csv: ") == 0, problem->message.c_str());
        QVERIFY2(problem->message.find(mentions.toStdString()) != std::string::npos, problem->message.c_str());
    }

    void missingFileIsCannotOpen()
    {
        const auto problem = error_of([] { load_profile("/nonexistent/profile.json"); });
        QVERIFY(problem.has_value());
        QCOMPARE(problem->kind, ProblemKind::cannot_open);
        QVERIFY(problem->message.find("/nonexistent/profile.json") != std::string::npos);
    }

    void uniformProfileMatchesTheTextbookCosts()
    {
        const Profile p = uniform_profile(3);
        QCOMPARE(p.layers.size(), std::size_t(3));
        for (const Layer& layer : p.layers) {
            QCOMPARE(layer.fwd_ms, 1.0);
            QCOMPARE(layer.bwd_ms, 2.0);
            QCOMPARE(layer.bwd_input_ms, 1.0);
            QCOMPARE(layer.bwd_weight_ms, 1.0);
        }
        QVERIFY(error_of([] { uniform_profile(0); }).has_value());
    }
};

QTEST_GUILESS_MAIN(TestPipelineProfile)
#include "tst_pipeline_profile.moc"
