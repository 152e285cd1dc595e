// The main window's "Profile from the Open Checkpoint…" and "Import Profiler Trace…":
// both actions exist in the Planner menu, the work runs off the GUI thread, the result lands in
// the planner, a bad trace is reported, and the newest request wins.
#include "app/shardscope/mainwindow.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/settings/settings.h"
#include "foreign_fixtures.h"

#include "core/checkpoint/safetensors.h"

#include <QAction>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

void write_model(const fs::path& dir)
{
    // embed [50, 16], two blocks of one [16, 16] weight and a norm, final norm, lm_head [50, 16]
    std::vector<shardscope::SafetensorsTensor> layout;
    std::uint64_t at = 0;
    auto add = [&](const std::string& name, std::vector<uint64_t> shape) {
        std::uint64_t n = 2;
        for (uint64_t d : shape)
            n *= d;
        layout.push_back({.name = name, .dtype = "BF16", .shape = std::move(shape), .begin = at, .end = at + n});
        at += n;
    };
    add("model.embed_tokens.weight", {50, 16});
    for (int b = 0; b < 2; ++b) {
        add("model.layers." + std::to_string(b) + ".mlp.weight", {16, 16});
        add("model.layers." + std::to_string(b) + ".norm.weight", {16});
    }
    add("model.norm.weight", {16});
    add("lm_head.weight", {50, 16});
    fixtures::write_file(dir / "model.safetensors",
                         shardscope::make_safetensors_header(layout, {}) +
                             std::string(static_cast<std::size_t>(at), '\0'));
    fixtures::write_file(dir / "config.json", R"({"hidden_size": 16, "num_attention_heads": 4, "intermediate_size": 64,
                                                  "vocab_size": 50, "num_hidden_layers": 2})");
}

std::string trace_of(int layers, double dur_us)
{
    nlohmann::json events = nlohmann::json::array();
    for (int l = 0; l < layers; ++l)
        events.push_back({{"ph", "X"},
                          {"cat", "user_annotation"},
                          {"name", "layers." + std::to_string(l)},
                          {"ts", 100 * l},
                          {"dur", dur_us},
                          {"pid", 1},
                          {"tid", 1}});
    return nlohmann::json{{"traceEvents", events}}.dump();
}

} // namespace

class TestProfileActions : public QObject {
    Q_OBJECT

private slots:
    void actionsExist()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        QVERIFY(window.findChild<QAction*>(QStringLiteral("profileFromCheckpointAction")));
        QVERIFY(window.findChild<QAction*>(QStringLiteral("importTraceAction")));
    }

    void profileFromTheOpenCheckpoint()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        QSignalSpy failed(&window, &MainWindow::profileImportFailed);
        window.profileFromCheckpoint(32, 1); // nothing open yet
        QCOMPARE(failed.count(), 1);
        QVERIFY(!window.plannerPanel()->profileChosen()); // still the bundled demo

        const fs::path dir = fs::path(tmp.path().toStdString()) / "model";
        write_model(dir);
        window.openPath(QString::fromStdString(dir.string()));
        QSignalSpy imported(&window, &MainWindow::profileImported);
        window.profileFromCheckpoint(32, 2);
        QVERIFY(imported.wait(30000));
        const auto& profile = window.plannerPanel()->planner()->profile();
        QCOMPARE(profile.layers.size(), std::size_t(4));
        QCOMPARE(profile.layers[0].params, std::int64_t(50 * 16));
        QCOMPARE(profile.layers[1].name, std::string("model.layers.0"));
        QCOMPARE(profile.layers[1].params, std::int64_t(16 * 16 + 16));
        QCOMPARE(profile.layers[3].params, std::int64_t(16 + 50 * 16));
        QCOMPARE(profile.micro_batch_size, std::optional<int>(2));
        QVERIFY(window.plannerPanel()->profileChosen()); // so is a profile derived from the checkpoint
    }

    void importTraceAndNewestWins()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        const QString first = tmp.filePath(QStringLiteral("first.json"));
        const QString second = tmp.filePath(QStringLiteral("second.json"));
        fixtures::write_file(first.toStdString(), trace_of(3, 100));
        fixtures::write_file(second.toStdString(), trace_of(5, 200));
        QSignalSpy imported(&window, &MainWindow::profileImported);
        window.importTrace(first);
        window.importTrace(second); // started later: its result is the one kept
        QVERIFY(imported.wait(30000));
        QTest::qWait(200); // the first job, had it not been dropped, would land now
        QCOMPARE(imported.count(), 1);
        QCOMPARE(imported.front().front().toString(), QStringLiteral("second"));
        const auto& profile = window.plannerPanel()->planner()->profile();
        QCOMPARE(profile.layers.size(), std::size_t(5));
        QCOMPARE(profile.layers[4].fwd_ms, 0.2);
        QVERIFY(window.plannerPanel()->profileChosen()); // an imported trace goes into the report

        QSignalSpy failed(&window, &MainWindow::profileImportFailed);
        const QString bad = tmp.filePath(QStringLiteral("bad.json"));
        fixtures::write_file(bad.toStdString(), R"({"traceEvents": []})");
        window.importTrace(bad);
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.front().front().toString().contains(bad), qPrintable(failed.front().front().toString()));
        QCOMPARE(window.plannerPanel()->planner()->profile().layers.size(), std::size_t(5)); // unchanged
    }
};

QTEST_MAIN(TestProfileActions)
#include "tst_profile_actions.moc"
