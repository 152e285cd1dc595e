#pragma once
// A checkpoint root over a training run's lifetime: one directory per step, a `latest` file that
// names the newest complete step (replaced atomically, only after that step is committed),
// rotation that keeps the last K complete steps, asynchronous saves that stall the training loop
// only for a snapshot, and an optional second tier (a mirror directory standing in for object
// storage) with its own, longer retention.
//
// Invariants: `latest` never names a step that is not fully committed; rotation never removes
// the step `latest` names, a step still being written, or a step whose upload to the mirror has
// not finished; a crash at any instant leaves `latest` naming a complete, loadable step.

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace shardscope {

// "step-00001234": zero-padded so that directory listings sort by step.
std::string step_dir_name(uint64_t step);
// The step number of a "step-<digits>" name, or nullopt for any other name.
std::optional<uint64_t> parse_step_dir_name(std::string_view name);

enum class StepTier { local, mirror };
std::string_view to_string(StepTier tier);

struct StepInfo {
    std::string name;        // directory name inside the root
    uint64_t step = 0;
    StepTier tier = StepTier::local;
    bool complete = false;   // manifest.json present (and parsable)
    bool is_latest = false;  // the root's `latest` names it
    double wall_clock_seconds = 0;
    int world_size = 0;
    uint64_t bytes = 0;
    std::vector<std::string> leftover_tmp_files; // from an interrupted write
    bool uploaded = false;   // local tier: the mirror holds a verified copy
    std::string problem;     // why it is not complete, when it is not
};

// The step directories of a root, sorted by step, without hashing anything; with a mirror, the
// mirror's steps follow (tier mirror) and each local step says whether its upload finished.
std::vector<StepInfo> list_steps(const std::filesystem::path& root,
                                 const std::optional<std::filesystem::path>& mirror = std::nullopt);

// Removes the step directory `name` of `root` so that a power cut part-way leaves an incomplete
// step (a leftover), never a manifest over missing shards: manifest.json goes first and, with
// `durable`, its removal is fsync'd before any shard is unlinked. Best effort: what cannot be
// removed now stays for the next clean-up.
void remove_step_dir(const std::filesystem::path& root, const std::string& name, bool durable = true);

// Name of the upload manifest a mirror step gets once its copy is verified.
inline constexpr const char* kUploadManifest = "upload.json";

// The step directory name `latest` holds, or nullopt when the root has none. Throws Error when
// `latest` is unreadable or names something that is not a plain directory name.
std::optional<std::string> read_latest(const std::filesystem::path& root);
// Replaces `latest` atomically (tmp -> fsync -> rename -> directory fsync).
void write_latest(const std::filesystem::path& root, const std::string& step_dir, bool durable = true);

struct ManagerOptions {
    std::filesystem::path root;
    int keep_last = 3;                          // complete local steps to keep (>= 1)
    std::optional<std::filesystem::path> mirror; // second tier
    int mirror_keep_last = 10;
    bool durable = true;
    int threads = 0;
};

// Owns a root. save() and save_async() go through the same commit sequence:
//   shards + manifest (save_sharded) -> `latest` -> rotation -> (mirror upload in background)
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
    // returns; the write runs on a background thread. A second call first waits for the previous write. An error of a background write is thrown
    // by the next save_async/save/wait call — never lost.
    void save_async(const std::vector<RankStateView>& states, uint64_t step, SaveOptions meta = {});
    void save_async(const std::vector<RankState>& states, uint64_t step, SaveOptions meta = {})
    {
        save_async(views_of(states), step, std::move(meta));
    }
    void wait(); // waits for the pending write and mirror uploads; rethrows their first error

    // Loads the step `latest` names; if it does not verify and a mirror holds the same step,
    // loads the mirror's copy instead. Throws the local error when no fallback works.
    LoadedCheckpoint load_latest(int expected_world_size, bool* used_mirror = nullptr);

    const ManagerOptions& options() const { return m_options; }

private:
    void commit_step(const std::vector<RankStateView>& states, uint64_t step, const SaveOptions& meta);
    void rotate(StepTier tier);
    void upload(const std::string& step_dir);
    void clean_leftovers();
    void join_writer();
    void finish_previous_write();

    ManagerOptions m_options;
    std::mutex m_mutex;
    std::mutex m_upload_mutex;
    std::thread m_writer;       // the pending async save, if any
    std::vector<RankState> m_snapshot; // what it writes; reused by the next save_async
    std::exception_ptr m_error; // first error of a background write or upload
    std::vector<std::thread> m_uploads;
    std::vector<std::string> m_uploading; // local steps whose upload has not finished
    std::optional<std::string> m_writing; // step directory being written
};

} // namespace shardscope
