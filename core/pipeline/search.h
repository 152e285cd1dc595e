#pragma once
// The planner's search (`shardctl plan`): over pipeline x data-parallel degree
// (pp * dp = GPUs), virtual stages, microbatches (global batch / (dp * micro batch size)),
// schedule, recomputation and the partition, every candidate is run through make_step_plan —
// the very function `shardctl schedule` calls — so a candidate's step_time and
// peak_memory_bytes are what `schedule` prints for the same options, bit for bit.
//
// Partitions tried per configuration: "compute" (the fastest cut, ignoring memory) and, when
// that does not fit, the fastest cut that fits (memory_fit_boundaries, fit_partition.h, knowing
// how many microbatches the schedule keeps in flight on each stage: exact with one chunk per
// stage and for small interleaved models, a local search for large interleaved ones) or, when
// no cut fits, the cut needing the least memory (least_memory_boundaries), so that the closest
// configuration is not overstated. Such a cut is reported as "manual:B1,B2,...".

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
    int zero = 0;
    bool overlap_allreduce = false;
    std::vector<ScheduleKind> schedules; // empty: all four
    std::vector<Recompute> recompute; // empty: none, selective, full
    int max_virtual_stages = 8; // interleaved tries v = 2 .. this (pp * v <= layers)
};

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
    // Every configuration evaluated: the ones that fit by step time (then fewer GPUs of
    // pipeline, then less memory), then the rest by how far they are over the limit.
    std::vector<Candidate> candidates;
    std::size_t fitting = 0; // how many of them fit
    // (pipeline, schedule, virtual stages) combinations not simulated because the schedule is
    // too large to build (build_schedule's limit); each would have been tried per recompute mode.
    std::size_t skipped = 0;
};

// Throws invalid_argument, one sentence: a global batch that the micro batch size does not
// divide, no pp * dp = gpus with pp <= layers and dp dividing the microbatches, a profile
// measured at another micro batch size, a bad option value, or every configuration too large
// to simulate.
// `cancel` (the GUI's flag) is looked at before every (pipeline, schedule, chunks) combination:
// once set, the search stops with Error(cancelled) within one combination's simulations.
SearchResult search_plans(const Profile& profile, const SearchSpec& spec, const std::atomic<bool>* cancel = nullptr);

// Why `runner_up` is slower than `best`, in a few words naming its largest loss: more compute
// on its busiest stage (recomputation, fewer stages), more pipeline idle (bubble), or more
// exposed all-reduce; e.g. "+4.1 ms (+2.3 %): bubble 18.2 % vs 6.0 %".
std::string why_slower(const Candidate& runner_up, const Candidate& best);

} // namespace shardscope::pipeline
