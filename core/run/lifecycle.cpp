// CheckpointManager: saves, `latest`, clean-up and rotation; the mirror's uploads are in
// mirror_upload.cpp, the writer lock in root_lock.cpp.

#include "core/run/lifecycle.h"
#include "core/run/internal/steps_scan.h"
#include "core/run/mirror_tier.h"

#include "core/checkpoint/directory.h"
#include "core/storage/folder.h"
#include "core/util/fsutil.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <unistd.h>
#include <csignal>
#include <atomic>
#include <map>
#include <set>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMirrorFetch = ".mirror-fetch-";

// ".mirror-fetch-<pid>-<n>": a scratch folder of this process, told apart from another's.
std::string mirror_fetch_name()
{
    static std::atomic<uint64_t> counter{0};
    return std::string(kMirrorFetch) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Scratch folders of processes that are gone (killed mid-resume): a whole step each, on disk.
void remove_dead_fetches(const fs::path& root)
{
    fsutil::UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd)
        return;
    for (const std::string& name : fsutil::list_directory(fd.get())) {
        if (!name.starts_with(kMirrorFetch))
            continue;
        const long pid = std::strtol(name.c_str() + kMirrorFetch.size(), nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            fsutil::remove_tree_at(fd.get(), name);
    }
}

} // namespace

// ---- CheckpointManager ------------------------------------------------------------------------

CheckpointManager::CheckpointManager(ManagerOptions options) : m_options(std::move(options))
{
    if (m_options.keep_last < 1 || m_options.mirror_keep_last < 1)
        throw Error(ProblemKind::invalid_argument, "keep_last must be at least 1");
    if (m_options.mirror && m_options.mirror->is_local()) {
        // The mirror's retention and sweeps delete what they do not hold: pointed at the root (or
        // a folder inside it, or one holding it) they would delete the root's own steps.
        const auto resolved = [](const fs::path& p) { // through symbolic links, without a trailing "/"
            std::error_code ec;
            fs::path out = fs::weakly_canonical(fs::absolute(p, ec), ec);
            return out.has_filename() ? out : out.parent_path();
        };
        const fs::path root = resolved(m_options.root), mirror = resolved(m_options.mirror->path);
        const auto within = [](const fs::path& inner, const fs::path& outer) {
            const auto [end, rest] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
            return end == outer.end();
        };
        if (m_options.mirror->path.empty() || within(mirror, root) || within(root, mirror))
            throw Error(ProblemKind::invalid_argument,
                        m_options.mirror->path.string() + ": the mirror must be a folder apart from the root " +
                            m_options.root.string() + ", neither it, inside it, nor holding it",
                        m_options.mirror->path.string());
    }
    if (m_options.mirror) // before anything is created: a mirror without credentials is refused first
        m_mirror = std::make_unique<MirrorTier>(*m_options.mirror);
    fsutil::make_directories(m_options.root, m_options.durable);
    if (m_mirror)
        m_mirror->prepare(m_options.durable);
}

CheckpointManager::~CheckpointManager()
{
    try {
        wait();
    } catch (...) {
        // Nobody asked for this error any more; the checkpoint itself is left consistent.
    }
}

void CheckpointManager::warn(const std::string& message)
{
    if (m_options.on_warning)
        m_options.on_warning(message);
    else
        std::fprintf(stderr, "shardscope: warning: %s\n", message.c_str());
}

void CheckpointManager::lock_root()
{
    if (!m_lock)
        m_lock = RootLock::acquire(m_options.root, [this](const std::string& m) { warn(m); });
}

void CheckpointManager::join_writer()
{
    if (m_writer.joinable())
        m_writer.join();
}

void CheckpointManager::clean_leftovers()
{
    // A step directory without a manifest is what a crash mid-save leaves. It is never loadable
    // and never named by `latest`, so removing it loses nothing.
    std::lock_guard lock(m_mutex);
    auto sweep = [&](const fs::path& root, bool mirror) {
        for (const StepInfo& s : mirror ? m_mirror->scan() : scan(root, StepTier::local)) {
            const bool busy = (m_writing && *m_writing == s.name) ||
                std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end();
            // A local step whose manifest does not parse is not a crash's leftover (the manifest is
            // renamed into place whole): it stays for verify to explain. On the mirror it is an
            // interrupted upload's copy.
            if (s.complete || (s.bad_manifest && !mirror) || s.is_latest || busy)
                continue;
            if (mirror)
                m_mirror->remove_step(s.name, m_options.durable);
            else
                remove_step_dir(root, s.name, m_options.durable);
        }
        // A crash while `latest` was replaced leaves latest.tmp. Only the local root's: an upload
        // thread may be replacing the mirror's `latest` right now (and it removes stale ones itself).
        if (!mirror)
            if (fsutil::UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); fd)
                fsutil::unlink_at(fd.get(), "latest.tmp");
    };
    sweep(m_options.root, false);
    remove_dead_fetches(m_options.root);
    // A bucket is swept by the upload thread (sweep_mirror): a save never waits for a store.
    if (m_mirror && m_mirror->is_local()) {
        try {
            sweep({}, true);
        } catch (const Error&) {
            // an unreachable mirror is the uploads' problem, never the save's
        }
    }
}

void CheckpointManager::sweep_mirror(const std::string& uploading)
{
    std::vector<std::string> leftovers;
    for (const StepInfo& s : m_mirror->scan())
        if (!s.complete && !s.is_latest && s.name != uploading)
            leftovers.push_back(s.name);
    for (const auto& name : leftovers)
        m_mirror->remove_step(name, m_options.durable);
    m_mirror->abort_uploads_except(uploading);
}

bool CheckpointManager::on_mirror(const StepInfo& step) const
{
    try {
        return m_mirror->describe(step.name, step.step).complete;
    } catch (const Error&) {
        return false; // not known to be there: whatever depends on it keeps its local copy
    }
}

bool CheckpointManager::known_on_mirror(const StepInfo& step)
{
    if (m_mirror->is_local())
        return on_mirror(step); // a directory answers at once
    std::lock_guard lock(m_mutex);
    return m_mirrored.contains(step.name);
}

void CheckpointManager::rotate(StepTier which)
{
    const bool local = which == StepTier::local;
    if (!local && !m_options.mirror)
        return;
    const int keep = local ? m_options.keep_last : m_options.mirror_keep_last;
    std::vector<StepInfo> complete;
    for (auto& s : local ? scan(m_options.root, which) : m_mirror->scan())
        if (s.complete)
            complete.push_back(std::move(s));
    if (complete.size() <= static_cast<std::size_t>(keep))
        return;
    // Which local steps the mirror holds, as the uploads found (a bucket is never asked on a
    // save's thread), before the lock is taken.
    std::set<std::string> mirrored;
    if (local && m_mirror)
        for (const StepInfo& s : complete)
            if (known_on_mirror(s))
                mirrored.insert(s.name);
    std::vector<std::string> held; // local steps kept beyond keep_last for the mirror
    std::vector<std::string> remote_removals;
    std::optional<std::string> kept_healthy;
    {
        std::lock_guard lock(m_mutex);
        const auto busy = [&](const StepInfo& s) {
            return (m_writing && *m_writing == s.name) ||
                (local && std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end());
        };
        const auto on_mirror = [&](const StepInfo& s) { return mirrored.count(s.name) > 0; };
        RotationPlan plan = plan_rotation(
            complete, keep, local && m_options.mirror ? std::optional<int>(m_options.mirror_keep_last) : std::nullopt,
            busy, on_mirror);
        for (const auto& name : plan.remove) {
            if (local)
                remove_step_dir(m_options.root, name, m_options.durable);
            else
                remote_removals.push_back(name); // after the lock: a store may be slow
        }
        held = std::move(plan.held);
        kept_healthy = std::move(plan.kept_healthy);
    }
    for (const auto& name : remote_removals) {
        {
            std::lock_guard lock(m_mutex);
            m_mirrored.erase(name); // no longer to be counted on, whether or not the removal ends
        }
        try {
            m_mirror->remove_step(name, m_options.durable);
        } catch (const Error&) {
            // the mirror's next rotation tries again
        }
    }
    bool tell_healthy = false;
    if (kept_healthy) {
        std::lock_guard lock(m_mutex); // the mirror's rotation runs on the upload thread
        std::string& told = m_kept_healthy_warned[local ? 0 : 1];
        tell_healthy = *kept_healthy != told; // once each time it moves
        told = *kept_healthy;
    }
    if (tell_healthy) {
        std::string newer;
        int listed = 0, more = 0;
        for (auto it = complete.rbegin(); it != complete.rend() && it->name != *kept_healthy; ++it) {
            if (it->maybe_healthy())
                continue;
            if (listed++ < 3)
                newer += (newer.empty() ? "" : "; ") + it->name + " (" + it->health + ")";
            else
                ++more;
        }
        warn("keeping " + *kept_healthy + " beyond keep_last " + std::to_string(keep) + " on the " +
             std::string(to_string(which)) + " tier: it is the newest healthy step, and the newer ones are not: " +
             newer + (more ? "; and " + std::to_string(more) + " more" : std::string()));
    }
    if (!local)
        return;
    bool tell = false;
    {
        std::lock_guard lock(m_mutex);
        tell = held.size() > m_held_warned; // once each time it grows, not at every save
        m_held_warned = held.size();
    }
    if (tell) {
        std::string names;
        for (const auto& n : held)
            names += (names.empty() ? "" : ", ") + n;
        warn("keeping " + std::to_string(held.size()) + " local step(s) beyond keep_last " +
             std::to_string(m_options.keep_last) + " because the mirror lacks them: " + names + " (at most " +
             std::to_string(std::max(0, m_options.mirror_keep_last - m_options.keep_last)) + " are held this way)");
    }
}

void CheckpointManager::commit_step(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta)
{
    const std::string name = step_dir_name(step);
    make_room(expected_step_bytes(states, meta), name);
    struct stat st {};
    if (::lstat((m_options.root / name).c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        // A link under the step's name, which no save makes: written through, it would put the
        // step outside the root while `latest` names it here. It is moved aside, as it is; what
        // it points to is not touched.
        const std::string aside = name + ".link-" + std::to_string(std::time(nullptr));
        fsutil::UniqueFd root_fd = fsutil::open_directory(m_options.root);
        if (!fsutil::rename_at(root_fd.get(), name, aside))
            throw Error(ProblemKind::io_error,
                        (m_options.root / name).string() +
                            " is a symbolic link where the step is to be saved, and cannot be moved aside: " +
                            std::strerror(errno),
                        (m_options.root / name).string());
        if (m_options.durable)
            fsutil::fsync_or_throw(root_fd.get(), m_options.root.string());
        warn((m_options.root / name).string() + " was a symbolic link; moved aside to " + aside +
             " and the step saved in a directory of its own");
    }
    std::error_code ec;
    if (fs::exists(m_options.root / name / "manifest.json", ec) && read_latest(m_options.root) != name) {
        // A committed step that was never published: a run killed between its manifest and the
        // `latest` update, now resumed from an earlier step and saving this step again. It is
        // kept, moved aside, rather than deleted or overwritten.
        const std::string aside = name + ".superseded-" + std::to_string(std::time(nullptr));
        fsutil::UniqueFd root_fd = fsutil::open_directory(m_options.root);
        if (!fsutil::rename_at(root_fd.get(), name, aside))
            throw Error(ProblemKind::already_exists,
                        (m_options.root / name).string() +
                            " already holds a committed step and cannot be moved aside: " + std::strerror(errno));
        // Durable before the step is written anew: otherwise a power cut could bring the old
        // directory back under the name the new one takes.
        if (m_options.durable)
            fsutil::fsync_or_throw(root_fd.get(), m_options.root.string());
    }
    SaveOptions options = meta;
    options.durable = m_options.durable;
    options.threads = m_options.threads;
    save_sharded(states, m_options.root / name, step, options);
    std::optional<std::string> previous;
    try {
        previous = read_latest(m_options.root);
    } catch (const Error&) {
        // a broken `latest` is simply replaced
    }
    try {
        write_latest(m_options.root, name, m_options.durable); // only now is the step the one to resume
    } catch (...) {
        // The rename may have happened before the directory fsync failed: point `latest` back at
        // the step the caller still believes in, so a failed save changes nothing.
        if (previous) {
            try {
                write_latest(m_options.root, *previous, m_options.durable);
            } catch (...) {
                // `latest` then names the new step, which is complete: still a consistent state
            }
        }
        throw;
    }
    {
        std::lock_guard lock(m_mutex);
        m_writing.reset();
        ++m_saves;
        if (m_options.mirror)
            m_uploading.push_back(name); // before rotation can see the step
    }
    if (m_options.mirror) {
        // The new step first, then earlier ones whose upload failed and is due again: the
        // newest copy is the one a restarted job wants.
        std::vector<std::string> names{name};
        try {
            for (auto& n : due_uploads(name, false))
                names.push_back(std::move(n));
        } catch (const Error&) {
            // the root cannot be listed now; the retries wait for the next save
        }
        start_uploads(std::move(names));
    }
    rotate(StepTier::local);
}

void CheckpointManager::finish_previous_write()
{
    join_writer();
    std::lock_guard lock(m_mutex);
    if (m_error) // the previous background write failed: say so now
        std::rethrow_exception(std::exchange(m_error, nullptr));
}

Manifest CheckpointManager::save(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta)
{
    // Bad input is refused before the root is touched: clean_leftovers and commit_step (which
    // moves an unpublished step aside) change the disk, and a save that then refuses must not
    // have. A pending background error stays pending for the next call.
    check_save(states, m_options.root / step_dir_name(step));
    lock_root(); // before anything changes: another job may be writing here
    finish_previous_write(); // uploads go on in the background
    clean_leftovers();
    {
        std::lock_guard lock(m_mutex);
        m_writing = step_dir_name(step);
    }
    try {
        commit_step(states, step, meta);
    } catch (...) {
        std::lock_guard lock(m_mutex);
        m_writing.reset();
        throw;
    }
    return read_manifest(m_options.root / step_dir_name(step));
}

void CheckpointManager::save_async(const std::vector<RankStateView>& states, uint64_t step, SaveOptions meta)
{
    // As in save(), and here also because the write runs later: bad input is refused now, by
    // this call, not reported by the next one.
    check_save(states, m_options.root / step_dir_name(step));
    lock_root(); // before anything changes: another job may be writing here
    finish_previous_write();
    clean_leftovers();
    {
        std::lock_guard lock(m_mutex);
        m_writing = step_dir_name(step);
    }
    // The snapshot: the only part of an asynchronous save the training loop waits for. It goes
    // into a buffer kept between saves (the previous write has finished by now), so after the
    // first save it is a plain copy into memory that is already mapped: first-touch page faults
    // cost far more than the copy itself.
    m_snapshot.resize(states.size());
    for (std::size_t i = 0; i < states.size(); ++i) {
        const RankStateView& from = states[i];
        RankState& to = m_snapshot[i];
        to.rank = from.rank;
        to.dtype = from.dtype;
        to.param_shard_offset = from.param_shard_offset;
        // assign() reuses the existing capacity
        to.param.assign(from.param.begin(), from.param.end());
        to.master.assign(from.master.begin(), from.master.end());
        to.exp_avg.assign(from.exp_avg.begin(), from.exp_avg.end());
        to.exp_avg_sq.assign(from.exp_avg_sq.begin(), from.exp_avg_sq.end());
    }
    m_writer = std::thread([this, step, meta = std::move(meta)] {
        try {
            commit_step(views_of(m_snapshot), step, meta);
        } catch (...) {
            std::lock_guard lock(m_mutex);
            m_writing.reset();
            if (!m_error)
                m_error = std::current_exception();
        }
    });
}

void CheckpointManager::wait()
{
    join_writer();
    std::thread uploads;
    {
        std::lock_guard lock(m_mutex);
        uploads.swap(m_upload_worker); // it ends once the queue is empty
    }
    if (uploads.joinable())
        uploads.join();
    std::lock_guard lock(m_mutex);
    if (m_error)
        std::rethrow_exception(std::exchange(m_error, nullptr));
}

bool CheckpointManager::holds_a_run() const
{
    try {
        if (read_latest(m_options.root))
            return true;
    } catch (const Error& e) {
        rethrow_remote(e);
        return true;
    }
    return m_options.mirror && MirrorTier(*m_options.mirror).read_latest();
}

ResumePoint CheckpointManager::load_resume_point(const ResumeOptions& options)
{
    wait();
    return shardscope::load_resume_point(m_options.root, m_options.mirror, options);
}

namespace {

// The kind a step's recorded or counted health is refused with: its first finding's.
ProblemKind health_kind(const StateHealth& h)
{
    if (h.nonfinite_param + h.nonfinite_master + h.nonfinite_exp_avg + h.nonfinite_exp_avg_sq > 0)
        return ProblemKind::nonfinite_values;
    return h.negative_exp_avg_sq > 0 ? ProblemKind::negative_second_moment : ProblemKind::param_master_mismatch;
}

// Health of loaded ranks, counted as a writer counts it, with the same wording as a record.
std::string loaded_health(const LoadedCheckpoint& loaded, StateHealth& sum)
{
    std::string text;
    for (const RankState& r : loaded.ranks) {
        const StateHealth h = scan_health(r);
        sum += h;
        add_rank_findings(text, r.rank, h);
    }
    return text;
}

Error no_healthy_step(const fs::path& root, const std::vector<std::string>& skipped,
                      const std::optional<StateHealth>& newest)
{
    std::string all;
    for (const auto& s : skipped)
        all += (all.empty() ? "" : "; ") + s;
    return Error(newest ? health_kind(*newest) : ProblemKind::cannot_open,
                 root.string() + ": no healthy step to resume from: " + all +
                     " (--allow-unhealthy, allow_unhealthy=True in Python, resumes from the newest step anyway)",
                 root.string());
}

} // namespace

std::optional<ResumeStep> choose_resume_step(const fs::path& root, bool allow_unhealthy)
{
    const std::optional<std::string> latest = read_latest(root);
    if (!latest)
        return std::nullopt;
    const uint64_t bound = parse_step_dir_name(*latest).value_or(UINT64_MAX);
    std::vector<StepInfo> steps = scan(root, StepTier::local);
    const auto named = std::find_if(steps.begin(), steps.end(), [&](const StepInfo& s) { return s.name == *latest; });
    if (named == steps.end() || !named->complete) // a damaged step is never passed over: its load says why
        return ResumeStep{.name = *latest};
    ResumeStep chosen;
    std::optional<StateHealth> newest;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        if (!it->complete || it->step > bound)
            continue;
        if (allow_unhealthy || it->maybe_healthy()) {
            chosen.name = it->name;
            return chosen;
        }
        chosen.skipped.push_back(it->name + ": " + it->health);
        if (!newest)
            newest = it->recorded_health;
    }
    throw no_healthy_step(root, chosen.skipped, newest);
}

ResumePoint load_step_or_root(const fs::path& path, const ResumeOptions& options)
{
    std::error_code ec;
    if (fs::is_directory(path, ec) && !fs::exists(path / "manifest.json", ec) && fs::exists(path / "latest", ec))
        return load_resume_point(path, std::nullopt, options);
    ResumePoint point;
    point.checkpoint = load_sharded(path, options.expected_world_size, options.load);
    return point;
}

ResumePoint load_resume_point(const fs::path& root, const std::optional<storage::Location>& mirror_location,
                              const ResumeOptions& options)
{
    std::optional<MirrorTier> mirror;
    std::string mirror_error; // why the mirror could not be read: the local tier alone is used
    try {
        if (mirror_location)
            mirror.emplace(*mirror_location);
    } catch (const Error& e) {
        mirror_error = e.what();
    }
    // An S3 mirror's step is fetched into the root to be loaded, and removed after; one folder
    // per process, so that two resumes of one root never share it.
    const fs::path scratch = root / mirror_fetch_name();
    struct Scratch {
        const fs::path& dir;
        ~Scratch()
        {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } remove_scratch{scratch};
    const auto load_from_mirror = [&](const std::string& name) {
        return load_sharded(mirror->fetch(name, scratch), options.expected_world_size, options.load);
    };
    // The newest `latest` bounds the search: a step committed after it was never published. One
    // that names a step no longer here (its local copy was lost) bounds it too when a mirror may
    // hold that step: the step is then tried below like one that does not verify, its loss said.
    std::optional<std::string> local_latest;
    try {
        local_latest = read_latest(root);
    } catch (const Error& e) {
        if (!mirror || e.kind() != ProblemKind::partial_write)
            throw;
        local_latest = read_tag_file(storage::Folder(fsutil::open_listed(root)), "latest", (root / "latest").string());
    }
    std::optional<std::string> latest = local_latest;
    std::vector<StepInfo> mirror_steps;
    if (mirror) {
        try {
            if (!latest)
                latest = mirror->read_latest();
            mirror_steps = mirror->scan();
        } catch (const Error& e) {
            if (e.kind() == ProblemKind::cancelled)
                throw; // the caller stopped the resume: not a lost mirror to resume without
            mirror_error = e.what();
            mirror.reset();
            latest = local_latest; // what the lost mirror named is no bound: none of its steps is read
        }
    }
    if (!latest)
        throw Error(ProblemKind::cannot_open,
                    root.string() + ": no complete checkpoint to resume from (no `latest`)" +
                        (mirror_error.empty() ? std::string() : "; the mirror could not be read: " + mirror_error),
                    root.string());
    const uint64_t bound = parse_step_dir_name(*latest).value_or(UINT64_MAX);

    // Each complete step at or before it, newest first, with its copy on each tier.
    struct Copies {
        std::optional<StepInfo> local, mirror;
    };
    std::map<uint64_t, Copies, std::greater<>> steps;
    for (StepInfo& s : scan(root, StepTier::local))
        if (s.complete && s.step <= bound)
            steps[s.step].local = std::move(s);
    if (mirror)
        for (StepInfo& s : mirror_steps)
            if (s.complete && s.step <= bound)
                steps[s.step].mirror = std::move(s);

    ResumePoint point;
    std::optional<Error> local_error; // the first local step that did not verify
    std::optional<StateHealth> first_unhealthy;
    if (local_latest && !(steps.count(bound) && steps[bound].local && steps[bound].local->name == *local_latest)) {
        // `latest` names a step that is not complete here (or one outside the step-N naming):
        // loaded as named, so that a damaged step is never passed over silently.
        try {
            LoadedCheckpoint loaded = load_sharded(root / *local_latest, options.expected_world_size, options.load);
            StateHealth health;
            const std::string why = loaded_health(loaded, health);
            if (options.allow_unhealthy || health.healthy()) {
                point.checkpoint = std::move(loaded);
                return point;
            }
            point.skipped.push_back(*local_latest + ": " + why);
            first_unhealthy = health;
        } catch (const Error& e) {
            if (!mirror || e.kind() == ProblemKind::cancelled) // a cancel is not a copy that failed
                throw;
            local_error = e;
            point.skipped.push_back(*local_latest + ": the local copy did not verify: " + e.what());
        }
    }
    for (auto& [number, copies] : steps) {
        const StepInfo& any = copies.local ? *copies.local : *copies.mirror;
        if (!options.allow_unhealthy && !any.maybe_healthy()) {
            point.skipped.push_back(any.name + ": " + any.health);
            if (!first_unhealthy)
                first_unhealthy = any.recorded_health;
            continue;
        }
        // After a local step failed to verify, only the mirror's copies are trusted.
        std::optional<LoadedCheckpoint> loaded;
        bool failed_here = false;
        if (copies.local && !local_error) {
            try {
                loaded = load_sharded(root / copies.local->name, options.expected_world_size, options.load);
            } catch (const Error& e) {
                if (!mirror || e.kind() == ProblemKind::cancelled) // a cancel is not a copy that failed
                    throw;
                local_error = e;
                failed_here = true;
            }
        }
        if (!loaded && copies.mirror) {
            loaded = load_from_mirror(copies.mirror->name);
            loaded->dir = mirror->display(copies.mirror->name); // where it came from, not the scratch copy
            point.used_mirror = true;
            point.mirror_reason = failed_here ? std::string("the local one did not verify: ") + local_error->what()
                : copies.local ? std::string("a newer local step did not verify, so only the mirror's copies are "
                                             "trusted: ") +
                    local_error->what()
                               : std::string("there is no local one");
        }
        if (!loaded) {
            if (failed_here) // said, so that a resume from an older mirror step names the one it lost
                point.skipped.push_back(
                    any.name + ": the local copy did not verify and the mirror has none: " + local_error->what());
            continue;
        }
        StateHealth health;
        const std::string why = loaded_health(*loaded, health);
        if (!options.allow_unhealthy && !health.healthy()) {
            point.skipped.push_back(any.name + ": " + why);
            if (!first_unhealthy)
                first_unhealthy = health;
            point.used_mirror = false;
            point.mirror_reason.clear();
            continue;
        }
        point.checkpoint = std::move(*loaded);
        return point;
    }
    if (local_error)
        throw *local_error;
    if (!first_unhealthy && local_latest) // `latest` names no complete step: its load says why
        load_sharded(root / *latest, options.expected_world_size, options.load);
    else if (!first_unhealthy && mirror)
        load_from_mirror(*latest);
    throw no_healthy_step(root, point.skipped, first_unhealthy);
}

} // namespace shardscope
