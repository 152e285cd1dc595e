#pragma once
// What `shardctl status` shows of a checkpoint root, read from disk without taking the writer
// lock or changing anything: every step of each tier, where its upload stands, who holds the
// lock, the free space of each tier and what the next rotation would delete.

#include "core/run/lifecycle.h"

#include <nlohmann/json.hpp>

#include <map>

namespace shardscope {

struct TierSpace {
    StepTier tier = StepTier::local;
    std::filesystem::path path;
    std::optional<uint64_t> free_bytes; // for an unprivileged writer (statvfs f_bavail)
    std::optional<uint64_t> total_bytes;
    std::string error; // why statvfs failed, when it did
};
TierSpace tier_space(StepTier tier, const std::filesystem::path& path);

struct RootStatus {
    std::filesystem::path root;
    std::optional<storage::Location> mirror;
    int keep_last = 3, mirror_keep_last = 10;
    std::optional<std::string> latest, mirror_latest;
    std::string mirror_error; // why the mirror could not be read (its steps are then not listed)
    std::vector<StepInfo> steps; // list_steps: the local tier, then the mirror's
    std::optional<LockHolder> lock;
    std::vector<TierSpace> space;
    // The next rotation's forecast, with no save or upload running (format.md, 6.3).
    std::vector<std::string> rotation_local, rotation_mirror, held_for_mirror;
    // The local step kept beyond keep_last as the newest healthy one (RotationPlan::kept_healthy).
    std::optional<std::string> kept_healthy;
    // With a mirror that was read: upload_states_on_disk(steps, lock, mirror_keep_last).
    std::map<std::string, UploadState> uploads;
};

// Whether the lock names a job that is writing the root now: a live pid on this host, or any
// holder on another host (whose processes this one cannot see).
bool writer_running(const std::optional<LockHolder>& lock);

// Where the upload of each complete local step stands as the disk says it (format.md, 6.7), for
// readers that do not have the manager's memory: `uploaded` when the mirror holds a verified
// copy; while a job writes the root, `uploading` (an incomplete copy) or `pending` (none yet);
// with no job writing, `failed` (that run ended without a copy). Only the newest
// `mirror_keep_last` complete local steps are listed: older ones are not the mirror's to hold.
// `steps`: list_steps(root, mirror).
std::map<std::string, UploadState> upload_states_on_disk(const std::vector<StepInfo>& steps,
                                                         const std::optional<LockHolder>& lock, int mirror_keep_last);

// A bucket's free space is not known: `space` lists the local tier alone then.
RootStatus root_status(const std::filesystem::path& root, const std::optional<storage::Location>& mirror, int keep_last,
                       int mirror_keep_last);

// A root in a bucket (`s3://bucket/run`), read as the mirror tier reads its own (MirrorTier::scan):
// its steps, each complete with its manifest as on a local disk, and its `latest`, with the same
// rotation forecast. `root` is its URL; no lock and no free space (a bucket has neither). Throws
// Error(invalid_argument) for a location that is not s3:// and Error(remote_error) when the
// store does not answer.
RootStatus bucket_root_status(const storage::Location& root, int keep_last);

// The `shardctl status --json` object (docs/shardctl.md, 2.13).
nlohmann::json to_json(const RootStatus& status);

} // namespace shardscope
