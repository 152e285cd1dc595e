#include "core/run/root_status.h"
#include "core/run/mirror_tier.h"
#include "core/run/internal/steps_scan.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <sys/statvfs.h>

namespace shardscope {

namespace fs = std::filesystem;

TierSpace tier_space(StepTier tier, const fs::path& path)
{
    TierSpace space{.tier = tier, .path = path};
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) {
        space.error = path.string() + ": statvfs failed: " + std::strerror(errno);
        return space;
    }
    space.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    space.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
    return space;
}

namespace {

std::optional<std::string> latest_or_none(const fs::path& root)
{
    try {
        return read_latest(root);
    } catch (const Error&) {
        return std::nullopt; // a broken `latest` names no step; verify says why
    }
}

std::vector<StepInfo> complete_of(const std::vector<StepInfo>& steps, StepTier tier)
{
    std::vector<StepInfo> out;
    for (const auto& s : steps)
        if (s.tier == tier && s.complete)
            out.push_back(s);
    return out;
}

nlohmann::json copy_json(const StepInfo& s)
{
    nlohmann::json j = {
        {"complete", s.complete}, {"latest", s.is_latest},      {"wall_clock_seconds", s.wall_clock_seconds},
        {"bytes", s.bytes},       {"world_size", s.world_size}, {"leftover_tmp_files", s.leftover_tmp_files}};
    if (!s.complete)
        j["problem"] = s.problem;
    // What its writer counted in the commit: "healthy", "unhealthy" (with which ranks and why),
    // or null when the manifest records none.
    j["recorded_health"] = !s.recorded_health ? nlohmann::json(nullptr)
        : s.recorded_health->healthy()        ? nlohmann::json("healthy")
                                              : nlohmann::json("unhealthy");
    if (s.recorded_health && !s.recorded_health->healthy())
        j["recorded_health_detail"] = s.health;
    return j;
}

nlohmann::json optional_number(const std::optional<uint64_t>& v)
{
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

} // namespace

bool writer_running(const std::optional<LockHolder>& lock)
{
    return lock && lock->running != std::optional<bool>(false);
}

std::map<std::string, UploadState> upload_states_on_disk(const std::vector<StepInfo>& steps,
                                                         const std::optional<LockHolder>& lock, int mirror_keep_last)
{
    std::map<std::string, const StepInfo*> mirror_copies;
    for (const auto& s : steps)
        if (s.tier == StepTier::mirror)
            mirror_copies[s.name] = &s;
    std::vector<const StepInfo*> local; // complete, by step (list_steps sorts each tier)
    for (const auto& s : steps)
        if (s.tier == StepTier::local && s.complete)
            local.push_back(&s);
    if (local.size() > static_cast<std::size_t>(std::max(mirror_keep_last, 0)))
        local.erase(local.begin(), local.end() - std::max(mirror_keep_last, 0));
    const bool writing = writer_running(lock);
    std::map<std::string, UploadState> out;
    for (const StepInfo* s : local) {
        const auto copy = mirror_copies.find(s->name);
        if (s->uploaded || (copy != mirror_copies.end() && copy->second->complete))
            out[s->name] = UploadState::uploaded;
        else if (!writing)
            out[s->name] = UploadState::failed;
        else
            out[s->name] = copy != mirror_copies.end() ? UploadState::uploading : UploadState::pending;
    }
    return out;
}

RootStatus root_status(const fs::path& root, const std::optional<storage::Location>& mirror, int keep_last,
                       int mirror_keep_last)
{
    RootStatus st{.root = root, .mirror = mirror, .keep_last = keep_last, .mirror_keep_last = mirror_keep_last};
    (void)fsutil::open_directory(root); // a root that cannot be opened is an error, not an empty root
    st.latest = latest_or_none(root);
    st.lock = read_lock_holder(root);
    st.space.push_back(tier_space(StepTier::local, root));
    st.steps = list_steps(root);
    if (mirror) {
        // A store that cannot be reached (or no credentials) still leaves the local tier to show.
        try {
            const MirrorTier tier(*mirror);
            std::vector<StepInfo> remote = tier.scan();
            for (auto& s : st.steps)
                for (const auto& r : remote)
                    s.uploaded = s.uploaded || (r.name == s.name && r.complete);
            st.steps.insert(st.steps.end(), remote.begin(), remote.end());
            try {
                st.mirror_latest = tier.read_latest();
            } catch (const Error& e) {
                rethrow_remote(e);
                // a broken `latest` names no step; verify says why
            }
            if (tier.is_local())
                st.space.push_back(tier_space(StepTier::mirror, mirror->path));
        } catch (const Error& e) {
            if (e.kind() == ProblemKind::cancelled)
                throw; // the reader stopped: not a mirror that cannot be read
            st.mirror_error = e.what();
        }
    }
    const auto none = [](const StepInfo&) { return false; };
    const auto uploaded = [](const StepInfo& s) { return s.uploaded; };
    RotationPlan local = plan_rotation(complete_of(st.steps, StepTier::local), keep_last,
                                       mirror ? std::optional<int>(mirror_keep_last) : std::nullopt, none, uploaded);
    st.rotation_local = std::move(local.remove);
    st.held_for_mirror = std::move(local.held);
    st.kept_healthy = std::move(local.kept_healthy);
    if (mirror && st.mirror_error.empty()) // a mirror not read says nothing of what it holds
        st.uploads = upload_states_on_disk(st.steps, st.lock, mirror_keep_last);
    if (mirror)
        st.rotation_mirror =
            plan_rotation(complete_of(st.steps, StepTier::mirror), mirror_keep_last, std::nullopt, none, none).remove;
    return st;
}

RootStatus bucket_root_status(const storage::Location& root, int keep_last)
{
    if (root.scheme != storage::Scheme::s3)
        throw Error(ProblemKind::invalid_argument,
                    root.text +
                        ": a checkpoint root is read on a local disk or in a bucket (s3://); a web server "
                        "cannot list its steps");
    const MirrorTier tier(root);
    RootStatus st{.root = storage::to_string(root), .keep_last = keep_last};
    st.steps = tier.scan(StepTier::local);
    try {
        st.latest = tier.read_latest();
    } catch (const Error& e) {
        rethrow_remote(e);
        // a broken `latest` names no step; verify says why
    }
    // As on a disk (read_latest): a `latest` naming no step that is there names none; verify says why.
    if (st.latest &&
        std::none_of(st.steps.begin(), st.steps.end(), [&](const StepInfo& s) { return s.name == *st.latest; }))
        st.latest.reset();
    const auto none = [](const StepInfo&) { return false; };
    RotationPlan plan = plan_rotation(complete_of(st.steps, StepTier::local), keep_last, std::nullopt, none, none);
    st.rotation_local = std::move(plan.remove);
    st.kept_healthy = std::move(plan.kept_healthy);
    return st;
}

nlohmann::json to_json(const RootStatus& st)
{
    using nlohmann::json;
    // One entry per step name, each tier's copy side by side.
    std::map<uint64_t, std::pair<const StepInfo*, const StepInfo*>> by_step;
    for (const auto& s : st.steps)
        (s.tier == StepTier::local ? by_step[s.step].first : by_step[s.step].second) = &s;
    const auto local_complete = complete_of(st.steps, StepTier::local);
    const auto in = [](const std::vector<std::string>& names, const std::string& n) {
        return std::find(names.begin(), names.end(), n) != names.end();
    };
    json steps = json::array();
    for (const auto& [step, copies] : by_step) {
        const StepInfo& any = copies.first ? *copies.first : *copies.second;
        json j = {
            {"step", step}, {"name", any.name}, {"local", copies.first ? copy_json(*copies.first) : json(nullptr)}};
        if (st.mirror) {
            j["mirror"] = copies.second ? copy_json(*copies.second) : json(nullptr);
            // Whether the mirror is meant to hold it: one of the newest mirror_keep_last local steps.
            std::size_t newer = 0;
            for (const auto& s : local_complete)
                newer += s.step > step;
            const bool wanted =
                copies.first && copies.first->complete && newer < static_cast<std::size_t>(st.mirror_keep_last);
            j["upload"] = !st.mirror_error.empty()         ? "unknown"
                : copies.second && copies.second->complete ? "uploaded"
                : copies.second                            ? "partial"
                : wanted                                   ? "missing"
                                                           : "not_needed";
            if (const auto u = st.uploads.find(any.name); u != st.uploads.end())
                j["upload_state"] = std::string(to_string(u->second));
        }
        json deletes = json::array();
        if (in(st.rotation_local, any.name))
            deletes.push_back("local");
        if (in(st.rotation_mirror, any.name))
            deletes.push_back("mirror");
        j["next_rotation_deletes"] = deletes;
        steps.push_back(std::move(j));
    }
    json lock = nullptr;
    if (st.lock) {
        lock = {{"pid", st.lock->pid},
                {"host", st.lock->host},
                {"started_at", st.lock->started_at},
                {"running", st.lock->running ? json(*st.lock->running) : json(nullptr)}};
    }
    json space = json::array();
    for (const auto& t : st.space) {
        json j = {{"tier", std::string(to_string(t.tier))},
                  {"path", t.path.string()},
                  {"free_bytes", optional_number(t.free_bytes)},
                  {"total_bytes", optional_number(t.total_bytes)}};
        if (!t.error.empty())
            j["error"] = t.error;
        space.push_back(std::move(j));
    }
    return {{"ok", true},
            {"root", st.root.string()},
            {"latest", st.latest ? json(*st.latest) : json(nullptr)},
            {"mirror",
             st.mirror ? json{{"path", storage::to_string(*st.mirror)},
                              {"latest", st.mirror_latest ? json(*st.mirror_latest) : json(nullptr)},
                              {"error", st.mirror_error.empty() ? json(nullptr) : json(st.mirror_error)}}
                       : json(nullptr)},
            {"keep", st.keep_last},
            {"mirror_keep", st.mirror ? json(st.mirror_keep_last) : json(nullptr)},
            {"lock", lock},
            {"space", space},
            {"steps", steps},
            {"next_rotation",
             {{"local", st.rotation_local},
              {"mirror", st.rotation_mirror},
              {"held_for_mirror", st.held_for_mirror},
              {"kept_as_newest_healthy", st.kept_healthy ? json(*st.kept_healthy) : json(nullptr)}}}};
}

} // namespace shardscope
