#pragma once
// Runs core's diff_checkpoints (shardctl diff) in the background through JobRunner: progress
// with bytes/s and ETA, Cancel, and the newest comparison wins.

#include "core/inspect/diff.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <memory>
#include <optional>

namespace shardwidgets {

class DiffController : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        std::shared_ptr<const shardscope::DiffReport> report;
        std::optional<shardscope::Problem> error; // a side cannot be read as a checkpoint at all
    };

    explicit DiffController(QObject* parent = nullptr);

    void setThrottleInterval(int milliseconds) { m_runner.setThrottleInterval(milliseconds); }
    // Compares A with B; unset tolerances mean bitwise.
    void start(const QString& a, const QString& b, std::optional<double> atol, std::optional<double> rtol);
    void cancel() { m_runner.cancel(); }
    bool isRunning() const { return m_runner.isRunning(); }
    const Outcome& outcome() const { return m_outcome; } // valid after finished()

signals:
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond, double etaSeconds);
    void finished();

private:
    Outcome m_outcome;
    JobRunner<Outcome> m_runner{this, [this] {
                                    const JobReading r = m_runner.read();
                                    emit progressChanged(r.bytesDone, r.bytesTotal, r.bytesPerSecond, r.etaSeconds);
                                }}; // last: destroyed (and waited for) first
};

} // namespace shardwidgets
