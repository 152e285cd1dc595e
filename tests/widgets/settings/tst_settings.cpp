#include "widgets/settings/settings.h"

#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;

class TestSettings : public QObject {
    Q_OBJECT
private slots:
    void recentFoldersNewestFirstCappedAtTen()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("s.ini"));
        {
            Settings settings(ini);
            for (int i = 0; i < 14; ++i)
                settings.addRecentFolder(QStringLiteral("/data/ck%1").arg(i));
            settings.addRecentFolder(QStringLiteral("/data/ck7/")); // again: moves to the front
            const QStringList recent = settings.recentFolders();
            QCOMPARE(recent.size(), Settings::kMaxRecentFolders);
            QCOMPARE(recent.first(), QStringLiteral("/data/ck7"));
            QCOMPARE(recent.count(QStringLiteral("/data/ck7")), 1);
            QVERIFY(!recent.contains(QStringLiteral("/data/ck0")));
            settings.removeRecentFolder(QStringLiteral("/data/ck13"));
            QVERIFY(!settings.recentFolders().contains(QStringLiteral("/data/ck13")));
            settings.sync();
        }
        Settings reopened(ini); // remembered across runs
        QCOMPARE(reopened.recentFolders().first(), QStringLiteral("/data/ck7"));
        reopened.clearRecentFolders();
        QVERIFY(reopened.recentFolders().isEmpty());
    }

    void windowStateIsVersioned()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("s.ini"));
        Settings settings(ini);
        settings.setWindowState(QByteArray("state-v1"));
        QCOMPARE(settings.windowState(), QByteArray("state-v1"));
        settings.sync();
        {
            QSettings raw(ini, QSettings::IniFormat); // as written by an older layout
            raw.setValue(QStringLiteral("window/stateVersion"), Settings::kWindowStateVersion + 1);
        }
        Settings other(ini);
        QVERIFY(other.windowState().isEmpty());
    }

    void typedValuesWithDefaults()
    {
        QTemporaryDir dir;
        Settings settings(dir.filePath(QStringLiteral("s.ini")));
        QCOMPARE(settings.fastVerify(), false);
        QCOMPARE(settings.verifyThreads(), 0);
        settings.setFastVerify(true);
        settings.setVerifyThreads(-3);
        QCOMPARE(settings.fastVerify(), true);
        QCOMPARE(settings.verifyThreads(), 0);
        settings.setLastProfile(QStringLiteral("/p.json"));
        QCOMPARE(settings.lastProfile(), QStringLiteral("/p.json"));
    }

    // The expected world size is per folder (slashes in a path are no QSettings groups), and
    // survives a restart; 0 forgets it.
    void expectedWorldSizePerFolder()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        {
            Settings settings(file);
            QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 0);
            settings.setExpectedWorldSize(QStringLiteral("/runs/a"), 8);
            settings.setExpectedWorldSize(QStringLiteral("/runs/a/b"), 4);
            settings.sync();
        }
        Settings settings(file);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 8);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a/b")), 4);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/c")), 0);
        settings.setExpectedWorldSize(QStringLiteral("/runs/a"), 0);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 0);
    }

    // The planner's training step and the plan search's inputs survive a restart; nothing stored
    // or a hand-edited value out of range gives nullopt, so the panels keep their defaults.
    void plannerInputsRoundTrip()
    {
        namespace pl = shardscope::pipeline;
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        const pl::TrainingOptions training{.dp = 8,
                                           .zero = 2,
                                           .recompute = pl::Recompute::selective,
                                           .link_gbps = 200.5,
                                           .overlap_allreduce = true,
                                           .fp32_grads = true,
                                           .gpu_memory_bytes = std::int64_t(80) << 30};
        const pl::SearchSpec search{.gpus = 512,
                                    .global_batch = 1024,
                                    .micro_batch_size = 2,
                                    .gpu_memory_bytes = std::int64_t(40) << 30,
                                    .link_gbps = 400,
                                    .zero = {1},
                                    .overlap_allreduce = true,
                                    .fp32_grads = true};
        {
            Settings settings(file);
            QVERIFY(!settings.plannerTraining());
            QVERIFY(!settings.planSearch());
            settings.setPlannerTraining(training);
            settings.setPlanSearch(search);
            settings.sync();
        }
        {
            Settings settings(file);
            const auto t = settings.plannerTraining();
            QVERIFY(t);
            QCOMPARE(t->dp, 8);
            QCOMPARE(t->zero, 2);
            QCOMPARE(t->recompute, pl::Recompute::selective);
            QCOMPARE(t->link_gbps, 200.5);
            QCOMPARE(t->overlap_allreduce, true);
            QCOMPARE(t->fp32_grads, true);
            QCOMPARE(t->gpu_memory_bytes, std::optional<std::int64_t>(std::int64_t(80) << 30));
            const auto s = settings.planSearch();
            QVERIFY(s);
            QCOMPARE(s->gpus, 512);
            QCOMPARE(s->global_batch, 1024);
            QCOMPARE(s->micro_batch_size, 2);
            QCOMPARE(s->gpu_memory_bytes, std::int64_t(40) << 30);
            QCOMPARE(s->link_gbps, 400.0);
            QCOMPARE(s->zero, std::vector<int>{1});
            QCOMPARE(s->overlap_allreduce, true);
            QCOMPARE(s->fp32_grads, true);
            // No limit is stored as such.
            pl::TrainingOptions unlimited = training;
            unlimited.gpu_memory_bytes.reset();
            settings.setPlannerTraining(unlimited);
            QVERIFY(settings.plannerTraining());
            QVERIFY(!settings.plannerTraining()->gpu_memory_bytes);
            settings.sync();
        }
        {
            QSettings raw(file, QSettings::IniFormat); // hand-edited
            raw.setValue(QStringLiteral("planner/training/zero"), 7);
            raw.setValue(QStringLiteral("planner/search/gpus"), 0);
        }
        Settings edited(file);
        QVERIFY(!edited.plannerTraining());
        QVERIFY(!edited.planSearch());
        {
            QSettings raw(file, QSettings::IniFormat);
            raw.setValue(QStringLiteral("planner/training/zero"), 1);
            raw.setValue(QStringLiteral("planner/training/recompute"), QStringLiteral("sometimes"));
        }
        QVERIFY(!Settings(file).plannerTraining());
        // Values the controls could not show are refused too, not shown clamped.
        auto refused = [&](const QString& key, const QVariant& value, bool training) {
            QSettings raw(file, QSettings::IniFormat);
            raw.setValue(QStringLiteral("planner/training/recompute"), QStringLiteral("none"));
            raw.setValue(QStringLiteral("planner/search/gpus"), 8);
            const QVariant before = raw.value(key);
            raw.setValue(key, value);
            raw.sync();
            Settings s(file);
            const bool gone = training ? !s.plannerTraining() : !s.planSearch();
            raw.setValue(key, before);
            raw.sync();
            return gone;
        };
        {
            QSettings raw(file, QSettings::IniFormat);
            raw.setValue(QStringLiteral("planner/training/recompute"), QStringLiteral("none"));
            raw.setValue(QStringLiteral("planner/search/gpus"), 8);
        }
        QVERIFY(Settings(file).plannerTraining()); // the baseline the cases below break one at a time
        QVERIFY(Settings(file).planSearch());
        QVERIFY(refused(QStringLiteral("planner/training/dp"), plannerrange::kMaxDp + 1, true));
        QVERIFY(refused(QStringLiteral("planner/training/gpuMemoryBytes"), -1, true));
        QVERIFY(refused(QStringLiteral("planner/training/gpuMemoryBytes"), qint64(8192) << 30, true));
        QVERIFY(refused(QStringLiteral("planner/training/linkGbps"), 1e6, true));
        QVERIFY(refused(QStringLiteral("planner/search/gpuMemoryBytes"), qint64(1) << 20, false)); // < 0.25 GiB
        QVERIFY(refused(QStringLiteral("planner/search/microBatchSize"), plannerrange::kMaxMicroBatch + 1, false));
        QVERIFY(refused(QStringLiteral("planner/search/linkGbps"), 2e5, false));
        QVERIFY(refused(QStringLiteral("planner/search/zeroStage"), 4, false));
        QVERIFY(refused(QStringLiteral("planner/search/zeroStage"), -2, false));
        // "Any ZeRO" (every stage searched) is stored as -1 and read back as the empty list.
        {
            Settings settings(file);
            pl::SearchSpec any = *settings.planSearch();
            any.zero.clear();
            settings.setPlanSearch(any);
            settings.sync();
        }
        QVERIFY(Settings(file).planSearch()->zero.empty());
    }

    // The Model search tab's inputs survive a restart; a size its control cannot show or an empty
    // name gives nullopt, so the tab keeps its defaults.
    void modelSearchInputsRoundTrip()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        {
            Settings settings(file);
            QVERIFY(!settings.modelSearch());
            settings.setModelSearch({.configPath = QStringLiteral("/data/llama-3.1-405b/config.json"),
                                     .cluster = QStringLiteral("h200-sxm-141gb"),
                                     .gpus = 16384,
                                     .seqLen = 8192,
                                     .globalBatch = 2048,
                                     .fp32Grads = true});
            settings.sync();
        }
        const auto m = Settings(file).modelSearch();
        QVERIFY(m);
        QCOMPARE(m->configPath, QStringLiteral("/data/llama-3.1-405b/config.json"));
        QCOMPARE(m->cluster, QStringLiteral("h200-sxm-141gb"));
        QCOMPARE(m->gpus, 16384);
        QCOMPARE(m->seqLen, 8192);
        QCOMPARE(m->globalBatch, 2048);
        QVERIFY(m->fp32Grads);
        auto refused = [&](const QString& key, const QVariant& value) {
            QSettings raw(file, QSettings::IniFormat); // hand-edited
            const QVariant before = raw.value(key);
            raw.setValue(key, value);
            raw.sync();
            const bool gone = !Settings(file).modelSearch();
            raw.setValue(key, before);
            raw.sync();
            return gone;
        };
        QVERIFY(refused(QStringLiteral("planner/modelSearch/gpus"), 0));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/gpus"), plannerrange::kMaxGpus + 1));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/seqLen"), plannerrange::kMaxSeqLen + 1));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/globalBatch"), -4));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/globalBatch"), QStringLiteral("many")));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/config"), QString()));
        QVERIFY(refused(QStringLiteral("planner/modelSearch/cluster"), QString()));
        QVERIFY(Settings(file).modelSearch()); // each case was put back
    }
};

QTEST_GUILESS_MAIN(TestSettings)
#include "tst_settings.moc"
