#pragma once
// The training state one rank owns, as it is saved, loaded and resharded.

#include "core/checkpoint/manifest.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace shardscope {

// One rank's slice of the training state: fp16/bf16 parameters (raw bits) and the ZeRO optimizer
// state of the same slice. All four vectors have param_shard_numel elements.
struct RankState {
    int rank = 0;
    ParamDtype dtype = ParamDtype::F16;
    uint64_t param_shard_offset = 0;
    std::vector<uint16_t> param;
    std::vector<float> master;
    std::vector<float> exp_avg;
    std::vector<float> exp_avg_sq;

    uint64_t numel() const { return param.size(); }
    bool operator==(const RankState&) const = default;
};

// Called from worker threads: implementations must be thread-safe and quick.
using ProgressFn = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

} // namespace shardscope
