#include "widgets/jobs/diffcontroller.h"

#include "widgets/jobs/checkpointlocation.h"

namespace shardwidgets {

DiffController::DiffController(QObject* parent) : QObject(parent) {}

void DiffController::start(const QString& a, const QString& b, std::optional<double> atol, std::optional<double> rtol)
{
    m_outcome = {};
    auto progress = std::make_shared<JobProgress>();
    const QString first = cleanCheckpointText(a), second = cleanCheckpointText(b);
    auto work = [progress, first, second, atol, rtol] {
        Outcome outcome;
        shardscope::DiffOptions options;
        options.atol = atol;
        options.rtol = rtol;
        options.cancel = &progress->cancel;
        options.progress = storeProgress(progress);
        outcome.error = problemOf(second.toStdString(), [&] {
            outcome.report = std::make_shared<const shardscope::DiffReport>(
                diff_checkpoints(checkpointLocation(first), checkpointLocation(second), options));
        });
        return outcome;
    };
    m_runner.start(progress, std::move(work), [this](Outcome outcome) {
        m_outcome = std::move(outcome);
        emit finished();
    });
}

} // namespace shardwidgets
