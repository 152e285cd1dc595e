#pragma once
// Synthetic training state for demos, tests and benchmarks. Element i of every flat vector is a
// function of (seed, i) alone, so the same seed saved at any world size is the same global state
// and load digests agree across world sizes.

#include "core/checkpoint/save.h"

namespace shardscope {

RankState make_demo_rank(uint64_t seed, uint64_t numel_total, int world_size, int rank, ParamDtype dtype);
std::vector<RankState> make_demo_state(uint64_t seed, uint64_t numel_total, int world_size, ParamDtype dtype);

// A plausible model-tensor layout over the flat vector (embedding, blocks, head), for the
// manifest's `tensors` list.
std::vector<TensorInfo> demo_tensor_layout(uint64_t numel_total);

// The manifest metadata of a demo checkpoint: the tensor layout above and a realistic
// training_state (optimizer, LR schedule, dataloader position, RNG) for the app and reports.
CheckpointMeta demo_checkpoint_meta(int world_size, uint64_t step, uint64_t seed, ParamDtype dtype,
                                    uint64_t numel_total);

} // namespace shardscope
