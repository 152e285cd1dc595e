// The root's step directories and `latest`, read and changed without a manager: what readers
// (verify, info, status, the app) use, and what the manager builds on.

#include "core/run/lifecycle.h"
#include "core/run/internal/steps_scan.h"
#include "core/run/mirror_tier.h"

#include "core/checkpoint/directory.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>

namespace shardscope {

namespace fs = std::filesystem;

std::string step_dir_name(uint64_t step)
{
    char name[32];
    std::snprintf(name, sizeof name, "step-%08llu", static_cast<unsigned long long>(step));
    return name;
}

std::optional<uint64_t> parse_step_dir_name(std::string_view name)
{
    return number_after(name, "step-"); // the one rule for a step folder's number
}

std::string_view to_string(StepTier tier)
{
    return tier == StepTier::local ? "local" : "mirror";
}

std::optional<std::string> read_latest(const fs::path& root)
{
    fsutil::UniqueFd dirfd = fsutil::open_directory(root);
    if (!fsutil::exists_at(dirfd.get(), "latest"))
        return std::nullopt;
    const fs::path dir = resolve_checkpoint_dir(root); // validates what `latest` names
    if (dir == root)
        return std::nullopt; // the root itself has a manifest: it is a step, not a root
    return dir.filename().string();
}

void write_latest(const fs::path& root, const std::string& step_dir, bool durable)
{
    if (fsutil::unsafe_name_reason(step_dir) || step_dir.find('/') != std::string::npos)
        throw Error(ProblemKind::invalid_argument, "'" + step_dir + "' is not a step directory name");
    fsutil::UniqueFd dirfd = fsutil::open_directory(root);
    fsutil::write_file_atomic(dirfd.get(), "latest", step_dir + "\n", root.string(), durable);
}

StepInfo describe_step(const fs::path& root, const std::string& name, uint64_t step, StepTier tier)
{
    StepInfo info;
    info.name = name;
    info.step = step;
    info.tier = tier;
    const fs::path dir = root / name;
    try {
        fsutil::UniqueFd fd = fsutil::open_directory(dir);
        info.leftover_tmp_files = leftover_tmp_files(fsutil::list_directory(fd.get()));
        if (!fsutil::exists_at(fd.get(), "manifest.json")) {
            info.problem = "no manifest.json: the save did not finish";
            return info;
        }
        info.bad_manifest = true; // until it parses
        const Manifest m = read_manifest(dir);
        info.bad_manifest = false;
        info.complete = true;
        info.world_size = m.world_size;
        info.wall_clock_seconds = m.wall_clock_seconds;
        info.bytes = m.total_bytes();
        info.recorded_health = m.health();
        info.health = m.describe_health();
        if (tier == StepTier::mirror && !fsutil::exists_at(fd.get(), kUploadManifest)) {
            info.complete = false;
            info.problem = "the upload has not finished (no upload.json)";
        }
    } catch (const Error& e) {
        info.complete = false;
        info.problem = e.what();
    }
    return info;
}

void remove_step_dir(const fs::path& root, const std::string& name, bool durable)
{
    try {
        fsutil::UniqueFd root_fd = fsutil::open_directory(root);
        {
            // Never through a symlink: a link named like a step is removed, not what it points at.
            fsutil::UniqueFd step_fd(
                ::openat(root_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (step_fd) {
                if (fsutil::unlink_at(step_fd.get(), "manifest.json")) {
                    if (durable)
                        fsutil::fsync_or_throw(step_fd.get(), (root / name).string());
                } else if (errno != ENOENT) {
                    return; // the manifest stays, so must its shards
                }
            }
        }
        fsutil::remove_tree_at(root_fd.get(), name);
    } catch (const Error&) {
        // gone already, or not removable now: the next sweep tries again
    }
}

std::vector<StepInfo> scan(const fs::path& root, StepTier tier)
{
    std::vector<StepInfo> steps;
    std::error_code ec;
    if (!fs::is_directory(root, ec))
        return steps;
    fsutil::UniqueFd fd = fsutil::open_directory(root);
    for (const auto& name : fsutil::list_directory(fd.get())) {
        const auto step = parse_step_dir_name(name);
        struct stat st {};
        if (step && ::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            steps.push_back(describe_step(root, name, *step, tier));
    }
    std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    std::optional<std::string> latest;
    try {
        latest = read_latest(root);
    } catch (const Error&) {
        // a broken `latest` marks no step; verify reports it
    }
    for (auto& s : steps)
        s.is_latest = latest && *latest == s.name;
    return steps;
}

const StepInfo* newest_maybe_healthy(std::span<const StepInfo> complete)
{
    for (auto it = complete.rbegin(); it != complete.rend(); ++it)
        if (it->maybe_healthy())
            return &*it;
    return nullptr;
}

RotationPlan plan_rotation(const std::vector<StepInfo>& complete, int keep, std::optional<int> mirror_keep,
                           const std::function<bool(const StepInfo&)>& busy,
                           const std::function<bool(const StepInfo&)>& on_mirror)
{
    RotationPlan plan;
    // Steps newer than the one `latest` names were never published — a run rolled back to an
    // older healthy step leaves the diverged ones it passed over — and do not count towards
    // keep_last: the run's own steps would otherwise make way for them. They stay until the run
    // writes those steps again (the old copy is set aside then, format.md 6.5).
    std::size_t counted = complete.size();
    for (std::size_t i = 0; i < complete.size(); ++i)
        if (complete[i].is_latest)
            counted = i + 1;
    // When a run diverges every later save is unhealthy, and keep_last alone would rotate the last
    // good step away within K saves: the one a resume needs.
    const StepInfo* newest_healthy = newest_maybe_healthy(std::span(complete).first(counted));
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < counted; ++i) {
        const StepInfo& s = complete[i];
        if (s.is_latest || busy(s))
            continue;
        if (&s == newest_healthy) {
            plan.kept_healthy = s.name;
            continue;
        }
        // Never delete the only copy of a step the mirror lacks and is meant to hold: one of
        // the newest mirror_keep_last. An older one its rotation would delete anyway, so
        // while the mirror lags the local tier grows by at most mirror_keep_last - keep_last.
        if (mirror_keep && counted - i <= static_cast<std::size_t>(*mirror_keep) && !on_mirror(s)) {
            plan.held.push_back(s.name);
            continue;
        }
        plan.remove.push_back(s.name);
    }
    return plan;
}

std::optional<std::string> rotate_steps(const fs::path& root, int keep_last, bool durable)
{
    std::vector<StepInfo> complete;
    for (StepInfo& s : scan(root, StepTier::local))
        if (s.complete)
            complete.push_back(std::move(s));
    const auto never = [](const StepInfo&) { return false; };
    RotationPlan plan = plan_rotation(complete, keep_last, std::nullopt, never, never);
    for (const auto& name : plan.remove)
        remove_step_dir(root, name, durable);
    return plan.kept_healthy;
}

std::vector<StepInfo> list_steps(const fs::path& root, const std::optional<storage::Location>& mirror)
{
    std::vector<StepInfo> steps = scan(root, StepTier::local);
    if (mirror) {
        std::vector<StepInfo> remote = MirrorTier(*mirror).scan();
        for (auto& s : steps)
            for (const auto& r : remote)
                s.uploaded = s.uploaded || (r.name == s.name && r.complete);
        steps.insert(steps.end(), remote.begin(), remote.end());
    }
    return steps;
}

} // namespace shardscope
