#pragma once
// The pipeline planner page: profile, schedule, stages, microbatches and v on a toolbar; the
// stage bar; the Gantt timeline; the bubble readout and per-stage table. All views observe one
// PipelinePlanner, so dragging a boundary updates everything at once. A second toolbar row
// sets the training step (dp, ZeRO, recomputation, GPU memory, link, overlapped all-reduce);
// below the timeline four tabs: the stage table (memory per stage, red over the limit), the
// plan search over the profile (PlanPanel), the search from a model's config.json on a cluster
// preset (ModelPlanPanel) and the bubble against microbatches of every schedule (BubbleChart,
// swept off the GUI thread by BubbleSweep after each change).

#include <QWidget>
#include <functional>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSpinBox;
class QFrame;
class QLabel;
class QPushButton;
class QTabWidget;
class QTableView;
class QTimer;

namespace shardwidgets {

class PipelinePlanner;
class StageBar;
class GanttView;
class BubbleReadout;
class StageStatsModel;
class PlanPanel;
class ModelPlanPanel;
class FlowLayout;
class BubbleChart;
class BubbleSweep;

class PlannerPanel : public QWidget {
    Q_OBJECT
public:
    explicit PlannerPanel(QWidget* parent = nullptr);

    PipelinePlanner* planner() const { return m_planner; }
    StageBar* stageBar() const { return m_stageBar; }
    GanttView* gantt() const { return m_gantt; }
    BubbleReadout* readout() const { return m_readout; }
    StageStatsModel* statsModel() const { return m_stats; }
    PlanPanel* planPanel() const { return m_plan; }
    ModelPlanPanel* modelPlanPanel() const { return m_modelPlan; }
    // Puts a config.json into the model search and shows that tab (File › Open Model Config…).
    void openModelConfig(const QString& path);
    BubbleChart* bubbleChart() const { return m_bubbleChart; }
    BubbleSweep* bubbleSweep() const { return m_sweep; }
    QTableView* statsTable() const { return m_table; }
    QTabWidget* tabs() const { return m_tabs; }
    QDoubleSpinBox* gpuMemoryBox() const { return m_gpuMemory; }
    QComboBox* scheduleBox() const { return m_schedule; }
    QSpinBox* stagesBox() const { return m_stages; }
    QSpinBox* microbatchesBox() const { return m_microbatches; }
    QSpinBox* dpBox() const { return m_dp; }
    QCheckBox* fp32GradsBox() const { return m_fp32Grads; }
    QDoubleSpinBox* linkBox() const { return m_link; }
    // Shown when a schedule or stage change re-balanced a dragged cut: what happened, and Undo
    // (also Ctrl+Z on the page) to put the previous schedule and cut back.
    QLabel* resetNotice() const { return m_resetText; }
    QPushButton* undoButton() const { return m_undo; }

    // Loads a profile file and selects it; shows nothing itself: the caller reports the error.
    bool openProfile(const QString& path, QString* error);
    // Reads a torch.distributed.pipelining CSV schedule (off the GUI thread: a schedule can be
    // millions of cells) and shows it; done(true) once it is on the timeline, done(false) with
    // the error's sentence otherwise. The newest request wins.
    void openScheduleCsv(const QString& path, const std::function<void(bool, const QString&)>& done);

    // Whether the profile shown is one somebody chose: loaded from a file (--profile, Load…),
    // picked in the profile box (a bundled one too), derived from a checkpoint or imported from a
    // trace. The bundled demo the page starts with is not: a checkpoint's report must not carry
    // its plan, or a reader takes a 7B demo's stages for the checkpoint's. Editing the schedule
    // or the stages of that demo does not choose it either; picking it in the box does.
    bool profileChosen() const { return m_profileChosen; }

signals:
    void profileError(const QString& message);

private:
    QWidget* buildToolbar(); // wraps to a second line in a narrow window
    // The training step's controls, in the toolbar's flow: one wrapping row for all settings
    // keeps the page within the window's minimum height.
    void addTrainingControls(QWidget* toolbar, FlowLayout* flow);
    void applyTrainingControls();
    void startSweep();
    void showSweep();
    void syncControls();
    void onPlanChanged();
    QWidget* buildResetBar();

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
    QFrame* m_resetBar = nullptr;
    QLabel* m_resetText = nullptr;
    QPushButton* m_undo = nullptr;
    QTableView* m_table = nullptr;
    QTabWidget* m_tabs = nullptr;
    PlanPanel* m_plan = nullptr;
    ModelPlanPanel* m_modelPlan = nullptr;
    BubbleChart* m_bubbleChart = nullptr;
    BubbleSweep* m_sweep = nullptr;
    QTimer* m_sweepTimer = nullptr; // a drag replans per mouse move; the sweep follows at rest
    QSpinBox* m_dp = nullptr;
    QComboBox* m_zero = nullptr;
    QComboBox* m_recompute = nullptr;
    QDoubleSpinBox* m_gpuMemory = nullptr;
    QDoubleSpinBox* m_link = nullptr;
    QCheckBox* m_overlap = nullptr;
    QCheckBox* m_fp32Grads = nullptr;
    bool m_profileChosen = false;
};

} // namespace shardwidgets
