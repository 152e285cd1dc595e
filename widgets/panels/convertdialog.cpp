#include "widgets/panels/convertdialog.h"

#include "core/checkpoint/manifest.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/jobs/convertcontroller.h"
#include "widgets/style/format.h"
#include "widgets/style/widgetstyle.h"

#include <QCloseEvent>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

namespace shardwidgets {

using shardscope::ConvertTarget;

namespace {

// A line edit and its "Choose…" button on one form row.
QWidget* withButton(QWidget* parent, QLineEdit* edit, QPushButton* button)
{
    auto* row = new QWidget(parent);
    auto* line = new QHBoxLayout(row);
    line->setContentsMargins(0, 0, 0, 0);
    line->addWidget(edit, 1);
    line->addWidget(button);
    return row;
}

// The combo items' data are core's spellings (to_string), so the CLI's words and the dialog's
// cannot drift apart.
template <class Enum>
void addItem(QComboBox* box, const QString& text, Enum value)
{
    box->addItem(text, QString::fromUtf8(shardscope::to_string(value)));
}

} // namespace

ConvertDialog::ConvertDialog(QWidget* parent)
    : QDialog(parent), m_controller(new ConvertController(this)), m_source(new QLineEdit(this)),
      m_chooseSource(new QPushButton(tr("Choose…"), this)), m_output(new QLineEdit(this)),
      m_chooseOutput(new QPushButton(tr("Choose…"), this)), m_target(new QComboBox(this)), m_dtype(new QComboBox(this)),
      m_states(new QComboBox(this)), m_maxShardSize(new QLineEdit(this)), m_worldSize(new QSpinBox(this)),
      m_progress(new QProgressBar(this)), m_rate(new QLabel(this)), m_status(new QLabel(this)),
      m_convert(new QPushButton(tr("Convert"), this)), m_cancel(new QPushButton(tr("Cancel"), this)),
      m_openResult(new QPushButton(tr("Open Result"), this)), m_close(new QPushButton(tr("Close"), this))
{
    setWindowTitle(tr("Convert Checkpoint"));
    m_source->setPlaceholderText(tr("a checkpoint folder, root or safetensors file"));
    m_source->setToolTip(tr("Anything ShardScope reads: a ShardScope step or root, a Hugging Face folder, a torch "
                            "DCP, a DeepSpeed or Megatron step. It is verified first and never modified."));
    m_chooseSource->setToolTip(tr("Choose another checkpoint folder"));
    m_output->setPlaceholderText(tr("a new folder"));
    m_output->setToolTip(tr("Must not exist, or be an empty folder; not inside the source. The output is written "
                            "beside it, verified, then renamed into place."));
    m_chooseOutput->setToolTip(tr("Choose where the new folder goes"));

    addItem(m_target, tr("Hugging Face safetensors (hf)"), ConvertTarget::hf);
    addItem(m_target, tr("PyTorch Distributed Checkpoint (dcp)"), ConvertTarget::dcp);
    addItem(m_target, tr("ShardScope checkpoint (shardscope)"), ConvertTarget::shardscope);
    addItem(m_dtype, tr("keep as saved"), shardscope::ConvertDtype::keep);
    addItem(m_dtype, tr("bf16"), shardscope::ConvertDtype::bf16);
    addItem(m_dtype, tr("f16"), shardscope::ConvertDtype::f16);
    addItem(m_dtype, tr("f32"), shardscope::ConvertDtype::f32);
    m_dtype->setToolTip(tr("Floating tensors cast, rounded to nearest even; integer and bool tensors are never cast"));
    addItem(m_states, tr("model"), shardscope::ConvertStates::model);
    addItem(m_states, tr("model + optimizer"), shardscope::ConvertStates::model_optimizer);
    m_states->setToolTip(tr("Model + optimizer also writes a ShardScope checkpoint's master weights and Adam "
                            "moments, or the tensors another format saved as optimizer state"));
    m_maxShardSize->setText(QStringLiteral("5GB"));
    m_maxShardSize->setToolTip(tr("Tensor bytes per file: 500MB, 5GB (powers of 1000), 2GiB (powers of 1024), or "
                                  "bytes. A larger tensor gets a file of its own."));
    m_worldSize->setRange(1, shardscope::kMaxWorldSize);
    // The short fields one width, as wide as the longest choice; the paths take the rest.
    const int shortWidth = m_states->sizeHint().width();
    for (QWidget* field : std::initializer_list<QWidget*>{m_dtype, m_states, m_maxShardSize, m_worldSize})
        field->setFixedWidth(shortWidth);
    m_worldSize->setToolTip(
        tr("The ranks the output is split over: each tensor's rows (dcp), the flat parameter vector (shardscope)"));

    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
    form->addRow(tr("&Source:"), withButton(this, m_source, m_chooseSource));
    form->addRow(tr("Convert &to:"), m_target);
    form->addRow(tr("&Output folder:"), withButton(this, m_output, m_chooseOutput));
    form->addRow(tr("&Dtype:"), m_dtype);
    form->addRow(tr("S&tates:"), m_states);
    form->addRow(tr("&Max shard size (hf):"), m_maxShardSize);
    form->addRow(tr("&World size (dcp, shardscope):"), m_worldSize);

    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setFormat(tr("idle"));
    m_progress->setTextVisible(true);
    m_rate->setAlignment(Qt::AlignRight | Qt::AlignTop);

    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::PlainText); // paths and core's messages are never markup
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status->setText(tr("The source is verified first; the output is verified before it appears."));

    auto* buttons = new QDialogButtonBox(this);
    buttons->addButton(m_openResult, QDialogButtonBox::ActionRole);
    buttons->addButton(m_convert, QDialogButtonBox::AcceptRole);
    buttons->addButton(m_cancel, QDialogButtonBox::RejectRole);
    buttons->addButton(m_close, QDialogButtonBox::RejectRole);
    m_convert->setDefault(true);
    m_openResult->hide();

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addSpacing(6);
    layout->addWidget(m_progress);
    // The sentence about the job on the left, its rate and ETA on the right while it runs.
    auto* statusRow = new QHBoxLayout;
    statusRow->addWidget(m_status, 1);
    statusRow->addWidget(m_rate, 0, Qt::AlignTop);
    layout->addLayout(statusRow);
    layout->addStretch(1);
    layout->addWidget(buttons);
    // Tab goes down the form as it reads, then to the buttons (creation order would visit the
    // output folder before the format above it).
    QWidget* order[] = {m_source,       m_chooseSource, m_target,     m_output,  m_chooseOutput, m_dtype, m_states,
                        m_maxShardSize, m_worldSize,    m_openResult, m_convert, m_cancel,       m_close};
    for (std::size_t i = 1; i < std::size(order); ++i)
        setTabOrder(order[i - 1], order[i]);
    setMinimumWidth(720); // a checkpoint path of a typical depth shown whole

    // The buttons are wired one by one, not through the box's accepted/rejected: Convert must not
    // close the dialog, and Cancel stops the job rather than the dialog.
    connect(m_convert, &QPushButton::clicked, this, &ConvertDialog::startConversion);
    connect(m_cancel, &QPushButton::clicked, this, &ConvertDialog::cancelConversion);
    connect(m_close, &QPushButton::clicked, this, &ConvertDialog::reject);
    connect(m_openResult, &QPushButton::clicked, this, [this] {
        emit openRequested(m_controller->destination());
        accept();
    });
    connect(m_chooseSource, &QPushButton::clicked, this, &ConvertDialog::chooseSource);
    connect(m_chooseOutput, &QPushButton::clicked, this, &ConvertDialog::chooseOutput);
    connect(m_source, &QLineEdit::textEdited, this, &ConvertDialog::suggestOutput);
    connect(m_target, &QComboBox::currentIndexChanged, this, [this] {
        suggestOutput();
        updateControls();
    });
    connect(m_controller, &ConvertController::progressChanged, this, &ConvertDialog::onProgress);
    connect(m_controller, &ConvertController::finished, this, &ConvertDialog::onFinished);
    updateControls();
}

void ConvertDialog::setSource(const QString& path)
{
    if (isRunning())
        return;
    m_source->setText(path);
    suggestOutput();
}

ConvertTarget ConvertDialog::target() const
{
    return shardscope::convert_target_from_string(m_target->currentData().toString().toStdString())
        .value_or(ConvertTarget::hf);
}

// "<source>-hf" beside the source: a new name, since core refuses a folder that holds anything.
// One stat per existing name, on the GUI thread: nothing of the checkpoint is read.
void ConvertDialog::suggestOutput()
{
    if (!m_output->text().isEmpty() && m_output->text() != m_suggestedOutput)
        return; // the user's own choice stays
    const QString source = cleanCheckpointText(m_source->text().trimmed());
    if (m_source->text().trimmed().isEmpty()) {
        m_suggestedOutput.clear();
    } else {
        // A bucket's or a URL's conversion goes to the home folder, named after its last part.
        const bool remote = isUrl(source);
        const QFileInfo info(remote ? QDir::home().filePath(source.section(QLatin1Char('/'), -1)) : source);
        const QString base = info.isFile() || (remote && info.fileName().contains(QLatin1Char('.')))
            ? info.completeBaseName()
            : info.fileName();
        const QString name = QStringLiteral("%1-%2").arg(base, m_target->currentData().toString());
        // An earlier conversion's folder is not offered again: "-2", "-3", … after it.
        m_suggestedOutput = info.dir().filePath(name);
        for (int n = 2; QFileInfo::exists(m_suggestedOutput) && n < 1000; ++n)
            m_suggestedOutput = info.dir().filePath(QStringLiteral("%1-%2").arg(name).arg(n));
    }
    m_output->setText(m_suggestedOutput);
}

std::optional<shardscope::ConvertOptions> ConvertDialog::options(QString* error) const
{
    auto fail = [&](const QString& text) {
        if (error)
            *error = text;
        return std::nullopt;
    };
    shardscope::ConvertOptions options;
    options.target = target();
    options.dtype = shardscope::convert_dtype_from_string(m_dtype->currentData().toString().toStdString())
                        .value_or(shardscope::ConvertDtype::keep);
    options.states = shardscope::convert_states_from_string(m_states->currentData().toString().toStdString())
                         .value_or(shardscope::ConvertStates::model);
    const QString size = m_maxShardSize->text().trimmed();
    const auto bytes = shardscope::parse_byte_size(size.toStdString());
    if (options.target == ConvertTarget::hf && !bytes)
        return fail(tr("The max shard size must be a positive size such as 5GB, 500MB or 2GiB, not '%1'.").arg(size));
    if (bytes)
        options.max_shard_bytes = *bytes;
    options.world_size = options.target == ConvertTarget::hf ? 1 : m_worldSize->value(); // a folder of no ranks
    return options;
}

bool ConvertDialog::startConversion()
{
    if (isRunning())
        return false;
    const QString source = m_source->text().trimmed();
    const QString output = m_output->text().trimmed();
    QString error;
    const auto options = this->options(&error);
    if (source.isEmpty())
        error = tr("Choose the checkpoint to convert.");
    else if (!isUrl(source) && !QFileInfo::exists(source))
        error = tr("%1 does not exist.").arg(source);
    else if (output.isEmpty())
        error = tr("Choose the new folder to write the conversion into.");
    if (!error.isEmpty() || !options) {
        showStatus(error, true);
        return false;
    }
    m_controller->start(source, output, *options);
    m_openResult->hide();
    m_convert->setDefault(true); // Enter converts again, not the hidden Open Result
    showJobProgress(m_progress, m_rate, 0, 0, 0, -1, tr("verifying the source"));
    showStatus(tr("Converting %1 to %2 in %3…").arg(source, m_target->currentData().toString(), output), false);
    updateControls();
    return true;
}

void ConvertDialog::cancelConversion()
{
    if (!isRunning())
        return;
    m_controller->cancel();
    showStatus(tr("Cancelling…"), false);
}

bool ConvertDialog::isRunning() const
{
    return m_controller->isRunning();
}

QString ConvertDialog::statusText() const
{
    return m_status->text();
}

void ConvertDialog::reject()
{
    if (isRunning()) {
        cancelConversion(); // the dialog stays until core has removed what it wrote
        return;
    }
    QDialog::reject();
}

void ConvertDialog::closeEvent(QCloseEvent* event)
{
    if (isRunning()) {
        cancelConversion();
        event->ignore();
        return;
    }
    QDialog::closeEvent(event);
}

void ConvertDialog::chooseSource()
{
    const QString start = m_source->text().isEmpty() ? QDir::homePath() : m_source->text();
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Checkpoint to convert"), start);
    if (!folder.isEmpty())
        setSource(folder);
}

void ConvertDialog::chooseOutput()
{
    const QString start = m_output->text().isEmpty() ? QDir::homePath() : m_output->text();
    // A new folder's name: a save dialog lets the user type it (core refuses a non-empty folder).
    const QString folder = QFileDialog::getSaveFileName(this, tr("Convert into a new folder"), start, QString(),
                                                        nullptr, QFileDialog::DontConfirmOverwrite);
    if (!folder.isEmpty())
        m_output->setText(folder);
}

void ConvertDialog::updateControls()
{
    const bool running = isRunning();
    for (QWidget* input : std::initializer_list<QWidget*>{m_source, m_chooseSource, m_output, m_chooseOutput, m_target,
                                                          m_dtype, m_states})
        input->setEnabled(!running);
    // A ShardScope checkpoint keeps its parameters in a 16-bit dtype (docs/shardctl.md, convert):
    // f32 is not offered there rather than refused after the source is read.
    const int f32 = m_dtype->findData(QString::fromUtf8(shardscope::to_string(shardscope::ConvertDtype::f32)));
    if (auto* items = qobject_cast<QStandardItemModel*>(m_dtype->model())) {
        const bool shardscopeTarget = target() == ConvertTarget::shardscope;
        if (shardscopeTarget && m_dtype->currentIndex() == f32)
            m_dtype->setCurrentIndex(0); // keep
        items->item(f32)->setEnabled(!shardscopeTarget);
        items->item(f32)->setToolTip(
            shardscopeTarget ? tr("A ShardScope checkpoint keeps its parameters in bf16 or f16") : QString());
    }
    m_maxShardSize->setEnabled(!running && target() == ConvertTarget::hf);
    m_worldSize->setEnabled(!running && target() != ConvertTarget::hf);
    m_convert->setEnabled(!running);
    m_cancel->setVisible(running);
    m_close->setVisible(!running);
}

void ConvertDialog::showStatus(const QString& text, bool problem)
{
    QPalette palette = this->palette();
    if (problem)
        palette.setColor(QPalette::WindowText, severityColor(Severity::bad, palette));
    m_status->setPalette(palette);
    m_status->setText(text);
}

void ConvertDialog::onProgress(quint64 done, quint64 total, double rate, double eta)
{
    showJobProgress(m_progress, m_rate, done, total, rate, eta, tr("verifying the source"));
}

void ConvertDialog::onFinished()
{
    const auto& outcome = m_controller->outcome();
    const QString destination = m_controller->destination();
    m_rate->clear();
    updateControls();
    if (outcome.result) {
        const auto& result = *outcome.result;
        uint64_t bytes = 0;
        for (const auto& file : result.files)
            bytes += file.bytes;
        showJobOutcome(m_progress, Severity::good, tr("done"));
        showStatus(tr("Converted %1 tensors into %2: %3 files, %4, verified.")
                       .arg(formatCount(result.tensors.size()), destination)
                       .arg(result.files.size())
                       .arg(formatBytes(bytes)),
                   false);
        m_openResult->show();
        m_openResult->setDefault(true);
        emit conversionFinished(true);
        if (m_interactive &&
            QMessageBox::question(this, tr("Conversion finished"),
                                  tr("The checkpoint was converted into\n%1\n\nOpen it now?").arg(destination)) ==
                QMessageBox::Yes) {
            emit openRequested(destination);
            accept();
        }
        return;
    }
    showJobOutcome(m_progress, outcome.cancelled ? Severity::neutral : Severity::bad,
                   outcome.cancelled ? tr("cancelled") : tr("failed"));
    // Core's message names the file or tensor; it is one sentence already, ended here.
    QString message = outcome.error ? printableText(outcome.error->message) : tr("unknown error");
    if (!message.endsWith(QLatin1Char('.')))
        message += QLatin1Char('.');
    showStatus(outcome.cancelled ? tr("Conversion cancelled: nothing was written to %1.").arg(destination)
                                 : tr("Conversion failed: %1").arg(message),
               !outcome.cancelled);
    emit conversionFinished(false);
}

} // namespace shardwidgets
