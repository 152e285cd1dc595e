#pragma once
// The one way the GUI runs core's long work (verify, reshard): on Qt's thread pool through a
// QFutureWatcher, with a cancel flag and byte counters the worker only stores into, and a
// GUI-thread timer that reads them at a fixed rate (so thousands of shards cannot flood the event
// loop) into a ThroughputMeter. Starting a job while one runs cancels and retires the old one:
// its outcome is never delivered, the newest wins. The destructor cancels and waits for every
// job, so a worker never outlives the state it writes to.

#include "core/checkpoint/state.h"
#include "core/util/cancel.h"
#include "core/util/error.h"
#include "widgets/jobs/throughputmeter.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QList>
#include <QObject>
#include <QThreadPool>
#include <QTimer>
#include <QtConcurrent>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace shardwidgets {

// What a worker shares with the GUI thread: written by the worker, read by the timer.
struct JobProgress {
    std::atomic<bool> cancel{false};
    std::atomic<uint64_t> bytesDone{0};
    std::atomic<uint64_t> bytesTotal{0};
};

// Core's progress callback for a job: worker threads store the counts and return; the GUI
// thread reads them at its own pace.
inline shardscope::ProgressFn storeProgress(std::shared_ptr<JobProgress> progress)
{
    return [progress = std::move(progress)](uint64_t done, uint64_t total) {
        progress->bytesDone.store(done, std::memory_order_relaxed);
        progress->bytesTotal.store(total, std::memory_order_relaxed);
    };
}

// Runs a worker's core call and turns what it throws into the Problem its outcome reports:
// core's typed Error as it is, anything else as an io_error about `path`.
template <class Work>
std::optional<shardscope::Problem> problemOf(const std::string& path, Work&& work)
{
    try {
        work();
    } catch (const shardscope::Error& error) {
        return error.problem();
    } catch (const std::exception& error) {
        return shardscope::Problem{.kind = shardscope::ProblemKind::io_error, .message = error.what(), .path = path};
    }
    return std::nullopt;
}

// Lowers the calling worker thread's scheduling priority (nice 10, on Linux), and so that of the
// threads core starts from it, which inherit it: on a machine with few cores the verify threads
// would otherwise delay the GUI thread's repaints and input by tens of milliseconds. A thread
// keeps it (raising it again needs privilege): JobRunner's threads are its own pool's.
void runBelowTheGuiThread();

struct JobReading {
    quint64 bytesDone = 0;
    quint64 bytesTotal = 0;
    double bytesPerSecond = 0;
    double etaSeconds = -1;
};

template <class Outcome>
class JobRunner {
public:
    // `tick` runs on the GUI thread at every timer interval while a job runs, and once more
    // before the job's outcome is delivered.
    JobRunner(QObject* owner, std::function<void()> tick) : m_owner(owner), m_tick(std::move(tick))
    {
        m_timer.setInterval(100);
        QObject::connect(&m_timer, &QTimer::timeout, owner, [this] { m_tick(); });
    }
    ~JobRunner()
    {
        cancel();
        // Wait, then delete the watchers: their queued "finished" would otherwise reach lambdas
        // that point at this runner after it is gone (the owner may live on).
        for (auto* watcher : m_retired) {
            watcher->waitForFinished();
            delete watcher;
        }
        if (m_watcher) {
            m_watcher->waitForFinished();
            delete m_watcher;
        }
    }
    JobRunner(const JobRunner&) = delete;
    JobRunner& operator=(const JobRunner&) = delete;

    void setThrottleInterval(int milliseconds) { m_timer.setInterval(std::max(1, milliseconds)); }

    // Runs `work` (on a worker thread) for `progress`; `done` gets its outcome on the GUI thread,
    // unless a newer start() or the destructor came first.
    void start(std::shared_ptr<JobProgress> progress, std::function<Outcome()> work, std::function<void(Outcome)> done)
    {
        retire();
        m_progress = std::move(progress);
        m_meter = {};
        m_clock.start();
        auto* watcher = new QFutureWatcher<Outcome>(m_owner);
        m_watcher = watcher;
        QObject::connect(watcher, &QFutureWatcherBase::finished, m_owner, [this, watcher, done = std::move(done)] {
            if (watcher != m_watcher)
                return; // retired meanwhile
            m_tick(); // deliver what the timer has not read yet
            m_timer.stop();
            // Moved out, not copied: an outcome can hold 10^5 tensors, and a copy (and later
            // freeing the future's own) would stall the GUI thread for 100 ms and more.
            Outcome outcome = watcher->future().takeResult();
            m_watcher = nullptr;
            watcher->deleteLater();
            done(std::move(outcome));
        });
        watcher->setFuture(QtConcurrent::run(&m_pool, [work = std::move(work), progress = m_progress] {
            runBelowTheGuiThread();
            // Cancel, a newer job or closing the app also stops a request to a server that does
            // not answer, deep below the work (core/util/cancel.h).
            const shardscope::CancelScope scope(&progress->cancel);
            return work();
        }));
        m_timer.start();
    }

    void cancel()
    {
        if (m_progress)
            m_progress->cancel.store(true);
    }
    bool isRunning() const { return m_watcher != nullptr; }
    const std::shared_ptr<JobProgress>& progress() const { return m_progress; }

    // The current job's counters and its rate, sampled now (call from `tick`).
    JobReading read()
    {
        if (!m_progress)
            return {};
        JobReading reading;
        reading.bytesDone = m_progress->bytesDone.load(std::memory_order_relaxed);
        reading.bytesTotal = m_progress->bytesTotal.load(std::memory_order_relaxed);
        m_meter.sample(reading.bytesDone, m_clock.elapsed());
        reading.bytesPerSecond = m_meter.bytesPerSecond();
        reading.etaSeconds = m_meter.etaSeconds(reading.bytesTotal);
        return reading;
    }

private:
    // The running job keeps going until it sees its flag; its outcome goes nowhere.
    void retire()
    {
        if (!m_watcher)
            return;
        m_progress->cancel.store(true);
        auto* old = m_watcher;
        m_watcher = nullptr;
        m_retired.append(old);
        QObject::connect(old, &QFutureWatcherBase::finished, m_owner, [this, old] {
            m_retired.removeOne(old);
            old->deleteLater();
        });
    }

    // First, so destroyed last (the destructor has waited for every job by then). Not Qt's
    // global pool: its threads would keep the lowered priority for other work.
    QThreadPool m_pool;
    QObject* m_owner;
    std::function<void()> m_tick;
    std::shared_ptr<JobProgress> m_progress;
    QFutureWatcher<Outcome>* m_watcher = nullptr;
    QList<QFutureWatcher<Outcome>*> m_retired; // cancelled jobs still unwinding
    QTimer m_timer;
    QElapsedTimer m_clock;
    ThroughputMeter m_meter;
};

} // namespace shardwidgets
