#pragma once
// A checkpoint root over a training run's lifetime: one directory per step, a `latest` file that
// names the newest complete step (replaced atomically, only after that step is committed),
// rotation that keeps the last K complete steps, asynchronous saves that stall the training loop
// only for a snapshot, and an optional second tier (a mirror: another directory, or an S3 bucket
// and prefix, mirror_tier.h) with its own, longer retention.
//
// Invariants: `latest` never names a step that is not fully committed; rotation never removes
// the step `latest` names, the newest step not recorded as unhealthy, a step still being written,
// or a step whose upload to the mirror has not finished; a crash at any instant leaves `latest`
// naming a complete, loadable step. `latest` names the newest committed step whatever its health:
// resume goes to the newest healthy one (load_resume_point).
//
// Under pressure: a failed mirror upload never fails a save — the local step stays
// committed, the upload is retried on later saves, and the local tier keeps the steps the mirror
// lacks and was meant to hold; one job at a time writes a root (root_lock.h).

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/run/root_lock.h"
#include "core/storage/location.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace shardscope {

class MirrorTier;

// "step-00001234": zero-padded so that directory listings sort by step.
std::string step_dir_name(uint64_t step);
// The step number of a "step-<digits>" name, or nullopt for any other name.
std::optional<uint64_t> parse_step_dir_name(std::string_view name);

enum class StepTier { local, mirror };
std::string_view to_string(StepTier tier);

struct StepInfo {
    std::string name; // directory name inside the root
    uint64_t step = 0;
    StepTier tier = StepTier::local;
    bool complete = false; // manifest.json present (and parsable)
    bool bad_manifest = false; // manifest.json exists but does not parse
    bool is_latest = false; // the root's `latest` names it
    double wall_clock_seconds = 0;
    int world_size = 0;
    uint64_t bytes = 0;
    std::vector<std::string> leftover_tmp_files; // from an interrupted write
    bool uploaded = false; // local tier: the mirror holds a verified copy
    std::string problem; // why it is not complete, when it is not
    // The health its writer recorded in the commit (health.h): nullopt when the manifest has
    // none (written before health was recorded, or by a writer that does not count it).
    std::optional<StateHealth> recorded_health; // summed over its ranks
    std::string health; // which ranks are not healthy and why, when it is not

    // Not known to be unhealthy: what retention protects and resume considers.
    bool maybe_healthy() const { return !recorded_health || recorded_health->healthy(); }
};

// The step directories of a root, sorted by step, without hashing anything; with a mirror, the
// mirror's steps follow (tier mirror) and each local step says whether its upload finished.
std::vector<StepInfo> list_steps(const std::filesystem::path& root,
                                 const std::optional<storage::Location>& mirror = std::nullopt);

// Removes the step directory `name` of `root` so that a power cut part-way leaves an incomplete
// step (a leftover), never a manifest over missing shards: manifest.json goes first and, with
// `durable`, its removal is fsync'd before any shard is unlinked. Best effort: what cannot be
// removed now stays for the next clean-up.
void remove_step_dir(const std::filesystem::path& root, const std::string& name, bool durable = true);

// One rotation of `root`'s complete steps by the manager's rule (format.md 6.3: keep_last, never
// `latest`, never the newest healthy step), for a writer without a CheckpointManager
// (shardctl-mpi train's process 0, after each commit and `latest` update). Returns the step kept
// beyond keep_last as the newest healthy one, if any.
std::optional<std::string> rotate_steps(const std::filesystem::path& root, int keep_last, bool durable = true);

// Name of the upload manifest a mirror step gets once its copy is verified.
inline constexpr const char* kUploadManifest = "upload.json";

// The step directory name `latest` holds, or nullopt when the root has none. Throws Error when
// `latest` is unreadable or names something that is not a plain directory name.
std::optional<std::string> read_latest(const std::filesystem::path& root);
// Replaces `latest` atomically (tmp -> fsync -> rename -> directory fsync).
void write_latest(const std::filesystem::path& root, const std::string& step_dir, bool durable = true);

struct ManagerOptions {
    std::filesystem::path root;
    int keep_last = 3; // complete local steps to keep (>= 1)
    std::optional<storage::Location> mirror; // second tier: a directory or s3://bucket/prefix
    int mirror_keep_last = 10;
    bool durable = true;
    int threads = 0;
    // Hears what goes wrong without stopping the run (a failed upload, local retention held
    // beyond keep_last, a leftover lock taken over); from any thread. Unset: stderr.
    std::function<void(const std::string&)> on_warning;
};

// A failed upload is retried at a later save: after its n-th failure in a row, 2^(n-1) saves
// later, at most kMaxUploadBackoffSaves (1, 2, 4, 8, 8, ... saves), for as long as the step is
// one the mirror is meant to hold. Bounded, so a mirror back after an outage is used again soon.
inline constexpr int kMaxUploadBackoffSaves = 8;

enum class UploadState { pending, uploading, uploaded, failed };
std::string_view to_string(UploadState state);

struct UploadStatus {
    std::string name; // step directory name
    uint64_t step = 0;
    UploadState state = UploadState::pending;
    int attempts = 0; // uploads of it this manager tried
    std::string error; // the last attempt's error, when failed
    int retry_in_saves = 0; // failed: saves until it is tried again (1: the next save)
};
// {"step", "name", "state", "attempts", "error"?, "retry_in_saves"?}: the one builder, for
// `shardctl train --json` and `shardctl status --json` (docs/shardctl.md).
nlohmann::json to_json(const UploadStatus& status);

struct ResumeOptions {
    int expected_world_size = -1; // < 0: any
    bool allow_unhealthy = false; // resume from the newest step even when it is not healthy
    LoadOptions load;
};

struct ResumePoint {
    LoadedCheckpoint checkpoint;
    bool used_mirror = false; // the mirror's copy: the local one was lost or did not verify
    std::string mirror_reason; // with used_mirror: which of the two, and why it did not verify
    // One sentence per newer step passed over because it is not healthy ("step-00000012: rank 0:
    // 4 non-finite exp_avg_sq values"), newest first.
    std::vector<std::string> skipped;
};

// Where a run resumes: the newest complete step at or before the one `latest` names (a step
// committed after it was never published) whose values are healthy — its recorded health first,
// then the loaded values themselves (scan_health), so a step without a record is judged too.
// Unhealthy steps are passed over and named in `skipped`; with allow_unhealthy the newest step is
// loaded whatever its health. A local step that does not verify is replaced by the mirror's copy
// of the same step, or else the mirror's newest healthy one; without one that error is thrown
// (a damaged step is never passed over silently). A local `latest` naming a step that is gone is
// such a step too when there is a mirror: it still bounds the search, and its loss is in `skipped`. Throws Error(cannot_open) when there is no
// `latest`, and the health's kind (nonfinite_values, ...) naming every step when none is healthy.
ResumePoint load_resume_point(const std::filesystem::path& root, const std::optional<storage::Location>& mirror,
                              const ResumeOptions& options = {});

// The step load_resume_point starts from, chosen by the recorded health alone, without loading
// anything: for processes that each load only their own shard (shardctl-mpi train), which cannot
// count the values of the whole step. nullopt when the root has no `latest`; the same Error when
// no step is recorded healthy (an unrecorded step counts as healthy here).
struct ResumeStep {
    std::string name;
    std::vector<std::string> skipped; // as ResumePoint::skipped
};
std::optional<ResumeStep> choose_resume_step(const std::filesystem::path& root, bool allow_unhealthy);

// What a load of a path a user names does (`shardctl load`, the Python module's load): a root (a
// `latest` file and no manifest.json) goes to its newest healthy step by load_resume_point; any
// other path is loaded as it is, whatever its health (the user chose that step).
ResumePoint load_step_or_root(const std::filesystem::path& path, const ResumeOptions& options = {});

// What a save of `states` will take on disk, about (shards, headers, manifest).
uint64_t expected_step_bytes(const std::vector<RankStateView>& states, const SaveOptions& meta);

// Owns a root. save() and save_async() go through the same commit sequence:
//   writer lock (first save) -> clean-up -> room for the step (space.cpp) -> shards + manifest
//   (save_sharded) -> `latest` -> rotation -> (mirror upload, then due retries, in background)
class CheckpointManager {
public:
    explicit CheckpointManager(ManagerOptions options);
    ~CheckpointManager(); // waits for pending work; errors there are dropped only if never asked

    CheckpointManager(const CheckpointManager&) = delete;
    CheckpointManager& operator=(const CheckpointManager&) = delete;

    // Synchronous save of `states` as step `step`. Refuses what check_save refuses before it
    // touches the root (no cleanup, no step moved aside); then cleans up leftovers of crashed saves.
    // The views are written in place (no copy); the RankState overload views its vectors.
    Manifest save(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta = {});
    Manifest save(const std::vector<RankState>& states, uint64_t step, const SaveOptions& meta = {})
    {
        return save(views_of(states), step, meta);
    }

    // Checks the input (check_save, thrown by this call), copies the state (the snapshot) and
    // returns; the write runs on a background thread. A second call first waits for the previous
    // write. An error of a background write is thrown by the next save_async/save/wait call —
    // never lost.
    void save_async(const std::vector<RankStateView>& states, uint64_t step, SaveOptions meta = {});
    void save_async(const std::vector<RankState>& states, uint64_t step, SaveOptions meta = {})
    {
        save_async(views_of(states), step, std::move(meta));
    }
    // Waits for the pending write and mirror uploads; rethrows the write's error. A failed upload
    // is not an error here: it stays in upload_status() and is retried by later saves.
    void wait();

    // The newest healthy step at or before `latest` (load_resume_point), after waiting for
    // pending work.
    ResumePoint load_resume_point(const ResumeOptions& options = {});
    // Whether a run is here to resume: a `latest` in the root, even one that cannot be read or
    // names a lost step (resuming says what is wrong, or finds the step in the mirror), or in the
    // mirror. False is a fresh start.
    bool holds_a_run() const;

    // Takes the root's writer lock now (save and save_async take it on their first call, so a
    // manager used only to resume never does). Throws Error(root_locked) naming the holder.
    void lock_root();

    // Each complete local step the mirror is meant to hold (the newest mirror_keep_last of them,
    // oldest first) and where its upload stands. Empty without a mirror.
    std::vector<UploadStatus> upload_status();
    // Tries every one of them not uploaded now, in the background, whatever the backoff (wait()
    // waits for it). For the end of a run, before saying whether the mirror has every step.
    void retry_uploads();

    const ManagerOptions& options() const { return m_options; }

private:
    struct UploadRecord {
        int attempts = 0;
        int failures = 0; // in a row
        std::string error;
        uint64_t retry_at_save = 0; // m_saves at which it is due again
    };

    void commit_step(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta);
    void rotate(StepTier tier);
    void upload(const std::string& step_dir);
    void start_uploads(std::vector<std::string> names); // in the background, one after another
    void run_upload(const std::string& name);
    std::vector<std::string> due_uploads(const std::string& committed, bool all);
    void warn(const std::string& message);
    void clean_leftovers();
    // Removes incomplete steps of an S3 mirror (not `uploading`); on the upload thread.
    void sweep_mirror(const std::string& uploading);
    // Whether the mirror holds a verified copy; false when the store does not answer.
    bool on_mirror(const StepInfo& step) const;
    // The same as far as it is known without asking a bucket: what saves and rotation go by, so
    // that a save never waits for a store. A step is known to be there once an upload of it
    // ended (or found an earlier run's copy); one not known keeps its local copy.
    bool known_on_mirror(const StepInfo& step);
    // Before a save: frees room for `need` bytes by removing the oldest steps that may go, or
    // refuses (io_error, naming the sizes) before anything is written (format.md, 6.3).
    void make_room(uint64_t need, const std::string& name);
    void join_writer();
    void finish_previous_write();

    ManagerOptions m_options;
    std::unique_ptr<MirrorTier> m_mirror; // the tier m_options.mirror names
    std::mutex m_mutex;
    std::mutex m_upload_mutex;
    std::thread m_writer; // the pending async save, if any
    std::vector<RankState> m_snapshot; // what it writes; reused by the next save_async
    std::exception_ptr m_error; // first error of a background write (uploads have their own state)
    // One upload worker, started when there is work and ending when the queue is empty: not a
    // thread a save, which a long run (or a slow mirror) piled up, each with its stack, until
    // wait() — and then failed to create one more. Uploads run in the order they were queued.
    std::thread m_upload_worker;
    std::deque<std::string> m_upload_queue;
    bool m_upload_worker_running = false;
    void upload_worker();
    std::vector<std::string> m_uploading; // local steps whose upload has not finished
    std::optional<std::string> m_writing; // step directory being written
    std::map<std::string, UploadRecord> m_upload_records; // by step directory name
    std::set<std::string> m_mirrored; // steps an upload put (or found) on an S3 mirror, whole
    uint64_t m_saves = 0; // steps this manager committed
    std::size_t m_held_warned = 0; // local steps held for the mirror at the last warning
    std::string m_kept_healthy_warned[2]; // per tier (local, mirror): the step last said to be kept
        // as the newest healthy one
    RootLock m_lock;
};

} // namespace shardscope
