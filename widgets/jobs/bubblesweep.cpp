#include "widgets/jobs/bubblesweep.h"

#include <algorithm>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

std::vector<int> sweepMicrobatches(int stages, int current)
{
    const int dense = std::clamp(4 * stages, 8, 64);
    std::vector<int> counts;
    for (int m = 1; m <= dense; ++m)
        counts.push_back(m);
    if (current > dense) {
        const int n = std::max(1, stages);
        constexpr int kSparsePoints = 32;
        const int step = n * std::max(1, (current - dense + kSparsePoints * n - 1) / (kSparsePoints * n));
        for (int m = (dense / n + 1) * n; m < current; m += step)
            counts.push_back(m);
        counts.push_back(current);
    }
    return counts;
}

std::vector<BubbleLine> sweepBubbles(const BubbleSweepInput& input, const std::atomic<bool>* cancel)
{
    const int stages = input.spec.stages;
    const int layers = int(input.profile.layers.size());
    const int currentPieces = int(input.boundaries.size()) + 1;
    const std::vector<int> counts = sweepMicrobatches(stages, input.spec.microbatches);
    const pl::Profile adjusted = pl::with_recompute(input.profile, input.options.recompute);
    const pl::ScheduleKind kinds[] = {pl::ScheduleKind::gpipe, pl::ScheduleKind::one_f_one_b,
                                      pl::ScheduleKind::interleaved, pl::ScheduleKind::zb_h1};
    std::vector<BubbleLine> lines;
    for (pl::ScheduleKind kind : kinds) {
        BubbleLine line{.kind = kind,
                        .virtualStages = kind != pl::ScheduleKind::interleaved ? 1
                            : input.spec.virtual_stages > 1                    ? input.spec.virtual_stages
                                                                               : 2};
        const int pieces = stages * line.virtualStages;
        if (kind == pl::ScheduleKind::interleaved && (stages < 2 || pieces > layers)) {
            lines.push_back(std::move(line)); // no line: nothing to interleave
            continue;
        }
        std::vector<int> cut = input.boundaries;
        try {
            if (pieces != currentPieces)
                cut = pl::partition(adjusted, pieces, pl::PartitionSpec{.method = pl::PartitionMethod::compute});
        } catch (const std::exception&) {
            lines.push_back(std::move(line));
            continue;
        }
        for (int m : counts) {
            if (cancel && cancel->load(std::memory_order_relaxed))
                return {};
            if (kind == pl::ScheduleKind::interleaved && m % stages != 0)
                continue; // Megatron's rule: microbatches in groups of N
            const pl::ScheduleSpec spec{.kind = kind,
                                        .stages = stages,
                                        .microbatches = m,
                                        .virtual_stages = line.virtualStages,
                                        .p2p_latency_ms = input.spec.p2p_latency_ms};
            try {
                const pl::StepPlan step =
                    pl::make_step_plan(input.profile, pl::build_schedule(spec), cut, input.options);
                line.microbatches.push_back(m);
                line.bubble.push_back(step.plan.timeline.bubble_fraction);
            } catch (const std::exception&) {
                // A point the schedule cannot run (too large, deadlock): left out of the line.
            }
        }
        lines.push_back(std::move(line));
    }
    return lines;
}

BubbleSweep::BubbleSweep(QObject* parent) : QObject(parent), m_runner(this, [] {}) {}

void BubbleSweep::start(BubbleSweepInput input)
{
    auto progress = std::make_shared<JobProgress>();
    m_runner.start(
        progress, [progress, input = std::move(input)] { return sweepBubbles(input, &progress->cancel); },
        [this](std::vector<BubbleLine> lines) {
            m_lines = std::move(lines);
            emit finished();
        });
}

} // namespace shardwidgets
