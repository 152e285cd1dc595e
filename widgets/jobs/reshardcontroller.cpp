#include "widgets/jobs/reshardcontroller.h"

#include "widgets/jobs/checkpointlocation.h"

#include <QDir>

namespace shardwidgets {

ReshardController::ReshardController(QObject* parent) : QObject(parent) {}

bool ReshardController::start(const QString& source, int targetWorldSize, const QString& destination)
{
    if (m_runner.isRunning())
        return false;
    m_destination = QDir::cleanPath(destination);
    m_outcome = {};
    auto progress = std::make_shared<JobProgress>();
    // A URL is refused here, in the job, so that the page shows it as it shows any failure.
    const std::optional<QString> remote = localOnly(source, QObject::tr("Reshard"));
    const std::filesystem::path src =
        remote ? std::filesystem::path() : std::filesystem::path(QDir::cleanPath(source).toStdString());
    const std::filesystem::path dst = m_destination.toStdString();
    const bool durable = m_durable;
    auto work = [progress, src, dst, targetWorldSize, durable, remote] {
        Outcome outcome;
        if (remote) {
            outcome.error = shardscope::Problem{.kind = shardscope::ProblemKind::invalid_argument,
                                                .message = remote->toStdString()};
            return outcome;
        }
        shardscope::ReshardOptions options;
        options.durable = durable;
        options.cancel = &progress->cancel;
        options.progress = storeProgress(progress);
        outcome.error =
            problemOf(dst.string(), [&] { outcome.result = shardscope::reshard(src, targetWorldSize, dst, options); });
        outcome.cancelled = outcome.error && outcome.error->kind == shardscope::ProblemKind::cancelled;
        return outcome;
    };
    m_runner.start(progress, std::move(work), [this](Outcome outcome) {
        m_outcome = std::move(outcome);
        emit finished();
    });
    emit started();
    return true;
}

void ReshardController::poll()
{
    const JobReading r = m_runner.read();
    emit progressChanged(r.bytesDone, r.bytesTotal, r.bytesPerSecond, r.etaSeconds);
}

} // namespace shardwidgets
