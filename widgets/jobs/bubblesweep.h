#pragma once
// "Bubble against microbatches": for the four schedules at the planner's current stages,
// partition and training options, core's make_step_plan at M = 1 .. maxMicrobatches, each
// point the simulated bubble fraction. Up to 4 x ~100 simulations of up to N x M x v ops is more
// than a GUI frame, so BubbleSweep runs it on the thread pool (JobRunner: the newest request
// wins) and the sweep itself stops between simulations when cancelled.

#include "core/pipeline/training.h"
#include "widgets/jobs/jobrunner.h"

#include <QObject>
#include <atomic>
#include <memory>
#include <vector>

namespace shardwidgets {

struct BubbleLine {
    shardscope::pipeline::ScheduleKind kind = shardscope::pipeline::ScheduleKind::one_f_one_b;
    int virtualStages = 1;
    std::vector<int> microbatches; // the M that could be simulated (interleaved: multiples of N)
    std::vector<double> bubble; // Timeline::bubble_fraction at each
};

struct BubbleSweepInput {
    shardscope::pipeline::Profile profile;
    shardscope::pipeline::ScheduleSpec spec; // the current one: stages, M, v, latency
    std::vector<int> boundaries; // the current cut, used where the piece count matches
    shardscope::pipeline::TrainingOptions options;
};

// The M the chart sweeps for N stages and the current M, ascending: every M up to 4N (at least
// 8, at most 64) where the curves bend, then, when the current M lies beyond, about 32 evenly
// spaced multiples of N (interleaved runs only those) and the current M itself, so that every
// curve reaches the M the planner shows without simulating every M up to 512.
std::vector<int> sweepMicrobatches(int stages, int current);

// The sweep itself, plain and synchronous (tests call it; BubbleSweep runs it off the GUI
// thread). A schedule whose piece count differs from the current cut's (interleaved against
// one chunk, and back) is cut by compute on the recompute-adjusted costs, as the planner would.
std::vector<BubbleLine> sweepBubbles(const BubbleSweepInput& input, const std::atomic<bool>* cancel = nullptr);

class BubbleSweep : public QObject {
    Q_OBJECT
public:
    explicit BubbleSweep(QObject* parent = nullptr);
    void start(BubbleSweepInput input);
    bool isRunning() const { return m_runner.isRunning(); }
    const std::vector<BubbleLine>& lines() const { return m_lines; }

signals:
    void finished();

private:
    std::vector<BubbleLine> m_lines;
    JobRunner<std::vector<BubbleLine>> m_runner;
};

} // namespace shardwidgets
