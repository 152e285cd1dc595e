#pragma once
// Runs core's verify_checkpoint in the background through JobRunner. The verifier's callbacks
// arrive on worker threads and only touch a shared job state; the runner's GUI-thread timer drains
// it at a fixed rate, so a checkpoint of 4,096 shards cannot flood the event loop. Starting a new
// job cancels the running one and the newest wins: results of an older job are never delivered.

#include "core/checkpoint/verify.h"
#include "core/run/lifecycle.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <QStringList>
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

    void setThrottleInterval(int milliseconds) { m_runner.setThrottleInterval(milliseconds); } // default 100 ms
    void start(const QString& path, const Options& options);
    void start(const QString& path) { start(path, Options{}); }
    void cancel() { m_runner.cancel(); }
    bool isRunning() const { return m_runner.isRunning(); }

    // Valid after manifestReady() of the current job.
    QString path() const { return m_path; }
    QString directory() const { return m_directory; }
    QString format() const { return m_format; }
    QStringList siblingSteps() const { return m_steps; } // complete step dirs of a root, oldest first
    // Every step directory of a local root as core's list_steps() saw it; empty for a plain
    // checkpoint and for a root in a bucket, which the steps pane lists on its own (a request or
    // two a step: the manifest is not held back for them).
    const std::vector<shardscope::StepInfo>& steps() const { return m_stepInfos; }
    // Whether what was opened is a root of steps (its `latest` led to the step shown), on a disk
    // or in a bucket.
    bool isRoot() const { return m_isRoot; }
    const std::optional<shardscope::Manifest>& manifest() const { return m_manifest; }
    // Valid after filesListed() of the current job: the files being checked (pending) and, for a
    // foreign format, the summary read from its metadata.
    const shardscope::VerifyReport& listed() const { return m_listed; }
    // Valid after firstTensorsListed() of the current job: the first tensors of a long metadata.
    const shardscope::ForeignSummary& firstTensors() const { return m_firstTensors; }
    // Valid after finished().
    const shardscope::VerifyReport& report() const { return m_report; }
    shardscope::VerifyReport takeReport() { return std::move(m_report); } // report() is empty after

signals:
    void started(const QString& path);
    void manifestReady();
    // Before filesListed, when core lists the first tensors of a long metadata early (DCP): a
    // view shows them while the rest is read.
    void firstTensorsListed();
    void filesListed(); // before the first shardPercent / shardFinished of the job
    void shardPercent(int index, int percent);
    void shardFinished(int index, const shardscope::ShardCheck& check);
    void progressChanged(quint64 bytesDone, quint64 bytesTotal, double bytesPerSecond, double etaSeconds);
    void finished(); // report() holds the result (report().cancelled when cancelled)
    void failed(const QString& message, const QString& path);

private:
    void poll();
    void onJobFinished(Outcome outcome);

    std::shared_ptr<VerifyJobState> m_job; // the current job (the runner's progress, with more)
    bool m_manifestSeen = false;
    bool m_listedSeen = false;
    bool m_firstTensorsSeen = false;

    QString m_path;
    QString m_directory;
    QString m_format;
    QStringList m_steps;
    std::vector<shardscope::StepInfo> m_stepInfos;
    bool m_isRoot = false;
    std::optional<shardscope::Manifest> m_manifest;
    shardscope::VerifyReport m_listed;
    shardscope::ForeignSummary m_firstTensors;
    shardscope::VerifyReport m_report;
    JobRunner<Outcome> m_runner{this, [this] { poll(); }}; // last: destroyed (and waited for) first
};

} // namespace shardwidgets
