#pragma once
// Runs core's verify_checkpoint in the background (QtConcurrent + QFutureWatcher). The verifier's
// callbacks arrive on worker threads and only touch a shared job state; a GUI-thread timer drains
// it at a fixed rate, so a checkpoint of 4,096 shards cannot flood the event loop. Starting a new
// job cancels the running one and the newest wins: results of an older job are never delivered.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"
#include "core/run/lifecycle.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QObject>
#include <QStringList>
#include <QTimer>
#include <memory>
#include <optional>

namespace shardwidgets {

struct VerifyJobState; // shared between the GUI thread and the worker

class VerifyController : public QObject {
    Q_OBJECT
public:
    struct Options {
        int threads = 0;
        bool fast = false;
        int expectedWorldSize = -1;
    };
    struct Outcome {
        shardscope::VerifyReport report;
        std::optional<shardscope::Problem> error; // the path could not be used at all
    };

    explicit VerifyController(QObject* parent = nullptr);
    ~VerifyController() override; // cancels and waits for the running job

    void setThrottleInterval(int milliseconds); // default 100 ms: 10 updates a second
    void start(const QString& path, const Options& options);
    void start(const QString& path) { start(path, Options{}); }
    void cancel();
    bool isRunning() const;

    // Valid after manifestReady() of the current job.
    QString path() const { return m_path; }
    QString directory() const { return m_directory; }
    QString format() const { return m_format; }
    QStringList siblingSteps() const { return m_steps; } // complete step dirs of a root, oldest first
    // Every step directory of a root as core's list_steps() saw it; empty for a plain checkpoint.
    const std::vector<shardscope::StepInfo>& steps() const { return m_stepInfos; }
    const std::optional<shardscope::Manifest>& manifest() const { return m_manifest; }
    // Valid after filesListed() of the current job: the files being checked (pending) and, for a
    // foreign format, the summary read from its metadata.
    const shardscope::VerifyReport& listed() const { return m_listed; }
    // Valid after finished().
    const shardscope::VerifyReport& report() const { return m_report; }

signals:
    void started(const QString& path);
    void manifestReady();
    void filesListed(); // before the first shardPercent / shardFinished of the job
    void shardPercent(int index, int percent);
    void shardFinished(int index, const shardscope::ShardCheck& check);
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond,
                         double etaSeconds);
    void finished(); // report() holds the result (report().cancelled when cancelled)
    void failed(const QString& message, const QString& path);

private:
    void poll();
    void onJobFinished(QFutureWatcher<Outcome>* watcher, std::shared_ptr<VerifyJobState> job);

    std::shared_ptr<VerifyJobState> m_job;
    QFutureWatcher<Outcome>* m_watcher = nullptr;
    QList<QFutureWatcher<Outcome>*> m_retired; // cancelled jobs still unwinding
    QTimer m_timer;
    QElapsedTimer m_clock;
    quint64 m_lastBytes = 0;
    qint64 m_lastMs = 0;
    double m_rate = 0;
    bool m_manifestSeen = false;
    bool m_listedSeen = false;

    QString m_path;
    QString m_directory;
    QString m_format;
    QStringList m_steps;
    std::vector<shardscope::StepInfo> m_stepInfos;
    std::optional<shardscope::Manifest> m_manifest;
    shardscope::VerifyReport m_listed;
    shardscope::VerifyReport m_report;
};

} // namespace shardwidgets
