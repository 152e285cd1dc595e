#pragma once
// The steps of a checkpoint root beside the checkpoint page: a table (StepListModel) the user
// opens any step from (double-click, Enter or Open), Refresh to list again while a run is still
// saving, and Mirror… to add the second tier's folder. Listing reads every step's manifest, so it
// runs off the GUI thread through core's list_steps().

#include "core/run/lifecycle.h"

#include <QFutureWatcher>
#include <QWidget>

class QLabel;
class QPushButton;
class QTableView;

namespace shardwidgets {

class StepListModel;

class StepsPane : public QWidget {
    Q_OBJECT
public:
    explicit StepsPane(QWidget* parent = nullptr);
    ~StepsPane() override;

    // A listing already made (by the verification job that opened the root).
    void setSteps(std::vector<shardscope::StepInfo> steps, const QString& root);
    void setCurrentDirectory(const QString& directory);
    void setVerdict(const QString& directory, bool ok); // see StepListModel::setVerdict
    void setMirror(const QString& mirror); // lists again, with the mirror's steps
    void refresh();                        // lists again in the background
    void clear();

    StepListModel* model() const { return m_model; }
    QTableView* view() const { return m_view; }
    bool isListing() const { return m_watcher != nullptr; }

signals:
    void openRequested(const QString& directory);
    void listed(); // a background listing finished and the model holds it

private:
    void openSelected();
    void updateTitle();
    int tableWidth() const; // every column at its contents' width

    StepListModel* m_model;
    QTableView* m_view;
    QLabel* m_title;
    QPushButton* m_open;
    QPushButton* m_refresh;
    QPushButton* m_mirror;
    QFutureWatcher<std::vector<shardscope::StepInfo>>* m_watcher = nullptr;
    QString m_currentDirectory;
    QString m_mirrorPath;
};

} // namespace shardwidgets
