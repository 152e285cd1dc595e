#pragma once
// What the manager's files share about a root's steps (core/run only).

#include "core/run/lifecycle.h"

#include <functional>
#include <span>

namespace shardscope {

// One step directory, described without hashing: complete when its manifest parses (and, on the
// mirror, upload.json exists).
StepInfo describe_step(const std::filesystem::path& root, const std::string& name, uint64_t step, StepTier tier);
// Every step directory of `root` (none when it is not a directory), sorted by step, `latest` marked.
std::vector<StepInfo> scan(const std::filesystem::path& root, StepTier tier);

// The newest of `complete` (sorted by step) not recorded as unhealthy: the step a resume would go
// back to, which rotation and make_room never remove. Null when every one is recorded unhealthy.
const StepInfo* newest_maybe_healthy(std::span<const StepInfo> complete);

// What one rotation of a tier does with its complete steps (oldest first): `remove` the names it
// deletes; `held` the local steps kept beyond keep_last only because the mirror lacks them;
// `kept_healthy` the newest step not recorded as unhealthy, when it is older than the newest
// keep_last and kept for that reason alone. The one rule, for CheckpointManager and for
// `shardctl status`'s forecast (format.md, 6.3).
struct RotationPlan {
    std::vector<std::string> remove;
    std::vector<std::string> held;
    std::optional<std::string> kept_healthy;
};
// `mirror_keep`: for the local tier with a mirror, the mirror's retention; `busy`: being written or
// uploaded; `on_mirror`: the mirror holds a verified copy.
RotationPlan plan_rotation(const std::vector<StepInfo>& complete, int keep, std::optional<int> mirror_keep,
                           const std::function<bool(const StepInfo&)>& busy,
                           const std::function<bool(const StepInfo&)>& on_mirror);

} // namespace shardscope
