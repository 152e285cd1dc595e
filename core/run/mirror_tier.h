#pragma once
// The second tier of a checkpoint root: a directory (another disk, a network mount) or an S3
// bucket and prefix. One interface for both, so that the manager, `status` and resume say the
// same about either: a step on the tier is complete when its manifest and its upload record are
// there, and those are written only after every rank's copy is in place and read back (format.md
// 6.6). On S3 nothing is renamed: rank objects go first (multipart for large ones, each part's
// MD5 checked by the server, each object's SHA-256 by reading it back), then manifest.json, then
// upload.json, then `latest`.

#include "core/run/lifecycle.h"
#include "core/storage/location.h"

#include <memory>
#include <set>
#include <string>

namespace shardscope {

namespace storage {
class S3Client;
}

class MirrorTier {
public:
    // An S3 location takes its region and credentials from the environment, and its endpoint
    // from the location (--endpoint) or else the environment (s3_config_from_environment);
    // throws Error(invalid_argument) when there are no credentials.
    explicit MirrorTier(storage::Location where);
    ~MirrorTier();
    MirrorTier(MirrorTier&&) noexcept;
    MirrorTier& operator=(MirrorTier&&) noexcept;

    const storage::Location& location() const { return m_where; }
    bool is_local() const { return m_where.is_local(); }
    // "s3://bucket/run/step-00000010" or "/mnt/mirror/step-00000010", for messages.
    std::string display(const std::string& name = {}) const;

    // A local mirror's directory is created; a bucket is left as it is (an unreachable store is
    // the uploads' problem, never the run's).
    void prepare(bool durable) const;
    // Every step on the tier, sorted, `latest` marked, described without hashing. A store that
    // does not answer throws Error(remote_error): no step is ever taken for incomplete (and so
    // deleted) because a request failed. `as`: mirror, where a step is complete once its upload
    // record is there; local, for a root read where it lives (`status s3://bucket/run`), where its
    // manifest makes it complete, as on a local disk. A step with only unfinished multipart
    // uploads under it is there too, incomplete.
    std::vector<StepInfo> scan(StepTier as = StepTier::mirror) const;
    StepInfo describe(const std::string& name, uint64_t step, StepTier as = StepTier::mirror) const;
    std::optional<std::string> read_latest() const;
    void write_latest(const std::string& name, bool durable) const;
    // The upload record first, then the manifest, then the rest: a removal cut short leaves an
    // incomplete step, never a manifest over missing ranks. On S3, unfinished multipart uploads
    // under the step are aborted too, and a store that fails throws (remote_error): an upload
    // must not go on over a step whose old record may still be there.
    void remove_step(const std::string& name, bool durable) const;
    // On S3: aborts every unfinished multipart upload of a step under the root
    // (root/step-NNNNNNNN/...) but those of step `except` (the one being sent). An upload cut short by a killed process leaves parts that no object
    // listing shows, under a step that may have no object at all: found only this way. A mirror
    // is written by one run at a time (as the sweep of its incomplete steps assumes).
    void abort_uploads_except(const std::string& except) const;
    // On S3: the steps under the root with an unfinished multipart upload, which no object
    // listing shows (a rank file being sent in parts); none on a local mirror, nor where the
    // store refuses to list uploads (403, 501). A store that does not answer throws.
    std::set<std::string> steps_with_open_uploads() const;
    // Whether step `name` is on the tier complete (its upload verified and recorded) with exactly
    // this manifest: an earlier run's upload of the same step, which need not be sent again.
    // Throws Error(remote_error) when the store does not answer.
    bool holds(const std::string& name, const std::string& manifest_text) const;
    // Copies the committed local step `src` (whose manifest is `manifest`) as step `name`, reads
    // every copy back against the manifest's SHA-256, then writes the manifest and upload.json.
    // Throws on any failure, with nothing on the tier that claims to be complete.
    void upload(const std::filesystem::path& src, const std::string& name, const Manifest& manifest,
                const std::string& manifest_text, bool durable) const;
    // A local directory holding the step: a local mirror's own, or for S3 a copy downloaded into
    // `scratch` (created, replaced if present; the caller removes it): the manifest, then the rank
    // files it names, each checked against its size first.
    std::filesystem::path fetch(const std::string& name, const std::filesystem::path& scratch) const;

private:
    storage::Location m_where;
    std::unique_ptr<storage::S3Client> m_s3;
    std::string key(const std::string& name) const; // prefix-relative name -> object key
};

} // namespace shardscope
