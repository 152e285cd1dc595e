#pragma once
// The planner's search (`shardctl plan`): over pipeline x data-parallel degree
// (pp * dp = GPUs), virtual stages, microbatches (global batch / (dp * micro batch size)),
// schedule, ZeRO stage, recomputation and the partition, every candidate is run through make_step_plan —
// the very function `shardctl schedule` calls — so a candidate's step_time and
// peak_memory_bytes are what `schedule` prints for the same options, bit for bit.
//
// Partitions tried per configuration: "compute" (the fastest cut, ignoring memory) and, when
// that does not fit, the fastest cut that fits (memory_fit_boundaries, fit_partition.h, knowing
// how many microbatches the schedule keeps in flight on each stage: exact with one chunk per
// stage and for small interleaved models, a local search for large interleaved ones) or, when
// no cut fits, the cut needing the least memory (least_memory_boundaries), so that the closest
// configuration is not overstated. Such a cut is reported as "manual:B1,B2,...". The ZeRO
// stages share one simulation (with_zero); memory-fitted cuts are looked for from the most
// sharded stage down, and not where a more sharded stage found none or where ZeRO 1 dominates 0.
//
// The micro batch size stays an input: a measured profile's costs and activation bytes are those
// of one micro batch size, and nothing in it says how they scale to another (kernels are not
// linear in the batch at small sizes). `plan --model` computes its costs and so searches it.

#include "core/pipeline/fit_partition.h"
#include "core/pipeline/training.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::pipeline {

struct SearchSpec {
    int gpus = 1;
    int global_batch = 1; // samples per step
    int micro_batch_size = 1; // samples per microbatch
    std::int64_t gpu_memory_bytes = 0;
    double link_gbps = 0.0;
    double p2p_latency_ms = 0.0;
    std::vector<int> zero; // ZeRO stages to try; empty: 0, 1, 2, 3 (searched_zero_stages)
    bool overlap_allreduce = false;
    bool fp32_grads = false; // TrainingOptions::fp32_grads
    std::vector<ScheduleKind> schedules; // empty: every built-in kind (searched_schedules)
    std::vector<Recompute> recompute; // empty: none, selective, full
    int max_virtual_stages = 8; // interleaved tries v = 2 .. this (pp * v <= layers)
};

// What both searches try when a list is left empty: every schedule build_schedule knows, in
// kScheduleKindNames' order, and ZeRO 0..3.
std::vector<ScheduleKind> searched_schedules(const std::vector<ScheduleKind>& asked);
std::vector<int> searched_zero_stages(const std::vector<int>& asked);
// The chunks per stage both searches try `kind` with on `stages` stages of a model of `layers`
// layers: interleaved 2 .. max_virtual (pp * v <= layers, M a multiple of pp, Megatron's rule),
// zb-v and dualpipe-v exactly 2 (2 pp <= layers; dualpipe-v also M >= 2 pp), the others 1.
// With one stage there is nothing to interleave or fold into a V: those kinds get no count.
std::vector<int> searched_virtual_stages(ScheduleKind kind, int stages, int microbatches, int layers, int max_virtual);
// The sentence both searches throw when no split of `gpus` GPUs leaves any of `kinds` a chunk
// count (e.g. only zb-v asked for on one GPU).
std::string no_schedule_runs(int gpus, const std::vector<ScheduleKind>& kinds);
// With one data-parallel rank every ZeRO stage holds and moves what ZeRO 0 does: true for all
// but the first of `stages` then, which the searches skip as repeats.
bool zero_repeats(int zero, int dp, const std::vector<int>& stages);

struct Candidate {
    int tp = 1; // tensor, context and expert parallel degrees (1 for a measured profile)
    bool sp = false;
    int cp = 1;
    int ep = 1;
    int pp = 1;
    int dp = 1;
    int zero = 0;
    int micro_batch_size = 1;
    int virtual_stages = 1;
    int microbatches = 1;
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    Recompute recompute = Recompute::none;
    std::string partition; // as --partition takes it
    double step_time = 0.0; // ms
    double makespan = 0.0;
    double compute_ms = 0.0; // the busiest stage's op time
    double bubble_fraction = 0.0;
    double exposed_allreduce_ms = 0.0;
    std::int64_t peak_memory_bytes = 0;
    bool fits = false;
    double samples_per_second = 0.0;
    // Model FLOPs (model_search.h) per GPU per second, and their share of the GPU's peak; 0 when
    // not known (a measured profile has no FLOPs, a rate without a peak no MFU).
    double tflops_per_gpu = 0.0;
    double mfu = 0.0;
};

struct SearchResult {
    // Every configuration evaluated, by ranks_before: the ones that fit by step time (then fewer
    // GPUs of pipeline, then less memory), then the rest by how far they are over the limit.
    std::vector<Candidate> candidates;
    std::size_t fitting = 0; // how many of them fit
    // (pipeline, schedule, virtual stages) combinations not simulated because the schedule is
    // too large to build (build_schedule's limit); each would have been tried per recompute mode.
    std::size_t skipped = 0;
};

// Throws invalid_argument, one sentence: a global batch that the micro batch size does not
// divide, no pp * dp = gpus with pp <= layers and dp dividing the microbatches, no split on which
// a schedule asked for runs (no_schedule_runs), a profile measured at another micro batch size, a
// bad option value (a ZeRO stage outside 0..3), or every configuration too large to simulate.
// `cancel` (the GUI's flag) is looked at before every (pipeline, schedule, chunks) combination:
// once set, the search stops with Error(cancelled) within one combination's simulations.
SearchResult search_plans(const Profile& profile, const SearchSpec& spec, const std::atomic<bool>* cancel = nullptr);

// The ranking both searches sort by: those that fit first, by step time, then fewer pipeline
// stages, then less memory, then the choices in a fixed order; those that do not, by memory.
// Step times are compared as ranked_time: rounded to 40 significant bits (a relative 1e-12, far
// below the pruning's 1e-9 slack), so two that differ only by floating-point rounding (the same
// costs summed in another order, as zb-v and dualpipe-v often give) usually tie and the memory
// decides (two a hair apart on either side of a grid point still do not); a rounding grid, unlike
// a tolerance, keeps the order strict and weak.
double ranked_time(double step_ms);
bool ranks_before(const Candidate& a, const Candidate& b);

// Why `runner_up` is slower than `best`, in a few words naming its largest loss: more compute
// on its busiest stage (recomputation, fewer stages), more pipeline idle (bubble), or more
// exposed all-reduce; e.g. "+4.1 ms (+2.3 %): bubble 18.2 % vs 6.0 %".
std::string why_slower(const Candidate& runner_up, const Candidate& best);

} // namespace shardscope::pipeline
