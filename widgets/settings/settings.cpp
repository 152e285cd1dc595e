#include "widgets/settings/settings.h"

#include "core/storage/location.h"

#include <QDir>
#include <QSettings>
#include <algorithm>

namespace shardwidgets {

namespace key {
const QString recentFolders = QStringLiteral("recent/folders");
const QString windowGeometry = QStringLiteral("window/geometry");
const QString windowState = QStringLiteral("window/state");
const QString windowStateVersion = QStringLiteral("window/stateVersion");
const QString lastProfile = QStringLiteral("planner/lastProfile");
const QString lastExportDirectory = QStringLiteral("export/lastDirectory");
const QString fastVerify = QStringLiteral("verify/fast");
// One entry per folder; the folder's path, hex-encoded, is the key (a path's slashes would make
// QSettings groups of it).
QString expectedWorldSize(const QString& folder)
{
    return QStringLiteral("expectedWorldSize/") + QString::fromLatin1(folder.toUtf8().toHex());
}
const QString verifyThreads = QStringLiteral("verify/threads");
const QString trainingDp = QStringLiteral("planner/training/dp");
const QString trainingZero = QStringLiteral("planner/training/zero");
const QString trainingRecompute = QStringLiteral("planner/training/recompute");
const QString trainingLinkGbps = QStringLiteral("planner/training/linkGbps");
const QString trainingOverlap = QStringLiteral("planner/training/overlapAllReduce");
const QString trainingFp32Grads = QStringLiteral("planner/training/fp32Grads");
const QString trainingGpuMemory = QStringLiteral("planner/training/gpuMemoryBytes"); // 0: no limit
const QString searchGpus = QStringLiteral("planner/search/gpus");
const QString searchGlobalBatch = QStringLiteral("planner/search/globalBatch");
const QString searchMicroBatch = QStringLiteral("planner/search/microBatchSize");
const QString searchGpuMemory = QStringLiteral("planner/search/gpuMemoryBytes");
const QString searchLinkGbps = QStringLiteral("planner/search/linkGbps");
// Named anew when the stage became a choice: a ZeRO 0 saved when it was an input (the old
// "planner/search/zero") does not pin the search to it now.
const QString searchZero = QStringLiteral("planner/search/zeroStage");
const QString searchOverlap = QStringLiteral("planner/search/overlapAllReduce");
const QString searchFp32Grads = QStringLiteral("planner/search/fp32Grads");
const QString modelConfig = QStringLiteral("planner/modelSearch/config");
const QString modelCluster = QStringLiteral("planner/modelSearch/cluster");
const QString modelGpus = QStringLiteral("planner/modelSearch/gpus");
const QString modelSeqLen = QStringLiteral("planner/modelSearch/seqLen");
const QString modelGlobalBatch = QStringLiteral("planner/modelSearch/globalBatch");
const QString modelFp32Grads = QStringLiteral("planner/modelSearch/fp32Grads");
} // namespace key

namespace pl = shardscope::pipeline;

Settings::Settings() : m_settings(std::make_unique<QSettings>()) {}

Settings::Settings(const QString& iniFile) : m_settings(std::make_unique<QSettings>(iniFile, QSettings::IniFormat)) {}

Settings::~Settings() = default;

QStringList Settings::recentFolders() const
{
    QStringList folders = m_settings->value(key::recentFolders).toStringList();
    folders.removeAll(QString());
    if (folders.size() > kMaxRecentFolders)
        folders.resize(kMaxRecentFolders);
    return folders;
}

namespace {

// A recent entry as it is opened again: a URL in its one spelling ("s3://b/run/" is
// "s3://b/run"; cleaning it as a path would make the relative folder "s3:/b/run"), a folder
// cleaned.
QString recentEntry(const QString& path)
{
    if (!shardscope::storage::is_url(path.toStdString()))
        return QDir::cleanPath(path);
    try {
        return QString::fromStdString(
            shardscope::storage::to_string(shardscope::storage::parse_location(path.toStdString())));
    } catch (const std::exception&) {
        return path; // kept as given: opening it says what is wrong
    }
}

} // namespace

void Settings::addRecentFolder(const QString& path)
{
    const QString clean = recentEntry(path);
    if (clean.isEmpty())
        return;
    QStringList folders = recentFolders();
    folders.removeAll(clean);
    folders.prepend(clean);
    while (folders.size() > kMaxRecentFolders)
        folders.removeLast();
    m_settings->setValue(key::recentFolders, folders);
}

void Settings::removeRecentFolder(const QString& path)
{
    QStringList folders = recentFolders();
    folders.removeAll(recentEntry(path));
    m_settings->setValue(key::recentFolders, folders);
}

void Settings::clearRecentFolders()
{
    m_settings->remove(key::recentFolders);
}

QByteArray Settings::windowGeometry() const
{
    return m_settings->value(key::windowGeometry).toByteArray();
}

void Settings::setWindowGeometry(const QByteArray& geometry)
{
    m_settings->setValue(key::windowGeometry, geometry);
}

QByteArray Settings::windowState() const
{
    if (m_settings->value(key::windowStateVersion, -1).toInt() != kWindowStateVersion)
        return {};
    return m_settings->value(key::windowState).toByteArray();
}

void Settings::setWindowState(const QByteArray& state)
{
    m_settings->setValue(key::windowState, state);
    m_settings->setValue(key::windowStateVersion, kWindowStateVersion);
}

QString Settings::lastProfile() const
{
    return m_settings->value(key::lastProfile).toString();
}

void Settings::setLastProfile(const QString& path)
{
    m_settings->setValue(key::lastProfile, path);
}

QString Settings::lastExportDirectory() const
{
    return m_settings->value(key::lastExportDirectory, QDir::homePath()).toString();
}

void Settings::setLastExportDirectory(const QString& path)
{
    m_settings->setValue(key::lastExportDirectory, path);
}

bool Settings::fastVerify() const
{
    return m_settings->value(key::fastVerify, false).toBool();
}

int Settings::expectedWorldSize(const QString& folder) const
{
    return std::max(0, m_settings->value(key::expectedWorldSize(folder), 0).toInt());
}

void Settings::setExpectedWorldSize(const QString& folder, int worldSize)
{
    if (worldSize > 0)
        m_settings->setValue(key::expectedWorldSize(folder), worldSize);
    else
        m_settings->remove(key::expectedWorldSize(folder));
}

void Settings::setFastVerify(bool fast)
{
    m_settings->setValue(key::fastVerify, fast);
}

int Settings::verifyThreads() const
{
    return std::max(0, m_settings->value(key::verifyThreads, 0).toInt());
}

void Settings::setVerifyThreads(int threads)
{
    m_settings->setValue(key::verifyThreads, std::max(0, threads));
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool within(double value, double lo, double hi)
{
    return value >= lo && value <= hi; // false for NaN
}

} // namespace

std::optional<pl::TrainingOptions> Settings::plannerTraining() const
{
    namespace r = plannerrange;
    if (!m_settings->contains(key::trainingDp))
        return std::nullopt;
    const auto recompute = pl::parse_recompute(m_settings->value(key::trainingRecompute).toString().toStdString());
    const qint64 memory = m_settings->value(key::trainingGpuMemory, 0).toLongLong();
    const pl::TrainingOptions options{.dp = m_settings->value(key::trainingDp, 1).toInt(),
                                      .zero = m_settings->value(key::trainingZero, 0).toInt(),
                                      .recompute = recompute.value_or(pl::Recompute::none),
                                      .link_gbps = m_settings->value(key::trainingLinkGbps, 0.0).toDouble(),
                                      .overlap_allreduce = m_settings->value(key::trainingOverlap, false).toBool(),
                                      .fp32_grads = m_settings->value(key::trainingFp32Grads, false).toBool(),
                                      .gpu_memory_bytes =
                                          memory > 0 ? std::optional<std::int64_t>(memory) : std::nullopt};
    const bool valid = recompute && options.dp >= 1 && options.dp <= r::kMaxDp && options.zero >= 0 &&
        options.zero <= 3 && within(options.link_gbps, 0.0, r::kMaxLinkGbps) && memory >= 0 &&
        double(memory) <= r::kMaxGpuMemoryGiB * kGiB;
    return valid ? std::optional(options) : std::nullopt;
}

void Settings::setPlannerTraining(const pl::TrainingOptions& options)
{
    m_settings->setValue(key::trainingDp, options.dp);
    m_settings->setValue(key::trainingZero, options.zero);
    m_settings->setValue(key::trainingRecompute, QString::fromUtf8(pl::to_string(options.recompute)));
    m_settings->setValue(key::trainingLinkGbps, options.link_gbps);
    m_settings->setValue(key::trainingOverlap, options.overlap_allreduce);
    m_settings->setValue(key::trainingFp32Grads, options.fp32_grads);
    m_settings->setValue(key::trainingGpuMemory, qint64(options.gpu_memory_bytes.value_or(0)));
}

std::optional<pl::SearchSpec> Settings::planSearch() const
{
    namespace r = plannerrange;
    if (!m_settings->contains(key::searchGpus))
        return std::nullopt;
    // -1: every ZeRO stage is searched (the panel's "Any ZeRO").
    const int zero = m_settings->value(key::searchZero, -1).toInt();
    pl::SearchSpec spec{.gpus = m_settings->value(key::searchGpus, 1).toInt(),
                        .global_batch = m_settings->value(key::searchGlobalBatch, 1).toInt(),
                        .micro_batch_size = m_settings->value(key::searchMicroBatch, 1).toInt(),
                        .gpu_memory_bytes = m_settings->value(key::searchGpuMemory, 0).toLongLong(),
                        .link_gbps = m_settings->value(key::searchLinkGbps, 0.0).toDouble(),
                        .overlap_allreduce = m_settings->value(key::searchOverlap, false).toBool(),
                        .fp32_grads = m_settings->value(key::searchFp32Grads, false).toBool()};
    const bool valid = spec.gpus >= 1 && spec.gpus <= r::kMaxGpus && spec.global_batch >= 1 &&
        spec.global_batch <= r::kMaxGlobalBatch && spec.micro_batch_size >= 1 &&
        spec.micro_batch_size <= r::kMaxMicroBatch &&
        within(double(spec.gpu_memory_bytes) / kGiB, r::kMinSearchMemoryGiB, r::kMaxGpuMemoryGiB) &&
        within(spec.link_gbps, 0.0, r::kMaxLinkGbps) && zero >= -1 && zero <= 3;
    if (zero >= 0)
        spec.zero = {zero};
    return valid ? std::optional(spec) : std::nullopt;
}

void Settings::setPlanSearch(const pl::SearchSpec& spec)
{
    m_settings->setValue(key::searchGpus, spec.gpus);
    m_settings->setValue(key::searchGlobalBatch, spec.global_batch);
    m_settings->setValue(key::searchMicroBatch, spec.micro_batch_size);
    m_settings->setValue(key::searchGpuMemory, qint64(spec.gpu_memory_bytes));
    m_settings->setValue(key::searchLinkGbps, spec.link_gbps);
    m_settings->setValue(key::searchZero, spec.zero.size() == 1 ? spec.zero.front() : -1); // -1: every stage
    m_settings->setValue(key::searchOverlap, spec.overlap_allreduce);
    m_settings->setValue(key::searchFp32Grads, spec.fp32_grads);
}

std::optional<ModelSearchInputs> Settings::modelSearch() const
{
    namespace r = plannerrange;
    if (!m_settings->contains(key::modelGpus))
        return std::nullopt;
    const ModelSearchInputs inputs{.configPath = m_settings->value(key::modelConfig).toString(),
                                   .cluster = m_settings->value(key::modelCluster).toString(),
                                   .gpus = m_settings->value(key::modelGpus, 0).toInt(),
                                   .seqLen = m_settings->value(key::modelSeqLen, 0).toInt(),
                                   .globalBatch = m_settings->value(key::modelGlobalBatch, 0).toInt(),
                                   .fp32Grads = m_settings->value(key::modelFp32Grads, false).toBool()};
    const bool valid = !inputs.configPath.isEmpty() && !inputs.cluster.isEmpty() && inputs.gpus >= 1 &&
        inputs.gpus <= r::kMaxGpus && inputs.seqLen >= 1 && inputs.seqLen <= r::kMaxSeqLen && inputs.globalBatch >= 1 &&
        inputs.globalBatch <= r::kMaxGlobalBatch;
    return valid ? std::optional(inputs) : std::nullopt;
}

void Settings::setModelSearch(const ModelSearchInputs& inputs)
{
    m_settings->setValue(key::modelConfig, inputs.configPath);
    m_settings->setValue(key::modelCluster, inputs.cluster);
    m_settings->setValue(key::modelGpus, inputs.gpus);
    m_settings->setValue(key::modelSeqLen, inputs.seqLen);
    m_settings->setValue(key::modelGlobalBatch, inputs.globalBatch);
    m_settings->setValue(key::modelFp32Grads, inputs.fp32Grads);
}

void Settings::sync()
{
    m_settings->sync();
}

} // namespace shardwidgets
