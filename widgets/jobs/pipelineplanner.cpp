#include "widgets/jobs/pipelineplanner.h"

#include "core/util/error.h"
#include "widgets/style/format.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <stdexcept>

namespace shardwidgets {

namespace pl = shardscope::pipeline;

PipelinePlanner::PipelinePlanner(QObject* parent) : QObject(parent)
{
    m_spec.kind = pl::ScheduleKind::one_f_one_b;
    m_spec.stages = 4;
    m_spec.microbatches = 8;
    m_profile = pl::uniform_profile(32);
    m_profile.name = "uniform (32 layers)";
    repartition();
}

QStringList PipelinePlanner::bundledProfiles()
{
    QStringList paths;
    const QDir dir(QStringLiteral(":/profiles"));
    for (const QString& name :
         dir.entryList({QStringLiteral("*.json"), QStringLiteral("*.csv")}, QDir::Files, QDir::Name))
        paths.append(dir.filePath(name));
    return paths;
}

void PipelinePlanner::setProfile(pl::Profile profile)
{
    forgetReset();
    m_model.reset(); // its collectives were this profile's
    // What only a Model search candidate sets, and no control shows, is its own too.
    m_options.ep = 1;
    m_options.cp = 1;
    m_options.dp_link_gbps.reset();
    m_profile = std::move(profile);
    if (m_method == pl::PartitionMethod::manual)
        m_method = pl::PartitionMethod::compute;
    emit profileChanged();
    repartition();
}

bool PipelinePlanner::loadProfile(const QString& path, QString* error)
{
    // Read through QFile so that resource paths work; parse with core's loaders.
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        if (error)
            *error = tr("%1: cannot open the profile: %2").arg(path, file.errorString());
        return false;
    }
    if (file.size() > (64 << 20)) {
        if (error)
            *error = tr("%1: the profile is larger than 64 MiB").arg(path);
        return false;
    }
    const QByteArray bytes = file.readAll();
    const std::string text(bytes.constData(), std::size_t(bytes.size()));
    const std::string origin = path.toStdString();
    try {
        pl::Profile profile = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive)
            ? pl::parse_profile_csv(text, origin)
            : pl::parse_profile_json(text, origin);
        if (profile.name.empty())
            profile.name = QFileInfo(path).completeBaseName().toStdString();
        profile.source = origin;
        setProfile(std::move(profile));
        return true;
    } catch (const shardscope::Error& e) {
        if (error)
            *error = printableText(e.what());
        return false;
    }
}

void PipelinePlanner::setSpec(pl::ScheduleSpec spec)
{
    if (spec.kind == pl::ScheduleKind::custom) {
        if (!m_custom) { // nothing opened yet: keep what is shown
            emit planChanged();
            return;
        }
        const double latency = spec.p2p_latency_ms;
        spec = m_custom->spec; // a file's op lists fix N, M and the chunks
        spec.p2p_latency_ms = latency;
    }
    spec.stages = std::clamp(spec.stages, 1, kMaxStages);
    spec.microbatches = std::clamp(spec.microbatches, 1, kMaxMicrobatches);
    if (spec.kind != pl::ScheduleKind::custom)
        spec.virtual_stages = spec.kind == pl::ScheduleKind::interleaved
            ? std::clamp(spec.virtual_stages, 2, kMaxVirtualStages)
            : pl::default_virtual_stages(spec.kind); // 2 for the V kinds, else 1
    const bool piecesChanged = spec.stages * spec.virtual_stages != m_spec.stages * m_spec.virtual_stages;
    forgetReset();
    const Cut previous{.spec = m_spec, .boundaries = m_boundaries};
    m_spec = spec;
    if (piecesChanged) {
        const bool dropsManualCut = m_method == pl::PartitionMethod::manual;
        if (dropsManualCut)
            m_method = pl::PartitionMethod::compute;
        repartition();
        if (dropsManualCut) {
            // Pieces are placed by chunk (partition.h): a cut of N pieces says nothing about where N * v (or
            // another N's) pieces should end, so it cannot be carried over; it can be put back.
            m_undo = previous;
            m_resetNotice = tr("Your dragged partition (%1 pieces) does not apply to %2 pieces; re-balanced by "
                               "compute.")
                                .arg(int(previous.boundaries.size()) + 1)
                                .arg(spec.stages * spec.virtual_stages);
            emit manualCutReset(m_resetNotice);
        }
    } else {
        m_schedule.reset();
        replan();
    }
}

void PipelinePlanner::setScheduleKind(pl::ScheduleKind kind)
{
    auto spec = m_spec;
    spec.kind = kind;
    if (kind == pl::ScheduleKind::interleaved && spec.virtual_stages < 2)
        spec.virtual_stages = 2;
    setSpec(spec);
}

bool PipelinePlanner::setCustomSchedule(pl::Schedule schedule, QString* error)
{
    if (schedule.spec.stages > kMaxStages || schedule.spec.microbatches > kMaxMicrobatches) {
        if (error)
            *error = tr("The schedule runs %1 stages and %2 microbatches; the planner shows at most %3 and %4 "
                        "(shardctl schedule --from-csv takes any size).")
                         .arg(schedule.spec.stages)
                         .arg(schedule.spec.microbatches)
                         .arg(kMaxStages)
                         .arg(kMaxMicrobatches);
        return false;
    }
    m_custom = std::move(schedule);
    auto spec = m_spec;
    spec.kind = pl::ScheduleKind::custom;
    // Same piece count or not, the op lists are new: forget the cached schedule either way.
    m_schedule.reset();
    setSpec(spec);
    return true;
}

void PipelinePlanner::setStages(int stages)
{
    auto spec = m_spec;
    spec.stages = stages;
    setSpec(spec);
}

void PipelinePlanner::setMicrobatches(int microbatches)
{
    auto spec = m_spec;
    spec.microbatches = microbatches;
    setSpec(spec);
}

void PipelinePlanner::setVirtualStages(int chunks)
{
    auto spec = m_spec;
    spec.virtual_stages = chunks;
    setSpec(spec);
}

bool PipelinePlanner::undoReset()
{
    if (!m_undo)
        return false;
    const Cut cut = std::move(*m_undo);
    forgetReset();
    m_spec = cut.spec;
    m_method = pl::PartitionMethod::manual;
    m_boundaries = cut.boundaries;
    m_schedule.reset();
    replan();
    return m_step.has_value();
}

void PipelinePlanner::forgetReset()
{
    m_undo.reset();
    m_resetNotice.clear();
}

void PipelinePlanner::rebalance(pl::PartitionMethod method)
{
    forgetReset();
    m_method = method;
    repartition();
}

bool PipelinePlanner::setBoundaries(const std::vector<int>& boundaries)
{
    try {
        pl::validate_boundaries(int(m_profile.layers.size()), m_spec.stages * m_spec.virtual_stages, boundaries);
    } catch (const shardscope::Error& e) {
        m_error = printableText(e.what());
        return false;
    }
    forgetReset();
    m_method = pl::PartitionMethod::manual;
    m_boundaries = boundaries;
    replan();
    return true;
}

bool PipelinePlanner::moveBoundary(int index, int edge)
{
    if (index < 0 || index >= int(m_boundaries.size()))
        return false;
    std::vector<int> moved = m_boundaries;
    const int lowest = index == 0 ? 1 : moved[std::size_t(index - 1)] + 1;
    const int highest =
        index + 1 == int(moved.size()) ? int(m_profile.layers.size()) - 1 : moved[std::size_t(index + 1)] - 1;
    if (lowest > highest)
        return false;
    moved[std::size_t(index)] = std::clamp(edge, lowest, highest);
    if (moved == m_boundaries)
        return false;
    return setBoundaries(moved);
}

void PipelinePlanner::setTrainingOptions(const pl::TrainingOptions& options)
{
    const bool recut = options.recompute != m_options.recompute && m_method != pl::PartitionMethod::manual;
    forgetReset();
    m_options = options;
    if (recut)
        repartition();
    else
        replan();
}

bool PipelinePlanner::applyCandidate(const pl::Candidate& candidate, const pl::SearchSpec& search)
{
    if (candidate.pp > kMaxStages || candidate.microbatches > kMaxMicrobatches ||
        candidate.virtual_stages > kMaxVirtualStages) {
        m_error = tr("pp %1 with %2 microbatches and v %3 is outside the planner's range (at most %4 stages, "
                     "%5 microbatches, %6 chunks)")
                      .arg(candidate.pp)
                      .arg(candidate.microbatches)
                      .arg(candidate.virtual_stages)
                      .arg(kMaxStages)
                      .arg(kMaxMicrobatches)
                      .arg(kMaxVirtualStages);
        return false;
    }
    forgetReset();
    const pl::ScheduleSpec spec{.kind = candidate.schedule,
                                .stages = candidate.pp,
                                .microbatches = candidate.microbatches,
                                .virtual_stages = candidate.virtual_stages,
                                .p2p_latency_ms = search.p2p_latency_ms};
    const pl::TrainingOptions options{.dp = candidate.dp,
                                      .zero = candidate.zero,
                                      .recompute = candidate.recompute,
                                      .link_gbps = search.link_gbps,
                                      .overlap_allreduce = search.overlap_allreduce,
                                      .fp32_grads = search.fp32_grads,
                                      .gpu_memory_bytes = search.gpu_memory_bytes};
    try {
        // The candidate's cut as the search made it: "compute" on the recompute-adjusted costs,
        // or the fitting cut spelled out as manual boundaries.
        const pl::PartitionSpec cut = pl::parse_partition_spec(candidate.partition);
        m_boundaries =
            pl::partition(pl::with_recompute(m_profile, candidate.recompute), spec.stages * spec.virtual_stages, cut);
        m_method = cut.method;
    } catch (const std::exception& e) {
        m_error = printableText(e.what());
        return false;
    }
    m_spec = spec;
    m_options = options;
    m_schedule.reset();
    replan();
    return m_step.has_value();
}

bool PipelinePlanner::applyModelCandidate(const pl::Candidate& candidate, pl::CandidateRun run, ModelContext context)
{
    if (candidate.pp > kMaxStages || candidate.microbatches > kMaxMicrobatches ||
        candidate.virtual_stages > kMaxVirtualStages) {
        m_error = tr("pp %1 with %2 microbatches and v %3 is outside the planner's range (at most %4 stages, "
                     "%5 microbatches, %6 chunks)")
                      .arg(candidate.pp)
                      .arg(candidate.microbatches)
                      .arg(candidate.virtual_stages)
                      .arg(kMaxStages)
                      .arg(kMaxMicrobatches)
                      .arg(kMaxVirtualStages);
        return false;
    }
    forgetReset();
    context.candidate = candidate;
    context.comm = std::move(run.comm);
    m_profile = std::move(run.model.profile);
    m_profile.name = QStringLiteral("%1 · tp %2%3 · cp %4 · ep %5 · b %6")
                         .arg(context.name)
                         .arg(candidate.tp)
                         .arg(candidate.sp ? QStringLiteral(" sp") : QString())
                         .arg(candidate.cp)
                         .arg(candidate.ep)
                         .arg(candidate.micro_batch_size)
                         .toStdString();
    m_spec = run.schedule;
    m_boundaries = std::move(run.boundaries);
    // The search's cut: compute, or the fitting cut spelled out as manual boundaries.
    m_method = pl::parse_partition_spec(candidate.partition).method;
    m_options = run.options;
    m_model = std::move(context);
    m_schedule.reset();
    emit profileChanged();
    replan();
    return m_step.has_value();
}

std::vector<pl::LayerComm> PipelinePlanner::pieceCommunication() const
{
    if (!m_model || !m_step)
        return {};
    return pl::piece_comm(m_model->comm, m_step->plan.pieces, m_options.recompute);
}

std::optional<pl::Throughput> PipelinePlanner::throughput() const
{
    if (!m_model || !m_step)
        return std::nullopt;
    const pl::Candidate& c = m_model->candidate;
    const int mbs = m_profile.micro_batch_size.value_or(c.micro_batch_size);
    // In 64 bits: the planner's controls allow products past 2^31.
    return pl::throughput(m_model->flops_per_sample, std::int64_t(m_spec.microbatches) * m_options.dp * mbs,
                          std::int64_t(c.tp) * c.cp * m_spec.stages * m_options.dp, m_model->peak_tflops,
                          m_step->step_time);
}

QString PipelinePlanner::partitionName() const
{
    pl::PartitionSpec spec{m_method, {}};
    if (m_method == pl::PartitionMethod::manual)
        spec.manual_boundaries = m_boundaries;
    return QString::fromStdString(pl::to_string(spec));
}

void PipelinePlanner::repartition()
{
    m_schedule.reset();
    try {
        const int pieces = m_spec.stages * m_spec.virtual_stages;
        // Balanced on the costs the schedule will run (recomputation lengthens backwards), as
        // the search and `shardctl schedule --partition compute` balance them.
        m_boundaries = pl::partition(pl::with_recompute(m_profile, m_options.recompute), pieces,
                                     pl::PartitionSpec{m_method, m_boundaries});
    } catch (const std::exception& e) {
        m_boundaries.clear();
        m_plan.reset();
        m_step.reset();
        m_error = printableText(e.what());
        emit planChanged();
        return;
    }
    replan();
}

void PipelinePlanner::replan()
{
    try {
        if (!m_schedule && m_spec.kind == pl::ScheduleKind::custom && m_custom) {
            m_schedule = *m_custom;
            m_schedule->spec.p2p_latency_ms = m_spec.p2p_latency_ms;
        }
        if (!m_schedule)
            m_schedule = pl::build_schedule(m_spec);
        m_step = pl::make_step_plan(m_profile, *m_schedule, m_boundaries, m_options);
        m_plan = m_step->plan;
        m_error.clear();
    } catch (const std::exception& e) { // core's Error, or invalid_argument for an option
        m_schedule.reset();
        m_plan.reset();
        m_step.reset();
        m_error = printableText(e.what());
    }
    emit planChanged();
}

} // namespace shardwidgets
