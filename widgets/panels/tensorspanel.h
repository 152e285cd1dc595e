#pragma once
// The Tensors page: what the values of the open checkpoint look like. Core's inspect_content
// runs in the background (ContentController) as soon as a checkpoint opens, with progress and
// Cancel; then a sortable table of every tensor (its health counts beside its name, NaN/Inf in
// red, long names elided in the middle), filtered by name and, when asked, to the tensors with
// problems (core's tensor_health), the selected tensor's log2|x| histogram and its parts (rank,
// file or chunk), and a banner: the first health problem on its own, and in the app the one resume
// verdict of the bytes and the values together.

#include "core/report/verdict.h"

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
struct ContentReport;
}

namespace shardwidgets {

class ContentController;
class FailureBanner;
class HistogramView;
class TensorFilter;
class TensorPartsModel;
class TensorStatsModel;

class TensorsPanel : public QWidget {
    Q_OBJECT
public:
    explicit TensorsPanel(QWidget* parent = nullptr);

    void open(const QString& path); // starts the scan (the newest open wins)
    void cancel();
    void clear();
    bool isReading() const; // the scan is running
    // The one resume verdict (the main window's, from the bytes and these values together)
    // replaces what the values alone said. The tensors read from its failed_files are marked, with
    // each file's status from `verify` (the verification the verdict was made from).
    void showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues,
                     const shardscope::VerifyReport* verify = nullptr);
    FailureBanner* banner() const { return m_banner; }

    const shardscope::ContentReport* report() const { return m_report.get(); }
    const std::shared_ptr<const shardscope::ContentReport>& sharedReport() const { return m_report; }
    // The parts, for tests and the main window: each child also has an objectName ("tensorSummary",
    // "tensorTable", "tensorFilter", "onlyProblems", "tensorCount", "partsTable", "histogram",
    // "banner") for QObject::findChild.
    TensorStatsModel* model() const { return m_model; }
    TensorPartsModel* partsModel() const { return m_parts; }

signals:
    void scanFinished(bool ok);

private:
    void onProgress(quint64 done, quint64 total, double rate, double eta);
    void onFinished();
    void showSelected();
    void showSummary(); // the line above the table: what was read, and how much of it from failed files
    void showCount(); // beside the filters: how many tensors they leave

    ContentController* m_controller;
    std::shared_ptr<const shardscope::ContentReport> m_report;
    QLabel* m_status;
    QProgressBar* m_progress;
    QLabel* m_rate;
    QPushButton* m_cancel;
    FailureBanner* m_banner;
    QLineEdit* m_filter;
    QCheckBox* m_onlyProblems;
    QLabel* m_count;
    TensorStatsModel* m_model;
    TensorFilter* m_proxy;
    QTableView* m_table;
    HistogramView* m_histogram;
    TensorPartsModel* m_parts;
    QTableView* m_partsView;
    QString m_readSummary; // "72 tensors (shardscope) read in 2 s"
    bool m_autoSelected = false; // the selected row is the page's choice, not the user's
};

} // namespace shardwidgets
