#pragma once
// Typed application settings over QSettings. Every key name lives in settings.cpp and nowhere
// else; the window state is stored with a version so that a layout change ignores stale state
// instead of restoring a broken one.

#include "core/pipeline/search.h"
#include "core/pipeline/training.h"

#include <QByteArray>
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>

class QSettings;

namespace shardwidgets {

// What the planner's controls can show, and so what a stored value may be (a value outside would
// be shown clamped while the planner computed with another one).
namespace plannerrange {
inline constexpr int kMaxDp = 1 << 16;
inline constexpr double kMaxGpuMemoryGiB = 4096;
inline constexpr double kMinSearchMemoryGiB = 0.25;
inline constexpr double kMaxLinkGbps = 1e5;
inline constexpr int kMaxGpus = 1 << 20;
inline constexpr int kMaxGlobalBatch = 1 << 24;
inline constexpr int kMaxMicroBatch = 1 << 16;
inline constexpr int kMaxSeqLen = 1 << 24; // shardctl's --seq-len
} // namespace plannerrange

// The Model search tab's inputs (`shardctl plan --model CONFIG --cluster NAME --gpus --seq-len
// --global-batch`): the config.json as chosen (a bundled ":/models/..." path or a file) and the
// cluster preset's name, which the panel checks when it shows them (a file since deleted, a
// preset since renamed keep its defaults), the three sizes and --fp32-grads.
struct ModelSearchInputs {
    QString configPath;
    QString cluster;
    int gpus = 64;
    int seqLen = 4096;
    int globalBatch = 512;
    bool fp32Grads = false;
};

class Settings {
public:
    static constexpr int kMaxRecentFolders = 10;
    static constexpr int kWindowStateVersion = 1;

    Settings(); // the application's QSettings
    explicit Settings(const QString& iniFile); // an explicit file (tests, portable use)
    ~Settings();
    Settings(const Settings&) = delete;
    Settings& operator=(const Settings&) = delete;

    QStringList recentFolders() const; // newest first, at most kMaxRecentFolders
    void addRecentFolder(const QString& path); // moves an existing entry to the front
    void removeRecentFolder(const QString& path);
    void clearRecentFolders();

    QByteArray windowGeometry() const;
    void setWindowGeometry(const QByteArray& geometry);
    // Empty when the stored state was written by another layout version.
    QByteArray windowState() const;
    void setWindowState(const QByteArray& state);

    QString lastProfile() const;
    void setLastProfile(const QString& path);
    QString lastExportDirectory() const;
    void setLastExportDirectory(const QString& path);
    bool fastVerify() const;
    void setFastVerify(bool fast);
    int verifyThreads() const; // 0: all hardware threads
    void setVerifyThreads(int threads);
    // The world size the user's job runs at, per checkpoint folder (as opened): verification
    // then reports a checkpoint saved at another one as a world size change. 0: not given.
    int expectedWorldSize(const QString& folder) const;
    void setExpectedWorldSize(const QString& folder, int worldSize);

    // The pipeline planner's training step (dp, ZeRO, recomputation, memory limit, link,
    // overlap) and the plan search's inputs, as last used; nullopt when never stored or when what
    // is stored is no longer valid (a hand-edited file), so the panels keep their defaults.
    std::optional<shardscope::pipeline::TrainingOptions> plannerTraining() const;
    void setPlannerTraining(const shardscope::pipeline::TrainingOptions& options);
    std::optional<shardscope::pipeline::SearchSpec> planSearch() const;
    void setPlanSearch(const shardscope::pipeline::SearchSpec& spec);
    // nullopt when never stored, or a size is out of its control's range or a name is empty.
    std::optional<ModelSearchInputs> modelSearch() const;
    void setModelSearch(const ModelSearchInputs& inputs);

    void sync();

private:
    std::unique_ptr<QSettings> m_settings;
};

} // namespace shardwidgets
