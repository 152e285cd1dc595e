#pragma once
// The Compare page: what changed between the open checkpoint (A) and another one (B) of any
// format or world size. Core's diff_checkpoints runs in the background (DiffController) with
// progress and Cancel; then a banner with the verdict, and a table of every paired tensor in
// model order with its status, changed elements, max |a-b| and a bar of its relative change.

#include <QString>
#include <QWidget>
#include <memory>

class QCheckBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;

namespace shardscope {
struct DiffReport;
}

namespace shardwidgets {

class DiffController;
class DiffModel;
class DiffFilter;
class FailureBanner;

class ComparePanel : public QWidget {
    Q_OBJECT
public:
    explicit ComparePanel(QWidget* parent = nullptr);

    // The open checkpoint: the A side of every comparison (clears the last one).
    void setBase(const QString& path);
    // Compares A with `other` (a folder or a file), with the tolerances in the fields.
    void compareWith(const QString& other);
    void chooseAndCompare(); // a folder dialog, then compareWith
    void cancel();

    const std::shared_ptr<const shardscope::DiffReport>& sharedReport() const { return m_report; }
    // For tests: the children also have objectNames ("diffTable", "otherPath", "atol", "rtol",
    // "onlyDiffering", "banner").
    DiffModel* model() const { return m_model; }

signals:
    void compareFinished(bool identical);

private:
    void onProgress(quint64 done, quint64 total, double rate, double eta);
    void onFinished();

    QString m_base;
    DiffController* m_controller;
    std::shared_ptr<const shardscope::DiffReport> m_report;
    QLabel* m_sides;
    QLineEdit* m_other;
    QPushButton* m_browse;
    QPushButton* m_compare;
    QLineEdit* m_atol;
    QLineEdit* m_rtol;
    QProgressBar* m_progress;
    QLabel* m_rate;
    QPushButton* m_cancel;
    FailureBanner* m_banner;
    QCheckBox* m_onlyDiffering;
    QLineEdit* m_filter;
    DiffModel* m_model;
    DiffFilter* m_proxy;
    QTableView* m_table;
};

} // namespace shardwidgets
