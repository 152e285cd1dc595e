#include "widgets/views/failurebanner.h"

#include "widgets/style/format.h"
#include "widgets/style/statusstyle.h"

#include "core/report/report.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace shardwidgets {

FailureBanner::FailureBanner(QWidget* parent)
    : QFrame(parent), m_icon(new QLabel(this)), m_title(new QLabel(this)), m_meaning(new QLabel(this)),
      m_reshard(new QPushButton(this)), m_open(new QPushButton(this))
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
    m_reshard->setObjectName(QStringLiteral("bannerReshard"));
    m_reshard->hide();
    layout->addWidget(m_reshard, 0, Qt::AlignVCenter);
    connect(m_reshard, &QPushButton::clicked, this, [this] { emit reshardRequested(m_reshardTo); });
    m_open->setObjectName(QStringLiteral("bannerOpenSuggested"));
    m_open->hide();
    layout->addWidget(m_open, 0, Qt::AlignVCenter);
    connect(m_open, &QPushButton::clicked, this, [this] { emit openRequested(m_suggested); });
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
    m_reshardTo = 0; // offered again by showVerdict, for a verdict that still calls for it
    m_reshard->hide();
    m_suggested.clear();
    m_open->hide();
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
    showVerdict(shardscope::resume_verdict(report, nullptr));
}

void FailureBanner::showVerdict(const shardscope::ResumeVerdict& verdict, bool readingValues)
{
    using shardscope::ResumeState;
    QString meaning = printableText(verdict.meaning);
    if (verdict.no_checkpoint) {
        apply(State::NoCheckpoint, printableText(verdict.title), meaning);
        return;
    }
    switch (verdict.state) {
    case ResumeState::safe: apply(State::Good, printableText(verdict.title), meaning); break;
    case ResumeState::unchecked:
        if (verdict.cancelled)
            apply(State::Cancelled, printableText(verdict.title), meaning);
        else if (readingValues)
            apply(State::Verifying, printableText(verdict.title),
                  tr("The files are intact; the tensors' values are being read (Tensors tab) before this can be "
                     "called safe to resume."));
        else
            apply(State::Unchecked, printableText(verdict.title), meaning);
        break;
    default:
        if (!verdict.failed_files.empty())
            // A missing file's tensors lack its values, a damaged one's hold others: neither is saved.
            meaning += tr(" The values shown are not all the saved ones: %1 failed verification.")
                           .arg(printableText(QString::fromStdString(verdict.failed_files.front())));
        apply(State::Bad, printableText(verdict.title), meaning);
        if (verdict.state == ResumeState::needs_reshard && verdict.expected_world_size > 0) {
            m_reshardTo = verdict.expected_world_size;
            m_reshard->setText(tr("Reshard to %1 ranks…").arg(m_reshardTo));
            m_reshard->show();
        }
    }
}

void FailureBanner::showError(const QString& title, const QString& detail)
{
    apply(State::Bad, title, detail);
}

void FailureBanner::suggestCheckpoint(const QString& path, const QString& text)
{
    if (m_state != State::NoCheckpoint)
        return;
    m_suggested = path;
    m_meaning->setText(m_meaning->text() + QLatin1Char('\n') + text);
    m_open->setText(tr("Open %1").arg(printableText(QFileInfo(path).fileName())));
    m_open->setToolTip(printableText(path));
    m_open->show();
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
