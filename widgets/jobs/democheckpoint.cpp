#include "widgets/jobs/democheckpoint.h"

#include "core/run/demo.h"
#include "widgets/style/format.h"

#include <QDir>
#include <QSaveFile>
#include <QStandardPaths>
#include <QtConcurrent>

namespace shardwidgets {

namespace {
constexpr int kWorldSize = 8;
constexpr uint64_t kNumel = 3u << 20; // 3 Mi elements: ~44 MB, a second or so of hashing
constexpr uint64_t kSeed = 20240601;
} // namespace

QString demoCheckpointRoot()
{
    QString cache = QStandardPaths::writableLocation(QStandardPaths::CacheLocation);
    if (cache.isEmpty())
        cache = QDir::tempPath() + QStringLiteral("/shardscope");
    return QDir(cache).filePath(QStringLiteral("demo-checkpoint"));
}

QString ensureDemoCheckpoint(QString* error)
{
    const QString root = demoCheckpointRoot();
    try {
        if (!QDir().mkpath(root))
            throw shardscope::Error(shardscope::ProblemKind::io_error, "cannot create the directory",
                                    root.toStdString());
        const auto states = shardscope::make_demo_state(kSeed, kNumel, kWorldSize, shardscope::ParamDtype::BF16);
        const uint64_t steps[] = {1800, 2000};
        QString last;
        for (uint64_t step : steps) {
            const QString name = QStringLiteral("step-%1").arg(step, 6, 10, QLatin1Char('0'));
            const QString dir = QDir(root).filePath(name);
            last = name;
            if (QFileInfo::exists(QDir(dir).filePath(QStringLiteral("manifest.json"))))
                continue;
            QDir(dir).removeRecursively(); // an interrupted earlier attempt
            shardscope::SaveOptions options;
            options.durable = false; // a cache, not a training run
            options.wall_clock_seconds = double(step) * 2.26;
            options.tensors = shardscope::demo_tensor_layout(kNumel);
            options.training_state = {
                {"optimizer",
                 {{"name", "adamw"}, {"lr", 3e-4}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}, {"step", step}}},
                {"lr_schedule", {{"name", "cosine"}, {"warmup_steps", 200}, {"total_steps", 10000}}},
                {"dataloader", {{"epoch", 1}, {"offset", step * 512}}},
                {"rng", {{"seed", kSeed}}}};
            shardscope::save_sharded(states, dir.toStdString(), step, options);
        }
        QSaveFile latest(QDir(root).filePath(QStringLiteral("latest")));
        if (!latest.open(QIODevice::WriteOnly) || latest.write(last.toUtf8() + '\n') < 0 || !latest.commit())
            throw shardscope::Error(shardscope::ProblemKind::io_error, latest.errorString().toStdString(),
                                    latest.fileName().toStdString());
        return root;
    } catch (const std::exception& e) {
        if (error)
            *error = printableText(e.what());
        return {};
    }
}

QFuture<QString> ensureDemoCheckpointAsync()
{
    return QtConcurrent::run([] { return ensureDemoCheckpoint(nullptr); });
}

} // namespace shardwidgets
