#include "core/run/lifecycle.h"

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

std::string step_dir_name(uint64_t step)
{
    char name[32];
    std::snprintf(name, sizeof name, "step-%08llu", static_cast<unsigned long long>(step));
    return name;
}

std::optional<uint64_t> parse_step_dir_name(std::string_view name)
{
    if (!name.starts_with("step-") || name.size() == 5 || name.size() > 5 + 19)
        return std::nullopt;
    uint64_t step = 0;
    for (char c : name.substr(5)) {
        if (c < '0' || c > '9')
            return std::nullopt;
        step = step * 10 + static_cast<uint64_t>(c - '0');
    }
    return step;
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

namespace {

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
        const Manifest m = read_manifest(dir);
        info.complete = true;
        info.world_size = m.world_size;
        info.wall_clock_seconds = m.wall_clock_seconds;
        info.bytes = m.total_bytes();
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

} // namespace

void remove_step_dir(const fs::path& root, const std::string& name, bool durable)
{
    try {
        fsutil::UniqueFd root_fd = fsutil::open_directory(root);
        {
            // Never through a symlink: a link named like a step is removed, not what it points at.
            fsutil::UniqueFd step_fd(::openat(root_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
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

namespace {

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

} // namespace

std::vector<StepInfo> list_steps(const fs::path& root, const std::optional<fs::path>& mirror)
{
    std::vector<StepInfo> steps = scan(root, StepTier::local);
    if (mirror) {
        std::vector<StepInfo> remote = scan(*mirror, StepTier::mirror);
        for (auto& s : steps)
            for (const auto& r : remote)
                s.uploaded = s.uploaded || (r.name == s.name && r.complete);
        steps.insert(steps.end(), remote.begin(), remote.end());
    }
    return steps;
}

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
    if (m_options.mirror)
        sweep(*m_options.mirror, true);
}

void CheckpointManager::rotate(StepTier which)
{
    auto prune = [&](const fs::path& root, StepTier tier, int keep) {
        std::vector<StepInfo> complete;
        for (auto& s : scan(root, tier))
            if (s.complete)
                complete.push_back(std::move(s));
        if (complete.size() <= static_cast<std::size_t>(keep))
            return;
        std::lock_guard lock(m_mutex);
        for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < complete.size(); ++i) {
            const StepInfo& s = complete[i];
            const bool uploading = std::find(m_uploading.begin(), m_uploading.end(), s.name) != m_uploading.end();
            if (s.is_latest || (m_writing && *m_writing == s.name) || (tier == StepTier::local && uploading))
                continue;
            if (tier == StepTier::local && m_options.mirror &&
                !describe_step(*m_options.mirror, s.name, s.step, StepTier::mirror).complete)
                continue; // never delete the only copy before the mirror holds a verified one
            remove_step_dir(root, s.name, m_options.durable);
        }
    };
    if (which == StepTier::local)
        prune(m_options.root, StepTier::local, m_options.keep_last);
    else if (m_options.mirror)
        prune(*m_options.mirror, StepTier::mirror, m_options.mirror_keep_last);
}

void CheckpointManager::upload(const std::string& name)
{
    // One upload at a time, so the mirror's `latest` only ever moves forward.
    std::lock_guard serial(m_upload_mutex);
    const fs::path src = m_options.root / name;
    const fs::path dst = *m_options.mirror / name;
    remove_step_dir(*m_options.mirror, name, m_options.durable); // an earlier, interrupted upload of it
    fsutil::make_directories(dst, m_options.durable);
    const Manifest m = read_manifest(src);
    fsutil::UniqueFd src_fd = fsutil::open_directory(src);
    fsutil::UniqueFd dst_fd = fsutil::open_directory(dst);
    nlohmann::json files = nlohmann::json::array();
    std::vector<char> buffer(kReadChunk);
    for (const ShardRecord& record : m.shards) {
        fsutil::OpenedFile in = fsutil::open_beneath_for_read(src_fd.get(), record.path);
        if (in.status != fsutil::OpenStatus::ok)
            throw Error(ProblemKind::unreadable, (src / record.path).string() + ": cannot upload it: " + in.reason,
                        record.path, record.rank);
        WriteOptions write;
        write.durable = m_options.durable;
        ShardFileWriter out(dst_fd.get(), dst, record.rank, write, record.path);
        for (uint64_t at = 0; at < in.size; at += buffer.size()) {
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(buffer.size(), in.size - at));
            if (!fsutil::read_exact(in.fd.get(), buffer.data(), n, at))
                throw Error(ProblemKind::unreadable, (src / record.path).string() + ": read failed during upload",
                            record.path, record.rank);
            out.write(buffer.data(), n);
        }
        const ShardRecord copied = out.finish(record.param_shard_offset, record.param_shard_numel);
        if (copied.sha256 != record.sha256) // what was sent is not what the manifest promised
            throw Error(ProblemKind::hash_mismatch,
                        (src / record.path).string() + " (rank " + std::to_string(record.rank) +
                            "): changed or corrupt while uploading; the mirror copy is not kept",
                        record.path, record.rank);
        files.push_back({{"path", record.path}, {"remote_path", (dst / record.path).string()},
                         {"sha256", copied.sha256}, {"bytes", copied.bytes}});
    }
    const std::string manifest = fsutil::read_small_file(src_fd.get(), "manifest.json", kMaxManifestBytes,
                                                         (src / "manifest.json").string());
    // The copies' names must be durable before a manifest points at them (as in commit()).
    if (m_options.durable)
        fsutil::fsync_or_throw(dst_fd.get(), dst.string());
    fsutil::write_file_atomic(dst_fd.get(), "manifest.json", manifest, dst.string(), m_options.durable);
    // Read the copy back as a remote client would, before declaring the upload done.
    const VerifyReport check = verify_checkpoint(dst);
    if (!check.ok())
        throw Error(check.problems.front());
    const nlohmann::json record = {{"source", src.string()}, {"step", m.step},
                                   {"uploaded_at", static_cast<int64_t>(std::time(nullptr))}, {"files", files}};
    fsutil::write_file_atomic(dst_fd.get(), kUploadManifest, record.dump(2) + "\n", dst.string(), m_options.durable);
    std::optional<std::string> current;
    try {
        current = read_latest(*m_options.mirror);
    } catch (const Error&) {
        // a broken mirror `latest` is simply replaced
    }
    if (!current || parse_step_dir_name(*current).value_or(0) <= m.step)
        write_latest(*m_options.mirror, name, m_options.durable);
    rotate(StepTier::mirror);
}

void CheckpointManager::commit_step(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta)
{
    const std::string name = step_dir_name(step);
    std::error_code ec;
    if (fs::exists(m_options.root / name / "manifest.json", ec) && read_latest(m_options.root) != name) {
        // A committed step that was never published: a run killed between its manifest and the
        // `latest` update, now resumed from an earlier step and saving this step again. It is
        // kept, moved aside, rather than deleted or overwritten.
        const std::string aside = name + ".superseded-" + std::to_string(std::time(nullptr));
        fsutil::UniqueFd root_fd = fsutil::open_directory(m_options.root);
        if (!fsutil::rename_at(root_fd.get(), name, aside))
            throw Error(ProblemKind::already_exists,
                        (m_options.root / name).string() + " already holds a committed step and cannot be moved aside: " +
                            std::strerror(errno));
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
        if (m_options.mirror)
            m_uploading.push_back(name);
    }
    if (m_options.mirror) {
        std::lock_guard lock(m_mutex);
        m_uploads.emplace_back([this, name] {
            try {
                upload(name);
            } catch (...) {
                std::lock_guard inner(m_mutex);
                if (!m_error)
                    m_error = std::current_exception();
            }
            {
                std::lock_guard inner(m_mutex);
                std::erase(m_uploading, name);
            }
            try { // local steps that waited for this upload may go now
                rotate(StepTier::local);
            } catch (...) {
                // rotation is retried after the next save
            }
        });
    }
    rotate(StepTier::local);
}

void CheckpointManager::finish_previous_write()
{
    join_writer();
    std::lock_guard lock(m_mutex);
    if (m_error) // the previous background write or an upload failed: say so now
        std::rethrow_exception(std::exchange(m_error, nullptr));
}

Manifest CheckpointManager::save(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta)
{
    // Bad input is refused before the root is touched: clean_leftovers and commit_step (which
    // moves an unpublished step aside) change the disk, and a save that then refuses must not
    // have. A pending background error stays pending for the next call.
    check_save(states, m_options.root / step_dir_name(step));
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
    std::vector<std::thread> uploads;
    {
        std::lock_guard lock(m_mutex);
        uploads.swap(m_uploads);
    }
    for (auto& t : uploads)
        t.join();
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
    throw Error(ProblemKind::cannot_open, m_options.root.string() + ": no complete checkpoint to resume from (no `latest`)",
                m_options.root.string());
}

} // namespace shardscope
