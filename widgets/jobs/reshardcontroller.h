#pragma once
// Runs core's reshard() in the background through JobRunner, like VerifyController: throttled
// progress with bytes/s and ETA, and cancel sets the flag core checks between chunks (core then
// leaves no manifest in the destination). One job at a time: a reshard writes a folder, so a
// second one must not start (or retire the first) behind the user's back.

#include "core/checkpoint/reshard.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <optional>

namespace shardwidgets {

class ReshardController : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        std::optional<shardscope::ReshardResult> result;
        std::optional<shardscope::Problem> error;
        bool cancelled = false;
    };

    explicit ReshardController(QObject* parent = nullptr);

    void setThrottleInterval(int milliseconds) { m_runner.setThrottleInterval(milliseconds); } // default 100 ms
    void setDurable(bool durable) { m_durable = durable; } // tests may skip fsync
    // False (and nothing starts) while a job runs.
    bool start(const QString& source, int targetWorldSize, const QString& destination);
    void cancel() { m_runner.cancel(); }
    bool isRunning() const { return m_runner.isRunning(); }

    QString destination() const { return m_destination; }
    const Outcome& outcome() const { return m_outcome; } // valid after finished()

signals:
    void started();
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond, double etaSeconds);
    // outcome() tells how: a result, an error, or cancelled.
    void finished();

private:
    void poll();

    bool m_durable = true;
    QString m_destination;
    Outcome m_outcome;
    JobRunner<Outcome> m_runner{this, [this] { poll(); }}; // last: destroyed (and waited for) first
};

} // namespace shardwidgets
