#include "widgets/jobs/verifycontroller.h"

#include "core/foreign/detect.h"
#include "core/run/lifecycle.h"

#include <QDir>
#include <QtConcurrent>
#include <atomic>
#include <map>
#include <mutex>

namespace shardwidgets {

namespace fs = std::filesystem;

struct VerifyJobState {
    std::atomic<bool> cancel{false};
    std::function<void()> wake; // asks the GUI thread to drain now (set before the job starts)
    std::atomic<uint64_t> bytesDone{0};
    std::atomic<uint64_t> bytesTotal{0};

    std::mutex mutex; // guards everything below
    bool manifestPublished = false;
    std::string directory;
    std::string format;
    std::vector<shardscope::StepInfo> steps;
    std::optional<shardscope::Manifest> manifest;
    std::optional<shardscope::VerifyReport> listed;
    std::map<std::size_t, int> percents; // latest percent per shard since the last drain
    std::vector<std::pair<std::size_t, shardscope::ShardCheck>> done;
};

namespace {

VerifyController::Outcome runJob(const fs::path& path, const VerifyController::Options& options,
                                 const std::shared_ptr<VerifyJobState>& job)
{
    VerifyController::Outcome outcome;
    fs::path dir;
    try {
        dir = shardscope::resolve_checkpoint_dir(path);
        std::string format = "unknown";
        try {
            format = std::string(shardscope::to_string(shardscope::detect_format(dir).format));
        } catch (const shardscope::Error&) {
        }
        std::optional<shardscope::Manifest> manifest;
        try {
            manifest = shardscope::read_manifest(dir);
        } catch (const shardscope::Error&) {
            // verify_checkpoint reports what is wrong with it, in the report's problems
        }
        // A root (`latest` led elsewhere, or no manifest of its own): its steps, listed by core.
        std::vector<shardscope::StepInfo> steps;
        std::error_code ec;
        if (fs::weakly_canonical(dir) != fs::weakly_canonical(path) || !fs::exists(path / "manifest.json", ec)) {
            try {
                steps = shardscope::list_steps(path);
            } catch (const shardscope::Error&) {
                // no list: the page shows the one directory it opened
            }
        }
        std::lock_guard lock(job->mutex);
        job->directory = dir.string();
        job->format = format;
        job->steps = std::move(steps);
        job->manifest = std::move(manifest);
        job->manifestPublished = true;
        if (job->wake)
            job->wake(); // the table should not wait for the next throttled tick
    } catch (const shardscope::Error& error) {
        outcome.error = error.problem();
        return outcome;
    } catch (const std::exception& error) {
        outcome.error = shardscope::Problem{shardscope::ProblemKind::cannot_open, -1, path.string(),
                                            error.what()};
        return outcome;
    }

    shardscope::VerifyOptions verify;
    verify.threads = options.threads;
    verify.fast = options.fast;
    verify.expected_world_size = options.expectedWorldSize;
    verify.cancel = &job->cancel;
    // Worker threads: store and return; the GUI thread looks at this when it chooses to.
    verify.callbacks.files_listed = [job](const shardscope::VerifyReport& listed) {
        std::lock_guard lock(job->mutex);
        job->listed = listed;
        if (job->wake)
            job->wake(); // rows first, then their statuses
    };
    verify.callbacks.progress = [job](uint64_t done, uint64_t total) {
        job->bytesDone.store(done, std::memory_order_relaxed);
        job->bytesTotal.store(total, std::memory_order_relaxed);
    };
    verify.callbacks.shard_progress = [job](std::size_t index, uint64_t done, uint64_t total) {
        const int percent = total ? int(done * 100 / total) : 100;
        std::lock_guard lock(job->mutex);
        job->percents[index] = percent;
    };
    verify.callbacks.shard_done = [job](std::size_t index, const shardscope::ShardCheck& check) {
        std::lock_guard lock(job->mutex);
        job->done.emplace_back(index, check);
    };
    try {
        outcome.report = shardscope::verify_checkpoint(dir, verify);
    } catch (const shardscope::Error& error) {
        outcome.error = error.problem();
    } catch (const std::exception& error) {
        outcome.error =
            shardscope::Problem{shardscope::ProblemKind::io_error, -1, dir.string(), error.what()};
    }
    return outcome;
}

} // namespace

VerifyController::VerifyController(QObject* parent) : QObject(parent)
{
    m_timer.setInterval(100);
    connect(&m_timer, &QTimer::timeout, this, &VerifyController::poll);
}

VerifyController::~VerifyController()
{
    cancel();
    for (auto* watcher : m_retired)
        watcher->waitForFinished();
    if (m_watcher)
        m_watcher->waitForFinished();
}

void VerifyController::setThrottleInterval(int milliseconds)
{
    m_timer.setInterval(std::max(1, milliseconds));
}

bool VerifyController::isRunning() const
{
    return m_watcher != nullptr;
}

void VerifyController::cancel()
{
    if (m_job)
        m_job->cancel.store(true);
}

void VerifyController::start(const QString& path, const Options& options)
{
    if (m_watcher) {
        // The older job keeps running until it sees the flag; its results go nowhere.
        m_job->cancel.store(true);
        m_watcher->disconnect(this);
        auto* old = m_watcher;
        m_retired.append(old);
        connect(old, &QFutureWatcherBase::finished, this, [this, old] {
            m_retired.removeOne(old);
            old->deleteLater();
        });
        m_watcher = nullptr;
    }
    m_job = std::make_shared<VerifyJobState>();
    m_path = path;
    m_directory.clear();
    m_format.clear();
    m_steps.clear();
    m_stepInfos.clear();
    m_manifest.reset();
    m_listed = {};
    m_report = {};
    m_manifestSeen = false;
    m_listedSeen = false;
    m_lastBytes = 0;
    m_lastMs = 0;
    m_rate = 0;
    m_clock.start();

    // Safe: the destructor waits for every job, so `this` outlives the worker.
    m_job->wake = [this] { QMetaObject::invokeMethod(this, &VerifyController::poll, Qt::QueuedConnection); };
    auto job = m_job;
    auto* watcher = new QFutureWatcher<Outcome>(this);
    m_watcher = watcher;
    connect(watcher, &QFutureWatcherBase::finished, this,
            [this, watcher, job] { onJobFinished(watcher, job); });
    const fs::path fsPath = QDir::cleanPath(path).toStdString();
    watcher->setFuture(QtConcurrent::run([fsPath, options, job] { return runJob(fsPath, options, job); }));
    m_timer.start();
    emit started(path);
}

void VerifyController::poll()
{
    if (!m_job)
        return;
    std::map<std::size_t, int> percents;
    std::vector<std::pair<std::size_t, shardscope::ShardCheck>> done;
    bool publishManifest = false;
    bool publishListed = false;
    {
        std::lock_guard lock(m_job->mutex);
        if (m_job->manifestPublished && !m_manifestSeen) {
            m_manifestSeen = publishManifest = true;
            m_directory = QString::fromStdString(m_job->directory);
            m_format = QString::fromStdString(m_job->format);
            m_manifest = m_job->manifest;
            m_stepInfos = m_job->steps;
            for (const auto& step : m_stepInfos)
                if (step.complete && step.tier == shardscope::StepTier::local)
                    m_steps.append(QDir::cleanPath(QDir(m_path).filePath(QString::fromStdString(step.name))));
        }
        if (m_manifestSeen && m_job->listed && !m_listedSeen) {
            m_listedSeen = publishListed = true;
            m_listed = std::move(*m_job->listed);
        }
        if (m_manifestSeen) {
            percents.swap(m_job->percents);
            done.swap(m_job->done);
        }
    }
    if (publishManifest)
        emit manifestReady();
    if (publishListed)
        emit filesListed();
    for (const auto& [index, percent] : percents)
        emit shardPercent(int(index), percent);
    for (const auto& [index, check] : done)
        emit shardFinished(int(index), check);

    const quint64 bytes = m_job->bytesDone.load(std::memory_order_relaxed);
    const quint64 total = m_job->bytesTotal.load(std::memory_order_relaxed);
    const qint64 now = m_clock.elapsed();
    if (now > m_lastMs && bytes >= m_lastBytes) {
        const double instant = double(bytes - m_lastBytes) * 1000.0 / double(now - m_lastMs);
        // Exponential smoothing so that the ETA does not jump with every chunk.
        m_rate = m_rate <= 0 ? instant : 0.7 * m_rate + 0.3 * instant;
        m_lastBytes = bytes;
        m_lastMs = now;
    }
    const double eta = m_rate > 0 && total >= bytes ? double(total - bytes) / m_rate : -1.0;
    emit progressChanged(bytes, total, m_rate, eta);
}

void VerifyController::onJobFinished(QFutureWatcher<Outcome>* watcher,
                                     std::shared_ptr<VerifyJobState> job)
{
    if (watcher != m_watcher || job != m_job)
        return; // an older job: the newest wins
    poll(); // deliver what the timer has not drained yet
    m_timer.stop();
    Outcome outcome = watcher->result();
    m_watcher = nullptr;
    watcher->deleteLater();
    if (outcome.error) {
        const auto& problem = *outcome.error;
        emit failed(QString::fromStdString(problem.message), QString::fromStdString(problem.path));
        return;
    }
    m_report = std::move(outcome.report);
    if (!m_manifest && m_report.manifest)
        m_manifest = m_report.manifest;
    emit finished();
}

} // namespace shardwidgets
