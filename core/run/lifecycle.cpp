// CheckpointManager: saves, `latest`, clean-up and rotation; the mirror's uploads are in
// mirror_upload.cpp, the writer lock in root_lock.cpp.

#include "core/run/lifecycle.h"
#include "core/run/internal/steps_scan.h"

#include "core/util/fsutil.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>

namespace shardscope {

namespace fs = std::filesystem;

// ---- CheckpointManager ------------------------------------------------------------------------

CheckpointManager::CheckpointManager(ManagerOptions options) : m_options(std::move(options))
{
    if (m_options.keep_last < 1 || m_options.mirror_keep_last < 1)
        throw Error(ProblemKind::invalid_argument, "keep_last must be at least 1");
    fsutil::make_directories(m_options.root, m_options.durable);
    if (m_options.mirror)
        fsutil::make_directories(*m_options.mirror, m_options.durable);
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
        for (const StepInfo& s : scan(root, mirror ? StepTier::mirror : StepTier::local)) {
            const bool busy = (m_writing && *m_writing == s.name) ||
                std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end();
            if (s.complete || s.is_latest || busy)
                continue;
            remove_step_dir(root, s.name, m_options.durable);
        }
        // A crash while `latest` was replaced leaves latest.tmp. Only the local root's: an upload
        // thread may be replacing the mirror's `latest` right now (and it removes stale ones itself).
        if (!mirror)
            if (fsutil::UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); fd)
                fsutil::unlink_at(fd.get(), "latest.tmp");
    };
    sweep(m_options.root, false);
    if (m_options.mirror) {
        try {
            sweep(*m_options.mirror, true);
        } catch (const Error&) {
            // an unreachable mirror is the uploads' problem, never the save's
        }
    }
}

void CheckpointManager::rotate(StepTier which)
{
    const bool local = which == StepTier::local;
    if (!local && !m_options.mirror)
        return;
    const fs::path& root = local ? m_options.root : *m_options.mirror;
    const int keep = local ? m_options.keep_last : m_options.mirror_keep_last;
    std::vector<StepInfo> complete;
    for (auto& s : scan(root, which))
        if (s.complete)
            complete.push_back(std::move(s));
    if (complete.size() <= static_cast<std::size_t>(keep))
        return;
    std::vector<std::string> held; // local steps kept beyond keep_last for the mirror
    {
        std::lock_guard lock(m_mutex);
        const auto busy = [&](const StepInfo& s) {
            return (m_writing && *m_writing == s.name) ||
                (local && std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end());
        };
        const auto on_mirror = [&](const StepInfo& s) {
            return describe_step(*m_options.mirror, s.name, s.step, StepTier::mirror).complete;
        };
        RotationPlan plan = plan_rotation(
            complete, keep, local && m_options.mirror ? std::optional<int>(m_options.mirror_keep_last) : std::nullopt,
            busy, on_mirror);
        for (const auto& name : plan.remove)
            remove_step_dir(root, name, m_options.durable);
        held = std::move(plan.held);
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

LoadedCheckpoint CheckpointManager::load_latest(int expected_world_size, bool* used_mirror)
{
    wait();
    if (used_mirror)
        *used_mirror = false;
    const std::optional<std::string> local = read_latest(m_options.root);
    std::optional<Error> local_error;
    if (local) {
        try {
            return load_sharded(m_options.root / *local, expected_world_size);
        } catch (const Error& e) {
            local_error = e;
        }
    }
    if (m_options.mirror) {
        // Prefer the mirror's copy of the same step; without one, the mirror's newest.
        std::optional<std::string> name = local;
        if (!name || !describe_step(*m_options.mirror, *name, 0, StepTier::mirror).complete)
            name = read_latest(*m_options.mirror);
        if (name && describe_step(*m_options.mirror, *name, 0, StepTier::mirror).complete) {
            LoadedCheckpoint loaded = load_sharded(*m_options.mirror / *name, expected_world_size);
            if (used_mirror)
                *used_mirror = true;
            return loaded;
        }
    }
    if (local_error)
        throw *local_error;
    throw Error(ProblemKind::cannot_open,
                m_options.root.string() + ": no complete checkpoint to resume from (no `latest`)",
                m_options.root.string());
}

} // namespace shardscope
