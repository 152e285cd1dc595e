#include "widgets/views/bubblereadout.h"

#include "widgets/style/format.h"
#include "widgets/jobs/pipelineplanner.h"

#include <QLabel>
#include <QVBoxLayout>

namespace shardwidgets {

BubbleReadout::BubbleReadout(PipelinePlanner* planner, QWidget* parent)
    : QFrame(parent), m_planner(planner), m_caption(new QLabel(this)), m_bubble(new QLabel(this)),
      m_detail(new QLabel(this))
{
    setFrameShape(QFrame::StyledPanel);
    auto* layout = new QVBoxLayout(this);
    m_caption->setText(tr("Pipeline bubble"));
    QFont big = m_bubble->font();
    big.setPointSizeF(big.pointSizeF() * 2.4);
    big.setBold(true);
    m_bubble->setFont(big);
    m_bubble->setObjectName(QStringLiteral("bubbleFigure"));
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_caption);
    layout->addWidget(m_bubble);
    layout->addWidget(m_detail);
    layout->addStretch(1);
    setMinimumWidth(270);
    connect(m_planner, &PipelinePlanner::planChanged, this, &BubbleReadout::refresh);
    refresh();
}

QString BubbleReadout::bubbleText() const
{
    const auto& plan = m_planner->plan();
    if (!plan)
        return {};
    return QStringLiteral("%1\u00a0%").arg(plan->timeline.bubble_fraction * 100.0, 0, 'f', 1);
}

QString BubbleReadout::detailText() const
{
    const auto& plan = m_planner->plan();
    if (!plan)
        return m_planner->error();
    const auto& t = plan->timeline;
    int64_t peakBytes = 0;
    int peakStage = 0;
    for (const auto& s : t.stage_stats)
        if (s.peak_activation_bytes > peakBytes) {
            peakBytes = s.peak_activation_bytes;
            peakStage = s.stage;
        }
    return tr("Closed form for uniform stages: %1\u00a0%\nMakespan: %2 ms\nPeak activation memory: %3 "
              "(stage %4)\nPartition: %5")
        .arg(t.closed_form_bubble * 100.0, 0, 'f', 1)
        .arg(t.makespan, 0, 'f', 3)
        .arg(formatBytes(uint64_t(std::max<int64_t>(0, peakBytes))))
        .arg(peakStage)
        .arg(m_planner->partitionName());
}

void BubbleReadout::refresh()
{
    const bool ok = m_planner->plan().has_value();
    m_bubble->setText(ok ? bubbleText() : tr("—"));
    m_detail->setText(detailText());
    m_bubble->setToolTip(tr("Idle stage-time / (stages × makespan), measured by the simulator"));
}

} // namespace shardwidgets
