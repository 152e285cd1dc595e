// The mirror tier of CheckpointManager: copying a committed step there (format.md, 6.6), and the
// state of every upload, failed ones retried with backoff on later saves (6.7). An upload that
// fails is the mirror's problem, never the save's: the local step is committed before it starts.

#include "core/run/lifecycle.h"
#include "core/run/internal/steps_scan.h"
#include "core/run/mirror_tier.h"
#include "core/run/root_status.h"

#include "core/checkpoint/directory.h"
#include "core/util/fsutil.h"

#include <algorithm>
#include <ctime>
#include <system_error>

namespace shardscope {

namespace fs = std::filesystem;

std::string_view to_string(UploadState state)
{
    switch (state) {
    case UploadState::pending: return "pending";
    case UploadState::uploading: return "uploading";
    case UploadState::uploaded: return "uploaded";
    case UploadState::failed: return "failed";
    }
    return "unknown";
}

nlohmann::json to_json(const UploadStatus& u)
{
    nlohmann::json j = {
        {"step", u.step}, {"name", u.name}, {"state", std::string(to_string(u.state))}, {"attempts", u.attempts}};
    if (u.state == UploadState::failed) {
        j["error"] = u.error;
        j["retry_in_saves"] = u.retry_in_saves;
    }
    return j;
}

void CheckpointManager::upload(const std::string& name)
{
    // One upload at a time, so the mirror's `latest` only ever moves forward.
    std::lock_guard serial(m_upload_mutex);
    const fs::path src = m_options.root / name;
    if (!m_mirror->is_local()) {
        try {
            sweep_mirror(name);
        } catch (const Error&) {
            // the store's leftovers wait for the next upload; this one may still go through
        }
    }
    fsutil::UniqueFd src_fd = fsutil::open_directory(src);
    const std::string manifest =
        fsutil::read_small_file(src_fd.get(), "manifest.json", kMaxManifestBytes, (src / "manifest.json").string());
    const Manifest m = read_manifest(src);
    // Sent before, by this run or an earlier one (a step not yet known here to be there, after a
    // restart): kept, not deleted and sent again, and `latest` moved on to it if a run was killed
    // before it did. A store that does not answer fails the attempt here, before anything of the
    // copy is touched.
    if (!m_mirror->holds(name, manifest)) {
        {
            std::lock_guard lock(m_mutex);
            m_mirrored.erase(name); // another copy of the name (a step saved again) is replaced
        }
        // An earlier, interrupted upload of it. On S3 a failure here fails the upload: its old
        // manifest and record must be gone before any rank object is replaced.
        m_mirror->remove_step(name, m_options.durable);
        // A copy that cannot fit is not started: a half-written one would only fill the mirror more.
        const uint64_t need = m.total_bytes() + 64 * 1024;
        if (m_mirror->is_local())
            if (const TierSpace space = tier_space(StepTier::mirror, m_mirror->location().path);
                space.free_bytes && *space.free_bytes < need)
                throw Error(ProblemKind::io_error,
                            m_mirror->display(name) + ": not uploaded: the step needs about " +
                                std::to_string(need / 1024) + " KiB but only " +
                                std::to_string(*space.free_bytes / 1024) + " KiB are free on the mirror",
                            m_mirror->display());
        m_mirror->upload(src, name, m, manifest, m_options.durable);
    }
    std::optional<std::string> current;
    try {
        current = m_mirror->read_latest();
    } catch (const Error&) {
        // a broken mirror `latest` is simply replaced
    }
    if (!current || parse_step_dir_name(*current).value_or(0) <= m.step)
        m_mirror->write_latest(name, m_options.durable);
}

namespace {

bool busy(const std::vector<std::string>& uploading, const std::string& name)
{
    return std::find(uploading.begin(), uploading.end(), name) != uploading.end();
}

// The newest `keep` complete local steps: the ones the mirror's own retention would hold.
std::vector<StepInfo> mirror_window(const fs::path& root, int keep)
{
    std::vector<StepInfo> complete;
    for (auto& s : scan(root, StepTier::local))
        if (s.complete)
            complete.push_back(std::move(s));
    if (complete.size() > static_cast<std::size_t>(keep))
        complete.erase(complete.begin(), complete.end() - keep);
    return complete;
}

} // namespace

void CheckpointManager::run_upload(const std::string& name)
{
    std::string error;
    try {
        upload(name);
    } catch (const std::exception& e) {
        error = e.what();
    } catch (...) {
        error = "unknown error";
    }
    int retry_in = 0, attempt = 0;
    {
        std::lock_guard lock(m_mutex);
        UploadRecord& r = m_upload_records[name];
        attempt = ++r.attempts;
        if (error.empty()) {
            r.failures = 0;
            r.error.clear();
            m_mirrored.insert(name);
        } else {
            ++r.failures;
            r.error = error;
            retry_in = std::min(1 << std::min(r.failures - 1, 30), kMaxUploadBackoffSaves);
            r.retry_at_save = m_saves + static_cast<uint64_t>(retry_in);
        }
        std::erase(m_uploading, name);
    }
    if (!error.empty())
        warn("the mirror upload of " + name + " failed (attempt " + std::to_string(attempt) + "): " + error +
             "; training goes on, the local copy is kept, and the upload is retried in " + std::to_string(retry_in) +
             (retry_in == 1 ? " save" : " saves"));
    try { // the mirror's own retention, and local steps that waited for this upload may go now
        if (error.empty())
            rotate(StepTier::mirror);
        rotate(StepTier::local);
    } catch (...) {
        // rotation is retried after the next save
    }
}

void CheckpointManager::start_uploads(std::vector<std::string> names)
{
    if (names.empty())
        return;
    std::thread finished; // a worker that found the queue empty and is ending
    std::string failure;
    {
        std::lock_guard lock(m_mutex);
        for (auto& n : names) {
            if (!busy(m_uploading, n)) // before the upload runs: rotation and clean-up leave it alone
                m_uploading.push_back(n);
            m_upload_queue.push_back(std::move(n));
        }
        if (m_upload_worker_running)
            return; // it takes them in turn
        finished = std::move(m_upload_worker);
        try {
            m_upload_worker = std::thread([this] { upload_worker(); });
            m_upload_worker_running = true;
        } catch (const std::system_error& e) {
            // No thread to be had: the steps stay committed and wait for a later save, instead
            // of staying "uploading" (so never rotated) for ever.
            for (const auto& n : m_upload_queue)
                std::erase(m_uploading, n);
            m_upload_queue.clear();
            failure = e.what();
        }
    }
    if (finished.joinable())
        finished.join();
    if (!failure.empty())
        warn("cannot start the mirror upload (" + failure + "); it is retried at a later save");
}

void CheckpointManager::upload_worker()
{
    for (;;) {
        std::string name;
        {
            std::lock_guard lock(m_mutex);
            if (m_upload_queue.empty()) {
                m_upload_worker_running = false; // the next start_uploads starts another
                return;
            }
            name = std::move(m_upload_queue.front());
            m_upload_queue.pop_front();
        }
        run_upload(name);
    }
}

std::vector<std::string> CheckpointManager::due_uploads(const std::string& committed, bool all)
{
    // Only steps the mirror would keep are worth sending; older ones its rotation would delete.
    std::vector<std::string> due;
    const auto window = mirror_window(m_options.root, m_options.mirror_keep_last);
    for (const StepInfo& s : window) {
        if (s.name == committed)
            continue;
        {
            std::lock_guard lock(m_mutex);
            if (busy(m_uploading, s.name))
                continue;
            const auto it = m_upload_records.find(s.name);
            // Never tried by this manager: left by an earlier run (killed mid-upload, or its
            // mirror was down); tried at this save like a new step.
            if (!all && it != m_upload_records.end() && it->second.failures > 0 && m_saves < it->second.retry_at_save)
                continue; // backing off
        }
        if (!known_on_mirror(s))
            due.push_back(s.name); // upload() first asks whether an earlier run sent it
    }
    return due;
}

std::vector<UploadStatus> CheckpointManager::upload_status()
{
    std::vector<UploadStatus> out;
    if (!m_options.mirror)
        return out;
    for (const StepInfo& s : mirror_window(m_options.root, m_options.mirror_keep_last)) {
        UploadStatus u{.name = s.name, .step = s.step};
        const bool uploaded = on_mirror(s);
        std::lock_guard lock(m_mutex);
        const auto it = m_upload_records.find(s.name);
        if (it != m_upload_records.end())
            u.attempts = it->second.attempts;
        if (busy(m_uploading, s.name)) {
            // Queued behind another upload: not started yet.
            const bool queued = std::find(m_upload_queue.begin(), m_upload_queue.end(), s.name) != m_upload_queue.end();
            u.state = queued ? UploadState::pending : UploadState::uploading;
        } else if (uploaded) {
            u.state = UploadState::uploaded;
        } else if (it != m_upload_records.end() && it->second.failures > 0) {
            u.state = UploadState::failed;
            u.error = it->second.error;
            u.retry_in_saves =
                static_cast<int>(it->second.retry_at_save > m_saves ? it->second.retry_at_save - m_saves : 0);
        }
        out.push_back(std::move(u));
    }
    return out;
}

void CheckpointManager::retry_uploads()
{
    if (!m_options.mirror)
        return;
    join_writer(); // a step still being committed is uploaded by its own save
    start_uploads(due_uploads({}, true));
}

} // namespace shardscope
