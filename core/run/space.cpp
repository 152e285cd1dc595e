// Space before writing: a save that cannot fit is refused before its first byte, and
// one that fits only without old steps removes them first — a full disk otherwise fails the save
// half-way, after rotation had waited for the new step to commit (keep_last + 1 steps of room).

#include "core/run/lifecycle.h"
#include "core/run/internal/steps_scan.h"
#include "core/run/mirror_tier.h"
#include "core/run/root_status.h"

#include <algorithm>
#include <cstdio>

namespace shardscope {

namespace fs = std::filesystem;

uint64_t expected_step_bytes(const std::vector<RankStateView>& states, const SaveOptions& meta)
{
    // 2 bytes a parameter and 3 x 4 of fp32 state (as reshard's estimate), a safetensors header
    // a rank, and the manifest with the training state it carries.
    uint64_t bytes = 64 * 1024 + (meta.training_state.is_null() ? 0 : meta.training_state.dump().size());
    for (const RankStateView& s : states)
        bytes += s.numel() * 14 + 16 * 1024;
    return bytes;
}

namespace {

std::string mib(uint64_t bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

} // namespace

void CheckpointManager::make_room(uint64_t need, const std::string& name)
{
    const TierSpace space = tier_space(StepTier::local, m_options.root);
    if (!space.free_bytes || *space.free_bytes >= need)
        return; // statvfs unavailable: the write itself will say whether it fits
    // What may go: complete steps, oldest first, except `latest`, one being uploaded, the newest
    // step not recorded as unhealthy and, with a mirror, the newest step the mirror lacks (the one
    // a restart would want if `latest` rots).
    std::vector<StepInfo> complete;
    for (auto& s : scan(m_options.root, StepTier::local))
        if (s.complete)
            complete.push_back(std::move(s));
    std::optional<std::string> newest_unmirrored;
    if (m_options.mirror)
        for (auto it = complete.rbegin(); it != complete.rend() && !newest_unmirrored; ++it)
            if (!known_on_mirror(*it))
                newest_unmirrored = it->name;
    const StepInfo* healthy = newest_maybe_healthy(complete); // what a resume would go back to
    const std::string newest_healthy = healthy ? healthy->name : std::string();
    std::vector<const StepInfo*> candidates;
    uint64_t freeable = 0;
    {
        std::lock_guard lock(m_mutex);
        for (const StepInfo& s : complete) {
            const bool uploading = std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end();
            if (s.is_latest || uploading || s.name == newest_unmirrored || s.name == newest_healthy)
                continue;
            candidates.push_back(&s);
            freeable += s.bytes;
        }
    }
    if (*space.free_bytes + freeable < need) // removing steps would not help: keep them all
        throw Error(ProblemKind::io_error,
                    (m_options.root / name).string() + ": not saved: the step needs about " + mib(need) + " but only " +
                        mib(*space.free_bytes) + " are free on its file system" +
                        (freeable ? " (" + mib(freeable) + " more if every step that may go went)" : std::string()) +
                        "; nothing was written",
                    m_options.root.string());
    std::string removed;
    uint64_t free = *space.free_bytes;
    for (const StepInfo* s : candidates) {
        if (free >= need)
            break;
        remove_step_dir(m_options.root, s->name, m_options.durable);
        removed += (removed.empty() ? "" : ", ") + s->name;
        const TierSpace now = tier_space(StepTier::local, m_options.root);
        free = now.free_bytes.value_or(free + s->bytes);
    }
    warn(name + " needs about " + mib(need) + " and " + mib(*space.free_bytes) +
         " were free: removed the oldest step(s) first, ahead of rotation: " + removed);
    if (free < need)
        throw Error(ProblemKind::io_error,
                    (m_options.root / name).string() + ": not saved: the step needs about " + mib(need) + " but only " +
                        mib(free) + " are free after removing " + removed + "; nothing was written",
                    m_options.root.string());
}

} // namespace shardscope
