#pragma once
// The planner's state without any widget: profile, schedule settings and partition, and the
// current Plan from core's make_plan. Views observe planChanged(); tests drive it directly.
// make_plan costs microseconds for realistic sizes, so it runs synchronously on every change
// (that is what makes dragging a boundary live); the settings' ranges keep it that way.

#include "core/pipeline/simulator.h"

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
    QString error() const { return m_error; } // why there is no plan

signals:
    void planChanged();
    void profileChanged();

private:
    void repartition();
    void replan();

    shardscope::pipeline::Profile m_profile;
    shardscope::pipeline::ScheduleSpec m_spec;
    shardscope::pipeline::PartitionMethod m_method = shardscope::pipeline::PartitionMethod::compute;
    std::vector<int> m_boundaries;
    std::optional<shardscope::pipeline::Schedule> m_schedule;
    std::optional<shardscope::pipeline::Plan> m_plan;
    QString m_error;
};

} // namespace shardwidgets
