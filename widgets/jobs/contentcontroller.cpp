#include "widgets/jobs/contentcontroller.h"

#include <QDir>

namespace shardwidgets {

ContentController::ContentController(QObject* parent) : QObject(parent) {}

void ContentController::start(const QString& path)
{
    m_outcome = {};
    auto progress = std::make_shared<JobProgress>();
    const std::filesystem::path where = QDir::cleanPath(path).toStdString();
    auto work = [progress, where] {
        Outcome outcome;
        shardscope::ContentOptions options;
        options.cancel = &progress->cancel;
        options.progress = storeProgress(progress);
        outcome.error = problemOf(where.string(), [&] {
            outcome.report = std::make_shared<const shardscope::ContentReport>(inspect_content(where, options));
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
