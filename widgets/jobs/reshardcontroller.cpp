#include "widgets/jobs/reshardcontroller.h"

#include <QDir>
#include <QtConcurrent>
#include <atomic>

namespace shardwidgets {

struct ReshardJobState {
    std::atomic<bool> cancel{false};
    std::atomic<uint64_t> bytesDone{0};
    std::atomic<uint64_t> bytesTotal{0};
};

ReshardController::ReshardController(QObject* parent) : QObject(parent)
{
    m_timer.setInterval(100);
    connect(&m_timer, &QTimer::timeout, this, &ReshardController::poll);
}

ReshardController::~ReshardController()
{
    cancel();
    if (m_watcher)
        m_watcher->waitForFinished();
}

void ReshardController::setThrottleInterval(int milliseconds)
{
    m_timer.setInterval(std::max(1, milliseconds));
}

void ReshardController::cancel()
{
    if (m_job)
        m_job->cancel.store(true);
}

bool ReshardController::start(const QString& source, int targetWorldSize, const QString& destination)
{
    if (m_watcher)
        return false;
    m_job = std::make_shared<ReshardJobState>();
    m_destination = QDir::cleanPath(destination);
    m_outcome = {};
    m_lastBytes = 0;
    m_lastMs = 0;
    m_rate = 0;
    m_clock.start();

    auto job = m_job;
    const std::filesystem::path src = QDir::cleanPath(source).toStdString();
    const std::filesystem::path dst = m_destination.toStdString();
    const bool durable = m_durable;
    m_watcher = new QFutureWatcher<Outcome>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, &ReshardController::onJobFinished);
    m_watcher->setFuture(QtConcurrent::run([job, src, dst, targetWorldSize, durable] {
        Outcome outcome;
        shardscope::ReshardOptions options;
        options.durable = durable;
        options.cancel = &job->cancel;
        // Worker threads: store and return; the GUI thread reads these at its own pace.
        options.progress = [job](uint64_t done, uint64_t total) {
            job->bytesDone.store(done, std::memory_order_relaxed);
            job->bytesTotal.store(total, std::memory_order_relaxed);
        };
        try {
            outcome.result = shardscope::reshard(src, targetWorldSize, dst, options);
        } catch (const shardscope::Error& error) {
            outcome.cancelled = error.problem().kind == shardscope::ProblemKind::cancelled;
            outcome.error = error.problem();
        } catch (const std::exception& error) {
            outcome.error = shardscope::Problem{shardscope::ProblemKind::io_error, -1, dst.string(), error.what()};
        }
        return outcome;
    }));
    m_timer.start();
    emit started();
    return true;
}

void ReshardController::poll()
{
    if (!m_job)
        return;
    const quint64 bytes = m_job->bytesDone.load(std::memory_order_relaxed);
    const quint64 total = m_job->bytesTotal.load(std::memory_order_relaxed);
    const qint64 now = m_clock.elapsed();
    if (now > m_lastMs && bytes >= m_lastBytes) {
        const double instant = double(bytes - m_lastBytes) * 1000.0 / double(now - m_lastMs);
        // Smoothed so that the ETA does not jump with every chunk (and across the verify/copy phases).
        m_rate = m_rate <= 0 ? instant : 0.7 * m_rate + 0.3 * instant;
        m_lastBytes = bytes;
        m_lastMs = now;
    }
    const double eta = m_rate > 0 && total >= bytes ? double(total - bytes) / m_rate : -1.0;
    emit progressChanged(bytes, total, m_rate, eta);
}

void ReshardController::onJobFinished()
{
    poll();
    m_timer.stop();
    m_outcome = m_watcher->result();
    m_watcher->deleteLater();
    m_watcher = nullptr;
    emit finished();
}

} // namespace shardwidgets
