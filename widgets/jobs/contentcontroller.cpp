#include "widgets/jobs/contentcontroller.h"

#include "widgets/jobs/checkpointlocation.h"

namespace shardwidgets {

ContentController::ContentController(QObject* parent) : QObject(parent) {}

void ContentController::start(const QString& path)
{
    m_outcome = {};
    auto progress = std::make_shared<JobProgress>();
    const QString text = cleanCheckpointText(path);
    auto work = [progress, text] {
        Outcome outcome;
        shardscope::ContentOptions options;
        options.cancel = &progress->cancel;
        options.progress = storeProgress(progress);
        outcome.error = problemOf(text.toStdString(), [&] {
            outcome.report =
                std::make_shared<const shardscope::ContentReport>(inspect_content(checkpointLocation(text), options));
        });
        return outcome;
    };
    m_runner.start(progress, std::move(work), [this](Outcome outcome) {
        m_outcome = std::move(outcome);
        emit finished();
    });
    emit started(path);
}

void ContentController::poll()
{
    const JobReading r = m_runner.read();
    emit progressChanged(r.bytesDone, r.bytesTotal, r.bytesPerSecond, r.etaSeconds);
}

} // namespace shardwidgets
