#include "widgets/views/failurebanner.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include "core/report/report.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace shardwidgets {

FailureBanner::FailureBanner(QWidget* parent)
    : QFrame(parent), m_icon(new QLabel(this)), m_title(new QLabel(this)), m_meaning(new QLabel(this))
{
    setObjectName(QStringLiteral("failureBanner"));
    setFrameShape(QFrame::StyledPanel);
    setAutoFillBackground(true);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addWidget(m_icon, 0, Qt::AlignTop);
    auto* text = new QVBoxLayout;
    QFont bold = m_title->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.1);
    m_title->setFont(bold);
    // Titles quote names from files: "<b>" in a tensor name is text, not markup.
    m_title->setTextFormat(Qt::PlainText);
    m_meaning->setTextFormat(Qt::PlainText);
    m_title->setWordWrap(true);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_meaning->setWordWrap(true);
    m_meaning->setTextInteractionFlags(Qt::TextSelectableByMouse);
    text->addWidget(m_title);
    text->addWidget(m_meaning);
    layout->addLayout(text, 1);
    hide();
}

void FailureBanner::apply(State state, const QString& title, const QString& meaning)
{
    m_state = state;
    m_title->setText(title);
    m_meaning->setText(meaning);
    m_meaning->setVisible(!meaning.isEmpty());
    const Severity severity = state == State::Good ? Severity::good
        : state == State::Bad                      ? Severity::bad
        : state == State::Verifying                ? Severity::busy
                                                   : Severity::neutral;
    m_icon->setPixmap(severityIcon(severity).pixmap(QSize(24, 24), devicePixelRatioF()));
    // A tint of the status colour over the window colour: readable in light and dark palettes.
    QPalette pal = palette();
    const QColor window = QPalette().color(QPalette::Window);
    const QColor tone = severityColor(severity, QPalette());
    QColor tint =
        QColor::fromRgbF(window.redF() * 0.85 + tone.redF() * 0.15, window.greenF() * 0.85 + tone.greenF() * 0.15,
                         window.blueF() * 0.85 + tone.blueF() * 0.15);
    pal.setColor(QPalette::Window, tint);
    setPalette(pal);
    setVisible(state != State::Hidden);
}

void FailureBanner::showVerifying(const QString& directory)
{
    apply(State::Verifying, tr("Verifying %1…").arg(printableText(directory)),
          tr("Every shard's size and hash is being checked in the background."));
}

void FailureBanner::showReport(const shardscope::VerifyReport& report)
{
    const shardscope::FailureSummary summary = shardscope::classify_failure(report);
    switch (summary.mode) {
    case shardscope::FailureMode::none: {
        QString meaning = tr("Every shard has its recorded size and hash and the manifest is consistent: "
                             "safe to resume from this step.");
        if (!report.leftover_tmp_files.empty())
            meaning += tr(" (%n leftover .tmp file(s) from an interrupted save can be deleted.)", nullptr,
                          int(report.leftover_tmp_files.size()));
        apply(State::Good,
              report.shards.size() == 1 ? tr("The shard is verified")
                                        : tr("All %1 shards verified").arg(report.shards.size()),
              meaning);
        return;
    }
    case shardscope::FailureMode::cancelled:
        apply(State::Cancelled, printableText(summary.title), printableText(summary.meaning));
        return;
    default: apply(State::Bad, printableText(summary.title), printableText(summary.meaning));
    }
}

void FailureBanner::showError(const QString& title, const QString& detail)
{
    apply(State::Bad, title, detail);
}

void FailureBanner::hideBanner()
{
    apply(State::Hidden, {}, {});
}

QString FailureBanner::title() const
{
    return m_title->text();
}

QString FailureBanner::text() const
{
    return m_title->text() + QLatin1Char('\n') + m_meaning->text();
}

} // namespace shardwidgets
