// shardctl profile/schedule/plan --model CONFIG.json and --cluster end to end: the per-layer
// figures, a profile from a shape read by schedule like a measured one, plan's command reproduced
// by schedule, the cluster's defaults and explicit flags winning, bad input in one sentence.
#include "testutil.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <nlohmann/json.hpp>

using nlohmann::json;
using testutil::shardctl;

namespace {

QString model(const char* name)
{
    return QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/fixtures/models/") + QString::fromLatin1(name);
}

QStringList words(const char* text)
{
    return QString::fromLatin1(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

json one_object(const testutil::Run& run)
{
    try {
        const json value = json::parse(run.out.toStdString());
        return value.is_object() ? value : json(nullptr);
    } catch (const json::exception&) {
        qWarning("stdout is not one JSON value:\n%s", run.out.constData());
        return nullptr;
    }
}

bool near(double a, double b, double relative = 1e-12)
{
    return std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b));
}

} // namespace

class TestCliModel : public QObject {
    Q_OBJECT

private slots:
    void profilePrintsThePerLayerFigures()
    {
        const auto run =
            shardctl(QStringList{QStringLiteral("profile"), QStringLiteral("--model"), model("llama2-7b.json")} +
                     words("--seq-len 4096 --micro-batch-size 1 --tp 2 --sp --json"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const json p = one_object(run);
        QVERIFY(p["ok"] == json(true));
        QCOMPARE(p["total_params"].get<std::int64_t>(), 6738415616ll);
        QCOMPARE(p["active_params"].get<std::int64_t>(), 6738415616ll);
        QCOMPARE(p["tensor_parallel"].get<int>(), 2);
        QVERIFY(p["sequence_parallel"] == json(true));
        QCOMPARE(p["layers"].size(), std::size_t(34));
        QCOMPARE(p["micro_batch_size"].get<int>(), 1);
        QVERIFY(p["config"]["gated_mlp"] == json(true));
        const json& block = p["layers"][1];
        QVERIFY(block["name"] == json("layers.0"));
        QCOMPARE(block["params"].get<std::int64_t>(), (202383360ll - 8192) / 2 + 8192);
        // Korthikanti's 34/t + 5as/(ht) with SwiGLU's 6I/h in place of the MLP's 16.
        const double s = 4096, h = 4096, a = 32, sbh = s * h, t = 2;
        const double sharded = 8.0 + 6.0 * 11008 / h;
        QCOMPARE(block["activation_bytes"].get<std::int64_t>(),
                 std::llround(sbh * (10.0 / t + sharded / t) + 5.0 * a * s * s / t));
        QCOMPARE(block["selective_activation_bytes"].get<std::int64_t>(), std::llround(sbh * (10.0 / t + sharded / t)));
        const double flops = (2.0 * s * (4 * h * h + 3 * h * 11008) + 4.0 * s * s * h) / t;
        QVERIFY(near(p["fwd_flops"][1].get<double>(), flops));
        QVERIFY(near(block["fwd_ms"].get<double>(), flops / (312e9 * 0.5))); // the default A100 at 0.5

        // Context and expert parallelism are said too: a GPU's tokens are 1/cp of the sequence,
        // its layers hold 1/ep of the experts.
        const auto split =
            shardctl(QStringList{QStringLiteral("profile"), QStringLiteral("--model"), model("mixtral-8x7b.json")} +
                     words("--seq-len 4096 --micro-batch-size 2 --cp 2 --ep 4 --json"));
        QVERIFY2(split.exit_code == 0, split.err.constData());
        const json m = one_object(split);
        QCOMPARE(m["context_parallel"].get<int>(), 2);
        QCOMPARE(m["expert_parallel"].get<int>(), 4);
        QCOMPARE(m["tokens"].get<int>(), 4096);
        const auto text =
            shardctl(QStringList{QStringLiteral("profile"), QStringLiteral("--model"), model("mixtral-8x7b.json")} +
                     words("--seq-len 4096 --micro-batch-size 2 --cp 2 --ep 4"));
        QVERIFY2(text.out.contains("tp 1, cp 2, ep 4 (the layers' figures are one GPU's)"), text.out.constData());
    }

    void aShapeProfileFeedsScheduleLikeAMeasuredOne()
    {
        QTemporaryDir tmp;
        const QString file = tmp.filePath(QStringLiteral("llama.json"));
        const QStringList shape = QStringList{QStringLiteral("--model"), model("llama2-7b.json")} +
            words("--seq-len 2048 --micro-batch-size 2 --tp 4");
        const auto written = shardctl(QStringList{QStringLiteral("profile")} + shape +
                                      words("--cluster h100-sxm-80gb --out") + QStringList{file});
        QVERIFY2(written.exit_code == 0, written.err.constData());
        const QStringList step =
            words("schedule --stages 4 --microbatches 8 --schedule 1f1b --partition compute --json");
        const auto from_file = shardctl(step + QStringList{QStringLiteral("--profile"), file});
        const auto from_model = shardctl(step + shape + words("--tflops 494.5"));
        QVERIFY2(from_file.exit_code == 0, from_file.err.constData());
        QVERIFY2(from_model.exit_code == 0, from_model.err.constData());
        QVERIFY(
            near(one_object(from_file)["step_time"].get<double>(), one_object(from_model)["step_time"].get<double>()));
        QVERIFY(one_object(from_file)["peak_memory_bytes"] == one_object(from_model)["peak_memory_bytes"]);
    }

    void clusterSetsMemoryAndLinkUnlessFlagsSayOtherwise()
    {
        const QStringList base =
            QStringList{QStringLiteral("schedule"), QStringLiteral("--model"), model("mixtral-8x7b.json")} +
            words("--seq-len 4096 --stages 8 --microbatches 16 --schedule 1f1b --cluster h100-sxm-80gb --json");
        const json preset = one_object(shardctl(base));
        QCOMPARE(preset["gpu_memory_bytes"].get<std::int64_t>(), 81559ll << 20); // nvidia-smi's total
        // 8 stages of one GPU fill one 8-GPU node: the sends are on NVLink, 900 GB/s counted both
        // ways, 450 GB/s = 3600 Gbit/s a direction; 16 stages span two nodes: InfiniBand's 400.
        QCOMPARE(preset["link_gbps"].get<double>(), 3600.0);
        const json two_nodes = one_object(
            shardctl(QStringList{QStringLiteral("schedule"), QStringLiteral("--model"), model("mixtral-8x7b.json")} +
                     words("--seq-len 4096 --stages 16 --microbatches 16 --schedule 1f1b "
                           "--cluster h100-sxm-80gb --json")));
        QCOMPARE(two_nodes["link_gbps"].get<double>(), 400.0);
        const json flags = one_object(shardctl(base + words("--gpu-memory 40 --link-gbps 100")));
        QCOMPARE(flags["gpu_memory_bytes"].get<std::int64_t>(), 40ll << 30);
        QCOMPARE(flags["link_gbps"].get<double>(), 100.0);
        // The same model on an A100 computes slower by 989/312 (both at half their peak).
        const json a100 = one_object(
            shardctl(QStringList{QStringLiteral("schedule"), QStringLiteral("--model"), model("mixtral-8x7b.json")} +
                     words("--seq-len 4096 --stages 8 --microbatches 16 --schedule 1f1b "
                           "--cluster a100-80gb --json")));
        const double a100_busy = a100["stage_stats"][0]["busy"].get<double>();
        const double h100_busy = preset["stage_stats"][0]["busy"].get<double>();
        QVERIFY2(near(a100_busy * 312.0, h100_busy * 989.0, 1e-12), std::to_string(a100_busy / h100_busy).c_str());
    }

    void planFromAModelIsReproducedBySchedule()
    {
        const auto plan =
            shardctl(QStringList{QStringLiteral("plan"), QStringLiteral("--model"), model("gpt2-small.json")} +
                     words("--seq-len 1024 --gpus 4 --global-batch 32 --micro-batch-size 4 "
                           "--cluster a100-80gb --tp 2 --top 2 --json"));
        QVERIFY2(plan.exit_code == 0, plan.err.constData());
        const json result = one_object(plan);
        QCOMPARE(result["gpu_memory_bytes"].get<std::int64_t>(), 80ll << 30);
        QVERIFY(!result["candidates"].empty());
        for (const json& c : result["candidates"]) {
            const std::string command = c["command"].get<std::string>();
            QVERIFY2(command.find("--tp 2") != std::string::npos && command.find("--tflops 156") != std::string::npos,
                     command.c_str());
            QStringList args = QString::fromStdString(command).split(QLatin1Char(' '), Qt::SkipEmptyParts);
            args.removeFirst(); // "shardctl"
            const auto again = shardctl(args + QStringList{QStringLiteral("--json")});
            QVERIFY2(again.exit_code == 0, again.err.constData());
            const json step = one_object(again);
            QCOMPARE(step["step_time"].get<double>(), c["step_time"].get<double>());
            QVERIFY(step["peak_memory_bytes"] == c["peak_memory_bytes"]);
            // Every choice and the rate read the same from the command as from the candidate.
            for (const char* key : {"tp", "sp", "cp", "ep", "dp", "zero", "micro_batch_size", "recompute"})
                QVERIFY2(step[key] == c[key],
                         (std::string(key) + ": " + step[key].dump() + " vs " + c[key].dump()).c_str());
            QCOMPARE(step["gpus"].get<int>(), 4);
            QCOMPARE(step["global_batch"].get<int>(), 32);
            QVERIFY(near(step["tflops_per_gpu"].get<double>(), c["tflops_per_gpu"].get<double>()));
            QVERIFY(near(step["mfu"].get<double>(), c["mfu"].get<double>()));
            QVERIFY(near(step["mfu"].get<double>(), step["tflops_per_gpu"].get<double>() / 312.0)); // A100's peak
        }
    }

    // schedule --model's rate by hand: GPT-2 small at s = 1024 does 3 forwards' worth of model
    // FLOPs per sample (Narayanan et al.'s count without recomputation), 72·s·l·h²·(1 + s/6h +
    // V/12lh) for its 12 blocks of h = 768 and its V = 50257 head; over t·pp·dp = 2·2·2 GPUs and
    // M·b·dp = 8·2·2 samples a step. Without --cluster there is no peak: mfu null, and a
    // profile has no FLOPs: none of these keys.
    void scheduleReportsTheModelRate()
    {
        const auto run =
            shardctl(QStringList{QStringLiteral("schedule"), QStringLiteral("--model"), model("gpt2-small.json")} +
                     words("--seq-len 1024 --micro-batch-size 2 --tp 2 --sp --stages 2 --dp 2 --microbatches 8 "
                           "--schedule 1f1b --json"));
        QVERIFY2(run.exit_code == 0, run.err.constData());
        const json step = one_object(run);
        QCOMPARE(step["tp"].get<int>(), 2);
        QCOMPARE(step["sp"].get<bool>(), true);
        QCOMPARE(step["cp"].get<int>(), 1);
        QCOMPARE(step["ep"].get<int>(), 1);
        QCOMPARE(step["micro_batch_size"].get<int>(), 2);
        QCOMPARE(step["gpus"].get<int>(), 8);
        QCOMPARE(step["global_batch"].get<int>(), 32);
        QVERIFY(step["mfu"].is_null());
        const double s = 1024, l = 12, h = 768, V = 50257;
        const double per_sample = 72.0 * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
        const double tflops = per_sample * 32 / (8 * step["step_time"].get<double>() / 1000.0) / 1e12;
        QVERIFY2(near(step["tflops_per_gpu"].get<double>(), tflops, 1e-9),
                 (step["tflops_per_gpu"].dump() + " vs " + std::to_string(tflops)).c_str());

        const auto text =
            shardctl(QStringList{QStringLiteral("schedule"), QStringLiteral("--model"), model("gpt2-small.json")} +
                     words("--seq-len 1024 --micro-batch-size 2 --tp 2 --sp --stages 2 --dp 2 --microbatches 8 "
                           "--schedule 1f1b --cluster a100-80gb"));
        QVERIFY2(text.exit_code == 0, text.err.constData());
        QVERIFY2(text.out.contains("tp 2 (sp), cp 1, ep 1, pp 2, dp 2: 8 GPUs, global batch 32 (micro batch 2); "),
                 text.out.constData());
        QVERIFY2(text.out.contains(" model TFLOP/s per GPU, MFU "), text.out.constData());

        const auto profile = shardctl(words("schedule --stages 2 --microbatches 4 --schedule 1f1b --json"));
        QVERIFY2(profile.exit_code == 0, profile.err.constData());
        const json uniform = one_object(profile);
        for (const char* key : {"tp", "gpus", "global_batch", "tflops_per_gpu", "mfu"})
            QVERIFY2(!uniform.contains(key), key);
    }

    void badInputIsOneSentence_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("named");
        QTest::newRow("hostile config") << (QStringList{QStringLiteral("profile"), QStringLiteral("--model"),
                                                        model("hostile.json")} +
                                            words("--seq-len 8 --micro-batch-size 1"))
                                        << QStringLiteral("'num_attention_heads' = -32");
        QTest::newRow("tflops without model")
            << words("schedule --stages 2 --microbatches 2 --schedule 1f1b --tflops 9")
            << QStringLiteral("--tflops applies to --model");
        QTest::newRow("profile and model")
            << (words("plan --profile x.json --gpus 2 --global-batch 2 --micro-batch-size 1 --gpu-memory 8 --model") +
                QStringList{model("gpt2-small.json")})
            << QStringLiteral("--profile or --model");
        QTest::newRow("unknown cluster")
            << words("schedule --stages 2 --microbatches 2 --schedule 1f1b --cluster dgx-b300")
            << QStringLiteral("neither a preset (a100-80gb, h100-sxm-80gb, h200-sxm-141gb) nor a file");
        QTest::newRow("tp splits no heads")
            << (QStringList{QStringLiteral("profile"), QStringLiteral("--model"), model("gpt2-small.json")} +
                words("--seq-len 8 --micro-batch-size 1 --tp 5"))
            << QStringLiteral("tensor-parallel degree of 5");
        QTest::newRow("no seq-len") << (QStringList{QStringLiteral("schedule"), QStringLiteral("--model"),
                                                    model("gpt2-small.json")} +
                                        words("--stages 2 --microbatches 2 --schedule 1f1b"))
                                    << QStringLiteral("--model needs --seq-len");
    }

    void badInputIsOneSentence()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, named);
        const auto run = shardctl(arguments + QStringList{QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 2);
        const json error = one_object(run);
        QVERIFY2(!error.is_null(), run.out.constData());
        const std::string message = error["error"]["message"].get<std::string>();
        QVERIFY2(message.find(named.toStdString()) != std::string::npos, message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCliModel)
#include "tst_cli_model.moc"
