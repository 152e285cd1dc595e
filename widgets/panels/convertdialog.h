#pragma once
// File › Convert…: a checkpoint (the one open in the app, or a folder the user chooses) written
// again as a Hugging Face folder, a torch DCP or a ShardScope checkpoint, with the options
// `shardctl convert` takes (docs/shardctl.md, "convert"). Core's convert_checkpoint runs in the
// background through ConvertController with progress and Cancel; the dialog only collects the
// options and reports the outcome in one sentence, offering to open a result.

#include "core/convert/convert.h"

#include <QDialog>
#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace shardwidgets {

class ConvertController;

class ConvertDialog : public QDialog {
    Q_OBJECT
public:
    explicit ConvertDialog(QWidget* parent = nullptr);

    // The checkpoint to convert (the open one); suggests an output folder beside it unless the
    // user typed one. Ignored while a conversion runs.
    void setSource(const QString& path);
    void setInteractive(bool interactive) { m_interactive = interactive; } // dialogs allowed

    // The options as the controls say, or nullopt with the sentence saying which one is wrong.
    std::optional<shardscope::ConvertOptions> options(QString* error = nullptr) const;
    // Starts the conversion as the controls say (what the Convert button does); false with the
    // reason shown if it cannot start.
    bool startConversion();
    void cancelConversion();
    bool isRunning() const;
    QString statusText() const; // the one sentence about the last attempt

    ConvertController* controller() const { return m_controller; }
    QLineEdit* sourceEdit() const { return m_source; }
    QLineEdit* outputEdit() const { return m_output; }
    QComboBox* targetBox() const { return m_target; }
    QComboBox* dtypeBox() const { return m_dtype; }
    QComboBox* statesBox() const { return m_states; }
    QLineEdit* maxShardSizeEdit() const { return m_maxShardSize; }
    QSpinBox* worldSizeBox() const { return m_worldSize; }
    QPushButton* convertButton() const { return m_convert; }
    QPushButton* cancelButton() const { return m_cancel; }
    QPushButton* openResultButton() const { return m_openResult; }

signals:
    void openRequested(const QString& directory); // the user wants to open the converted result
    void conversionFinished(bool ok);

protected:
    void reject() override; // Escape or the title bar's close while converting cancels instead
    void closeEvent(QCloseEvent* event) override;

private:
    shardscope::ConvertTarget target() const;
    void chooseSource();
    void chooseOutput();
    void suggestOutput();
    void updateControls();
    void showStatus(const QString& text, bool problem);
    void onProgress(quint64 done, quint64 total, double rate, double eta);
    void onFinished();

    ConvertController* m_controller;
    QLineEdit* m_source;
    QPushButton* m_chooseSource;
    QLineEdit* m_output;
    QPushButton* m_chooseOutput;
    QComboBox* m_target;
    QComboBox* m_dtype;
    QComboBox* m_states;
    QLineEdit* m_maxShardSize;
    QSpinBox* m_worldSize;
    QProgressBar* m_progress;
    QLabel* m_rate;
    QLabel* m_status;
    QPushButton* m_convert;
    QPushButton* m_cancel;
    QPushButton* m_openResult;
    QPushButton* m_close;
    QString m_suggestedOutput; // replaced as source and target change, until the user edits it
    bool m_interactive = true;
};

} // namespace shardwidgets
