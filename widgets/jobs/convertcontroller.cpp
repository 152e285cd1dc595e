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
    // The source may be a bucket or a URL (read in place); the output is a local folder.
    const QString src = cleanCheckpointText(source);
    const std::filesystem::path dst = m_destination.toStdString();
    options.durable = m_durable;
    options.cancel = &progress->cancel;
    options.progress = storeProgress(progress);
    auto work = [src, dst, options = std::move(options)] {
        Outcome outcome;
        outcome.error = problemOf(dst.string(), [&] {
            outcome.result = shardscope::convert_checkpoint(checkpointLocation(src), dst, options);
        });
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
