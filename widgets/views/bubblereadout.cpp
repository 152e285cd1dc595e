#include "widgets/views/bubblereadout.h"

#include "widgets/style/format.h"
#include "widgets/jobs/pipelineplanner.h"

#include <QLabel>
#include <QHBoxLayout>
#include <QScrollArea>
#include <QVBoxLayout>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

namespace {

// The stage holding the most per GPU: the one the fit verdict is about.
int peakStage(const pl::StepPlan& step)
{
    int stage = 0;
    for (std::size_t s = 0; s < step.memory.size(); ++s)
        if (step.memory[s].total > step.memory[std::size_t(stage)].total)
            stage = int(s);
    return stage;
}

QString bytes(std::int64_t value)
{
    return formatBytes(uint64_t(std::max<std::int64_t>(0, value)));
}

QString mfuText(double mfu)
{
    return mfu > 0 ? QStringLiteral("%1\u00a0%").arg(mfu * 100.0, 0, 'f', 1) : BubbleReadout::tr("not known");
}

} // namespace

BubbleReadout::BubbleReadout(PipelinePlanner* planner, QWidget* parent)
    : QFrame(parent), m_planner(planner), m_caption(new QLabel(this)), m_bubble(new QLabel(this)),
      m_detail(new QLabel(this))
{
    setFrameShape(QFrame::StyledPanel);
    auto* layout = new QVBoxLayout(this);
    layout->setSpacing(2);
    layout->setContentsMargins(8, 4, 8, 4);
    m_caption->setText(tr("Pipeline bubble"));
    QFont big = m_bubble->font();
    big.setPointSizeF(big.pointSizeF() * 2.4);
    big.setBold(true);
    m_bubble->setFont(big);
    m_bubble->setObjectName(QStringLiteral("bubbleFigure"));
    m_detail->setWordWrap(true);
    m_detail->setTextFormat(Qt::PlainText);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // The caption beside the big figure: the step's lines below need the height more.
    auto* head = new QHBoxLayout;
    head->setSpacing(8);
    head->addWidget(m_bubble);
    head->addWidget(m_caption, 1, Qt::AlignBottom | Qt::AlignLeft);
    layout->addLayout(head);
    // A model's candidate adds lines: in a short window they scroll rather than being cut off.
    m_detail->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    auto* scroll = new QScrollArea(this);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidgetResizable(true);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // In a layout, so the wrapped label's height for the viewport's width is what the scroll
    // area sees (a bare label would be squeezed to the viewport and cut instead).
    auto* page = new QWidget(scroll);
    auto* pageLayout = new QVBoxLayout(page);
    pageLayout->setContentsMargins(0, 0, 0, 0);
    pageLayout->addWidget(m_detail);
    pageLayout->addStretch(1);
    scroll->setWidget(page);
    scroll->viewport()->setAutoFillBackground(false);
    page->setAutoFillBackground(false);
    // At least a few lines; the page's tabs below the timeline decide the rest.
    scroll->setMinimumHeight(m_detail->fontMetrics().lineSpacing() * 5);
    layout->addWidget(scroll, 1);
    // The scroll area asks for little: the width the step's longest lines need without wrapping.
    setMinimumWidth(
        fontMetrics().horizontalAdvance(QStringLiteral("Purple bands: all-reduce over dp 16, 12345.67 ms")) + 40);
    connect(m_planner, &PipelinePlanner::planChanged, this, &BubbleReadout::refresh);
    refresh();
}

QString BubbleReadout::ms(double value)
{
    return QStringLiteral("%1 ms").arg(value, 0, 'f', 2);
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
    const auto& step = m_planner->stepPlan();
    if (!step)
        return m_planner->error();
    const pl::Timeline& t = step->plan.timeline;
    const pl::TrainingOptions& o = step->options;
    QStringList lines;
    lines << tr("Closed form for uniform stages: %1\u00a0%").arg(t.closed_form_bubble * 100.0, 0, 'f', 1);
    // The sum the search table's step time is made of, as shardctl schedule computes it: the
    // end of the last all-reduce = makespan + the part of the all-reduce nothing hid.
    lines << tr("Step time: %1").arg(ms(step->step_time));
    lines << tr("  = makespan %1").arg(ms(t.makespan));
    lines << tr("  + exposed all-reduce %1").arg(ms(step->exposed_allreduce_ms));
    if (m_planner->modelContext()) {
        if (const auto rate = m_planner->throughput())
            lines << tr("  at %1 TFLOP/s per GPU, MFU %2").arg(rate->tflops_per_gpu, 0, 'f', 1).arg(mfuText(rate->mfu));
        // The busiest stage sets the pace; its collectives are inside the makespan, not added.
        int busiest = 0;
        for (std::size_t s = 0; s < t.stage_stats.size(); ++s)
            if (t.stage_stats[s].busy > t.stage_stats[std::size_t(busiest)].busy)
                busiest = int(s);
        const std::vector<pl::LayerComm> stages = pl::stage_comm(m_planner->pieceCommunication(), step->plan);
        if (std::size_t(busiest) < stages.size()) {
            const pl::LayerComm& c = stages[std::size_t(busiest)];
            lines << tr("Inside the makespan, stage %1 (busiest) spends %2 in tp/cp collectives, %3 in expert "
                        "all-to-all")
                         .arg(busiest)
                         .arg(ms(c.tp_fwd + c.tp_bwd + c.cp_fwd + c.cp_bwd), ms(c.ep_fwd + c.ep_bwd));
        }
    }
    // What the purple bands on the timeline are, and why it runs past the last op.
    if (pl::gradient_replicas(o) > 1) { // dp x cp ranks reduce a weight's gradients
        QString line = o.cp > 1
            ? tr("Purple bands: all-reduce over dp %1 x cp %2, %3").arg(o.dp).arg(o.cp).arg(ms(step->allreduce_ms))
            : tr("Purple bands: all-reduce over dp %1, %2").arg(o.dp).arg(ms(step->allreduce_ms));
        if (o.overlap_allreduce)
            line += tr(", %1 hidden").arg(ms(std::max(0.0, step->allreduce_ms - step->exposed_allreduce_ms)));
        if (o.fp32_grads)
            line += tr(" (fp32 gradients)");
        lines << line;
    } else {
        lines << tr("dp 1: no all-reduce, no purple bands");
    }
    if (o.fp32_grads) // the memory table's gradients column is twice the 16-bit one's
        lines << tr("Gradients in fp32: 4 bytes a parameter");

    const int stage = peakStage(*step);
    lines << tr("Peak memory: %1 per GPU (stage %2)").arg(bytes(step->peak_memory_bytes)).arg(stage);
    if (!o.gpu_memory_bytes) {
        lines << tr("  no GPU memory set: no fit verdict");
    } else if (step->fits) {
        lines << tr("  fits in %1 (%2 to spare)")
                     .arg(bytes(*o.gpu_memory_bytes), bytes(*o.gpu_memory_bytes - step->peak_memory_bytes));
    } else {
        int over = 0;
        for (const pl::StageMemory& m : step->memory)
            over += !m.fits;
        lines << tr("  does NOT fit in %1: %2 over, %3/%4 stages")
                     .arg(bytes(*o.gpu_memory_bytes), bytes(step->peak_memory_bytes - *o.gpu_memory_bytes))
                     .arg(over)
                     .arg(int(step->memory.size()));
    }
    lines << tr("Partition: %1").arg(m_planner->partitionName());
    return lines.join(QLatin1Char('\n'));
}

QString BubbleReadout::modelSummary(const PipelinePlanner& planner)
{
    const auto& step = planner.stepPlan();
    if (!step)
        return {};
    QString text = tr("step time %1 = makespan %2 + exposed all-reduce %3")
                       .arg(ms(step->step_time), ms(step->plan.timeline.makespan), ms(step->exposed_allreduce_ms));
    const auto& limit = step->options.gpu_memory_bytes;
    if (limit)
        text += step->fits ? tr(" · fits: %1 of %2").arg(bytes(step->peak_memory_bytes), bytes(*limit))
                           : tr(" · does NOT fit: %1 of %2").arg(bytes(step->peak_memory_bytes), bytes(*limit));
    if (const auto rate = planner.throughput())
        text += tr(" · %1 TFLOP/s per GPU, MFU %2").arg(rate->tflops_per_gpu, 0, 'f', 1).arg(mfuText(rate->mfu));
    return text;
}

void BubbleReadout::refresh()
{
    const bool ok = m_planner->plan().has_value();
    m_bubble->setText(ok ? bubbleText() : tr("—"));
    m_detail->setText(detailText());
    m_bubble->setToolTip(tr("Idle stage-time / (stages × makespan), measured by the simulator"));
}

} // namespace shardwidgets
