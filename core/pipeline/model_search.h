#pragma once
// The planner's search from a model's shape (`shardctl plan --model`): every (t, cp, ep, pp, dp,
// v, schedule, ZeRO stage, recomputation, micro batch size) with t * cp * pp * dp = GPUs, ep a
// divisor of dp and of the experts, dp * micro batch size dividing the global batch, t splitting
// the model (tensor_parallel_misfit), cp the sequence and pp <= layers; t, cp and ep are every
// divisor that does, not only powers of two. Each
// configuration's profile is parallel_profile (parallel_cost.h: the collectives on the links
// their groups span), cut by compute (the `compute` partition) or, when that cut does not fit,
// by the fastest cut that does (fit_partition.h; `manual:...`), and run through make_step_plan
// with the data-parallel link of its rank layout, exactly what `shardctl schedule --model ...`
// runs for the same flags.
// Sequence parallelism is on whenever t > 1: here it costs the same time and holds less memory.
//
// Pruning, exact: a configuration whose model state alone (the stages' mean under its ZeRO
// stage) exceeds the GPU memory cannot fit, since the peak is at least the mean; the others are
// simulated in order of a lower bound on their step time — the busiest stage computes at least
// the mean, M x (forward + backward of every layer) / pp, and without overlap the last stage's
// data-parallel block follows the makespan, at least that of the mean stage — until the bound
// exceeds the step time of the `top`-th fastest that fits. A configuration whose compute cut
// does not fit is skipped when M x its busiest piece (no cut's is smaller) exceeds that step
// time, before a fitting cut is looked for. Before simulating, a second bound
// with the cut known (model_search.cpp's cut_bound: valid for every kind, split backward or not,
// looped or V-shaped) skips those that cannot enter the top. So the `top` best are those an
// exhaustive search finds (tested against one). When nothing fits, the configurations with the
// least model state are simulated so the closest can be named, and the 16 closest by their even
// cut are simulated again on their least-memory cut.

#include "core/pipeline/model_config.h"
#include "core/pipeline/parallel_cost.h"
#include "core/pipeline/search.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardscope::pipeline {

struct ModelSearchSpec {
    int gpus = 1;
    int global_batch = 1; // samples (sequences) per step
    int seq_len = 0;
    double device_tflops = 156; // the rate one GPU achieves on the matmuls
    double peak_tflops = 0; // for `mfu`; 0: not known
    std::int64_t gpu_memory_bytes = 0;
    LinkChoice links;
    bool overlap_allreduce = false;
    bool fp32_grads = false; // TrainingOptions::fp32_grads
    std::vector<int> micro_batch_sizes; // empty: 1, 2, 4
    std::vector<int> zero; // empty: 0, 1, 2, 3
    std::vector<ScheduleKind> schedules; // empty: every built-in kind (searched_schedules, search.h)
    std::vector<Recompute> recompute; // empty: none, selective, full
    std::vector<int> tp, cp, ep; // empty: every degree that splits the model and the GPUs
    int max_virtual_stages = 8;
    std::size_t top = 5; // how many of the best are guaranteed exact
    bool exhaustive = false; // simulate everything (no pruning): the tests' brute force
};

struct ModelSearchResult {
    SearchResult search; // candidates simulated, fits first by step time
    std::size_t space = 0; // configurations enumerated
    std::size_t pruned_memory = 0; // not simulated: the model state alone exceeds the memory
    std::size_t pruned_time = 0; // not simulated: the step-time bound exceeds the top-th best
    // Of those simulated, how many took less than a bound said they must (the mean-stage bound,
    // M x the least busiest piece, or the cut bound; checked for all of them in an exhaustive
    // search, else the cut bound only where it was worked out).
    // Pruning is exact only while this is 0: the tests' check that every bound is one.
    std::size_t bound_violations = 0;
};

// Model FLOPs of one sample (sequence of `seq_len`): 3 x the forward FLOPs of every layer, i.e.
// Narayanan et al. 2021's eq. 3 without the recomputation's extra forward
// (72 B s l h^2 (1 + s/(6h) + V/(12 l h)) for a GPT block), so recomputation is not counted as
// useful work; `tflops_per_gpu` and `mfu` of a candidate are computed from it.
double model_flops_per_sample(const ModelConfig& config, int seq_len);

// Model FLOPs per GPU per second and their share of the peak (0 when `peak_tflops` is 0), and
// samples per second, for a step of `step_ms` ms over `gpus` GPUs.
struct Throughput {
    double samples_per_second = 0.0;
    double tflops_per_gpu = 0.0;
    double mfu = 0.0;
};
Throughput throughput(double flops_per_sample, std::int64_t global_batch, std::int64_t gpus, double peak_tflops,
                      double step_ms);

// What make_step_plan runs for one candidate of search_model_plans (the same spec), so that a
// viewer can show it exactly: its profile (parallel_profile on its mesh's links) with each
// layer's collectives, its schedule, its cut and its training options.
struct CandidateRun {
    ModelProfile model;
    std::vector<LayerComm> comm; // per layer: the collectives inside its fwd_ms and bwd_ms
    ScheduleSpec schedule;
    std::vector<int> boundaries;
    TrainingOptions options;
};
CandidateRun candidate_run(const ModelConfig& config, const ModelSearchSpec& spec, const Candidate& candidate);

// Throws invalid_argument, one sentence: no factorisation of the GPUs, none on which a schedule
// asked for runs (no_schedule_runs, search.h), no micro batch size
// dividing the global batch, a bad option; Error(cancelled) when `cancel` is set.
ModelSearchResult search_model_plans(const ModelConfig& config, const ModelSearchSpec& spec,
                                     const std::atomic<bool>* cancel = nullptr);

} // namespace shardscope::pipeline
