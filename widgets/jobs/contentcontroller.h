#pragma once
// Runs core's inspect_content (shardctl stats) in the background through JobRunner: progress with
// bytes/s and ETA, Cancel, and the newest job wins when another checkpoint opens.

#include "core/inspect/content.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <memory>
#include <optional>

namespace shardwidgets {

class ContentController : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        std::shared_ptr<const shardscope::ContentReport> report;
        std::optional<shardscope::Problem> error; // the path cannot be read at all
    };

    explicit ContentController(QObject* parent = nullptr);

    void setThrottleInterval(int milliseconds) { m_runner.setThrottleInterval(milliseconds); }
    void start(const QString& path);
    void cancel() { m_runner.cancel(); }
    bool isRunning() const { return m_runner.isRunning(); }
    const Outcome& outcome() const { return m_outcome; } // valid after finished()

signals:
    void started(const QString& path);
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond, double etaSeconds);
    void finished();

private:
    void poll();

    Outcome m_outcome;
    JobRunner<Outcome> m_runner{this, [this] { poll(); }}; // last: destroyed (and waited for) first
};

} // namespace shardwidgets
