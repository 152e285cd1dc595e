// The training step around a schedule against its closed forms: microbatches in
// flight per schedule (GPipe M, 1F1B N - s, interleaved as Narayanan et al. 2021), ZeRO bytes
// per parameter, recomputation (Korthikanti et al. 2022) in memory and in the 1F1B makespan,
// link costs on every crossing, and the ring all-reduce with and without overlap.
#include "problemcheck.h"

#include "core/pipeline/export.h"
#include "core/pipeline/training.h"
#include "core/util/error.h"

#include <QTest>
#include <tuple>
#include <algorithm>
#include <cmath>

using namespace shardscope;
using namespace shardscope::pipeline;
using problemcheck::error_of;

namespace {

bool exact(double a, double b)
{
    return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
}

// `count` identical layers with chosen costs and sizes (designated, so every field is named).
Profile layers(int count, double fwd, double bwd, std::int64_t params, std::int64_t activation,
               std::optional<std::int64_t> output = std::nullopt)
{
    Profile profile;
    profile.name = "test";
    for (int i = 0; i < count; ++i)
        profile.layers.push_back(Layer{.name = "l" + std::to_string(i),
                                       .params = params,
                                       .fwd_ms = fwd,
                                       .bwd_ms = bwd,
                                       .bwd_input_ms = bwd / 2,
                                       .bwd_weight_ms = bwd / 2,
                                       .activation_bytes = activation,
                                       .output_bytes = output});
    return profile;
}

StepPlan step(const Profile& profile, ScheduleKind kind, int n, int m, int v = 1, TrainingOptions options = {},
              double latency = 0.0)
{
    const ScheduleSpec spec{
        .kind = kind, .stages = n, .microbatches = m, .virtual_stages = v, .p2p_latency_ms = latency};
    return make_step_plan(profile, spec, PartitionSpec{}, options);
}

// Narayanan et al. 2021 / Megatron-LM: stage s of the interleaved schedule runs
// (N - s - 1) * 2 + (v - 1) * N warm-up forwards (all M*v when M == N) and then one more
// forward before its first backward, so that many (microbatch, chunk) sets are held at once.
int interleaved_in_flight(int n, int m, int v, int s)
{
    if (m == n)
        return m * v;
    return std::min((n - s - 1) * 2 + (v - 1) * n + 1, m * v);
}

} // namespace

class TestPipelineTraining : public QObject {
    Q_OBJECT

private slots:
    void inFlightFollowsTheSchedule()
    {
        // One layer per piece, 1000 bytes each: peak bytes are 1000 x the count in flight.
        for (int n : {1, 2, 4, 8})
            for (int m : {1, 3, 8, 16, 32}) {
                const Profile profile = layers(n, 1.0, 2.0, 10, 1000);
                const StepPlan gpipe = step(profile, ScheduleKind::gpipe, n, m);
                const StepPlan f1b = step(profile, ScheduleKind::one_f_one_b, n, m);
                for (int s = 0; s < n; ++s) {
                    const auto& g = gpipe.plan.timeline.stage_stats[s];
                    const auto& f = f1b.plan.timeline.stage_stats[s];
                    QCOMPARE(g.peak_activations, m);
                    QCOMPARE(f.peak_activations, std::min(n - s, m));
                    QCOMPARE(gpipe.memory[s].activations, std::int64_t(m) * 1000);
                    QCOMPARE(f1b.memory[s].activations, std::int64_t(std::min(n - s, m)) * 1000);
                }
                if (m >= n) { // ZB-H1 defers stage s's W passes by s: every stage holds N
                    const StepPlan zb = step(profile, ScheduleKind::zb_h1, n, m);
                    for (int s = 0; s < n; ++s)
                        QCOMPARE(zb.plan.timeline.stage_stats[s].peak_activations, n);
                }
            }
        for (int n : {2, 4, 8})
            for (int v : {2, 3, 4})
                for (int m : {n, 2 * n, 4 * n}) {
                    const Profile profile = layers(n * v, 1.0, 2.0, 10, 1000);
                    const StepPlan inter = step(profile, ScheduleKind::interleaved, n, m, v);
                    for (int s = 0; s < n; ++s) {
                        const int expected = interleaved_in_flight(n, m, v, s);
                        QCOMPARE(inter.plan.timeline.stage_stats[s].peak_activations, expected);
                        QCOMPARE(inter.memory[s].activations, std::int64_t(expected) * 1000);
                    }
                    // Korthikanti et al.'s form for the first stage with M > N: N (1 + (N-1)/(N v))
                    // stage-activations, a stage's being v chunks' worth.
                    if (m > n)
                        QVERIFY(exact(inter.memory[0].activations / (1000.0 * v), n * (1.0 + (n - 1.0) / (n * v))));
                }
    }

    void zeroBytesPerParameter()
    {
        // Rajbhandari et al. 2020, figure 1: 16, 4 + 12/D, 2 + 14/D, 16/D bytes a parameter, here
        // as the literal numbers for D = 1, 8 and 64 (the fractions are exact in binary).
        const double expected[3][4] = {{16, 16, 16, 16}, // D = 1: nothing to shard over
                                       {16, 5.5, 3.75, 2}, // D = 8: 4 + 1.5, 2 + 1.75, 16/8
                                       {16, 4.1875, 2.21875, 0.25}}; // D = 64
        const int degrees[3] = {1, 8, 64};
        for (int row = 0; row < 3; ++row)
            for (int z = 0; z <= 3; ++z) {
                const int d = degrees[row];
                QCOMPARE(bytes_per_param(z, d).total(), expected[row][z]);
                // The stage totals: 4 layers of 1024 params per stage, divisible by every D.
                const Profile profile = layers(8, 1.0, 2.0, 1024, 0);
                const StepPlan plan =
                    step(profile, ScheduleKind::one_f_one_b, 2, 4, 1, TrainingOptions{.dp = d, .zero = z});
                const StageMemory& m = plan.memory[1];
                QCOMPARE(m.activations, std::int64_t(0));
                QCOMPARE(double(m.total), 4096 * expected[row][z]);
            }
        // The parts for D = 8: ZeRO-1 keeps 2 + 2 and shards the 12; ZeRO-3 shards all three.
        const ParamBytes z1 = bytes_per_param(1, 8), z3 = bytes_per_param(3, 8);
        QCOMPARE(z1.weights, 2.0);
        QCOMPARE(z1.gradients, 2.0);
        QCOMPARE(z1.optimizer, 1.5);
        QCOMPARE(z3.weights, 0.25);
        QCOMPARE(z3.gradients, 0.25);
        QCOMPARE(z3.optimizer, 1.5);
        // 4096 params under ZeRO-2 over 8 ranks: 8192 B of weights, 1024 of gradients, 6144 of
        // optimizer state.
        const StepPlan z2 =
            step(layers(8, 1.0, 2.0, 1024, 0), ScheduleKind::one_f_one_b, 2, 4, 1, TrainingOptions{.dp = 8, .zero = 2});
        QCOMPARE(z2.memory[1].weights, std::int64_t(8192));
        QCOMPARE(z2.memory[1].gradients, std::int64_t(1024));
        QCOMPARE(z2.memory[1].optimizer, std::int64_t(6144));
        // Context parallelism: cp ranks hold the same weights and reduce their partial gradients,
        // so ZeRO shards and the gradient ring span dp x cp (Megatron's data-parallel group with
        // context parallelism): dp 2 x cp 4 holds and moves what dp 8 does.
        const StepPlan dp8 = step(layers(8, 1.0, 2.0, 1024, 0), ScheduleKind::one_f_one_b, 2, 4, 1,
                                  TrainingOptions{.dp = 8, .zero = 1, .link_gbps = 100});
        const StepPlan dp2cp4 = step(layers(8, 1.0, 2.0, 1024, 0), ScheduleKind::one_f_one_b, 2, 4, 1,
                                     TrainingOptions{.dp = 2, .cp = 4, .zero = 1, .link_gbps = 100});
        QCOMPARE(dp2cp4.memory[1].optimizer, std::int64_t(4096 * 12 / 8));
        QCOMPARE(dp2cp4.memory[1].total, dp8.memory[1].total);
        QVERIFY(dp8.allreduce_ms > 0);
        QCOMPARE(dp2cp4.allreduce_ms, dp8.allreduce_ms);
        // dp 1 x cp 8 too: with dp 1 alone nothing would be reduced at all.
        const StepPlan cp8 = step(layers(8, 1.0, 2.0, 1024, 0), ScheduleKind::one_f_one_b, 2, 4, 1,
                                  TrainingOptions{.dp = 1, .cp = 8, .zero = 1, .link_gbps = 100});
        QCOMPARE(cp8.allreduce_ms, dp8.allreduce_ms);
        // A buffer that does not divide is padded to D equal shards.
        const StepPlan odd =
            step(layers(1, 1, 2, 10, 0), ScheduleKind::gpipe, 1, 1, 1, TrainingOptions{.dp = 4, .zero = 3});
        QCOMPARE(odd.memory[0].weights, std::int64_t(3 * 2));
    }

    // One whole step by hand with selective recomputation on a model shape: 2 stages of 2 blocks
    // (s 1024, h 512, a 8, one sample), 1F1B, M = 4, D = 2, ZeRO-1, 100 Gbit/s.
    //   activations per block: s*h*(34 + 5as/h) = 1024*512*34 + 5*8*1024^2 = 17825792 + 41943040
    //     = 59768832 B; selective keeps 34sh = 17825792 B and recomputes 41943040 B.
    //   selective adds fwd * s / (6h + s) = 4 * 1024 / 4096 = 1 ms to each block's backward:
    //     F = 2 x 4 = 8 ms, B = 2 x (8 + 1) = 18 ms a stage.
    //   makespan (M + N - 1)(F + B) = 5 x 26 = 130 ms (the sends carry output_bytes 0 here, so
    //     the link costs only the all-reduce; linksCostBytesOverBandwidthPlusLatency tests sends).
    //   memory, stage 0 (keeps N - s = 2 microbatches): params 2 x 10^6 x (4 + 12/2) = 20 MB;
    //     activations 2 x 2 x 17825792 + 41943040 (one block's recomputed working set).
    //   all-reduce after the flush: 2 (D - 1)/D x 2 x 2 x 10^6 B x 8 / (100 x 10^6) = 0.32 ms.
    // Megatron Core's distributed-optimizer documentation, its table of bytes per parameter:
    // "bf16 parameters, fp32 gradients: 18 non-distributed, 6 + 12/d distributed" — here ZeRO 0
    // and 1 with fp32 gradients, for d = 1 to 1024; stages 2 and 3 shard the 4 bytes.
    void megatronDistributedOptimizerTable()
    {
        for (int d = 1; d <= 1024; d *= 2) {
            QCOMPARE(bytes_per_param(0, d, true).total(), 18.0);
            QCOMPARE(bytes_per_param(1, d, true).total(), 6.0 + 12.0 / d);
            QCOMPARE(bytes_per_param(2, d, true).total(), 2.0 + 16.0 / d);
            QCOMPARE(bytes_per_param(3, d, true).total(), 18.0 / d);
            QCOMPARE(param_state_bytes(1024 * 1024, 1, d, true), std::int64_t((6 * d + 12) * (1024 * 1024 / d)));
        }
        // In a step: 4096 parameters a stage under the distributed optimizer over 8 ranks hold
        // 2 + 4 bytes each of weights and gradients and 12 / 8 of optimizer state.
        const StepPlan dist = step(layers(8, 1.0, 2.0, 1024, 0), ScheduleKind::one_f_one_b, 2, 4, 1,
                                   TrainingOptions{.dp = 8, .zero = 1, .fp32_grads = true});
        QCOMPARE(dist.memory[1].weights, std::int64_t(8192));
        QCOMPARE(dist.memory[1].gradients, std::int64_t(16384));
        QCOMPARE(dist.memory[1].optimizer, std::int64_t(6144));
        // Their traffic: fp32 gradients reduce twice the bytes, the weights gather as 16 bits:
        // 4 U for an all-reduce, 3 U for the distributed optimizer (reduce-scatter 2 + gather 1).
        const double gbps = 100.0;
        const Profile profile = layers(4, 1.0, 2.0, 1'000'000, 1);
        const double unit = ring_allreduce_ms(2 * 1'000'000, 8, gbps) / 2.0;
        for (const auto& [zero, units] : {std::pair{0, 4.0}, std::pair{1, 3.0}}) {
            const StepPlan plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1,
                                       TrainingOptions{.dp = 8, .zero = zero, .link_gbps = gbps, .fp32_grads = true});
            QVERIFY(exact(plan.allreduce_ms, units * unit));
            QCOMPARE(plan.allreduce[0].bytes, std::int64_t(4'000'000));
        }
        // ZeRO 2 and 3 with M = 8 on a stage of 10^9 parameters, whose reductions do not hide in
        // its 8 x 3 ms of compute: (2M + 1) U, 3 U of it after the backward; 4 M U, 4 U after.
        const Profile big = layers(4, 1.0, 2.0, 1'000'000'000, 1);
        const double big_unit = ring_allreduce_ms(2'000'000'000, 8, gbps) / 2.0, busy = 8 * 3.0;
        for (const auto& [zero, total, last] : {std::tuple{2, 17.0, 3.0}, std::tuple{3, 32.0, 4.0}}) {
            const StepPlan plan = step(big, ScheduleKind::one_f_one_b, 4, 8, 1,
                                       TrainingOptions{.dp = 8, .zero = zero, .link_gbps = gbps, .fp32_grads = true});
            QVERIFY(exact(plan.allreduce_ms, last * big_unit + std::max(0.0, (total - last) * big_unit - busy)));
        }
    }

    void wholeStepWithSelectiveRecomputation()
    {
        Profile profile = layers(4, 4.0, 8.0, 1'000'000, 59'768'832, 0);
        profile.shape = ModelShape{.seq_len = 1024, .hidden_size = 512, .attention_heads = 8};
        const StepPlan plan =
            step(profile, ScheduleKind::one_f_one_b, 2, 4, 1,
                 TrainingOptions{.dp = 2, .zero = 1, .recompute = Recompute::selective, .link_gbps = 100.0});
        QCOMPARE(layer_selective_bytes(profile, profile.layers[0]), std::int64_t(17'825'792));
        QVERIFY(exact(layer_selective_recompute_ms(profile, profile.layers[0]), 1.0));
        QVERIFY(exact(plan.plan.timeline.makespan, 130.0));
        QCOMPARE(plan.memory[0].weights + plan.memory[0].gradients + plan.memory[0].optimizer,
                 std::int64_t(20'000'000));
        QCOMPARE(plan.memory[0].activations, std::int64_t(2 * 2 * 17'825'792 + 41'943'040));
        QCOMPARE(plan.memory[1].activations, std::int64_t(1 * 2 * 17'825'792 + 41'943'040));
        QCOMPARE(plan.peak_memory_bytes, std::int64_t(20'000'000 + 2 * 2 * 17'825'792 + 41'943'040));
        QVERIFY(exact(plan.allreduce_ms, 0.32));
        QVERIFY(exact(plan.step_time, 130.0 + 0.32));
    }

    void nonFiniteTimesAreRefused()
    {
        const Profile profile = layers(2, 1.0, 2.0, 1000, 1000, std::int64_t(1) << 40);
        const auto problem = error_of(
            [&] { step(profile, ScheduleKind::gpipe, 2, 2, 1, TrainingOptions{.dp = 2, .link_gbps = 1e-306}); });
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("not a finite number") != std::string::npos, problem->message.c_str());
    }

    void recomputationInTheMakespan()
    {
        // 1F1B on uniform stages: (M + N - 1)(F + B); full recomputation adds F to every B.
        const double F = 1.5, B = 2.5;
        for (int n : {2, 4, 8})
            for (int m : {n, 2 * n, 32}) {
                const Profile profile = layers(n, F, B, 1, 340);
                const double none = step(profile, ScheduleKind::one_f_one_b, n, m).plan.timeline.makespan;
                QVERIFY(exact(none, (m + n - 1) * (F + B)));
                const StepPlan full =
                    step(profile, ScheduleKind::one_f_one_b, n, m, 1, TrainingOptions{.recompute = Recompute::full});
                QVERIFY(exact(full.plan.timeline.makespan, (m + n - 1) * (2 * F + B)));
                QVERIFY(exact(full.step_time, full.plan.timeline.makespan)); // no DP, no all-reduce
                // Without a shape nothing is known to drop: selective changes nothing.
                const StepPlan selective = step(profile, ScheduleKind::one_f_one_b, n, m, 1,
                                                TrainingOptions{.recompute = Recompute::selective});
                QVERIFY(exact(selective.plan.timeline.makespan, none));
            }
    }

    void recomputationInMemory()
    {
        // A transformer block's activations, Korthikanti et al.: s*b*h*(34 + 5*a*s/h) bytes.
        const std::int64_t s = 2048, b = 2, h = 1024, a = 16;
        const std::int64_t full_bytes = s * b * h * 34 + 5 * a * s * s * b;
        Profile profile = layers(8, 1.0, 2.0, 0, full_bytes);
        profile.shape = ModelShape{.seq_len = int(s), .hidden_size = int(h), .attention_heads = int(a)};
        const Layer& block = profile.layers[0];
        QCOMPARE(layer_selective_bytes(profile, block), 34 * s * b * h); // drops 5as/h
        QCOMPARE(layer_output_bytes(profile, block), 2 * s * b * h);
        QCOMPARE(layer_input_bytes(profile, block), 2 * s * b * h);
        QVERIFY(exact(layer_selective_recompute_ms(profile, block), 1.0 * s / (6.0 * h + s)));

        // 4 stages of 2 blocks under 1F1B, M = 8: stage s keeps N - s microbatches.
        for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
            const StepPlan plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, TrainingOptions{.recompute = mode});
            const std::int64_t kept = mode == Recompute::none ? full_bytes
                : mode == Recompute::selective                ? 34 * s * b * h
                                                              : 2 * s * b * h;
            // Recomputing one layer brings back what it did not keep, for one microbatch.
            const std::int64_t working = full_bytes - kept;
            for (int stage = 0; stage < 4; ++stage)
                QCOMPARE(plan.memory[stage].activations, (4 - stage) * 2 * kept + working);
        }
        // Explicit fields win over the defaults, and are checked against activation_bytes.
        profile.layers[0].input_bytes = 7;
        QCOMPARE(layer_input_bytes(profile, profile.layers[0]), std::int64_t(7));
        profile.layers[0].input_bytes = full_bytes + 1;
        QCOMPARE(error_of([&] { validate_profile(profile); })->kind, ProblemKind::invalid_profile);
    }

    void linksCostBytesOverBandwidthPlusLatency()
    {
        // GPipe crosses N - 1 links forward and N - 1 back: 3 (M + N - 1) + 2 (N - 1) c with
        // c = latency + 8 * bytes / (G * 10^6) ms.
        const std::int64_t bytes = 25'000'000; // 25 MB a send
        for (double gbps : {100.0, 400.0})
            for (double latency : {0.0, 0.02}) {
                const Profile profile = layers(4, 1.0, 2.0, 1, 1, bytes);
                const StepPlan plan =
                    step(profile, ScheduleKind::gpipe, 4, 8, 1, TrainingOptions{.link_gbps = gbps}, latency);
                const double c = latency + 8.0 * bytes / (gbps * 1e6);
                QVERIFY(exact(transfer_ms(bytes, gbps), 8.0 * bytes / (gbps * 1e6)));
                QVERIFY(exact(plan.plan.timeline.makespan, 3.0 * (8 + 4 - 1) + 2 * 3 * c));
                const auto sends = transfers(plan);
                QCOMPARE(sends.size(), std::size_t(2 * 3 * 8)); // every F and B that crosses
                for (const Transfer& t : sends) {
                    QCOMPARE(t.bytes, bytes);
                    QVERIFY(exact(t.end - t.start, c));
                    QCOMPARE(t.to_stage, t.after == OpKind::F ? t.from_stage + 1 : t.from_stage - 1);
                }
            }
        // The default output: activation_bytes * 2 / 34 (no shape), i.e. 2sbh of a block's 34sbh.
        const Profile profile = layers(2, 1.0, 2.0, 1, 3400);
        QCOMPARE(layer_output_bytes(profile, profile.layers[0]), std::int64_t(200));
        // One stage has no links.
        QCOMPARE(transfers(step(profile, ScheduleKind::gpipe, 1, 4, 1, {.link_gbps = 1})).size(), std::size_t(0));
    }

    void ringAllReduce()
    {
        const double gbps = 200.0;
        const std::int64_t params = 1'000'000'000; // per stage: 2 GB of 16-bit gradients
        for (int d : {2, 4, 8, 16}) {
            const double expected = 2.0 * (d - 1) / d * (2.0 * params) * 8.0 / (gbps * 1e6);
            QVERIFY(exact(ring_allreduce_ms(2 * params, d, gbps), expected));
            const Profile profile = layers(4, 1.0, 2.0, params, 1);
            const TrainingOptions options{.dp = d, .link_gbps = gbps};
            const StepPlan plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, options);
            QVERIFY(exact(plan.allreduce_ms, expected));
            // After the flush, nothing overlaps: the whole all-reduce adds to the step.
            QVERIFY(exact(plan.step_time, plan.plan.timeline.makespan + expected));
            QCOMPARE(plan.allreduce.size(), std::size_t(4));
            for (const AllReduce& a : plan.allreduce) {
                QCOMPARE(a.bytes, 2 * params);
                QVERIFY(exact(a.start, plan.plan.timeline.makespan));
            }
            // Overlapped: each stage starts when its last microbatch's backward (B = 2 ms) starts.
            // Under 1F1B stage 0 ends last (at the makespan), so all but 2 ms of its all-reduce
            // is exposed; the others hide in its cool-down: stage s's last B ends 2s ms earlier.
            TrainingOptions overlap = options;
            overlap.overlap_allreduce = true;
            const StepPlan hidden = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, overlap);
            QVERIFY(exact(hidden.step_time, hidden.plan.timeline.makespan - 2.0 + expected));
            for (int s = 0; s < 4; ++s)
                QVERIFY(exact(hidden.allreduce[s].start, hidden.plan.timeline.makespan - 2.0 * s - 2.0));
            // In units U of half a ring: ZeRO-3 gathers the weights for every microbatch's forward
            // and backward and reduce-scatters its gradients, 3 M U, of which the last microbatch's
            // 3 U follow the backward and the other 21 U overlap the stage's 8 x (1 + 2) ms of
            // compute; ZeRO-2 reduce-scatters every microbatch and gathers once, (M + 1) U, 2 U last.
            const double unit = expected / 2.0, busy = 8 * 3.0;
            const StepPlan z3 = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1,
                                     TrainingOptions{.dp = d, .zero = 3, .link_gbps = gbps});
            QVERIFY(exact(z3.allreduce_ms, 3.0 * unit + std::max(0.0, 21.0 * unit - busy)));
            const StepPlan z2 = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1,
                                     TrainingOptions{.dp = d, .zero = 2, .link_gbps = gbps});
            QVERIFY(exact(z2.allreduce_ms, 2.0 * unit + std::max(0.0, 7.0 * unit - busy)));
            // With one microbatch ZeRO-3 is 1.5 rings and ZeRO-2 one.
            QVERIFY(exact(step(profile, ScheduleKind::one_f_one_b, 4, 1, 1,
                               TrainingOptions{.dp = d, .zero = 3, .link_gbps = gbps})
                              .allreduce_ms,
                          1.5 * expected));
        }
        // Overlap hides a late stage's large all-reduce behind stage 0's cool-down.
        Profile skewed = layers(4, 1.0, 2.0, 1, 1);
        skewed.layers[3].params = 100'000'000;
        TrainingOptions options{.dp = 8, .link_gbps = 100.0};
        const StepPlan flushed = step(skewed, ScheduleKind::one_f_one_b, 4, 8, 1, options);
        options.overlap_allreduce = true;
        const StepPlan overlapped = step(skewed, ScheduleKind::one_f_one_b, 4, 8, 1, options);
        const double ar3 = ring_allreduce_ms(2 * 100'000'000, 8, 100.0);
        QVERIFY(exact(flushed.step_time, flushed.plan.timeline.makespan + ar3));
        QVERIFY(exact(overlapped.step_time,
                      std::max(overlapped.plan.timeline.makespan, overlapped.allreduce[3].start + ar3)));
        QVERIFY(overlapped.step_time < flushed.step_time);
        // Without DP (or without a bandwidth) there is nothing to reduce.
        QVERIFY(step(skewed, ScheduleKind::one_f_one_b, 4, 8).allreduce.empty());
    }

    void limitsAndJson()
    {
        const Profile profile = layers(4, 1.0, 2.0, 1 << 20, 1 << 20);
        TrainingOptions options{.dp = 2, .zero = 1, .gpu_memory_bytes = std::int64_t(1) << 40};
        StepPlan plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, options);
        QVERIFY(plan.fits);
        // 1F1B: stage 0 holds the most activations, so it sets the peak.
        QCOMPARE(plan.peak_memory_bytes, plan.memory[0].total);
        options.gpu_memory_bytes = plan.memory[1].total; // stage 0 is over, the others fit
        plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, options);
        QVERIFY(!plan.fits && !plan.memory[0].fits && plan.memory[1].fits && plan.memory[3].fits);

        const nlohmann::json j = step_plan_json(plan, "test", "uniform");
        QCOMPARE(j["peak_memory_bytes"].get<std::int64_t>(), plan.peak_memory_bytes);
        QCOMPARE(j["fits"].get<bool>(), false);
        QCOMPARE(j["stage_stats"][0]["memory"]["total"].get<std::int64_t>(), plan.memory[0].total);
        for (const char* key : {"weights", "gradients", "optimizer", "activations", "total", "fits"})
            QVERIFY2(j["stage_stats"][2]["memory"].contains(key), key);
        for (const char* key : {"dp", "zero", "recompute", "step_time", "allreduce", "gpu_memory_bytes"})
            QVERIFY2(j.contains(key), key);
        QVERIFY(!j.contains("sends")); // no bandwidth given

        // With a bandwidth and DP the trace shows the sends and all-reduces on link tracks.
        options = TrainingOptions{.dp = 2, .link_gbps = 100.0};
        plan = step(profile, ScheduleKind::one_f_one_b, 4, 8, 1, options);
        const nlohmann::json trace = to_trace_json(plan, "t");
        std::size_t sends = 0, reduces = 0;
        for (const auto& e : trace["traceEvents"]) {
            sends += e.value("cat", "") == "send";
            reduces += e.value("cat", "") == "allreduce";
            if (e.value("cat", "") == "send")
                QVERIFY(e["tid"].get<int>() >= 4); // tracks N + s, beside the stages
        }
        QCOMPARE(sends, transfers(plan).size());
        QCOMPARE(sends, std::size_t(2 * 3 * 8));
        QCOMPARE(reduces, std::size_t(4));
        QCOMPARE(step_plan_json(plan, "test", "uniform")["sends"].size(), sends);

        for (const TrainingOptions& bad : {TrainingOptions{.dp = 0}, TrainingOptions{.zero = 4},
                                           TrainingOptions{.link_gbps = -1}, TrainingOptions{.gpu_memory_bytes = 0}})
            QCOMPARE(error_of([&] { step(profile, ScheduleKind::gpipe, 2, 2, 1, bad); })->kind,
                     ProblemKind::invalid_argument);
        QCOMPARE(parse_recompute("selective"), std::optional(Recompute::selective));
        QVERIFY(!parse_recompute("some"));
    }
};

QTEST_GUILESS_MAIN(TestPipelineTraining)
#include "tst_pipeline_training.moc"
