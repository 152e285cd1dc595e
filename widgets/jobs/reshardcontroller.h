#pragma once
// Runs core's reshard() in the background (QtConcurrent + QFutureWatcher), the way
// VerifyController runs verification: the worker only stores progress in atomics, a GUI-thread
// timer turns it into throttled progress signals with bytes/s and ETA, and cancel sets the flag
// core checks between chunks (core then leaves no manifest in the destination). One job at a time:
// a reshard writes a folder, so a second one must not start behind the user's back.

#include "core/checkpoint/reshard.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>

namespace shardwidgets {

struct ReshardJobState;

class ReshardController : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        std::optional<shardscope::ReshardResult> result;
        std::optional<shardscope::Problem> error;
        bool cancelled = false;
    };

    explicit ReshardController(QObject* parent = nullptr);
    ~ReshardController() override; // cancels and waits: the worker must not outlive the flag

    void setThrottleInterval(int milliseconds); // default 100 ms
    void setDurable(bool durable) { m_durable = durable; } // tests may skip fsync
    // False (and nothing starts) while a job runs.
    bool start(const QString& source, int targetWorldSize, const QString& destination);
    void cancel();
    bool isRunning() const { return m_watcher != nullptr; }

    QString destination() const { return m_destination; }
    const Outcome& outcome() const { return m_outcome; } // valid after finished()

signals:
    void started();
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond, double etaSeconds);
    // outcome() tells how: a result, an error, or cancelled.
    void finished();

private:
    void poll();
    void onJobFinished();

    std::shared_ptr<ReshardJobState> m_job;
    QFutureWatcher<Outcome>* m_watcher = nullptr;
    QTimer m_timer;
    QElapsedTimer m_clock;
    quint64 m_lastBytes = 0;
    qint64 m_lastMs = 0;
    double m_rate = 0;
    bool m_durable = true;
    QString m_destination;
    Outcome m_outcome;
};

} // namespace shardwidgets
