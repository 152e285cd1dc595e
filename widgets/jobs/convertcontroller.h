#pragma once
// Runs core's convert_checkpoint() in the background through JobRunner, as ReshardController runs
// reshard(): throttled progress with bytes/s and ETA, and cancel sets the flag core checks between
// pieces (core then removes its temporary folder: the output is never half there). One job at a
// time: a conversion writes a folder, so a second one must not start (or retire the first) behind
// the user's back.

#include "core/convert/convert.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <optional>

namespace shardwidgets {

class ConvertController : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        std::optional<shardscope::ConvertResult> result;
        std::optional<shardscope::Problem> error;
        bool cancelled = false;
    };

    explicit ConvertController(QObject* parent = nullptr);

    void setThrottleInterval(int milliseconds) { m_runner.setThrottleInterval(milliseconds); } // default 100 ms
    void setDurable(bool durable) { m_durable = durable; } // tests may skip fsync
    // Converts `source` into the new folder `destination` with `options` (their cancel flag,
    // progress and durability are the controller's). False (and nothing starts) while a job runs.
    bool start(const QString& source, const QString& destination, shardscope::ConvertOptions options);
    void cancel() { m_runner.cancel(); }
    bool isRunning() const { return m_runner.isRunning(); }

    QString destination() const { return m_destination; }
    const Outcome& outcome() const { return m_outcome; } // valid after finished()

signals:
    void started();
    // Bytes over core's three passes: reading the source, writing the output, reading it back.
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
