// The search over every parallel degree, ZeRO stage, recomputation and micro batch size of a
// model given by its shape (model_search.h), pruned by exact bounds.
#include "core/pipeline/model_search.h"

#include "core/pipeline/fit_partition.h"
#include "core/pipeline/model_shape.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

namespace shardscope::pipeline {
namespace {

// A configuration's search for a cut that fits, when the interleaved or V cuts are more than a
// tenth of what `plan --profile` enumerates: a ten-thousandth of the local search it allows one
// (fit_partition.h), since thousands of configurations may each ask (the 405B benchmark's took
// 31 s at the full budget); a descent cut short keeps the best cut so far, still checked.
constexpr std::int64_t kFitVisits = kSearchVisits / 10000;
constexpr std::uint64_t kFitEnumeratedCuts = kEnumeratedCuts / 10;

std::string manual_partition(const std::vector<int>& boundaries)
{
    return to_string(PartitionSpec{.method = PartitionMethod::manual, .manual_boundaries = boundaries});
}

[[noreturn]] void bad_search(const std::string& sentence)
{
    throw Error(ProblemKind::invalid_argument, sentence);
}

// One (micro batch, t, cp, ep): the profile every pp, dp and schedule shares.
struct Shape {
    int mbs = 1, tp = 1, cp = 1, ep = 1;
    ModelProfile model;
    std::vector<Profile> adjusted; // per recompute mode
    std::vector<double> work_ms; // per mode: every layer's forward + backward, one microbatch
    std::vector<double> kept_bytes; // per mode: every layer's kept activations, one microbatch
    std::int64_t params = 0; // per GPU, summed over layers
    std::int64_t expert_params = 0;
};

struct Config {
    std::size_t shape = 0;
    std::size_t mode = 0; // index into the recompute modes
    int pp = 1, dp = 1, v = 1, zero = 0, microbatches = 1;
    ScheduleKind kind = ScheduleKind::one_f_one_b;
    double time_bound = 0.0;
};

// Every degree dividing n, not only powers of two: 3072 GPUs or 60 experts split three ways too.
std::vector<int> divisors(int n, const std::vector<int>& fixed)
{
    if (!fixed.empty())
        return fixed;
    std::vector<int> out;
    for (int d = 1; d <= std::min(n, 4096); ++d) // shape_profile's limit
        if (n % d == 0)
            out.push_back(d);
    return out;
}

// The mean stage's model state in bytes: a lower bound on the peak (model_search.h).
double state_bound(const Shape& s, int pp, int dp, int zero, bool fp32_grads)
{
    const ParamBytes dense = bytes_per_param(zero, dp, fp32_grads),
                     expert = bytes_per_param(zero, std::max(1, dp / s.ep), fp32_grads);
    return (static_cast<double>(s.params - s.expert_params) * dense.total() +
            static_cast<double>(s.expert_params) * expert.total()) /
        pp;
}

// The mean stage's data-parallel block after the makespan (training.h's U, times the final part).
double dp_bound(const Shape& s, int pp, int dp, int zero, bool fp32_grads, int microbatches, double gbps)
{
    const double dense = 2.0 * static_cast<double>(s.params - s.expert_params) / pp;
    const double experts = 2.0 * static_cast<double>(s.expert_params) / pp;
    const auto ring = [&](double bytes, int ranks) {
        return ranks > 1 && gbps > 0.0 ? 2.0 * (ranks - 1) / ranks * bytes * 8.0 / (gbps * 1e6) : 0.0;
    };
    const double unit = 0.5 * (ring(dense, dp) + ring(experts, std::max(1, dp / s.ep)));
    return zero_traffic(zero, microbatches, fp32_grads).final * unit;
}

// The training step of one configuration: its data-parallel and pipeline links from the mesh.
TrainingOptions step_options(const ModelSearchSpec& spec, const GroupLinks& mesh, int dp, int cp, int zero,
                             Recompute mode, int ep)
{
    return TrainingOptions{.dp = dp,
                           .cp = cp,
                           .zero = zero,
                           .recompute = mode,
                           .link_gbps = mesh.pp.gbps,
                           .dp_link_gbps = mesh.dp.gbps,
                           .ep = ep,
                           .overlap_allreduce = spec.overlap_allreduce,
                           .fp32_grads = spec.fp32_grads,
                           .gpu_memory_bytes = spec.gpu_memory_bytes};
}

Workload shape_workload(const ModelSearchSpec& spec, int micro_batch_size)
{
    return Workload{
        .seq_len = spec.seq_len, .micro_batch_size = micro_batch_size, .device_tflops = spec.device_tflops, .mfu = 1.0};
}

class Searcher {
public:
    Searcher(const ModelConfig& config, const ModelSearchSpec& spec, const std::atomic<bool>* cancel)
        : m_config(config), m_spec(spec), m_cancel(cancel)
    {}

    ModelSearchResult run();

private:
    void enumerate_shapes();
    void enumerate_configs(std::vector<Config>& configs, std::vector<Config>& too_big);
    // Simulates `config` unless, with its cut known, a bound shows it cannot beat `limit`.
    void evaluate(const Config& config, double limit = std::numeric_limits<double>::infinity());
    void set_step(Candidate& out, std::string partition, const StepPlan& step) const;
    void recut_leanest(Candidate& c) const;
    double cut_bound(const Config& c, const Shape& s, const std::vector<int>& cut, const GroupLinks& mesh) const;
    GroupLinks links(const Shape& s, int pp, int dp) const
    {
        return mesh_links(m_spec.links, Mesh{.tp = s.tp, .cp = s.cp, .ep = s.ep, .dp = dp, .pp = pp});
    }

    const ModelConfig& m_config;
    const ModelSearchSpec& m_spec;
    const std::atomic<bool>* m_cancel;
    std::vector<Recompute> m_modes;
    std::vector<ScheduleKind> m_kinds;
    bool m_factorised = false; // some (pp, dp) split the GPUs and the batch
    std::vector<Shape> m_shapes;
    double m_flops_per_sample = 0.0;
    int m_layers = 0;
    struct Scheduled {
        Schedule schedule;
        std::optional<Holding> holding; // what its cuts' memory is computed from, once asked for
    };
    std::map<std::tuple<int, int, int, int, double>, Scheduled> m_schedules;
    // Per (shape, recompute mode, pieces): the compute cut and its busiest piece's forward and
    // backward, which no cut goes below (the cut is the exact min-max).
    struct ComputeCut {
        std::vector<int> boundaries;
        double busiest_ms = 0.0;
    };
    std::map<std::tuple<std::size_t, std::size_t, int>, ComputeCut> m_cuts;
    ModelSearchResult m_result;
};

void Searcher::enumerate_shapes()
{
    const std::vector<int> sizes =
        m_spec.micro_batch_sizes.empty() ? std::vector<int>{1, 2, 4} : m_spec.micro_batch_sizes;
    const int experts = m_config.experts > 1 ? m_config.experts : 1;
    for (int mbs : sizes) {
        if (mbs < 1 || m_spec.global_batch % mbs != 0)
            continue;
        for (int t : divisors(m_spec.gpus, m_spec.tp)) {
            if (t < 1 || m_spec.gpus % t != 0 || !tensor_parallel_misfit(m_config, t).empty())
                continue;
            for (int cp : divisors(m_spec.gpus / t, m_spec.cp)) {
                if (cp < 1 || (m_spec.gpus / t) % cp != 0 || m_spec.seq_len % cp != 0)
                    continue;
                for (int ep : divisors(experts, m_spec.ep)) {
                    if (ep < 1 || experts % ep != 0 || (m_spec.gpus / t / cp) % ep != 0)
                        continue;
                    Shape s{.mbs = mbs, .tp = t, .cp = cp, .ep = ep};
                    const Workload work = shape_workload(m_spec, mbs);
                    const Parallelism parallel{.tp = t, .sequence_parallel = t > 1, .cp = cp, .ep = ep};
                    s.model = parallel_profile(m_config, work, parallel, links(s, 1, ep));
                    for (const Layer& layer : s.model.profile.layers) {
                        s.params += layer.params;
                        s.expert_params += layer.expert_params;
                    }
                    for (Recompute mode : m_modes) {
                        Profile adjusted = with_recompute(s.model.profile, mode);
                        double work_ms = 0.0, kept = 0.0;
                        for (const Layer& layer : adjusted.layers) {
                            work_ms += layer.fwd_ms + layer.bwd_ms;
                            kept += static_cast<double>(layer.activation_bytes);
                        }
                        s.adjusted.push_back(std::move(adjusted));
                        s.work_ms.push_back(work_ms);
                        s.kept_bytes.push_back(kept);
                    }
                    m_shapes.push_back(std::move(s));
                }
            }
        }
    }
}

void Searcher::enumerate_configs(std::vector<Config>& configs, std::vector<Config>& too_big)
{
    const std::vector<int> stages = searched_zero_stages(m_spec.zero);
    for (std::size_t i = 0; i < m_shapes.size(); ++i) {
        const Shape& s = m_shapes[i];
        const int rest = m_spec.gpus / (s.tp * s.cp);
        for (int pp = 1; pp <= std::min(rest, m_layers); ++pp) {
            if (rest % pp != 0)
                continue;
            const int dp = rest / pp;
            const int samples = m_spec.global_batch / s.mbs;
            if (dp % s.ep != 0 || samples % dp != 0)
                continue;
            const int microbatches = samples / dp;
            m_factorised = true;
            const GroupLinks mesh = links(s, pp, dp);
            for (ScheduleKind kind : m_kinds) {
                const std::vector<int> chunks =
                    searched_virtual_stages(kind, pp, microbatches, m_layers, m_spec.max_virtual_stages);
                for (int v : chunks)
                    for (int zero : stages) {
                        if (zero_repeats(zero, dp * s.cp, stages))
                            continue; // nothing to shard: the same as the first stage tried
                        for (std::size_t r = 0; r < m_modes.size(); ++r) {
                            ++m_result.space;
                            Config c{.shape = i,
                                     .mode = r,
                                     .pp = pp,
                                     .dp = dp,
                                     .v = v,
                                     .zero = zero,
                                     .microbatches = microbatches,
                                     .kind = kind};
                            c.time_bound = microbatches * s.work_ms[r] / pp +
                                (m_spec.overlap_allreduce
                                     ? 0.0
                                     : dp_bound(s, pp, dp * s.cp, zero, m_spec.fp32_grads, microbatches, mesh.dp.gbps));
                            if (state_bound(s, pp, dp * s.cp, zero, m_spec.fp32_grads) >
                                static_cast<double>(m_spec.gpu_memory_bytes)) {
                                ++m_result.pruned_memory;
                                too_big.push_back(c);
                            } else {
                                configs.push_back(c);
                            }
                        }
                    }
            }
        }
    }
}

// With the cut known: stage s cannot start before the first microbatch's forward has crossed the
// pieces before its first one (pieces 0 .. s - 1 on stages 0 .. s - 1 in either placement, with
// their sends), runs M x its pieces' forward and backward, and, where the backward is not split,
// ends with a B whose gradient still has to travel back through the pieces below it; the step
// then waits for the data-parallel block (training.h). A lower bound on what make_step_plan finds
// for every kind: a split backward (zb-h1, zb-h2, zb-v, dualpipe-v) may end a stage on a W that
// nothing follows (ZB-H2 and the V kinds defer W passes to the very end), so it adds no tail.
double Searcher::cut_bound(const Config& c, const Shape& s, const std::vector<int>& cut, const GroupLinks& mesh) const
{
    const ScheduleSpec spec{.kind = c.kind, .stages = c.pp, .virtual_stages = c.v};
    std::vector<PieceCost> pieces = piece_costs(s.adjusted[c.mode], c.pp, cut, placement_of(spec));
    const int n = c.pp;
    std::vector<double> busy(n, 0.0), forward(n, 0.0), start(n, 0.0), tail(n, 0.0);
    std::vector<std::int64_t> experts(n, 0);
    for (PieceCost& piece : pieces) {
        if (n > 1)
            piece.send_ms = transfer_ms(piece.output_bytes, mesh.pp.gbps);
        busy[piece.stage] += c.microbatches * (piece.fwd_ms + piece.bwd_ms);
        forward[piece.stage] += c.microbatches * piece.fwd_ms;
        for (int l = piece.first_layer; l <= piece.last_layer; ++l)
            experts[piece.stage] += s.model.profile.layers[static_cast<std::size_t>(l)].expert_params;
    }
    for (int stage = 1; stage < n; ++stage) {
        const PieceCost& before = pieces[static_cast<std::size_t>(stage - 1)];
        start[stage] = start[stage - 1] + before.fwd_ms + before.send_ms + mesh.pp.latency_ms;
    }
    if (!splits_backward(c.kind)) {
        // Looped (gpipe, 1f1b, interleaved): the last op is a B on some chunk, piece chunk * N + s,
        // followed at least by the B's of that chunk's pieces on the stages before (the pieces of
        // lower chunks come later still, so stopping at the chunk's first piece under-counts).
        std::fill(tail.begin(), tail.end(), std::numeric_limits<double>::infinity());
        for (int chunk = 0; chunk < c.v; ++chunk) {
            double back = 0.0;
            for (int stage = 0; stage < n; ++stage) {
                tail[stage] = std::min(tail[stage], back);
                const PieceCost& piece = pieces[static_cast<std::size_t>(chunk * n + stage)];
                back += piece.bwd_ms + piece.send_ms + mesh.pp.latency_ms;
            }
        }
    }
    double makespan = 0.0;
    for (int stage = 0; stage < n; ++stage)
        makespan = std::max(makespan, start[stage] + busy[stage] + tail[stage]);
    const int replicas = c.dp * s.cp; // gradients are reduced over dp x cp (training.h)
    if (replicas == 1)
        return makespan;
    const ZeroTraffic traffic = zero_traffic(c.zero, c.microbatches, m_spec.fp32_grads);
    const int expert_dp = std::max(1, replicas / s.ep);
    double step = makespan;
    for (int stage = 0; stage < n; ++stage) {
        std::int64_t params = 0;
        for (const PieceCost& piece : pieces)
            if (piece.stage == stage)
                params += piece.params;
        const double unit = 0.5 *
            (ring_allreduce_ms(2 * (params - experts[stage]), replicas, mesh.dp.gbps) +
             ring_allreduce_ms(2 * experts[stage], expert_dp, mesh.dp.gbps));
        const double ms = traffic.final * unit + std::max(0.0, (traffic.total - traffic.final) * unit - busy[stage]);
        // Overlapped, the block starts with the last microbatch's backward, after every forward
        // of the stage (they run in microbatch order).
        step = std::max(step, (m_spec.overlap_allreduce ? start[stage] + forward[stage] : makespan) + ms);
    }
    return step;
}

void Searcher::evaluate(const Config& c, double limit)
{
    if (m_cancel && m_cancel->load(std::memory_order_relaxed))
        throw Error(ProblemKind::cancelled, "the plan search was cancelled");
    const Shape& s = m_shapes[c.shape];
    const GroupLinks mesh = links(s, c.pp, c.dp);
    const auto schedule_key = std::tuple(static_cast<int>(c.kind), c.pp, c.microbatches, c.v, mesh.pp.latency_ms);
    auto schedule = m_schedules.find(schedule_key);
    if (schedule == m_schedules.end()) {
        try {
            Schedule built = build_schedule(ScheduleSpec{.kind = c.kind,
                                                         .stages = c.pp,
                                                         .microbatches = c.microbatches,
                                                         .virtual_stages = c.v,
                                                         .p2p_latency_ms = mesh.pp.latency_ms});
            schedule = m_schedules.emplace(schedule_key, Scheduled{.schedule = std::move(built)}).first;
        } catch (const Error&) {
            ++m_result.search.skipped; // too large to simulate
            return;
        }
    }
    const auto cut_key = std::tuple(c.shape, c.mode, c.pp * c.v);
    auto compute_cut = m_cuts.find(cut_key);
    if (compute_cut == m_cuts.end()) {
        ComputeCut made{
            .boundaries = partition(s.adjusted[c.mode], c.pp * c.v, PartitionSpec{.method = PartitionMethod::compute})};
        const std::vector<Layer>& layers = s.adjusted[c.mode].layers;
        for (std::size_t piece = 0, first = 0; piece <= made.boundaries.size(); ++piece) {
            const std::size_t end =
                piece < made.boundaries.size() ? static_cast<std::size_t>(made.boundaries[piece]) : layers.size();
            double ms = 0.0;
            for (; first < end; ++first)
                ms += layers[first].fwd_ms + layers[first].bwd_ms;
            made.busiest_ms = std::max(made.busiest_ms, ms);
        }
        compute_cut = m_cuts.emplace(cut_key, std::move(made)).first;
    }
    const TrainingOptions options = step_options(m_spec, mesh, c.dp, s.cp, c.zero, m_modes[c.mode], s.ep);
    Scheduled& scheduled = schedule->second;
    const std::vector<int>* cut = &compute_cut->second.boundaries;
    // A stage is busy M times its pieces' forward and backward: a bound on every cut's step.
    const double any_cut_bound = c.microbatches * compute_cut->second.busiest_ms;
    // The configuration runs on the fastest cut that fits (the smallest busiest piece, as
    // `--partition compute` minimises): the compute cut when it does, else the one
    // memory_fit_boundaries finds (fit_partition.h: 1F1B's first stage holds pp microbatches'
    // activations and its last one, so a cut that gives the early stages fewer layers can fit
    // where the even one does not). It is looked for only when it could enter the top; with as
    // many pieces as layers the compute cut is the only one.
    std::optional<std::vector<int>> fitted;
    if (c.pp * c.v < m_layers) {
        if (!scheduled.holding)
            scheduled.holding = holding_of(scheduled.schedule);
        const bool fits =
            cut_peak_memory(s.model.profile, scheduled.schedule, options, *cut, &*scheduled.holding).value_or(0) <=
            m_spec.gpu_memory_bytes;
        if (!fits && std::isfinite(limit) && any_cut_bound * (1.0 - 1e-9) > limit) {
            ++m_result.pruned_time;
            return;
        }
        if (!fits)
            fitted = memory_fit_boundaries(s.model.profile, scheduled.schedule, options, m_spec.gpu_memory_bytes,
                                           kFitEnumeratedCuts, kFitVisits, &*scheduled.holding);
        if (fitted)
            cut = &*fitted;
    }
    const double bound = std::isfinite(limit) || m_spec.exhaustive ? cut_bound(c, s, *cut, mesh) : 0.0;
    if (std::isfinite(limit) && bound * (1.0 - 1e-9) > limit) {
        ++m_result.pruned_time;
        return;
    }
    const StepPlan step = make_step_plan(s.model.profile, scheduled.schedule, *cut, options);
    const double slack = 1.0 - 1e-9;
    if (bound * slack > step.step_time || c.time_bound * slack > step.step_time ||
        any_cut_bound * slack > step.step_time)
        ++m_result.bound_violations;
    Candidate out{.tp = s.tp,
                  .sp = s.tp > 1,
                  .cp = s.cp,
                  .ep = s.ep,
                  .pp = c.pp,
                  .dp = c.dp,
                  .zero = c.zero,
                  .micro_batch_size = s.mbs,
                  .virtual_stages = c.v,
                  .microbatches = c.microbatches,
                  .schedule = c.kind,
                  .recompute = m_modes[c.mode]};
    set_step(out, fitted ? manual_partition(*fitted) : std::string("compute"), step);
    m_result.search.candidates.push_back(std::move(out));
}

void Searcher::set_step(Candidate& out, std::string partition, const StepPlan& step) const
{
    const Timeline& t = step.plan.timeline;
    out.partition = std::move(partition);
    out.step_time = step.step_time;
    out.makespan = t.makespan;
    out.bubble_fraction = t.bubble_fraction;
    out.exposed_allreduce_ms = step.exposed_allreduce_ms;
    out.peak_memory_bytes = step.peak_memory_bytes;
    out.fits = step.fits;
    out.compute_ms = 0.0;
    for (const StageStats& stage : t.stage_stats)
        out.compute_ms = std::max(out.compute_ms, stage.busy);
    const Throughput rate =
        throughput(m_flops_per_sample, m_spec.global_batch, m_spec.gpus, m_spec.peak_tflops, step.step_time);
    out.samples_per_second = rate.samples_per_second;
    out.tflops_per_gpu = rate.tflops_per_gpu;
    out.mfu = rate.mfu;
}

// When nothing fits, "the closest" is judged on each configuration's leanest cut, not its even
// one: 1F1B's first stage, holding pp microbatches, may need far more than a cut that gives it
// fewer layers. Its step is simulated again on that cut.
void Searcher::recut_leanest(Candidate& c) const
{
    const CandidateRun run = candidate_run(m_config, m_spec, c);
    const Schedule schedule = build_schedule(run.schedule);
    const auto lean = least_memory_boundaries(run.model.profile, schedule, run.options, kFitEnumeratedCuts, kFitVisits);
    if (!lean || *lean == run.boundaries)
        return;
    const StepPlan step = make_step_plan(run.model.profile, schedule, *lean, run.options);
    if (step.peak_memory_bytes < c.peak_memory_bytes)
        set_step(c, manual_partition(*lean), step);
}

ModelSearchResult Searcher::run()
{
    if (m_spec.gpus < 1 || m_spec.global_batch < 1)
        bad_search("the GPU count and the global batch must be at least 1");
    if (m_spec.gpu_memory_bytes <= 0)
        bad_search("the GPU memory must be more than 0 bytes");
    if (m_spec.seq_len < 1 || m_spec.seq_len > (1 << 24))
        bad_search("the sequence length must be 1..2^24");
    if (m_spec.top < 1 || m_spec.max_virtual_stages < 2)
        bad_search("the number of candidates kept must be at least 1 and the most chunks at least 2");
    for (int zero : m_spec.zero)
        if (zero < 0 || zero > 3)
            bad_search("the ZeRO stages tried must be 0..3, not " + std::to_string(zero));
    m_modes = m_spec.recompute.empty() ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
                                       : m_spec.recompute;
    m_kinds = searched_schedules(m_spec.schedules);
    m_layers = m_config.layers + 2; // embedding and head
    m_flops_per_sample = model_flops_per_sample(m_config, m_spec.seq_len);
    enumerate_shapes();
    if (m_shapes.empty())
        bad_search("no micro batch size tried divides the global batch of " + std::to_string(m_spec.global_batch) +
                   ", or no tensor-, context- or expert-parallel degree tried splits " + m_config.source + " over " +
                   std::to_string(m_spec.gpus) + " GPUs");
    std::vector<Config> configs, too_big;
    enumerate_configs(configs, too_big);
    if (configs.empty() && too_big.empty() && m_factorised)
        bad_search(no_schedule_runs(m_spec.gpus, m_kinds));
    if (configs.empty() && too_big.empty())
        bad_search("no way to split " + std::to_string(m_spec.gpus) +
                   " GPUs into tensor x context x pipeline x data parallel with the data-parallel degree times "
                   "the micro batch size dividing the global batch of " +
                   std::to_string(m_spec.global_batch));
    std::stable_sort(configs.begin(), configs.end(),
                     [](const Config& a, const Config& b) { return a.time_bound < b.time_bound; });
    std::vector<double> best; // the fastest `top` fitting step times, ascending
    for (const Config& c : configs) {
        // A bound at most a rounding above the true step time: never prunes one that ties.
        if (!m_spec.exhaustive && best.size() == m_spec.top && c.time_bound * (1.0 - 1e-9) > best.back()) {
            m_result.pruned_time += configs.size() - static_cast<std::size_t>(&c - configs.data());
            break;
        }
        const std::size_t before_count = m_result.search.candidates.size();
        evaluate(c,
                 m_spec.exhaustive || best.size() < m_spec.top ? std::numeric_limits<double>::infinity() : best.back());
        if (m_result.search.candidates.size() == before_count || !m_result.search.candidates.back().fits)
            continue;
        best.insert(std::upper_bound(best.begin(), best.end(), m_result.search.candidates.back().step_time),
                    m_result.search.candidates.back().step_time);
        if (best.size() > m_spec.top)
            best.pop_back();
    }
    if (m_spec.exhaustive) {
        for (const Config& c : too_big)
            evaluate(c);
    } else if (best.empty() && !too_big.empty()) {
        // Nothing fits: simulate those that could need the least memory, to name the closest. A
        // stage's peak is at least the mean stage's model state and one microbatch of its layers'
        // activations (each holds one between a forward and its backward): a bound that sees
        // what tensor, sequence and context parallelism save in activations, not only the state.
        const auto least_memory = [&](const Config& c) {
            const Shape& s = m_shapes[c.shape];
            return state_bound(s, c.pp, c.dp * s.cp, c.zero, m_spec.fp32_grads) + s.kept_bytes[c.mode] / c.pp;
        };
        std::stable_sort(too_big.begin(), too_big.end(),
                         [&](const Config& a, const Config& b) { return least_memory(a) < least_memory(b); });
        for (std::size_t i = 0; i < std::min<std::size_t>(too_big.size(), 64); ++i)
            evaluate(too_big[i]);
    }
    SearchResult& r = m_result.search;
    if (r.candidates.empty())
        bad_search("no configuration of " + std::to_string(m_spec.gpus) + " GPUs is small enough to simulate (" +
                   std::to_string(r.skipped) + " skipped)");
    std::sort(r.candidates.begin(), r.candidates.end(), ranks_before);
    if (best.empty() && !m_spec.exhaustive) {
        const std::size_t closest = std::min<std::size_t>(r.candidates.size(), 16);
        for (std::size_t i = 0; i < closest; ++i)
            recut_leanest(r.candidates[i]);
        std::sort(r.candidates.begin(), r.candidates.end(), ranks_before);
    }
    r.fitting = static_cast<std::size_t>(
        std::count_if(r.candidates.begin(), r.candidates.end(), [](const Candidate& c) { return c.fits; }));
    return std::move(m_result);
}

} // namespace

Throughput throughput(double flops_per_sample, std::int64_t global_batch, std::int64_t gpus, double peak_tflops,
                      double step_ms)
{
    Throughput out;
    if (step_ms <= 0.0 || gpus < 1)
        return out;
    const double seconds = step_ms / 1000.0;
    out.samples_per_second = double(global_batch) / seconds;
    out.tflops_per_gpu = flops_per_sample * double(global_batch) / (double(gpus) * seconds) / 1e12;
    out.mfu = peak_tflops > 0.0 ? out.tflops_per_gpu / peak_tflops : 0.0;
    return out;
}

CandidateRun candidate_run(const ModelConfig& config, const ModelSearchSpec& spec, const Candidate& c)
{
    const Mesh mesh{.tp = c.tp, .cp = c.cp, .ep = c.ep, .dp = c.dp, .pp = c.pp};
    const GroupLinks links = mesh_links(spec.links, mesh);
    const Parallelism parallel{.tp = c.tp, .sequence_parallel = c.sp, .cp = c.cp, .ep = c.ep};
    CandidateRun run{.model = shape_profile(config, shape_workload(spec, c.micro_batch_size), parallel)};
    // add_parallel_comm adds exactly layer_comm; both kept, so the viewer can draw the share.
    run.comm = layer_comm(run.model, links);
    add_parallel_comm(run.model, links);
    run.schedule = ScheduleSpec{.kind = c.schedule,
                                .stages = c.pp,
                                .microbatches = c.microbatches,
                                .virtual_stages = c.virtual_stages,
                                .p2p_latency_ms = links.pp.latency_ms};
    run.boundaries = partition(with_recompute(run.model.profile, c.recompute), c.pp * c.virtual_stages,
                               parse_partition_spec(c.partition));
    run.options = step_options(spec, links, c.dp, c.cp, c.zero, c.recompute, c.ep);
    return run;
}

double model_flops_per_sample(const ModelConfig& config, int seq_len)
{
    const ModelProfile one = shape_profile(config, Workload{.seq_len = seq_len, .micro_batch_size = 1}, {});
    return 3.0 * std::accumulate(one.fwd_flops.begin(), one.fwd_flops.end(), 0.0);
}

ModelSearchResult search_model_plans(const ModelConfig& config, const ModelSearchSpec& spec,
                                     const std::atomic<bool>* cancel)
{
    return Searcher(config, spec, cancel).run();
}

} // namespace shardscope::pipeline
