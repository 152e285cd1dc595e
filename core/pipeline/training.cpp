#include "core/pipeline/training.h"

#include "core/util/enum_names.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace shardscope::pipeline {
namespace {

[[noreturn]] void bad_option(const std::string& sentence)
{
    throw Error(ProblemKind::invalid_argument, sentence);
}

// What one rank holds of a `params`-element buffer of `bytes` each: all of it, or its
// ceil(P / D) share when the ZeRO stage shards it (flat buffers are padded to D equal parts).
std::int64_t held(std::int64_t params, int bytes, bool sharded, int dp)
{
    const std::int64_t elements = sharded ? (params + dp - 1) / dp : params;
    return elements * bytes;
}

} // namespace

double layer_held_bytes(const Profile& profile, const Layer& layer, Recompute mode)
{
    switch (mode) {
    case Recompute::none: return static_cast<double>(layer.activation_bytes);
    case Recompute::selective: return static_cast<double>(layer_selective_bytes(profile, layer));
    case Recompute::full: return static_cast<double>(layer_input_bytes(profile, layer));
    }
    return 0.0;
}

namespace {

std::vector<StageMemory> stage_memory(const Profile& profile, const Plan& plan, const TrainingOptions& options)
{
    const int n = plan.timeline.spec.stages;
    std::vector<StageMemory> memory(static_cast<std::size_t>(n));
    // The recomputed working set: while one layer's backward runs, its full activations exist
    // again for that one microbatch, on top of everything the stage keeps.
    std::vector<std::int64_t> working(static_cast<std::size_t>(n), 0);
    std::vector<std::int64_t> expert_params(static_cast<std::size_t>(n), 0);
    for (const PieceCost& piece : plan.pieces)
        for (int l = piece.first_layer; l <= piece.last_layer; ++l) {
            const Layer& layer = profile.layers[static_cast<std::size_t>(l)];
            expert_params[piece.stage] += layer.expert_params;
            const double extra =
                static_cast<double>(layer.activation_bytes) - layer_held_bytes(profile, layer, options.recompute);
            working[piece.stage] = std::max(working[piece.stage], std::int64_t(std::max(0.0, extra)));
        }
    for (const StageCost& stage : plan.stages) {
        // 16 bytes a parameter: far from overflowing int64 for any model that exists.
        if (stage.params > std::numeric_limits<std::int64_t>::max() / 32)
            throw Error(ProblemKind::invalid_profile,
                        "stage " + std::to_string(stage.stage) + " holds " + std::to_string(stage.params) +
                            " parameters, too many to count bytes");
        StageMemory& m = memory[stage.stage];
        const std::int64_t experts = expert_params[stage.stage], dense = stage.params - experts;
        const int replicas = gradient_replicas(options), expert_dp = std::max(1, replicas / options.ep);
        m.weights = held(dense, 2, options.zero >= 3, replicas) + held(experts, 2, options.zero >= 3, expert_dp);
        const int grad = options.fp32_grads ? 4 : 2;
        m.gradients =
            held(dense, grad, options.zero >= 2, replicas) + held(experts, grad, options.zero >= 2, expert_dp);
        m.optimizer = held(dense, 12, options.zero >= 1, replicas) + held(experts, 12, options.zero >= 1, expert_dp);
        // Each part is countable (the profile's and the simulator's bounds); their sum is checked.
        if (__builtin_add_overflow(plan.timeline.stage_stats[stage.stage].peak_activation_bytes, working[stage.stage],
                                   &m.activations) ||
            __builtin_add_overflow(m.weights + m.gradients + m.optimizer, m.activations, &m.total))
            throw Error(ProblemKind::invalid_profile,
                        "stage " + std::to_string(stage.stage) +
                            " would hold more than 2^63 bytes of model state and activations: too many to count");
        m.fits = !options.gpu_memory_bytes || m.total <= *options.gpu_memory_bytes;
    }
    return memory;
}

// The end of each stage's last backward op (B, or W where the backward is split): its
// gradients are complete from then on.
std::vector<double> last_backward_end(const Timeline& timeline)
{
    std::vector<double> end(static_cast<std::size_t>(timeline.spec.stages), 0.0);
    for (const TimedOp& op : timeline.ops)
        if (op.kind != OpKind::F)
            end[op.stage] = std::max(end[op.stage], op.end);
    return end;
}

// When each stage's last microbatch starts its backward (its first B or W op): from then on the
// gradients of the layers that backward has passed are final, and buckets of them can be reduced
// while it goes on (PyTorch DDP's and Megatron's overlap).
std::vector<double> last_backward_start(const Timeline& timeline)
{
    std::vector<double> start(static_cast<std::size_t>(timeline.spec.stages), std::numeric_limits<double>::infinity());
    for (const TimedOp& op : timeline.ops)
        if (op.kind != OpKind::F && op.microbatch == timeline.spec.microbatches - 1)
            start[op.stage] = std::min(start[op.stage], op.start);
    return start;
}

void finish_step(const Profile& profile, StepPlan& step)
{
    const TrainingOptions& options = step.options;
    const Timeline& timeline = step.plan.timeline;
    step.memory = stage_memory(profile, step.plan, options);
    step.peak_memory_bytes = 0;
    for (const StageMemory& m : step.memory)
        step.peak_memory_bytes = std::max(step.peak_memory_bytes, m.total);
    step.fits = !options.gpu_memory_bytes || step.peak_memory_bytes <= *options.gpu_memory_bytes;

    step.step_time = timeline.makespan;
    step.allreduce.clear();
    step.allreduce_ms = 0.0;
    if (const int replicas = gradient_replicas(options); replicas > 1) {
        const std::vector<double> ready = last_backward_end(timeline);
        const std::vector<double> streaming = last_backward_start(timeline);
        const ZeroTraffic traffic = zero_traffic(options.zero, timeline.spec.microbatches, options.fp32_grads);
        const double gbps = options.dp_link_gbps.value_or(options.link_gbps);
        const int expert_dp = std::max(1, replicas / options.ep);
        std::vector<std::int64_t> expert_params(step.plan.stages.size(), 0);
        for (const PieceCost& piece : step.plan.pieces)
            for (int l = piece.first_layer; l <= piece.last_layer; ++l)
                expert_params[piece.stage] += profile.layers[static_cast<std::size_t>(l)].expert_params;
        for (const StageCost& stage : step.plan.stages) {
            const std::int64_t bytes = 2 * stage.params, experts = 2 * expert_params[stage.stage];
            // One unit U: half a ring all-reduce of the dense and of the expert gradients.
            const double unit = 0.5 *
                (ring_allreduce_ms(bytes - experts, replicas, gbps) + ring_allreduce_ms(experts, expert_dp, gbps));
            const double early =
                std::max(0.0, (traffic.total - traffic.final) * unit - timeline.stage_stats[stage.stage].busy);
            const double ms = traffic.final * unit + early;
            const double start = options.overlap_allreduce ? streaming[stage.stage] : timeline.makespan;
            // Overlapped, the reduction streams beside the last backward but cannot end before it.
            const double end = options.overlap_allreduce ? std::max(start + ms, ready[stage.stage]) : start + ms;
            step.allreduce.push_back(AllReduce{.stage = stage.stage,
                                               .bytes = stage.params * (options.fp32_grads ? 4 : 2),
                                               .start = start,
                                               .end = end});
            step.allreduce_ms = std::max(step.allreduce_ms, ms);
            step.step_time = std::max(step.step_time, end);
        }
    }
    step.exposed_allreduce_ms = step.step_time - timeline.makespan;
    // A link of 1e-300 Gbit/s or a profile of 1e308 ms overflows to infinity; such a step time
    // would print as null and rank as nothing. Refuse it instead.
    if (!std::isfinite(step.step_time))
        bad_option("the step time is not a finite number of ms (a link bandwidth or a profile "
                   "cost out of any realistic range)");
}

} // namespace

std::string_view to_string(Recompute mode)
{
    return enum_name(mode, kRecomputeNames, "unknown");
}

std::optional<Recompute> parse_recompute(std::string_view text)
{
    return enum_from_name<Recompute>(text, kRecomputeNames);
}

int gradient_replicas(const TrainingOptions& options)
{
    return options.dp * options.cp; // check_options bounds it
}

void check_options(const TrainingOptions& options)
{
    if (options.dp < 1)
        bad_option("the data-parallel degree must be at least 1, not " + std::to_string(options.dp));
    if (options.cp < 1 || std::int64_t(options.dp) * options.cp > (1 << 24))
        bad_option("the context-parallel degree must be at least 1 and dp x cp at most 2^24, not cp " +
                   std::to_string(options.cp) + " with dp " + std::to_string(options.dp));
    if (options.zero < 0 || options.zero > 3)
        bad_option("the ZeRO stage must be 0, 1, 2 or 3, not " + std::to_string(options.zero));
    if (options.ep < 1 || options.dp % options.ep != 0)
        bad_option("the expert-parallel degree (" + std::to_string(options.ep) +
                   ") must divide the data-parallel degree (" + std::to_string(options.dp) + ")");
    if (options.dp_link_gbps && (!std::isfinite(*options.dp_link_gbps) || *options.dp_link_gbps < 0.0))
        bad_option("the data-parallel link bandwidth must be a finite number of Gbit/s >= 0");
    if (!std::isfinite(options.link_gbps) || options.link_gbps < 0.0)
        bad_option("the link bandwidth must be a finite number of Gbit/s >= 0");
    if (options.gpu_memory_bytes && *options.gpu_memory_bytes <= 0)
        bad_option("the GPU memory limit must be more than 0 bytes");
}

ParamBytes bytes_per_param(int zero, int dp, bool fp32_grads)
{
    const double d = dp, grad = fp32_grads ? 4.0 : 2.0;
    return ParamBytes{.weights = zero >= 3 ? 2.0 / d : 2.0,
                      .gradients = zero >= 2 ? grad / d : grad,
                      .optimizer = zero >= 1 ? 12.0 / d : 12.0};
}

std::int64_t param_state_bytes(std::int64_t params, int zero, int dp, bool fp32_grads)
{
    return held(params, 2, zero >= 3, dp) + held(params, fp32_grads ? 4 : 2, zero >= 2, dp) +
        held(params, 12, zero >= 1, dp);
}

double layer_recompute_ms(const Profile& profile, const Layer& layer, Recompute mode)
{
    switch (mode) {
    case Recompute::none: return 0.0;
    case Recompute::selective: return layer_selective_recompute_ms(profile, layer);
    case Recompute::full: return layer.fwd_ms;
    }
    return 0.0;
}

Profile with_recompute(const Profile& profile, Recompute mode)
{
    if (mode == Recompute::none)
        return profile;
    Profile out = profile;
    for (std::size_t i = 0; i < out.layers.size(); ++i) {
        const Layer& original = profile.layers[i];
        Layer& layer = out.layers[i];
        const double extra = layer_recompute_ms(profile, original, mode);
        layer.activation_bytes = static_cast<std::int64_t>(layer_held_bytes(profile, original, mode));
        // Recomputation precedes the input gradient, so it lengthens B; W is unchanged.
        layer.bwd_ms += extra;
        layer.bwd_input_ms += extra;
        // What is kept is now all there is; keep the optional fields consistent with that.
        layer.selective_activation_bytes.reset();
        layer.input_bytes.reset();
        layer.output_bytes = layer_output_bytes(profile, original);
    }
    return out;
}

ZeroTraffic zero_traffic(int zero, int microbatches, bool fp32_grads)
{
    const double m = std::max(1, microbatches);
    const double g = fp32_grads ? 2.0 : 1.0; // units of one gradient reduce-scatter
    if (zero >= 3) // per microbatch: gather for the forward and the backward, reduce-scatter
        return ZeroTraffic{.total = m * (2.0 + g), .final = 2.0 + g};
    if (zero == 2) // per microbatch a reduce-scatter; the weights gathered once
        return ZeroTraffic{.total = m * g + 1.0, .final = g + 1.0};
    if (zero == 1) // reduce-scatter the gradients, all-gather the weights
        return ZeroTraffic{.total = g + 1.0, .final = g + 1.0};
    return ZeroTraffic{.total = 2.0 * g, .final = 2.0 * g}; // all-reduce the gradients
}

double transfer_ms(std::int64_t bytes, double link_gbps)
{
    // bytes * 8 bit / (G * 10^9 bit/s) s = bytes * 8 / (G * 10^6) ms
    return link_gbps > 0.0 ? static_cast<double>(bytes) * 8.0 / (link_gbps * 1e6) : 0.0;
}

double ring_allreduce_ms(std::int64_t bytes, int dp, double link_gbps)
{
    if (dp <= 1)
        return 0.0;
    // Reduce-scatter then all-gather: each rank sends and receives (D - 1) / D of the buffer
    // twice (Patarasuk & Yuan 2009), bandwidth-optimal and independent of D for large D.
    return 2.0 * (dp - 1) / dp * transfer_ms(bytes, link_gbps);
}

StepPlan make_step_plan(const Profile& profile, const Schedule& schedule, const std::vector<int>& boundaries,
                        const TrainingOptions& options)
{
    check_options(options);
    const Profile adjusted = with_recompute(profile, options.recompute);
    const int pieces = schedule.spec.stages * schedule.spec.virtual_stages;
    if (static_cast<int>(boundaries.size()) + 1 != pieces)
        throw Error(ProblemKind::invalid_schedule,
                    std::to_string(pieces) + " pieces need " + std::to_string(pieces - 1) + " boundaries, got " +
                        std::to_string(boundaries.size()));
    StepPlan step;
    step.options = options;
    step.plan.boundaries = boundaries;
    step.plan.pieces = piece_costs(adjusted, schedule.spec.stages, boundaries, placement_of(schedule.spec));
    if (schedule.spec.stages > 1) // on one stage the pieces hand over in place
        for (PieceCost& piece : step.plan.pieces)
            piece.send_ms = transfer_ms(piece.output_bytes, options.link_gbps);
    step.plan.stages = stage_costs(step.plan.pieces, schedule.spec.stages);
    simulate_into(schedule, step.plan.pieces, step.plan.timeline);
    finish_step(profile, step);
    return step;
}

StepPlan make_step_plan(const Profile& profile, const ScheduleSpec& spec, const PartitionSpec& partition_spec,
                        const TrainingOptions& options)
{
    check_options(options);
    const Schedule schedule = build_schedule(spec);
    const int pieces = spec.stages * spec.virtual_stages;
    // Cut the model by the costs it will really run with (recomputation lengthens backwards).
    const std::vector<int> boundaries = partition(with_recompute(profile, options.recompute), pieces, partition_spec);
    return make_step_plan(profile, schedule, boundaries, options);
}

StepPlan with_zero(const Profile& profile, StepPlan step, int zero)
{
    step.options.zero = zero;
    check_options(step.options);
    finish_step(profile, step);
    return step;
}

std::vector<Transfer> transfers(const StepPlan& step)
{
    const Timeline& t = step.plan.timeline;
    const int n = t.spec.stages;
    const int piece_count = n * t.spec.virtual_stages;
    std::vector<Transfer> out;
    if (n < 2)
        return out;
    const double latency = t.spec.p2p_latency_ms;
    const Placement placement = placement_of(t.spec);
    for (const TimedOp& op : t.ops) {
        const int p = piece_of(op.stage, op.chunk, n, placement);
        int to_piece = -1;
        if (op.kind == OpKind::F && p + 1 < piece_count)
            to_piece = p + 1;
        else if (op.kind == OpKind::B && p > 0)
            to_piece = p - 1;
        // The V's turn (piece N - 1 to N) stays on the last stage: nothing goes over a link.
        if (to_piece < 0 || stage_of_piece(to_piece, n, placement) == op.stage)
            continue;
        // Both directions carry a tensor of the boundary's shape: the output, or its gradient.
        const PieceCost& boundary = step.plan.pieces[static_cast<std::size_t>(std::min(p, to_piece))];
        out.push_back(Transfer{.from_stage = op.stage,
                               .to_stage = stage_of_piece(to_piece, n, placement),
                               .microbatch = op.microbatch,
                               .chunk = op.chunk,
                               .after = op.kind,
                               .bytes = boundary.output_bytes,
                               .start = op.end,
                               .end = op.end + latency + boundary.send_ms});
    }
    return out;
}

} // namespace shardscope::pipeline
