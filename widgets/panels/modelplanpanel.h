#pragma once
// The planner's search from a model's shape (`shardctl plan --model CONFIG.json --cluster NAME`
// in the app): a config.json (a bundled example or a file), a cluster preset, the GPUs, the
// sequence length and the global batch; "Search" runs core's search_model_plans on the thread
// pool (JobRunner: a new search or Cancel drops the running one's result, the newest wins). The
// candidates — t, sp, cp, ep, pp, dp, ZeRO, micro batch, schedule, v with step time, peak
// memory, fit, TFLOP/s per GPU and MFU — in a table beside the scatter. Choosing one loads it
// into the PipelinePlanner through core's candidate_run, so the timeline shows exactly it, its
// tensor-parallel collectives and expert all-to-all drawn inside the ops.

#include "core/pipeline/cluster.h"
#include "core/pipeline/model_search.h"
#include "widgets/jobs/jobrunner.h"

#include <QWidget>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTableView;

namespace shardwidgets {

class CandidateScatter;
class PipelinePlanner;
class PlanCandidateModel;
struct ModelSearchInputs;

// What one model search hands back to the GUI thread.
struct ModelSearchOutcome {
    std::optional<shardscope::pipeline::ModelConfig> config;
    std::optional<shardscope::pipeline::ModelSearchResult> result;
    QString error; // one sentence naming the config when it or the search refused
};

class ModelPlanPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPlanPanel(PipelinePlanner* planner, QWidget* parent = nullptr);

    static QStringList bundledConfigs(); // ":/models/*.json"

    // Adds a config.json (a file or a resource path) to the chooser and selects it.
    void setConfigPath(const QString& path);
    QString configPath() const;
    // A preset's name (cluster_preset_names()); false when there is none of that name.
    bool setCluster(const QString& name);
    shardscope::pipeline::Cluster cluster() const;
    // The search the inputs describe (the cluster's memory, rate, peak and links).
    shardscope::pipeline::ModelSearchSpec searchSpec() const;
    // The inputs as Settings stores them across restarts. Restoring skips a config file that no
    // longer exists and a preset of an unknown name (those keep what is shown), sets the rest.
    ModelSearchInputs inputs() const;
    void setInputs(const ModelSearchInputs& inputs);

    void search();
    void cancel();
    bool isSearching() const { return m_runner.isRunning() && m_searching; }
    bool loadCandidate(int index); // an index into the result's candidates

    PlanCandidateModel* model() const { return m_model; }
    QTableView* table() const { return m_table; }
    QLabel* message() const { return m_message; }
    QPushButton* searchButton() const { return m_searchButton; }
    QComboBox* configBox() const { return m_config; }
    QComboBox* clusterBox() const { return m_cluster; }
    QSpinBox* gpusBox() const { return m_gpus; }
    QSpinBox* seqLenBox() const { return m_seqLen; }
    QSpinBox* globalBatchBox() const { return m_globalBatch; }
    QCheckBox* fp32GradsBox() const { return m_fp32Grads; }

signals:
    void searchFinished();
    void candidateLoaded(int index);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    QWidget* buildInputs();
    void chooseConfigFile();
    void onFinished(ModelSearchOutcome outcome, const shardscope::pipeline::ModelSearchSpec& spec);

    PipelinePlanner* m_planner;
    PlanCandidateModel* m_model;
    CandidateScatter* m_scatter;
    QTableView* m_table = nullptr;
    QSplitter* m_splitter = nullptr;
    QLabel* m_message = nullptr;
    QPushButton* m_searchButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QComboBox* m_config = nullptr;
    QComboBox* m_cluster = nullptr;
    QSpinBox* m_gpus = nullptr;
    QSpinBox* m_seqLen = nullptr;
    QSpinBox* m_globalBatch = nullptr;
    QCheckBox* m_fp32Grads = nullptr;
    // The search the table holds, and the config it was run on.
    shardscope::pipeline::ModelSearchSpec m_shown;
    std::optional<shardscope::pipeline::ModelConfig> m_shownConfig;
    QString m_shownName;
    quint64 m_generation = 0;
    bool m_searching = false;
    JobRunner<ModelSearchOutcome> m_runner;
};

} // namespace shardwidgets
