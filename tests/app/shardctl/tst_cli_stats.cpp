// shardctl stats and diff end to end: exit codes, the --json object in every outcome, a NaN
// planted in one rank's file traced back to that rank, and diffs of real torch.save files.

#include "core/checkpoint/save.h"
#include "core/run/demo.h"
#include "content_fixtures.h"
#include "testutil.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <limits>

using namespace testutil;
namespace fs = std::filesystem;

namespace {

// Writes a float NaN over element `index` of tensor `name` in a safetensors file.
void plant_nan(const fs::path& file, const std::string& name, uint64_t index)
{
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t length = 0;
    f.read(reinterpret_cast<char*>(&length), 8);
    std::string header(length, ' ');
    f.read(header.data(), static_cast<std::streamsize>(length));
    const auto json = nlohmann::json::parse(header);
    const uint64_t begin = json.at(name).at("data_offsets").at(0).get<uint64_t>();
    const uint32_t nan_bits = 0x7fc00000u;
    f.seekp(static_cast<std::streamoff>(8 + length + begin + index * 4));
    f.write(reinterpret_cast<const char*>(&nan_bits), 4);
}

// Mean, min and max of the values that are not NaN, the mean in long double.
struct Summary {
    long double mean = 0;
    double min = INFINITY, max = -INFINITY;
};
Summary summary(const std::vector<double>& values)
{
    Summary out;
    long double sum = 0;
    uint64_t n = 0;
    for (double x : values)
        if (!std::isnan(x)) {
            sum += x;
            ++n;
            out.min = std::min(out.min, x);
            out.max = std::max(out.max, x);
        }
    out.mean = sum / n;
    return out;
}

bool same_figures(const nlohmann::json& tensor, const Summary& expected)
{
    const double mean = tensor.at("mean").get<double>();
    return tensor.at("min").get<double>() == expected.min && tensor.at("max").get<double>() == expected.max &&
        std::abs((long double)mean - expected.mean) <= 1e-12L * std::abs(expected.mean);
}

} // namespace

class TestCliStats : public QObject {
    Q_OBJECT
private slots:
    void healthyThenNan()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        QCOMPARE(shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"), qs(dir),
                           QStringLiteral("--world-size"), QStringLiteral("4"), QStringLiteral("--numel"),
                           QStringLiteral("20000"), QStringLiteral("--dtype"), QStringLiteral("bf16")})
                     .exit_code,
                 0);
        Run run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        nlohmann::json out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), true);
        QCOMPARE(out.at("format").get<std::string>(), std::string("shardscope"));
        QVERIFY(out.at("problems").empty());
        QVERIFY(out.at("tensors").size() > 4);
        for (const char* key : {"name", "state", "dtype", "shape", "numel", "nan", "posinf", "neginf", "zeros", "min",
                                "max", "mean", "std", "abs_max", "l2", "histogram", "parts"})
            QVERIFY2(out.at("tensors").at(0).contains(key), key);
        QCOMPARE(out.at("tensors").at(0).at("histogram").at("counts").size(), std::size_t(64));

        plant_nan(dir / "rank3.safetensors", "exp_avg_sq", 7);
        run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), false);
        QCOMPARE(out.at("problems").size(), std::size_t(1));
        const auto& problem = out.at("problems").at(0);
        QCOMPARE(problem.at("kind").get<std::string>(), std::string("nonfinite_values"));
        QCOMPARE(problem.at("rank").get<int>(), 3);
        QVERIFY(problem.at("message").get<std::string>().find("exp_avg_sq") != std::string::npos);
        QVERIFY(run.err.contains("rank 3"));

        // The text form: the NaN (rank 3 holds the end of the flat vector, the head) on stderr,
        // exit 1; a glob that leaves the head out reads only healthy tensors.
        run = shardctl({QStringLiteral("stats"), qs(dir)});
        QCOMPARE(run.exit_code, 1);
        QVERIFY(run.err.contains("rank 3 (rank3.safetensors)"));
        run = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--tensor"), QStringLiteral("embed*")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY(run.err.isEmpty());
        QVERIFY(run.out.contains("embed.weight"));
        QVERIFY(!run.out.contains("head.weight"));
    }

    // Real torch.save files (PyTorch writes them; scripts/setup.sh installs python3-torch): every
    // statistic equals torch's own float64 computation, a transposed view and an offset view
    // included, and shardctl never runs pickle to get there.
    void realTorchSave()
    {
        QTemporaryDir tmp;
        QProcess python;
        python.start(QStringLiteral("/usr/bin/python3"),
                     {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/fixtures/torch_save_stats.py"), tmp.path()});
        if (!python.waitForFinished(120000) || python.exitCode() != 0) {
            if (python.readAllStandardError().contains("No module named 'torch'") ||
                python.error() == QProcess::FailedToStart)
                QSKIP("PyTorch is not installed (apt-get install python3-torch; scripts/setup.sh does)");
            QFAIL("the torch.save fixture script failed");
        }
        const fs::path dir = tmp.path().toStdString();
        std::ifstream in(dir / "reference.json");
        const nlohmann::json reference = nlohmann::json::parse(in);
        const Run run = shardctl({QStringLiteral("stats"), qs(dir / "model.pt"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1); // "bad" holds a NaN and two infinities
        const nlohmann::json out = run.json();
        QCOMPARE(out.at("tensors").size(), reference.size());
        for (const auto& t : out.at("tensors")) {
            const std::string name = t.at("name").get<std::string>();
            const auto& ref = reference.at(name);
            for (const char* key : {"numel", "nan", "posinf", "neginf"})
                QVERIFY2(t.at(key).get<uint64_t>() == ref.at(key).get<uint64_t>(), (name + " " + key).c_str());
            for (const char* key : {"min", "max", "mean", "std", "l2"}) {
                const double got = t.at(key).get<double>(), want = ref.at(key).get<double>();
                QVERIFY2(std::abs(got - want) <= 1e-9 * std::max(1e-300, std::abs(want)),
                         (name + " " + key + ": " + std::to_string(got) + " vs torch " + std::to_string(want)).c_str());
            }
        }
        QCOMPARE(out.at("problems").at(0).at("kind").get<std::string>(), std::string("nonfinite_values"));

        // A tensor of a dtype ShardScope does not read: stats names it among its warnings, diff
        // cannot call the files identical, and convert refuses rather than leave it out.
        const Run complex = shardctl({QStringLiteral("stats"), qs(dir / "complex.pt"), QStringLiteral("--json")});
        QCOMPARE(complex.exit_code, 0);
        QCOMPARE(complex.json().at("tensors").size(), std::size_t(1));
        QVERIFY(complex.json().at("warnings").dump().find("'freqs' has dtype 'complex64'") != std::string::npos);
        const Run against_itself = shardctl({QStringLiteral("diff"), qs(dir / "complex.pt"), qs(dir / "complex.pt")});
        QCOMPARE(against_itself.exit_code, 1);
        QVERIFY2(against_itself.err.contains("'freqs' has dtype 'complex64'"), against_itself.err.constData());
        const Run converted = shardctl({QStringLiteral("convert"), qs(dir / "meg"), QStringLiteral("--to"),
                                        QStringLiteral("hf"), QStringLiteral("--out"), qs(dir / "complex_hf")});
        QCOMPARE(converted.exit_code, 1);
        QVERIFY2(converted.err.contains("'model.freqs' has dtype 'complex64'") &&
                     converted.err.contains("convert would leave it out"),
                 converted.err.constData());
        QVERIFY(!fs::exists(dir / "complex_hf"));

        const Run index = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(index.exit_code, 0);
        QCOMPARE(index.json().at("format").get<std::string>(), std::string("torch-index"));
        QCOMPARE(index.json().at("tensors").size(), std::size_t(2));
        // A file that also holds an older copy of "a": the index decides which is the model's.
        // stats reads "a" from the file it names (100 elements, not two copies end to end) and
        // names the other copy; diff finds the model identical to the folder without it, and
        // convert refuses, as verify fails.
        const Run stale = shardctl({QStringLiteral("stats"), qs(dir / "stale"), QStringLiteral("--json")});
        QCOMPARE(stale.exit_code, 1);
        const nlohmann::json stale_stats = stale.json();
        QCOMPARE(stale_stats.at("tensors").size(), std::size_t(2));
        for (const auto& t : stale_stats.at("tensors"))
            QCOMPARE(t.at("numel").get<uint64_t>(), t.at("name") == "a" ? uint64_t(100) : uint64_t(5));
        QCOMPARE(stale_stats.at("problems").size(), std::size_t(1));
        QCOMPARE(stale_stats.at("problems").at(0).at("kind").get<std::string>(), std::string("unmapped_tensor"));
        QCOMPARE(stale_stats.at("problems").at(0).at("path").get<std::string>(),
                 std::string("pytorch_model-00002-of-00002.bin"));
        const Run against = shardctl({QStringLiteral("diff"), qs(dir), qs(dir / "stale")});
        QVERIFY2(against.out.contains("2 tensors: 2 identical, bitwise"), against.out.constData());
        QCOMPARE(against.exit_code, 1); // the stale copy is a problem of the second side
        QCOMPARE(shardctl({QStringLiteral("verify"), qs(dir / "stale")}).exit_code, 1);
        const Run refused = shardctl({QStringLiteral("convert"), qs(dir / "stale"), QStringLiteral("--to"),
                                      QStringLiteral("hf"), QStringLiteral("--out"), qs(dir / "stale_hf")});
        QCOMPARE(refused.exit_code, 1);
        QVERIFY2(refused.err.contains("holds tensor 'a', which the index maps to pytorch_model-00001-of-00002.bin"),
                 refused.err.constData());
        QVERIFY(!fs::exists(dir / "stale_hf"));

        // One dispatcher for every command: verify (every archive entry's CRC) and info open what
        // stats opens, and convert writes safetensors that diff calls identical, bit for bit.
        for (const fs::path& source : {dir / "model.pt", dir}) {
            const Run verified = shardctl({QStringLiteral("verify"), qs(source), QStringLiteral("--json")});
            QCOMPARE(verified.exit_code, 0);
            QCOMPARE(verified.json().at("format").get<std::string>(),
                     std::string(source == dir ? "torch-index" : "torch"));
            QCOMPARE(shardctl({QStringLiteral("info"), qs(source)}).exit_code, 0);
        }
        const fs::path hf = dir / "converted";
        QCOMPARE(shardctl({QStringLiteral("convert"), qs(dir / "model.pt"), QStringLiteral("--to"),
                           QStringLiteral("hf"), QStringLiteral("--out"), qs(hf)})
                     .exit_code,
                 0);
        const Run same = shardctl({QStringLiteral("diff"), qs(dir / "model.pt"), qs(hf)});
        QCOMPARE(same.exit_code, 0);
        QVERIFY2(same.out.contains("9 tensors: 9 identical, bitwise"), same.out.constData());
        fs::remove_all(hf);
        // The index maps "b" to the file holding "a", which lacks it: said by name.
        std::ofstream(dir / "pytorch_model.bin.index.json")
            << R"({"metadata": {}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                 "b": "pytorch_model-00001-of-00002.bin"}})";
        const Run wrong = shardctl({QStringLiteral("verify"), qs(dir)});
        QCOMPARE(wrong.exit_code, 1);
        QVERIFY2(wrong.err.contains("pytorch_model-00001-of-00002.bin: lacks tensor 'b', which the index maps to it"),
                 wrong.err.constData());
        // stats reads each tensor from the file the index maps it to, as verify holds them: with
        // "a" and "b" mapped each to the other's file, neither file holds what it should, and
        // what they hold is not the checkpoint's by this index.
        std::ofstream(dir / "pytorch_model.bin.index.json", std::ios::trunc)
            << R"({"metadata": {}, "weight_map": {"a": "pytorch_model-00002-of-00002.bin",
                 "b": "pytorch_model-00001-of-00002.bin"}})";
        const Run swapped = shardctl({QStringLiteral("stats"), qs(dir), QStringLiteral("--json")});
        QCOMPARE(swapped.exit_code, 1);
        const nlohmann::json stats = swapped.json();
        QCOMPARE(stats.at("tensors").size(), std::size_t(0));
        std::multiset<std::string> said;
        for (const auto& p : stats.at("problems"))
            said.insert(p.at("kind").get<std::string>() + " " + p.at("path").get<std::string>());
        QVERIFY2(said ==
                     (std::multiset<std::string>{"missing_tensor pytorch_model-00001-of-00002.bin",
                                                 "missing_tensor pytorch_model-00002-of-00002.bin",
                                                 "unmapped_tensor pytorch_model-00001-of-00002.bin",
                                                 "unmapped_tensor pytorch_model-00002-of-00002.bin"}),
                 swapped.err.constData());
    }

    // report --content: a checkpoint that verifies (its hashes match) but holds a NaN fails the
    // report through its content-health section alone.
    void reportWithContent()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("ckpt")).toStdString();
        auto states = shardscope::make_demo_state(4, 20'000, 2, shardscope::ParamDtype::F16);
        states[1].exp_avg[9] = std::numeric_limits<float>::quiet_NaN();
        shardscope::SaveOptions options;
        options.tensors = shardscope::demo_tensor_layout(20'000);
        shardscope::save_sharded(states, dir, 8, options);
        const fs::path out = tmp.filePath(QStringLiteral("report.json")).toStdString();
        const QStringList args = {QStringLiteral("report"), qs(dir), QStringLiteral("--format"), QStringLiteral("json"),
                                  QStringLiteral("--out"),  qs(out)};
        QCOMPARE(shardctl(args).exit_code, 0); // without --content: bytes only, and they are right
        const Run run = shardctl(args + QStringList{QStringLiteral("--content")});
        QCOMPARE(run.exit_code, 1);
        QVERIFY(run.err.contains("NaN"));
        std::ifstream in(out);
        const auto report = nlohmann::json::parse(in);
        QCOMPARE(report.at("checkpoint").at("verify").at("ok").get<bool>(), true);
        QCOMPARE(report.at("content").at("problems").at(0).at("kind").get<std::string>(),
                 std::string("nonfinite_values"));
        QCOMPARE(report.at("content").at("problems").at(0).at("rank").get<int>(), 1);
        QCOMPARE(report.at("ok").get<bool>(), false);
    }

    // A hostile tensor name (a terminal escape) never reaches the terminal raw, and --json still
    // prints one object.
    void hostileNamesAreEscaped()
    {
        QTemporaryDir tmp;
        const fs::path file = tmp.filePath(QStringLiteral("evil.safetensors")).toStdString();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        // The name is ESC ] 0 ; pwned BEL w: a terminal title change, JSON-escaped in the header.
        std::string header = "{\"\\u001b]0;pwned\\u0007w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
        header.append((8 - header.size() % 8) % 8, ' ');
        std::string bytes;
        const uint64_t length = header.size();
        bytes.append(reinterpret_cast<const char*>(&length), 8);
        bytes += header;
        bytes.append(reinterpret_cast<const char*>(&nan), 4);
        write_text(file, bytes);
        Run run = shardctl({QStringLiteral("stats"), qs(file), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        QVERIFY(!run.err.contains('\x1b'));
        QVERIFY(run.err.contains("\\x1b"));
        QCOMPARE(run.json().at("problems").at(0).at("kind").get<std::string>(), std::string("nonfinite_values"));
        run = shardctl({QStringLiteral("stats"), qs(file)});
        QVERIFY(!run.out.contains('\x1b') && !run.err.contains('\x1b'));

        // A line break in a name is shown, not obeyed: one line per tensor in info's listing.
        std::string broken = "{\"two\\nlines\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
        broken.append((8 - broken.size() % 8) % 8, ' ');
        const uint64_t broken_length = broken.size();
        write_text(file, std::string(reinterpret_cast<const char*>(&broken_length), 8) + broken + std::string(4, '\0'));
        run = shardctl({QStringLiteral("info"), qs(file)});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("  tensor two\\x0alines  F32 [1]"), run.out.constData());
    }

    void jsonInEveryOutcome()
    {
        Run run = shardctl({QStringLiteral("stats"), QStringLiteral("/nonexistent/ckpt"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 2);
        nlohmann::json out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), false);
        QCOMPARE(out.at("error").at("kind").get<std::string>(), std::string("cannot_open"));
        QVERIFY(run.err.contains("/nonexistent/ckpt"));

        run = shardctl({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--bogus")});
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.json().at("ok").get<bool>(), false);

        for (const QStringList& args :
             {QStringList{QStringLiteral("diff"), QStringLiteral("--json"), QStringLiteral("/a")},
              QStringList{QStringLiteral("diff"), QStringLiteral("/nonexistent/a"), QStringLiteral("/nonexistent/b"),
                          QStringLiteral("--json")},
              QStringList{QStringLiteral("diff"), QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("--rtol"),
                          QStringLiteral("nan"), QStringLiteral("--json")}}) {
            run = shardctl(args);
            QCOMPARE(run.exit_code, 2);
            QCOMPARE(run.json().at("ok").get<bool>(), false);
            QVERIFY(run.json().at("error").contains("kind"));
            QVERIFY(!run.err.isEmpty());
        }
    }

    // diff on real torch.save files: a transposed view, a slice with steps and an expanded row
    // equal the contiguous values in a safetensors file (written from torch's own bytes), and
    // convert writes them so; one element changed by torch is found
    // at its flat index, exit 1; the same at world sizes 2 and 5 natively is identical, exit 0.
    void diffRealTorchAndWorldSizes()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        QProcess python;
        python.start(QStringLiteral("/usr/bin/python3"),
                     {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/fixtures/torch_diff.py"), tmp.path()});
        if (!python.waitForFinished(120000) || python.exitCode() != 0) {
            if (python.readAllStandardError().contains("No module named 'torch'") ||
                python.error() == QProcess::FailedToStart)
                QSKIP("PyTorch is not installed (apt-get install python3-torch; scripts/setup.sh does)");
            QFAIL("the torch diff fixture script failed");
        }
        const uint64_t index = python.readAllStandardOutput().trimmed().toULongLong();
        Run run = shardctl(
            {QStringLiteral("diff"), qs(dir / "a.pt"), qs(dir / "model.safetensors"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 0);
        QCOMPARE(run.json().at("summary").at("identical").get<int>(), 5);
        QCOMPARE(run.json().at("a").at("path").get<std::string>(), (dir / "a.pt").string());
        QCOMPARE(shardctl({QStringLiteral("convert"), qs(dir / "meg"), QStringLiteral("--to"), QStringLiteral("hf"),
                           QStringLiteral("--out"), qs(dir / "a_hf")})
                     .exit_code,
                 0);
        run = shardctl({QStringLiteral("diff"), qs(dir / "meg"), qs(dir / "a_hf")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("5 tensors: 5 identical, bitwise"), run.out.constData());

        run = shardctl({QStringLiteral("diff"), qs(dir / "a.pt"), qs(dir / "b.pt"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        nlohmann::json changed;
        const nlohmann::json tensors = run.json().at("tensors"); // not a temporary's member in range-for
        for (const auto& t : tensors)
            if (t.at("status") == "changed")
                changed = t;
        QCOMPARE(changed.at("name").get<std::string>(), std::string("layer.weight"));
        QCOMPARE(changed.at("changed_elements").get<uint64_t>(), uint64_t(1));
        QCOMPARE(changed.at("first_changed_element").get<uint64_t>(), index);
        QVERIFY(std::abs(changed.at("max_abs_diff").get<double>() - 1.0) < 1e-6);
        run = shardctl({QStringLiteral("diff"), qs(dir / "a.pt"), qs(dir / "b.pt"), QStringLiteral("--atol"),
                        QStringLiteral("1.5")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY(run.out.contains("5 identical"));

        for (const char* world : {"2", "5"})
            QCOMPARE(shardctl({QStringLiteral("demo-save"), QStringLiteral("--out"),
                               qs(dir / ("w" + std::string(world))), QStringLiteral("--world-size"),
                               QString::fromLatin1(world), QStringLiteral("--numel"), QStringLiteral("30001")})
                         .exit_code,
                     0);
        run = shardctl({QStringLiteral("diff"), qs(dir / "w2"), qs(dir / "w5")});
        QCOMPARE(run.exit_code, 0);
        QVERIFY2(run.out.contains("identical, bitwise"), run.out.constData());
    }

    // An FP8 weight with DeepSeek-V3 block scales: stats --json reports its dequantized values
    // (against a reference decoded in the test) and names the scale tensor; --raw-fp8 the stored
    // ones; scales of the wrong shape are one problem naming the file and tensor, exit 1.
    void fp8WeightsDequantized()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const Fp8Weight w = make_fp8_weight(300, 200, 11, 4321);
        write_safetensors(dir / "fp8.safetensors", fp8_entries("q.weight", w));
        Run run = shardctl({QStringLiteral("stats"), qs(dir / "fp8.safetensors"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1); // the planted NaN
        nlohmann::json out = run.json();
        nlohmann::json tensor = out.at("tensors").at(0);
        QCOMPARE(tensor.at("name").get<std::string>(), std::string("q.weight"));
        QCOMPARE(tensor.at("dtype").get<std::string>(), std::string("F8_E4M3"));
        QCOMPARE(tensor.at("dequantized_by").get<std::string>(), std::string("q.weight_scale_inv"));
        QCOMPARE(tensor.at("nan").get<uint64_t>(), uint64_t(1));
        QVERIFY2(same_figures(tensor, summary(w.values())), tensor.dump().c_str());
        QVERIFY(!out.at("tensors").at(1).contains("dequantized_by"));
        QCOMPARE(out.at("problems").size(), std::size_t(1));
        QCOMPARE(out.at("problems").at(0).at("kind").get<std::string>(), std::string("nonfinite_values"));

        run = shardctl({QStringLiteral("stats"), qs(dir / "fp8.safetensors"), QStringLiteral("--json"),
                        QStringLiteral("--raw-fp8")});
        tensor = run.json().at("tensors").at(0);
        QVERIFY(!tensor.contains("dequantized_by"));
        QVERIFY2(same_figures(tensor, summary(w.values(true))), tensor.dump().c_str());

        run = shardctl({QStringLiteral("stats"), qs(dir / "fp8.safetensors")});
        QVERIFY2(run.out.contains("q.weight  F8_E4M3 300x200") &&
                     run.out.contains("(dequantized by q.weight_scale_inv)"),
                 run.out.constData());

        write_safetensors(dir / "bad.safetensors", fp8_entries("q.weight", w, "F32", {3, 3}));
        run = shardctl({QStringLiteral("stats"), qs(dir / "bad.safetensors"), QStringLiteral("--json")});
        QCOMPARE(run.exit_code, 1);
        out = run.json();
        QCOMPARE(out.at("ok").get<bool>(), false);
        const nlohmann::json& problem = out.at("problems").at(0);
        QCOMPARE(problem.at("kind").get<std::string>(), std::string("invalid_fp8_scale"));
        QCOMPARE(problem.at("path").get<std::string>(), std::string("bad.safetensors"));
        const std::string message = problem.at("message").get<std::string>();
        QVERIFY2(message.find((dir / "bad.safetensors").string()) == 0 &&
                     message.find("'q.weight'") != std::string::npos && message.find("[3, 3]") != std::string::npos,
                 message.c_str());
        tensor = out.at("tensors").at(0);
        QVERIFY(!tensor.contains("dequantized_by"));
        QVERIFY2(same_figures(tensor, summary(w.values(true))), tensor.dump().c_str());
        QVERIFY(run.err.contains("'q.weight_scale_inv'"));
    }
};

QTEST_GUILESS_MAIN(TestCliStats)
#include "tst_cli_stats.moc"
