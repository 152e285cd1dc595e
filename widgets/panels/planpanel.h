#pragma once
// The planner's search (`shardctl plan` in the app): GPUs, memory per GPU, global
// batch, micro batch size, link and ZeRO; "Search" runs core's search_plans on the thread pool
// (JobRunner: a new search or Cancel drops the running one's result, the newest wins); the best
// configurations in a table (PlanCandidateModel) beside a scatter of all of them
// (CandidateScatter). Choosing a row or a dot loads that candidate into the PipelinePlanner, so
// the timeline and the stage table show exactly it. When nothing fits, one sentence names the
// closest configuration and by how much it misses.

#include "core/pipeline/search.h"
#include "widgets/jobs/jobrunner.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableView;

namespace shardwidgets {

class CandidateScatter;
class PipelinePlanner;
class PlanCandidateModel;

// What one search hands back to the GUI thread.
struct PlanSearchOutcome {
    std::optional<shardscope::pipeline::SearchResult> result;
    QString error; // one sentence when the search refused its inputs
};

class PlanPanel : public QWidget {
    Q_OBJECT
public:
    explicit PlanPanel(PipelinePlanner* planner, QWidget* parent = nullptr);

    // The search the inputs describe, over the planner's profile.
    shardscope::pipeline::SearchSpec searchSpec() const;
    // Sets the inputs from a stored search (Settings); the profile's own micro batch size, when
    // it names one, still wins, as it does whenever a profile is loaded.
    void setSearchInputs(const shardscope::pipeline::SearchSpec& spec);
    void search();
    void cancel();
    bool isSearching() const { return m_runner.isRunning() && m_searching; }
    // Loads the candidate of the search's ranking (an index into result().candidates).
    bool loadCandidate(int index);

    PlanCandidateModel* model() const { return m_model; }
    CandidateScatter* scatter() const { return m_scatter; }
    QTableView* table() const { return m_table; }
    QLabel* message() const { return m_message; }
    QPushButton* searchButton() const { return m_searchButton; }
    QSpinBox* gpusBox() const { return m_gpus; }
    QDoubleSpinBox* memoryBox() const { return m_memory; }
    QSpinBox* globalBatchBox() const { return m_globalBatch; }
    QSpinBox* microBatchBox() const { return m_microBatch; }
    QDoubleSpinBox* linkBox() const { return m_link; }
    QComboBox* zeroBox() const { return m_zero; }

signals:
    void searchFinished();
    void candidateLoaded(int index);

private:
    QWidget* buildInputs();
    void onFinished(PlanSearchOutcome outcome, const shardscope::pipeline::SearchSpec& spec);
    QString describeResult(const shardscope::pipeline::SearchResult& result,
                           const shardscope::pipeline::SearchSpec& spec) const;

    PipelinePlanner* m_planner;
    PlanCandidateModel* m_model;
    CandidateScatter* m_scatter;
    QTableView* m_table = nullptr;
    QLabel* m_message = nullptr;
    QPushButton* m_searchButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QSpinBox* m_gpus = nullptr;
    QDoubleSpinBox* m_memory = nullptr;
    QSpinBox* m_globalBatch = nullptr;
    QSpinBox* m_microBatch = nullptr;
    QDoubleSpinBox* m_link = nullptr;
    QComboBox* m_zero = nullptr;
    QCheckBox* m_overlap = nullptr;
    QCheckBox* m_fp32Grads = nullptr;
    shardscope::pipeline::SearchSpec m_shown; // the search the table holds
    quint64 m_generation = 0; // a result is delivered only to the search that asked for it
    bool m_searching = false;
    JobRunner<PlanSearchOutcome> m_runner;
};

} // namespace shardwidgets
