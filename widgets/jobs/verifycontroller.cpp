#include "widgets/jobs/verifycontroller.h"

#include "core/open/verify.h"
#include "core/run/lifecycle.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/style/format.h"

#include <QDir>
#include <QtConcurrent>
#include <atomic>
#include <map>
#include <mutex>

namespace shardwidgets {

namespace fs = std::filesystem;

struct VerifyJobState : JobProgress {
    std::function<void()> wake; // asks the GUI thread to drain now (set before the job starts)

    std::mutex mutex; // guards everything below
    bool manifestPublished = false;
    std::string directory;
    std::string format;
    std::vector<shardscope::StepInfo> steps;
    bool isRoot = false;
    std::optional<shardscope::Manifest> manifest;
    std::optional<shardscope::ForeignSummary> firstTensors;
    std::optional<shardscope::VerifyReport> listed;
    std::map<std::size_t, int> percents; // latest percent per shard since the last drain
    std::vector<std::pair<std::size_t, shardscope::ShardCheck>> done;
};

namespace {

VerifyController::Outcome runJob(const QString& text, const VerifyController::Options& options,
                                 const std::shared_ptr<VerifyJobState>& job)
{
    VerifyController::Outcome outcome;
    std::optional<shardscope::DetectedFormat> detected;
    fs::path path = text.toStdString();
    fs::path dir;
    try {
        // Detection lists the folder (or the bucket's prefix) and follows a root's `latest` once;
        // verification below reads the same step directory through the same listing.
        const shardscope::storage::Location where = checkpointLocation(text);
        detected = shardscope::detect_format(where);
        // The folder whose step was chosen; one file opened on its own stays that file (its
        // folder was listed only to open it).
        std::error_code ec;
        const bool oneFile = where.is_local()
            ? !fs::is_directory(path, ec)
            : detected->format == shardscope::CheckpointFormat::safetensors && detected->path != detected->dir.path;
        dir = detected->dir.valid() && !oneFile ? detected->dir.path : path;
        const std::string format(shardscope::to_string(detected->format));
        std::optional<shardscope::Manifest> manifest;
        if (detected->dir.has("manifest.json")) {
            const std::string display = (dir / "manifest.json").string();
            try {
                manifest = shardscope::parse_manifest(
                    detected->dir.read_small("manifest.json", shardscope::kMaxManifestBytes, display), display);
            } catch (const shardscope::Error&) {
                // verify_checkpoint reports what is wrong with it, in the report's problems
            }
        }
        // A root (`latest` led elsewhere, or no manifest of its own): its steps, listed by core.
        // A root in a bucket is listed by the steps pane alone (a web server cannot be listed).
        std::vector<shardscope::StepInfo> steps;
        bool isRoot = false;
        if (dir != path || !manifest) {
            if (where.is_local()) {
                try {
                    steps = shardscope::list_steps(path);
                } catch (const shardscope::Error&) {
                    // no list: the page shows the one directory it opened
                }
                isRoot = !steps.empty();
            } else {
                // (as core spells the URL: "s3://b/run/step-1/" is the step itself, not a root)
                isRoot = where.scheme == shardscope::storage::Scheme::s3 &&
                    dir != fs::path(shardscope::storage::to_string(where));
            }
        }
        std::lock_guard lock(job->mutex);
        job->directory = dir.string();
        job->format = format;
        job->steps = std::move(steps);
        job->isRoot = isRoot;
        job->manifest = std::move(manifest);
        job->manifestPublished = true;
        if (job->wake)
            job->wake(); // the table should not wait for the next throttled tick
    } catch (const shardscope::Error& error) {
        outcome.error = error.problem();
        return outcome;
    } catch (const std::exception& error) {
        outcome.error = shardscope::Problem{
            .kind = shardscope::ProblemKind::cannot_open, .message = error.what(), .path = path.string()};
        return outcome;
    }

    shardscope::VerifyOptions verify;
    verify.threads = options.threads;
    verify.fast = options.fast;
    verify.expected_world_size = options.expectedWorldSize;
    verify.cancel = &job->cancel;
    // Worker threads: store and return; the GUI thread looks at this when it chooses to.
    verify.callbacks.files_listed = [job](const shardscope::VerifyReport& listed) {
        shardscope::VerifyReport copy = listed; // not under the lock the GUI thread's poll takes
        std::lock_guard lock(job->mutex);
        job->listed = std::move(copy);
        if (job->wake)
            job->wake(); // rows first, then their statuses
    };
    verify.callbacks.first_tensors = [job](const shardscope::ForeignSummary& first) {
        shardscope::ForeignSummary copy = first; // (bounded: kDcpFirstTensors, kDcpFirstChunks)
        std::lock_guard lock(job->mutex);
        job->firstTensors = std::move(copy);
        if (job->wake)
            job->wake();
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
    outcome.error = problemOf(dir.string(), [&] { outcome.report = shardscope::verify_checkpoint(*detected, verify); });
    return outcome;
}

} // namespace

VerifyController::VerifyController(QObject* parent) : QObject(parent) {}

void VerifyController::start(const QString& path, const Options& options)
{
    m_job = std::make_shared<VerifyJobState>();
    m_path = path;
    m_directory.clear();
    m_format.clear();
    m_steps.clear();
    m_stepInfos.clear();
    m_isRoot = false;
    m_manifest.reset();
    m_listed = {};
    m_firstTensors = {};
    m_report = {};
    m_manifestSeen = false;
    m_listedSeen = false;
    m_firstTensorsSeen = false;

    // Safe: the destructor waits for every job, so `this` outlives the worker.
    m_job->wake = [this] { QMetaObject::invokeMethod(this, &VerifyController::poll, Qt::QueuedConnection); };
    auto job = m_job;
    const QString text = cleanCheckpointText(path);
    m_runner.start(
        job, [text, options, job] { return runJob(text, options, job); },
        [this](Outcome outcome) { onJobFinished(std::move(outcome)); });
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
    bool publishFirstTensors = false;
    {
        std::lock_guard lock(m_job->mutex);
        if (m_job->manifestPublished && !m_manifestSeen) {
            m_manifestSeen = publishManifest = true;
            m_directory = QString::fromStdString(m_job->directory);
            m_format = QString::fromStdString(m_job->format);
            m_manifest = m_job->manifest;
            m_stepInfos = m_job->steps;
            m_isRoot = m_job->isRoot;
            for (const auto& step : m_stepInfos)
                if (step.complete && step.tier == shardscope::StepTier::local)
                    m_steps.append(childOf(m_path, QString::fromStdString(step.name)));
        }
        if (m_manifestSeen && m_job->firstTensors && !m_firstTensorsSeen) { // (even if the files are listed too)
            m_firstTensorsSeen = publishFirstTensors = true;
            m_firstTensors = std::move(*m_job->firstTensors);
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
    if (publishFirstTensors)
        emit firstTensorsListed();
    if (publishListed)
        emit filesListed();
    for (const auto& [index, percent] : percents)
        emit shardPercent(int(index), percent);
    for (const auto& [index, check] : done)
        emit shardFinished(int(index), check);

    const JobReading r = m_runner.read();
    emit progressChanged(r.bytesDone, r.bytesTotal, r.bytesPerSecond, r.etaSeconds);
}

void VerifyController::onJobFinished(Outcome outcome)
{
    if (outcome.error && outcome.error->kind == shardscope::ProblemKind::cancelled) {
        // A request to a server stopped by the cancel (before the folder was read, or in the
        // middle of a shard): what the user asked for, not a failure to open it.
        m_report = {};
        m_report.dir = outcome.error->path;
        m_report.cancelled = true;
        emit finished();
        return;
    }
    if (outcome.error) {
        const auto& problem = *outcome.error;
        // The message is shown, the path is opened again or forgotten: only the message is escaped.
        emit failed(printableText(problem.message), QString::fromStdString(problem.path));
        return;
    }
    m_report = std::move(outcome.report);
    if (!m_manifest && m_report.manifest)
        m_manifest = m_report.manifest;
    emit finished();
}

} // namespace shardwidgets
