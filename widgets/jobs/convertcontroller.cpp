#include "widgets/jobs/convertcontroller.h"

#include "widgets/jobs/checkpointlocation.h"

#include <QDir>

namespace shardwidgets {

ConvertController::ConvertController(QObject* parent) : QObject(parent) {}

bool ConvertController::start(const QString& source, const QString& destination, shardscope::ConvertOptions options)
{
    if (m_runner.isRunning())
        return false;
    m_destination = QDir::cleanPath(destination);
    m_outcome = {};
    auto progress = std::make_shared<JobProgress>();
    // A URL is refused here, in the job, so that the page shows it as it shows any failure.
    const std::optional<QString> remote = localOnly(source, QObject::tr("Convert"));
    const std::filesystem::path src =
        remote ? std::filesystem::path() : std::filesystem::path(QDir::cleanPath(source).toStdString());
    const std::filesystem::path dst = m_destination.toStdString();
    options.durable = m_durable;
    options.cancel = &progress->cancel;
    options.progress = storeProgress(progress);
    auto work = [src, dst, remote, options = std::move(options)] {
        Outcome outcome;
        if (remote) {
            outcome.error = shardscope::Problem{.kind = shardscope::ProblemKind::invalid_argument,
                                                .message = remote->toStdString()};
            return outcome;
        }
        outcome.error =
            problemOf(dst.string(), [&] { outcome.result = shardscope::convert_checkpoint(src, dst, options); });
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

void ConvertController::poll()
{
    const JobReading r = m_runner.read();
    emit progressChanged(r.bytesDone, r.bytesTotal, r.bytesPerSecond, r.etaSeconds);
}

} // namespace shardwidgets
