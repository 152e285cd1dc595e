#pragma once
// The reshard page: a target world size, the ribbons from the current ranks to the new ones, a
// table per new rank with the totals (all from core's plan_reshard, which is cheap and pure), and
// "Reshard…", which writes the new checkpoint in the background with progress and cancel, then
// offers to open it.

#include "core/checkpoint/reshard.h"

#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace shardwidgets {

class ReshardController;
class ReshardPlanModel;
class ReshardView;

class ReshardPanel : public QWidget {
    Q_OBJECT
public:
    explicit ReshardPanel(QWidget* parent = nullptr);

    // The checkpoint to reshard: its directory and manifest. The target starts at twice the
    // current world size (the common "restart on more GPUs" case) unless the user chose one.
    void setCheckpoint(const QString& directory, const shardscope::Manifest& manifest);
    // What verifying the open checkpoint found: a reshard reads and verifies every source shard,
    // so after a failure Reshard… is disabled, its tooltip and the totals line saying why.
    void setSourceProblem(const QString& problem); // empty: verified (or not yet known)
    // An open checkpoint without a ShardScope manifest (another format, or a step whose save
    // never committed): nothing to plan, and the page says why instead of asking for a checkpoint.
    void setNoManifest(const QString& directory);
    void clear();
    void setInteractive(bool interactive) { m_interactive = interactive; } // dialogs allowed

    void setTargetWorldSize(int worldSize);
    int targetWorldSize() const;
    const std::optional<shardscope::ReshardPlan>& plan() const;
    QString totalsText() const;

    // Starts the reshard into `destination` (no dialog); false with a message if it cannot start.
    bool startReshard(const QString& destination, QString* error = nullptr);
    void chooseDestinationAndReshard(); // asks for an output folder first
    void cancelReshard();

    ReshardPlanModel* model() const { return m_model; }
    ReshardView* view() const { return m_view; }
    ReshardController* controller() const { return m_controller; }
    QSpinBox* targetBox() const { return m_target; }
    QPushButton* reshardButton() const { return m_reshard; }
    QPushButton* openResultButton() const { return m_openResult; }

signals:
    void targetChanged(int worldSize);
    void openRequested(const QString& directory); // the user wants to open the resharded result
    void reshardFinished(bool ok);
    void statusMessage(const QString& text);

private:
    void replan();
    void onProgress(quint64 done, quint64 total, double rate, double eta);
    void onFinished();
    void updateButtons();

    ReshardController* m_controller;
    ReshardPlanModel* m_model;
    ReshardView* m_view;
    QTableView* m_table;
    QSpinBox* m_target;
    QLabel* m_source;
    QLabel* m_totals;
    QPushButton* m_reshard;
    QPushButton* m_cancel;
    QPushButton* m_openResult;
    QProgressBar* m_progress;
    QLabel* m_rate;
    QString m_directory;
    std::optional<shardscope::Manifest> m_manifest;
    QString m_sourceProblem;
    bool m_userChoseTarget = false;
    bool m_interactive = true;
};

} // namespace shardwidgets
