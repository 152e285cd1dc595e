#include "core/pipeline/search.h"

#include "core/pipeline/fit_partition.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

namespace shardscope::pipeline {
namespace {

[[noreturn]] void bad_search(const std::string& sentence)
{
    throw Error(ProblemKind::invalid_argument, sentence);
}

Candidate describe(const StepPlan& step, std::string partition, const SearchSpec& spec)
{
    const Timeline& t = step.plan.timeline;
    Candidate c;
    c.pp = t.spec.stages;
    c.dp = step.options.dp;
    c.zero = step.options.zero;
    c.micro_batch_size = spec.micro_batch_size;
    c.virtual_stages = t.spec.virtual_stages;
    c.microbatches = t.spec.microbatches;
    c.schedule = t.spec.kind;
    c.recompute = step.options.recompute;
    c.partition = std::move(partition);
    c.step_time = step.step_time;
    c.makespan = t.makespan;
    for (const StageStats& s : t.stage_stats)
        c.compute_ms = std::max(c.compute_ms, s.busy);
    c.bubble_fraction = t.bubble_fraction;
    c.exposed_allreduce_ms = step.exposed_allreduce_ms;
    c.peak_memory_bytes = step.peak_memory_bytes;
    c.fits = step.fits;
    c.samples_per_second = step.step_time > 0.0 ? spec.global_batch / (step.step_time / 1000.0) : 0.0;
    return c;
}

// Two recompute modes whose schedules would be indistinguishable: same costs, same bytes kept.
bool same_costs(const Profile& a, const Profile& b)
{
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        const Layer& x = a.layers[i];
        const Layer& y = b.layers[i];
        if (x.bwd_ms != y.bwd_ms || x.bwd_input_ms != y.bwd_input_ms || x.activation_bytes != y.activation_bytes)
            return false;
    }
    return true;
}

void check_search(const Profile& profile, const SearchSpec& spec)
{
    if (spec.gpus < 1)
        bad_search("--gpus must be at least 1, not " + std::to_string(spec.gpus));
    if (spec.micro_batch_size < 1 || spec.global_batch < 1)
        bad_search("the global batch and the micro batch size must be at least 1");
    if (spec.global_batch % spec.micro_batch_size != 0)
        bad_search("the global batch (" + std::to_string(spec.global_batch) +
                   ") is not a multiple of the micro batch size (" + std::to_string(spec.micro_batch_size) + ")");
    if (profile.micro_batch_size && *profile.micro_batch_size != spec.micro_batch_size)
        bad_search("the profile " + (profile.source.empty() ? profile.name : profile.source) +
                   " was measured at micro batch size " + std::to_string(*profile.micro_batch_size) + ", not " +
                   std::to_string(spec.micro_batch_size) + " (its costs are per microbatch)");
    if (spec.gpu_memory_bytes <= 0)
        bad_search("the GPU memory must be more than 0 bytes");
    for (int zero : spec.zero)
        if (zero < 0 || zero > 3)
            bad_search("the ZeRO stages tried must be 0..3, not " + std::to_string(zero));
}

} // namespace

std::vector<ScheduleKind> searched_schedules(const std::vector<ScheduleKind>& asked)
{
    if (!asked.empty())
        return asked;
    std::vector<ScheduleKind> all;
    for (int k = 0; k < static_cast<int>(ScheduleKind::custom); ++k)
        all.push_back(static_cast<ScheduleKind>(k));
    return all;
}

std::vector<int> searched_zero_stages(const std::vector<int>& asked)
{
    return asked.empty() ? std::vector<int>{0, 1, 2, 3} : asked;
}

std::vector<int> searched_virtual_stages(ScheduleKind kind, int stages, int microbatches, int layers, int max_virtual)
{
    std::vector<int> chunks;
    switch (kind) {
    case ScheduleKind::interleaved:
        if (stages > 1 && microbatches % stages == 0)
            for (int v = 2; v <= max_virtual && static_cast<long long>(stages) * v <= layers; ++v)
                chunks.push_back(v);
        break;
    case ScheduleKind::zb_v:
    case ScheduleKind::dualpipe_v:
        // check_spec's rules: two chunks as a V; DualPipeV needs one microbatch per chunk in flight.
        if (stages > 1 && 2LL * stages <= layers &&
            (kind == ScheduleKind::zb_v || static_cast<long long>(microbatches) >= 2LL * stages))
            chunks.push_back(2);
        break;
    case ScheduleKind::custom: break; // read from a file, never searched
    default: chunks.push_back(1);
    }
    return chunks;
}

std::string no_schedule_runs(int gpus, const std::vector<ScheduleKind>& kinds)
{
    std::string names;
    for (ScheduleKind kind : kinds)
        names += (names.empty() ? "" : ", ") + std::string(to_string(kind));
    return "none of the schedules tried (" + names + ") runs on any split of " + std::to_string(gpus) +
        (gpus == 1 ? " GPU" : " GPUs") +
        ": interleaved, zb-v and dualpipe-v need at least 2 pipeline stages and a layer a chunk, interleaved "
        "microbatches a multiple of the stages, dualpipe-v at least 2 a stage";
}

bool zero_repeats(int zero, int dp, const std::vector<int>& stages)
{
    return dp == 1 && !stages.empty() && zero != stages.front();
}

SearchResult search_plans(const Profile& profile, const SearchSpec& spec, const std::atomic<bool>* cancel)
{
    validate_profile(profile);
    check_search(profile, spec);
    const int layers = static_cast<int>(profile.layers.size());
    const int samples_per_replica_unit = spec.global_batch / spec.micro_batch_size;
    const std::vector<ScheduleKind> schedules = searched_schedules(spec.schedules);
    const std::vector<int> zero_stages = searched_zero_stages(spec.zero);
    std::vector<int> by_sharding = zero_stages; // most sharded first: see the memory cuts below
    std::sort(by_sharding.begin(), by_sharding.end(), std::greater<>());
    const std::vector<Recompute> modes = spec.recompute.empty()
        ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
        : spec.recompute;
    // A mode that changes nothing (selective without a shape or selective fields) would only
    // repeat the candidates of the mode listed before it.
    std::vector<Recompute> kept_modes;
    std::vector<Profile> adjusted;
    for (Recompute mode : modes) {
        Profile costs = with_recompute(profile, mode);
        const bool repeat = std::any_of(adjusted.begin(), adjusted.end(),
                                        [&](const Profile& other) { return same_costs(other, costs); });
        if (repeat)
            continue;
        kept_modes.push_back(mode);
        adjusted.push_back(std::move(costs));
    }

    SearchResult result;
    std::string first_skip;
    bool factorised = false;
    for (int pp = 1; pp <= std::min(spec.gpus, layers); ++pp) {
        if (spec.gpus % pp != 0)
            continue;
        const int dp = spec.gpus / pp;
        if (samples_per_replica_unit % dp != 0)
            continue;
        factorised = true;
        const int microbatches = samples_per_replica_unit / dp;
        for (ScheduleKind kind : schedules) {
            for (int v : searched_virtual_stages(kind, pp, microbatches, layers, spec.max_virtual_stages)) {
                if (cancel && cancel->load(std::memory_order_relaxed))
                    throw Error(ProblemKind::cancelled, "the plan search was cancelled");
                const ScheduleSpec schedule_spec{.kind = kind,
                                                 .stages = pp,
                                                 .microbatches = microbatches,
                                                 .virtual_stages = v,
                                                 .p2p_latency_ms = spec.p2p_latency_ms};
                Schedule schedule;
                try {
                    schedule = build_schedule(schedule_spec);
                } catch (const Error& error) {
                    // Too large to simulate (millions of microbatches): counted, and named when
                    // it leaves nothing at all to rank.
                    if (result.skipped++ == 0)
                        first_skip = error.what();
                    continue;
                }
                for (std::size_t r = 0; r < kept_modes.size(); ++r) {
                    const PartitionSpec compute{.method = PartitionMethod::compute};
                    const std::vector<int> cut = partition(adjusted[r], pp * v, compute);
                    std::optional<StepPlan> simulated; // the ZeRO stage changes no op: one simulation
                    bool no_cut_fits = false; // for a stage sharding more than this one
                    for (int zero : by_sharding) {
                        if (zero_repeats(zero, dp, zero_stages))
                            continue;
                        const TrainingOptions options{.dp = dp,
                                                      .zero = zero,
                                                      .recompute = kept_modes[r],
                                                      .link_gbps = spec.link_gbps,
                                                      .overlap_allreduce = spec.overlap_allreduce,
                                                      .fp32_grads = spec.fp32_grads,
                                                      .gpu_memory_bytes = spec.gpu_memory_bytes};
                        const StepPlan fastest = simulated ? with_zero(profile, *simulated, zero)
                                                           : make_step_plan(profile, schedule, cut, options);
                        if (!simulated)
                            simulated = fastest;
                        result.candidates.push_back(describe(fastest, "compute", spec));
                        // Every cut holds no less under a stage that shards less, so where a more
                        // sharded stage was shown to have no cut that fits (an exhaustive look),
                        // this one has none either. ZeRO 0 moves no less than ZeRO 1 (2 U each;
                        // with fp32 gradients 4 U against 3) and holds more, so under the cut
                        // search's objective (the busiest piece's compute)
                        // its fitted cut can only tie ZeRO 1's or lose: a heuristic for the
                        // simulated step, which is not compared.
                        const bool dominated = zero == 0 && dp > 1 &&
                            std::find(zero_stages.begin(), zero_stages.end(), 1) != zero_stages.end();
                        if (fastest.fits || no_cut_fits || dominated)
                            continue;
                        // The fastest cut that fits or, when none does, the one needing the least
                        // memory: "the closest configuration" must not overstate the miss.
                        MemoryCuts cuts = memory_cuts(profile, schedule, options, spec.gpu_memory_bytes, cancel);
                        no_cut_fits = !cuts.fitting && cuts.exact;
                        const auto& fitted_cut = cuts.fitting ? cuts.fitting : cuts.least_memory;
                        if (fitted_cut && *fitted_cut != fastest.plan.boundaries) {
                            const PartitionSpec manual{.method = PartitionMethod::manual,
                                                       .manual_boundaries = *fitted_cut};
                            const StepPlan fitted = make_step_plan(profile, schedule, *fitted_cut, options);
                            result.candidates.push_back(describe(fitted, to_string(manual), spec));
                        }
                    }
                }
            }
        }
    }
    if (!factorised)
        bad_search("no way to split " + std::to_string(spec.gpus) +
                   " GPUs into pipeline x data "
                   "parallel with at most " +
                   std::to_string(layers) +
                   " stages (one layer each) and "
                   "the data-parallel degree dividing the " +
                   std::to_string(samples_per_replica_unit) + " microbatches of the global batch");
    if (result.candidates.empty() && result.skipped == 0)
        bad_search(no_schedule_runs(spec.gpus, schedules));
    if (result.candidates.empty())
        bad_search("no configuration of " + std::to_string(spec.gpus) + (spec.gpus == 1 ? " GPU" : " GPUs") +
                   " is small enough to simulate (" + std::to_string(result.skipped) +
                   " skipped; the first: " + first_skip + ")");

    std::stable_sort(result.candidates.begin(), result.candidates.end(), ranks_before);
    result.fitting = static_cast<std::size_t>(
        std::count_if(result.candidates.begin(), result.candidates.end(), [](const Candidate& c) { return c.fits; }));
    return result;
}

double ranked_time(double step_ms)
{
    int exponent = 0;
    const double mantissa = std::frexp(step_ms, &exponent);
    return std::ldexp(std::round(std::ldexp(mantissa, 40)), exponent - 40);
}

bool ranks_before(const Candidate& a, const Candidate& b)
{
    if (a.fits != b.fits)
        return a.fits;
    if (!a.fits && a.peak_memory_bytes != b.peak_memory_bytes)
        return a.peak_memory_bytes < b.peak_memory_bytes;
    if (ranked_time(a.step_time) != ranked_time(b.step_time))
        return ranked_time(a.step_time) < ranked_time(b.step_time);
    if (a.pp != b.pp)
        return a.pp < b.pp;
    if (a.peak_memory_bytes != b.peak_memory_bytes)
        return a.peak_memory_bytes < b.peak_memory_bytes;
    // A total order over the choices, so a pruned and an exhaustive search rank ties alike.
    return std::tuple(a.tp, a.cp, a.ep, a.dp, a.virtual_stages, static_cast<int>(a.schedule), a.zero,
                      static_cast<int>(a.recompute), a.micro_batch_size) <
        std::tuple(b.tp, b.cp, b.ep, b.dp, b.virtual_stages, static_cast<int>(b.schedule), b.zero,
                   static_cast<int>(b.recompute), b.micro_batch_size);
}

std::string why_slower(const Candidate& r, const Candidate& best)
{
    char head[96];
    const double delta = r.step_time - best.step_time;
    std::snprintf(head, sizeof head, "+%.4g ms (+%.3g %%): ", delta,
                  best.step_time > 0.0 ? 100.0 * delta / best.step_time : 0.0);
    if (ranked_time(r.step_time) <= ranked_time(best.step_time))
        return "ties with #1 on step time; ranked after it for " +
            std::string(r.pp != best.pp                                     ? "more pipeline stages"
                            : r.peak_memory_bytes != best.peak_memory_bytes ? "more memory"
                                                                            : "coming later in the search");
    // The step is compute on the busiest stage + the pipeline's idle + exposed all-reduce.
    const double compute = r.compute_ms - best.compute_ms;
    const double idle = (r.makespan - r.compute_ms) - (best.makespan - best.compute_ms);
    const double reduce = r.exposed_allreduce_ms - best.exposed_allreduce_ms;
    char why[320];
    if (compute >= idle && compute >= reduce) {
        // A stage's ops hold its tensor-, context- and expert-parallel collectives, and their
        // cost follows the micro batch size and the recomputation. With all of those the same
        // each GPU has the same work (layers / pp x M with M / pp fixed by the batch), so its
        // busiest stage can only be busier by the cut.
        std::string cause;
        const auto differs = [&](const char* what, const std::string& a, const std::string& b) {
            if (a != b)
                cause += (cause.empty() ? "" : ", ") + std::string(what) + " " + a + " vs " + b;
        };
        differs("tp", std::to_string(r.tp), std::to_string(best.tp));
        differs("cp", std::to_string(r.cp), std::to_string(best.cp));
        differs("ep", std::to_string(r.ep), std::to_string(best.ep));
        differs("micro batch size", std::to_string(r.micro_batch_size), std::to_string(best.micro_batch_size));
        differs("recompute", std::string(to_string(r.recompute)), std::string(to_string(best.recompute)));
        if (cause.empty() && r.pp > 1)
            cause = "a less even partition";
        std::snprintf(why, sizeof why, "its busiest stage computes %.4g ms more%s%s%s", compute,
                      cause.empty() ? "" : " (", cause.c_str(), cause.empty() ? "" : ")");
    } else if (idle >= reduce) {
        std::snprintf(why, sizeof why, "bubble %.1f %% vs %.1f %% (%s, %d microbatches)", 100.0 * r.bubble_fraction,
                      100.0 * best.bubble_fraction, std::string(to_string(r.schedule)).c_str(), r.microbatches);
    } else {
        // Gradients are reduced over dp x cp, the experts' over dp x cp / ep (training.h).
        const auto group = [](const Candidate& c) {
            return "dp " + std::to_string(c.dp) + (c.cp > 1 ? " x cp " + std::to_string(c.cp) : "") +
                (c.ep > 1 ? ", ep " + std::to_string(c.ep) : "");
        };
        std::snprintf(why, sizeof why, "%.4g ms more exposed gradient all-reduce (%s vs %s)", reduce, group(r).c_str(),
                      group(best).c_str());
    }
    // Name what it gains too when that offsets much of the loss, or the figures look absurd
    // ("+29 ms: 390 ms more all-reduce").
    std::string text = head + std::string(why);
    const double gain = std::min({compute, idle, reduce});
    if (gain < -0.1 * delta) {
        const char* part = gain == compute ? "busiest-stage compute"
            : gain == idle                 ? "pipeline idle"
                                           : "exposed all-reduce";
        char despite[96];
        std::snprintf(despite, sizeof despite, ", despite %.4g ms less %s", -gain, part);
        text += despite;
    }
    return text;
}

} // namespace shardscope::pipeline
