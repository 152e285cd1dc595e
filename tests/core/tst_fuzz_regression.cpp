// Replays every fuzzing seed and every input that once crashed a fuzzer (tests/fuzz/corpus and
// tests/fuzz/regression) through the same entry points as the libFuzzer targets, in the
// ordinary build: each must end in a result or a typed shardscope::Error, nothing else.

#include "fuzz/fuzz_entries.h"
#include "fuzz/fuzz_foreign_entries.h"
#include "fuzz/fuzz_inspect_entries.h"
#include "fuzz/fuzz_trace_entries.h"

#include <QTest>
#include <filesystem>
#include <fstream>
#include <functional>

namespace fs = std::filesystem;

class TestFuzzRegression : public QObject {
    Q_OBJECT
private:
    using Entry = std::function<void(const uint8_t*, std::size_t)>;

    static std::vector<std::pair<std::string, Entry>> targets()
    {
        std::vector<std::pair<std::string, Entry>> all = {
            {"fuzz_manifest", shardscope::fuzz::manifest_one},
            {"fuzz_safetensors_header", shardscope::fuzz::safetensors_one},
            {"fuzz_profile", shardscope::fuzz::profile_one},
            {"fuzz_index", shardscope::fuzz::index_one},
            {"fuzz_pickle", shardscope::fuzz::pickle_one},
            {"fuzz_zip", shardscope::fuzz::zip_one},
            {"fuzz_inspect", shardscope::fuzz::inspect_one},
            {"fuzz_trace", shardscope::fuzz::trace_one},
            {"fuzz_schedule_csv", shardscope::fuzz::schedule_csv_one},
            {"fuzz_s3_answer", shardscope::fuzz::s3_answer_one},
        };
        return all;
    }

private slots:
    void replay_data()
    {
        QTest::addColumn<QString>("target");
        QTest::addColumn<QString>("file");
        const fs::path fuzz = fs::path(SHARDSCOPE_SOURCE_DIR) / "tests" / "fuzz";
        int files = 0;
        for (const auto& [target, entry] : targets()) {
            (void)entry;
            for (const char* set : {"corpus", "regression"}) {
                const fs::path dir = fuzz / set / target;
                if (!fs::is_directory(dir))
                    continue;
                for (const auto& file : fs::directory_iterator(dir)) {
                    if (!file.is_regular_file())
                        continue;
                    const std::string row = target + "/" + set + "/" + file.path().filename().string();
                    QTest::newRow(row.c_str())
                        << QString::fromStdString(target) << QString::fromStdString(file.path().string());
                    ++files;
                }
            }
        }
        QVERIFY2(files >= 8, "the seed corpora are missing");
    }

    void replay()
    {
        QFETCH(QString, target);
        QFETCH(QString, file);
        std::ifstream in(file.toStdString(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), {});
        for (const auto& [name, entry] : targets()) {
            if (name != target.toStdString())
                continue;
            try {
                entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
            } catch (const std::exception& e) {
                QFAIL(qPrintable(QStringLiteral("%1: %2").arg(file, QString::fromUtf8(e.what()))));
            }
            return;
        }
        QFAIL("unknown target");
    }
};

QTEST_GUILESS_MAIN(TestFuzzRegression)
#include "tst_fuzz_regression.moc"
