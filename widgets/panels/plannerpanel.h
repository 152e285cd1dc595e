#pragma once
// The pipeline planner page: profile, schedule, stages, microbatches and v on a toolbar; the
// stage bar; the Gantt timeline; the bubble readout and per-stage table. All views observe one
// PipelinePlanner, so dragging a boundary updates everything at once.

#include <QWidget>

class QComboBox;
class QSpinBox;
class QLabel;
class QTableView;

namespace shardwidgets {

class PipelinePlanner;
class StageBar;
class GanttView;
class BubbleReadout;
class StageStatsModel;

class PlannerPanel : public QWidget {
    Q_OBJECT
public:
    explicit PlannerPanel(QWidget* parent = nullptr);

    PipelinePlanner* planner() const { return m_planner; }
    StageBar* stageBar() const { return m_stageBar; }
    GanttView* gantt() const { return m_gantt; }
    BubbleReadout* readout() const { return m_readout; }
    StageStatsModel* statsModel() const { return m_stats; }

    // Loads a profile file and selects it; shows nothing itself: the caller reports the error.
    bool openProfile(const QString& path, QString* error);

signals:
    void profileError(const QString& message);

private:
    QWidget* buildToolbar(); // wraps to a second line in a narrow window
    void syncControls();
    void onPlanChanged();

    PipelinePlanner* m_planner;
    StageStatsModel* m_stats;
    StageBar* m_stageBar;
    GanttView* m_gantt;
    BubbleReadout* m_readout;
    QComboBox* m_profile = nullptr;
    QComboBox* m_schedule = nullptr;
    QSpinBox* m_stages = nullptr;
    QSpinBox* m_microbatches = nullptr;
    QSpinBox* m_virtual = nullptr;
    QLabel* m_error = nullptr;
    QTableView* m_table = nullptr;
};

} // namespace shardwidgets
