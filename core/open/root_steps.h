#pragma once
// The step folders of a checkpoint root of any format, so that "where can I resume?" has an
// answer for a torchtitan or DeepSpeed run too: ShardScope's step-<N>, DeepSpeed's global_step<N>,
// Megatron's iter_<N>, and torch DCP checkpoints saved side by side (torchtitan's step-<N>, or any
// folder holding a `.metadata` whose name ends in a number). Names only: nothing is verified here.

#include "core/open/detect.h"
#include "core/storage/location.h"
#include "core/util/error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

struct RootStep {
    std::string name; // the folder's name: global_step3, iter_0000020, step-10
    uint64_t step = 0; // the training step its name gives
    storage::Location location; // root's child `name`
    bool tagged = false; // the root's tag file (`latest`, latest_checkpointed_iteration.txt) names it
};

struct RootSteps {
    storage::Location root;
    // shardscope, deepspeed, megatron or torch_dcp; unknown when the path is no root of any of
    // them (an empty folder, or one checkpoint rather than a folder of steps).
    CheckpointFormat format = CheckpointFormat::unknown;
    std::vector<RootStep> steps; // by step, newest last (equal steps by name)
    std::optional<std::string> tag; // the folder the tag file names, when it could be read
    std::optional<Problem> tag_problem; // why the tag file names no usable folder
};

// Lists `root` once (a local directory, or a prefix in a bucket with one listing), without
// following a symlink anywhere: a step folder must be a real directory inside it (a symlink named
// like a step is not listed), a DCP step's `.metadata` a regular file in it. Names that are not
// valid UTF-8 or hold control bytes are skipped. The format is detect_format's decision over the
// root's names (`latest`, the tracker file, global_step* and iter_* entries); where that finds no
// root, ShardScope step folders with a manifest.json, then DCP step folders decide. Throws
// Error(cannot_open) when `root` cannot be opened or nothing is beneath the prefix,
// Error(remote_error) when the server fails; a bad tag file is `tag_problem`.
RootSteps list_root_steps(const storage::Location& root);

// The number a DCP step folder's name ends in (step-10, step_10, checkpoint-10,
// epoch_3_step_100 -> 100; 1 to 19 digits), or nullopt.
std::optional<uint64_t> trailing_step_number(std::string_view name);

} // namespace shardscope
