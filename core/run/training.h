#pragma once
// A small, real, deterministic data-parallel training loop: a linear model of `numel` parameters
// fitted with AdamW to synthetic regression data. fp32 master weights and fp16/bf16 parameters;
// each rank owns a ZeRO slice of the optimizer state; a shuffling dataloader; a stateful RNG for
// label noise; warm-up + cosine learning rate.
//
// Everything a resumed run needs is in the checkpoint: the four tensors per rank, and in
// training_state the optimizer hyper-parameters and step, the LR schedule, the dataloader's
// (epoch, offset, shuffle seed) and the RNG state. Gradients are summed in 64-bit fixed point,
// which is associative, so the result does not depend on how samples are split over ranks (and a
// distributed all-reduce of it is exact).

#include "core/checkpoint/load.h"

#include <array>

namespace shardscope {

struct TrainConfig {
    int world_size = 1;
    uint64_t numel = 0;
    uint64_t seed = 1;
    ParamDtype dtype = ParamDtype::BF16;
    int batch_size = 16; // global batch
    uint64_t dataset_size = 4096; // samples per epoch
    double lr = 0.01;
    double min_lr = 0.001;
    uint64_t warmup_steps = 10;
    uint64_t total_steps = 1000; // length of the cosine schedule
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.01;

    // One process per rank (shardctl-mpi): with local_rank >= 0 the Trainer holds and updates only
    // that rank's slice, and `allreduce_sum` must sum the forward pass's fixed-point partial sums
    // over all processes (exact, since integer addition is associative). The core stays MPI-free.
    int local_rank = -1;
    std::function<void(std::vector<int64_t>&)> allreduce_sum;
};

class Trainer {
public:
    explicit Trainer(const TrainConfig& config); // fresh initialisation from config.seed

    // Continues from a loaded checkpoint. Throws Error(invalid_argument) naming the field when
    // the checkpoint was made with a different seed, numel, dtype, optimizer or schedule, or lacks
    // training_state. Every item of the checkpoint is restored or checked against `config`; one it
    // holds that this trainer would not restore (an unknown training_state entry or manifest
    // field, a tensor the load passed over) is named in `unread` when given, and otherwise refused
    // with Error(unread_state): a resume never drops state silently.
    static Trainer resume(const TrainConfig& config, LoadedCheckpoint checkpoint,
                          std::vector<std::string>* unread = nullptr);

    // One optimizer step over the next global batch; returns that batch's loss (NaN once a
    // non-finite parameter reaches the forward pass, as in a diverged run).
    double step();

    // Test support (shardctl train --inject-nan-at-step): a NaN in the first element this
    // trainer holds of `which`, as a diverging run would leave one. Training goes on with it.
    void plant_nan(StateVector which);

    uint64_t steps_done() const { return m_step; }
    double last_loss() const { return m_last_loss; }
    const std::vector<RankState>& ranks() const { return m_ranks; }
    nlohmann::json training_state() const;
    const TrainConfig& config() const { return m_config; }

private:
    double learning_rate(uint64_t step) const;
    uint64_t next_sample();
    double next_noise();

    TrainConfig m_config;
    std::vector<RankState> m_ranks;
    uint64_t m_step = 0;
    uint64_t m_epoch = 0;
    uint64_t m_offset = 0; // position inside this epoch's shuffled order
    std::vector<uint32_t> m_order;
    std::array<uint64_t, 4> m_rng{}; // xoshiro256** state
    double m_last_loss = 0;
};

} // namespace shardscope
