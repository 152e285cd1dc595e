#pragma once
// The module's parts, one per core subsystem; module.cpp calls each once.

#include <pybind11/pybind11.h>

namespace shardscope::python {

void bind_checkpoint(pybind11::module_& m); // verify, load, save_sharded, write_rank_shard, commit, ...
void bind_inspect(pybind11::module_& m); // stats, diff
void bind_manager(pybind11::module_& m); // CheckpointManager
void bind_pipeline(pybind11::module_& m); // schedule, plan

} // namespace shardscope::python
