#pragma once
// The planner's state without any widget: profile, schedule settings and partition, and the
// current Plan from core's make_plan. Views observe planChanged(); tests drive it directly.
// make_plan costs microseconds for realistic sizes, so it runs synchronously on every change
// (that is what makes dragging a boundary live); the settings' ranges keep it that way.
// The plan is core's make_step_plan under the training options (dp, ZeRO, recomputation, link,
// GPU memory), so memory per stage, sends and the all-reduce are the very figures `shardctl
// schedule` prints for the same settings.

#include "core/pipeline/model_search.h"
#include "core/pipeline/search.h"
#include "core/pipeline/training.h"

#include <QObject>
#include <QString>
#include <optional>

namespace shardwidgets {

class PipelinePlanner : public QObject {
    Q_OBJECT
public:
    static constexpr int kMaxStages = 64;
    static constexpr int kMaxMicrobatches = 512;
    static constexpr int kMaxVirtualStages = 8;

    explicit PipelinePlanner(QObject* parent = nullptr);

    // Profiles: built in code, from a file (JSON/CSV), or bundled in the resources.
    void setProfile(shardscope::pipeline::Profile profile);
    bool loadProfile(const QString& path, QString* error = nullptr); // also ":/profiles/x.json"
    static QStringList bundledProfiles(); // resource paths

    void setSpec(shardscope::pipeline::ScheduleSpec spec);
    void setScheduleKind(shardscope::pipeline::ScheduleKind kind);
    void setStages(int stages);
    void setMicrobatches(int microbatches);
    void setVirtualStages(int chunks);
    // A schedule read from a torch.distributed.pipelining CSV (core's parse_schedule_csv, run off
    // the GUI thread by the caller): shown as it is, its stages, microbatches and chunks fixed,
    // until another schedule kind is chosen. Choosing "custom" again brings it back. False (and
    // `error` says why) when it has more stages or microbatches than the planner's ranges.
    bool setCustomSchedule(shardscope::pipeline::Schedule schedule, QString* error = nullptr);
    bool hasCustomSchedule() const { return m_custom.has_value(); }

    // Throws nothing: an out-of-range value leaves no plan and error() says why. A change of
    // recomputation re-balances (compute partitions see the recompute-adjusted costs).
    void setTrainingOptions(const shardscope::pipeline::TrainingOptions& options);
    // Shows exactly one `shardctl plan` candidate found with `search`: schedule, stages, chunks,
    // microbatches, partition and training options. False (error() says why) when it lies
    // outside the planner's ranges.
    bool applyCandidate(const shardscope::pipeline::Candidate& candidate,
                        const shardscope::pipeline::SearchSpec& search);

    // Shows one candidate of the model search (search_model_plans) exactly: core's candidate_run
    // gives its profile (with each layer's collectives), schedule, cut and training options. The
    // planner then knows the model (modelContext): the plan's collectives per piece and its
    // throughput follow every later change until another profile is loaded. False (error() says
    // why) outside the planner's ranges.
    struct ModelContext {
        QString name; // the config's
        shardscope::pipeline::Candidate candidate; // as the search found it
        std::vector<shardscope::pipeline::LayerComm> comm; // per layer
        double flops_per_sample = 0.0;
        double peak_tflops = 0.0;
    };
    bool applyModelCandidate(const shardscope::pipeline::Candidate& candidate, shardscope::pipeline::CandidateRun run,
                             ModelContext context);
    const std::optional<ModelContext>& modelContext() const { return m_model; }
    // Of the plan shown, with a model: each piece's collectives (core's piece_comm) and the
    // throughput of its step over tp x cp x pp x dp GPUs and M x dp x micro batch samples.
    std::vector<shardscope::pipeline::LayerComm> pieceCommunication() const;
    std::optional<shardscope::pipeline::Throughput> throughput() const;

    // A schedule, stage or chunk change that alters the piece count cannot keep a dragged
    // (manual) cut: the planner re-balances by compute, says so (manualCutReset, resetNotice)
    // and keeps what was there so undoReset() can put the previous schedule and cut back. The
    // next change of any other kind forgets it. A change that keeps the piece count (GPipe,
    // 1F1B and ZB-H1 on the same stages) keeps the dragged cut.
    bool canUndoReset() const { return m_undo.has_value(); }
    QString resetNotice() const { return m_resetNotice; }
    bool undoReset();

    // Balanced partitions computed by core; any later drag makes the partition manual.
    void rebalance(shardscope::pipeline::PartitionMethod method);
    bool setBoundaries(const std::vector<int>& boundaries);
    // Moves one boundary to a layer edge (clamped so no piece is empty). True when it moved.
    bool moveBoundary(int index, int edge);

    const shardscope::pipeline::Profile& profile() const { return m_profile; }
    const shardscope::pipeline::ScheduleSpec& spec() const { return m_spec; }
    const std::vector<int>& boundaries() const { return m_boundaries; }
    QString partitionName() const; // "compute", "manual:3,6,9", ...
    const std::optional<shardscope::pipeline::Plan>& plan() const { return m_plan; }
    const std::optional<shardscope::pipeline::StepPlan>& stepPlan() const { return m_step; }
    const shardscope::pipeline::TrainingOptions& trainingOptions() const { return m_options; }
    QString error() const { return m_error; } // why there is no plan

signals:
    void planChanged();
    void profileChanged();
    void manualCutReset(const QString& notice); // after the planChanged of the reset

private:
    void repartition();
    void replan();
    void forgetReset();

    struct Cut {
        shardscope::pipeline::ScheduleSpec spec;
        std::vector<int> boundaries;
    };

    shardscope::pipeline::Profile m_profile;
    shardscope::pipeline::ScheduleSpec m_spec;
    shardscope::pipeline::PartitionMethod m_method = shardscope::pipeline::PartitionMethod::compute;
    std::vector<int> m_boundaries;
    std::optional<shardscope::pipeline::Schedule> m_schedule;
    std::optional<shardscope::pipeline::Schedule> m_custom; // the last CSV schedule opened
    std::optional<shardscope::pipeline::Plan> m_plan; // m_step->plan, kept for the plan() views
    std::optional<shardscope::pipeline::StepPlan> m_step;
    shardscope::pipeline::TrainingOptions m_options;
    QString m_error;
    std::optional<ModelContext> m_model; // set by applyModelCandidate, dropped with its profile
    std::optional<Cut> m_undo; // the manual cut a piece-count change replaced
    QString m_resetNotice;
};

} // namespace shardwidgets
