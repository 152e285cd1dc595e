#include "core/run/mirror_tier.h"
#include "core/run/internal/piece_digests.h"
#include "core/run/internal/steps_scan.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/internal/shardfile.h"
#include "core/checkpoint/verify.h"
#include "core/storage/s3.h"
#include "core/storage/sequential_read.h"
#include "core/util/cancel.h"
#include "core/util/fsutil.h"
#include "core/util/hashing.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

// Parts of a multipart upload and pieces of a read-back: large enough that per-request costs
// vanish (16 and 32 MiB parts sent no faster to the test gateway), small enough that a widened
// read-back's ranges ahead hold little. A part in flight is not held in memory.
constexpr std::size_t kPart = 8 << 20;
constexpr int kTransfers = 4;
constexpr std::size_t kMaxMirrorObjects = 1'000'000;

std::span<const std::byte> bytes_of(const std::string& text)
{
    return std::as_bytes(std::span(text.data(), text.size()));
}

} // namespace

MirrorTier::MirrorTier(storage::Location where) : m_where(std::move(where))
{
    if (m_where.scheme == storage::Scheme::s3) {
        storage::S3Config config = storage::s3_config_from_environment(m_where.endpoint);
        config.verify_tls = m_where.verify_tls;
        m_s3 = std::make_unique<storage::S3Client>(std::move(config));
    } else if (!m_where.is_local())
        throw Error(ProblemKind::invalid_argument,
                    m_where.text + ": a mirror is a local directory or an s3:// location, not a web server");
}

MirrorTier::~MirrorTier() = default;
MirrorTier::MirrorTier(MirrorTier&&) noexcept = default;
MirrorTier& MirrorTier::operator=(MirrorTier&&) noexcept = default;

std::string MirrorTier::key(const std::string& name) const
{
    return m_where.prefix.empty() ? name : m_where.prefix + "/" + name;
}

std::string MirrorTier::display(const std::string& name) const
{
    if (is_local())
        return (name.empty() ? m_where.path : m_where.path / name).string();
    return storage::to_string(name.empty() ? m_where : m_where.child(name));
}

void MirrorTier::prepare(bool durable) const
{
    if (is_local())
        fsutil::make_directories(m_where.path, durable);
}

std::optional<std::string> MirrorTier::read_latest() const
{
    if (is_local())
        return shardscope::read_latest(m_where.path);
    const auto text = m_s3->get(m_where.bucket, key("latest"), 4096);
    if (!text)
        return std::nullopt;
    std::string name = *text;
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
        name.pop_back();
    if (!parse_step_dir_name(name))
        throw Error(ProblemKind::invalid_manifest,
                    display("latest") + ": does not name a step (" + printable(name, 80) + ")");
    return name;
}

void MirrorTier::write_latest(const std::string& name, bool durable) const
{
    if (is_local())
        return shardscope::write_latest(m_where.path, name, durable);
    m_s3->put(m_where.bucket, key("latest"), bytes_of(name + "\n"));
}

StepInfo MirrorTier::describe(const std::string& name, uint64_t step, StepTier as) const
{
    if (is_local())
        return describe_step(m_where.path, name, step, as);
    StepInfo info{.name = name, .step = step, .tier = as};
    try {
        const auto objects = m_s3->list_level(m_where.bucket, key(name) + "/", kMaxMirrorObjects).objects;
        const auto has = [&](const char* file) {
            return std::any_of(objects.begin(), objects.end(),
                               [&](const storage::ObjectInfo& o) { return o.key == key(name) + "/" + file; });
        };
        if (!has("manifest.json")) {
            info.problem = as == StepTier::local ? "no manifest.json: the save did not finish"
                                                 : "no manifest.json: the upload did not finish";
            return info;
        }
        info.bad_manifest = true;
        const auto text = m_s3->get(m_where.bucket, key(name) + "/manifest.json", kMaxManifestBytes);
        if (!text)
            throw Error(ProblemKind::missing_file, display(name) + "/manifest.json: gone while listed");
        const Manifest m = parse_manifest(*text, display(name) + "/manifest.json");
        info.bad_manifest = false;
        info.complete = as == StepTier::local || has(kUploadManifest);
        info.world_size = m.world_size;
        info.wall_clock_seconds = m.wall_clock_seconds;
        info.bytes = m.total_bytes();
        info.recorded_health = m.health();
        info.health = m.describe_health();
        if (!info.complete)
            info.problem = "the upload has not finished (no upload.json)";
    } catch (const Error& e) {
        // A store that did not answer proves nothing about the step: the caller must not take it
        // for incomplete (and delete it).
        rethrow_remote(e);
        info.complete = false;
        info.problem = e.what();
    }
    return info;
}

std::vector<StepInfo> MirrorTier::scan(StepTier as) const
{
    if (is_local())
        return shardscope::scan(m_where.path, as);
    const std::string root = m_where.prefix.empty() ? "" : m_where.prefix + "/";
    // Open uploads first: a step whose last upload completes between the two listings is then in
    // the objects' listing.
    const std::set<std::string> open = steps_with_open_uploads();
    // The root's level only (its step folders as common prefixes): each step is listed on its
    // own when it is described, so no object is listed twice and a root of many large steps
    // costs a page, not one per thousand rank objects.
    std::map<uint64_t, std::string> names;
    for (const std::string& prefix : m_s3->list_level(m_where.bucket, root, kMaxMirrorObjects).prefixes) {
        if (!prefix.starts_with(root) || !prefix.ends_with('/') || prefix.size() < root.size() + 2)
            continue;
        const std::string folder = prefix.substr(root.size(), prefix.size() - root.size() - 1);
        if (const auto step = parse_step_dir_name(folder))
            names.emplace(*step, folder);
    }
    std::vector<StepInfo> steps;
    for (const auto& [step, name] : names)
        steps.push_back(describe(name, step, as));
    // A step whose rank files are still being sent in parts has no object yet: it is the
    // incomplete copy it is (its upload in progress, or cut short), not absent.
    for (const std::string& name : open) {
        const uint64_t step = parse_step_dir_name(name).value_or(0);
        if (!names.contains(step))
            steps.push_back({.name = name,
                             .step = step,
                             .tier = as,
                             .problem = as == StepTier::local
                                 ? "no manifest.json: the save did not finish (its rank files are being sent in parts)"
                                 : "the upload has not finished (its rank files are being sent in parts)"});
    }
    std::sort(steps.begin(), steps.end(), [](const StepInfo& a, const StepInfo& b) { return a.step < b.step; });
    std::optional<std::string> latest;
    try {
        latest = read_latest();
    } catch (const Error& e) {
        rethrow_remote(e);
        // a broken `latest` marks no step
    }
    for (auto& s : steps)
        s.is_latest = latest && *latest == s.name;
    return steps;
}

void MirrorTier::remove_step(const std::string& name, bool durable) const
{
    if (is_local())
        return remove_step_dir(m_where.path, name, durable);
    const std::string dir = key(name) + "/";
    for (const auto& u : m_s3->list_multipart_uploads(m_where.bucket, dir))
        m_s3->abort_multipart(m_where.bucket, u.key, u.upload_id);
    m_s3->remove(m_where.bucket, dir + kUploadManifest);
    m_s3->remove(m_where.bucket, dir + "manifest.json");
    for (const auto& o : m_s3->list(m_where.bucket, dir, kMaxMirrorObjects))
        m_s3->remove(m_where.bucket, o.key);
}

namespace {

// The step folder an upload's key is in (root/step-NNNNNNNN/...), or "": a root at the bucket's
// top shares it with what other programs upload.
std::string step_of_upload(const std::string& root, const std::string& key)
{
    const std::string_view rest = std::string_view(key).substr(root.size());
    const std::string step(rest.substr(0, rest.find('/')));
    return step.size() < rest.size() && parse_step_dir_name(step) ? step : std::string();
}

} // namespace

void MirrorTier::abort_uploads_except(const std::string& except) const
{
    if (is_local())
        return;
    const std::string root = m_where.prefix.empty() ? "" : m_where.prefix + "/";
    for (const auto& u : m_s3->list_multipart_uploads(m_where.bucket, root))
        if (const std::string step = step_of_upload(root, u.key); !step.empty() && step != except)
            m_s3->abort_multipart(m_where.bucket, u.key, u.upload_id);
}

std::set<std::string> MirrorTier::steps_with_open_uploads() const
{
    std::set<std::string> steps;
    if (is_local())
        return steps;
    const std::string root = m_where.prefix.empty() ? "" : m_where.prefix + "/";
    // Credentials that may list and read objects but not uploads (a reader's) still read the
    // steps: only an upload in progress goes unshown.
    for (const auto& u : m_s3->list_multipart_uploads_if_allowed(m_where.bucket, root)
                             .value_or(std::vector<storage::MultipartUpload>{}))
        if (std::string step = step_of_upload(root, u.key); !step.empty())
            steps.insert(std::move(step));
    return steps;
}

bool MirrorTier::holds(const std::string& name, const std::string& manifest_text) const
{
    if (!describe(name, parse_step_dir_name(name).value_or(0)).complete)
        return false;
    if (is_local()) {
        const fs::path dir = m_where.path / name;
        const fsutil::UniqueFd fd = fsutil::open_directory(dir);
        return fsutil::read_small_file(fd.get(), "manifest.json", kMaxManifestBytes,
                                       (dir / "manifest.json").string()) == manifest_text;
    }
    return m_s3->get(m_where.bucket, key(name) + "/manifest.json", kMaxManifestBytes) == manifest_text;
}

namespace {

// A rank file of the step being sent, opened beneath the step's folder and checked against the
// manifest's size: a missing or changed file fails before anything is sent.
fsutil::OpenedFile open_rank_file(int dirfd, const fs::path& src, const ShardRecord& record)
{
    fsutil::OpenedFile in = fsutil::open_beneath_for_read(dirfd, record.path);
    if (in.status != fsutil::OpenStatus::ok)
        throw Error(ProblemKind::unreadable, (src / record.path).string() + ": cannot upload it: " + in.reason,
                    record.path, record.rank);
    if (in.size != record.bytes)
        throw Error(ProblemKind::size_mismatch,
                    (src / record.path).string() + " (rank " + std::to_string(record.rank) + "): " +
                        std::to_string(in.size) + " bytes where the manifest says " + std::to_string(record.bytes),
                    record.path, record.rank);
    return in;
}

// One PUT or one part of a multipart upload: `size` bytes of a rank file from `offset`.
struct Piece {
    std::size_t object; // index into the shards
    int part; // 0 for a single PUT
    uint64_t offset;
    std::size_t size;
};

void read_piece(const fsutil::OpenedFile& in, const fs::path& src, const ShardRecord& record, const Piece& piece,
                uint64_t at, std::span<std::byte> into)
{
    if (!fsutil::read_exact(in.fd.get(), into.data(), into.size(), piece.offset + at))
        throw Error(ProblemKind::unreadable,
                    (src / record.path).string() + " (rank " + std::to_string(record.rank) +
                        "): read failed during upload",
                    record.path, record.rank);
}

// The rank files of `src` sent under `dir`: each of up to a part as one PUT, a larger one as a
// multipart upload. Every piece (PUT or part) of every object is one job for kTransfers threads,
// so the parts of one object go up at once where there are fewer objects than threads. Each
// carries its MD5, which the server checks; PieceDigests works them out ahead from the same
// files. A file is opened for each piece it gives, by the digests' thread and by a sender
// (thousands of ranks hold no descriptor each), and a multipart upload is begun by the first of
// its parts to go. On any failure every multipart upload begun is aborted, so none is left
// behind. What was sent is proven by reading it back (read_back).
void send_shards(const storage::S3Client& s3, const std::string& bucket, const std::string& dir, int dirfd,
                 const fs::path& src, const std::vector<ShardRecord>& shards)
{
    struct Object {
        std::mutex begin; // the first part to go begins the upload; the others wait for its id
        std::string upload_id; // a multipart upload's, once begun
        std::vector<std::string> etags; // one a part
    };
    std::vector<Object> objects(shards.size());
    for (const ShardRecord& record : shards)
        (void)open_rank_file(dirfd, src, record);
    // The first part of every object, then the second, ...: the transfers in flight are
    // different objects' where there are enough (parts of one upload at once were a little
    // slower on the test gateway: 2.3–2.5 s against 2.2 s for 512 MiB in four objects).
    std::vector<Piece> pieces;
    for (std::size_t i = 0; i < shards.size(); ++i)
        if (shards[i].bytes <= kPart)
            pieces.push_back({.object = i, .part = 0, .offset = 0, .size = std::size_t(shards[i].bytes)});
        else
            objects[i].etags.resize(static_cast<std::size_t>((shards[i].bytes + kPart - 1) / kPart));
    for (std::size_t part = 1;; ++part) {
        const std::size_t before = pieces.size();
        for (std::size_t i = 0; i < objects.size(); ++i)
            if (part <= objects[i].etags.size()) {
                const uint64_t at = uint64_t(part - 1) * kPart;
                pieces.push_back({.object = i,
                                  .part = static_cast<int>(part),
                                  .offset = at,
                                  .size = std::size_t(std::min<uint64_t>(kPart, shards[i].bytes - at))});
            }
        if (pieces.size() == before)
            break;
    }
    std::atomic<bool> failed{false};
    std::vector<uint64_t> sizes;
    for (const Piece& piece : pieces)
        sizes.push_back(piece.size);
    try {
        PieceDigests digests(std::move(sizes), [&](std::size_t j) -> PieceDigests::Read {
            const Piece* piece = &pieces[j];
            const ShardRecord* record = &shards[piece->object];
            auto in = std::make_shared<fsutil::OpenedFile>(open_rank_file(dirfd, src, *record));
            return [&src, piece, record, in](uint64_t at, std::span<std::byte> into) {
                read_piece(*in, src, *record, *piece, at, into);
            };
        });
        const CancelFlags* const callers = t_operation_cancel; // without parallel_for's own
        parallel_for(pieces.size(), kTransfers, [&](std::size_t j) {
            if (failed)
                return; // the upload is lost already: its other parts need not go up
            const Piece& piece = pieces[j];
            const ShardRecord& record = shards[piece.object];
            Object& o = objects[piece.object];
            const std::string key = dir + record.path;
            try {
                digests.check();
                // Read from the file into the connection's buffer as it is sent: no part is held
                // in memory whole, whatever the part size.
                const fsutil::OpenedFile in = open_rank_file(dirfd, src, record);
                const auto read = [&](uint64_t at, std::span<std::byte> into) {
                    read_piece(in, src, record, piece, at, into);
                };
                if (piece.part == 0) {
                    s3.put(bucket, key, piece.size, read, digests.get(j));
                } else {
                    {
                        std::lock_guard lock(o.begin);
                        // Not cut short when another part fails: a begin cancelled once sent can
                        // open an upload on the server that no id here names, and nothing would
                        // abort it. Only the caller's own cancel stops it.
                        const CancelScope callers_only(callers);
                        if (o.upload_id.empty())
                            o.upload_id = s3.create_multipart(bucket, key);
                    }
                    o.etags[static_cast<std::size_t>(piece.part - 1)] =
                        s3.upload_part(bucket, key, o.upload_id, piece.part, piece.size, read, digests.get(j));
                }
            } catch (const Error& e) {
                failed = true;
                if (e.kind() != ProblemKind::hash_mismatch)
                    throw;
                // The server found other bytes than those hashed: the file changed between the
                // digests' read and the sender's, or the bytes were changed on the way.
                throw Error(ProblemKind::hash_mismatch,
                            (src / record.path).string() + " (rank " + std::to_string(record.rank) +
                                "): changed while it was uploaded, or changed on the way (" + e.what() +
                                "); the mirror copy is not kept",
                            record.path, record.rank);
            } catch (...) {
                failed = true;
                throw;
            }
        });
        // Completed at once: each took 47 ms on the test gateway, one after another a fifth of a
        // second of idle cores at the end of a 512 MiB upload.
        parallel_for(shards.size(), kTransfers, [&](std::size_t i) {
            if (failed || objects[i].upload_id.empty())
                return; // after a failure the rest are aborted below, not completed
            try {
                s3.complete_multipart(bucket, dir + shards[i].path, objects[i].upload_id, objects[i].etags);
            } catch (...) {
                failed = true;
                throw;
            }
            objects[i].upload_id.clear();
        });
    } catch (...) {
        for (std::size_t i = 0; i < shards.size(); ++i)
            if (!objects[i].upload_id.empty()) {
                try {
                    s3.abort_multipart(bucket, dir + shards[i].path, objects[i].upload_id);
                } catch (const Error&) {
                    // the next upload of this step aborts what is left under it
                }
            }
        throw;
    }
}

// One object of the bucket as storage::read_in_order reads it: streamed, or in ranges.
class ObjectReader final : public storage::Reader {
public:
    ObjectReader(const storage::S3Client& s3, const std::string& bucket, const std::string& key)
        : m_s3(s3), m_bucket(bucket), m_key(key)
    {}
    bool read(void* buffer, std::size_t size, uint64_t offset) const override
    {
        m_s3.read(m_bucket, m_key, offset, {static_cast<std::byte*>(buffer), size});
        return true;
    }
    std::optional<uint64_t> stream(uint64_t offset, uint64_t size,
                                   const std::function<bool(const char*, std::size_t)>& consume) const override
    {
        return m_s3.stream(m_bucket, m_key, offset, size, consume);
    }

private:
    const storage::S3Client& m_s3;
    const std::string m_bucket, m_key;
};

// The object read back: its SHA-256, as a reader elsewhere would see it. It is streamed and hashed
// as it arrives; read alone, widened to `depth` ranges at a time on a slow link
// (storage::read_in_order, storage::remote_read_depth).
std::string read_back(const storage::S3Client& s3, const std::string& bucket, const std::string& key, uint64_t size,
                      int depth)
{
    Sha256 sha;
    const ObjectReader reader(s3, bucket, key);
    storage::read_in_order(
        reader, size,
        {.chunk = static_cast<std::size_t>(std::min<uint64_t>(std::max<uint64_t>(size, 1), kPart)), .depth = depth},
        [&](const char* bytes, std::size_t n) {
            sha.update(bytes, n);
            return true;
        });
    return sha.hex_digest();
}

// upload.json (format.md 6.6), the same on either kind of tier. `copy_s` and `read_back_s`: how
// long the copy and its read-back took, for whoever asks why the mirror lags.
std::string upload_record(const fs::path& src, const Manifest& m, const nlohmann::json& files, double copy_s,
                          double read_back_s)
{
    const auto rounded = [](double s) { return std::round(s * 1000) / 1000; };
    const nlohmann::json record = {{"source", src.string()},
                                   {"step", m.step},
                                   {"uploaded_at", static_cast<int64_t>(std::time(nullptr))},
                                   {"seconds", {{"copy", rounded(copy_s)}, {"read_back", rounded(read_back_s)}}},
                                   {"files", files}};
    return record.dump(2) + "\n";
}

double seconds_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

void MirrorTier::upload(const fs::path& src, const std::string& name, const Manifest& m,
                        const std::string& manifest_text, bool durable) const
{
    nlohmann::json files = nlohmann::json::array();
    const auto began = std::chrono::steady_clock::now();
    if (is_local()) {
        // The mirror root must still be there: recreating a vanished one would upload into
        // whatever lies beneath it (format.md 6.7).
        (void)fsutil::open_directory(m_where.path);
        const fs::path dst = m_where.path / name;
        fsutil::make_directories(dst, durable);
        fsutil::UniqueFd src_fd = fsutil::open_directory(src);
        fsutil::UniqueFd dst_fd = fsutil::open_directory(dst);
        std::vector<char> buffer(kReadChunk);
        for (const ShardRecord& record : m.shards) {
            fsutil::OpenedFile in = fsutil::open_beneath_for_read(src_fd.get(), record.path);
            if (in.status != fsutil::OpenStatus::ok)
                throw Error(ProblemKind::unreadable, (src / record.path).string() + ": cannot upload it: " + in.reason,
                            record.path, record.rank);
            ShardFileWriter out(dst_fd.get(), dst, record.rank, WriteOptions{.durable = durable}, record.path);
            for (uint64_t at = 0; at < in.size; at += buffer.size()) {
                const auto n = static_cast<std::size_t>(std::min<uint64_t>(buffer.size(), in.size - at));
                if (!fsutil::read_exact(in.fd.get(), buffer.data(), n, at))
                    throw Error(ProblemKind::unreadable, (src / record.path).string() + ": read failed during upload",
                                record.path, record.rank);
                out.write(buffer.data(), n);
            }
            const ShardRecord copied = out.finish(record.param_shard_offset, record.param_shard_numel);
            if (copied.sha256 != record.sha256)
                throw Error(ProblemKind::hash_mismatch,
                            (src / record.path).string() + " (rank " + std::to_string(record.rank) +
                                "): changed or corrupt while uploading; the mirror copy is not kept",
                            record.path, record.rank);
            files.push_back({{"path", record.path},
                             {"remote_path", (dst / record.path).string()},
                             {"sha256", copied.sha256},
                             {"bytes", copied.bytes}});
        }
        // The copies' names must be durable before a manifest points at them (as in commit()).
        if (durable)
            fsutil::fsync_or_throw(dst_fd.get(), dst.string());
        fsutil::write_file_atomic(dst_fd.get(), "manifest.json", manifest_text, dst.string(), durable);
        // Read the copy back as a remote client would, before declaring the upload done.
        const double copy_s = seconds_since(began);
        const auto reading = std::chrono::steady_clock::now();
        const VerifyReport check = verify_native(dst);
        if (!check.ok())
            throw Error(check.problems.front());
        fsutil::write_file_atomic(dst_fd.get(), kUploadManifest,
                                  upload_record(src, m, files, copy_s, seconds_since(reading)), dst.string(), durable);
        return;
    }

    const std::string dir = key(name) + "/";
    fsutil::UniqueFd src_fd = fsutil::open_directory(src);
    send_shards(*m_s3, m_where.bucket, dir, src_fd.get(), src, m.shards);
    const double copy_s = seconds_since(began);
    // Every object read back as a remote client would, before the manifest may point at them: a
    // local file that changed while it was sent, or a copy the store mangled, differs from the
    // manifest. One stream an object, as verify reads them.
    const auto reading = std::chrono::steady_clock::now();
    const int readers = static_cast<int>(std::min<std::size_t>(m.shards.size(), storage::kRemoteReadsAtOnce));
    std::vector<nlohmann::json> sent(m.shards.size());
    parallel_for(m.shards.size(), readers, [&](std::size_t i) {
        const ShardRecord& record = m.shards[i];
        const std::string object = dir + record.path;
        const auto info = m_s3->head(m_where.bucket, object);
        if (!info || info->size != record.bytes ||
            read_back(*m_s3, m_where.bucket, object, record.bytes, storage::remote_read_depth(readers)) !=
                record.sha256)
            throw Error(ProblemKind::hash_mismatch,
                        display(name) + "/" + record.path + " (rank " + std::to_string(record.rank) +
                            "): the uploaded copy does not read back as the manifest's SHA-256; it is not kept",
                        record.path, record.rank);
        sent[i] = {{"path", record.path},
                   {"remote_path", storage::object_url(m_where.bucket, object)},
                   {"sha256", record.sha256},
                   {"bytes", record.bytes}};
    });
    const double read_back_s = seconds_since(reading);
    for (auto& f : sent)
        files.push_back(std::move(f));
    // A multipart upload the server began but whose answer was lost (a reset connection, a
    // timeout) was begun again by the retry: the first is left open, holding parts nowhere
    // visible. Before the step is published none of its uploads may still be open.
    for (const auto& u : m_s3->list_multipart_uploads(m_where.bucket, dir))
        m_s3->abort_multipart(m_where.bucket, u.key, u.upload_id);
    m_s3->put(m_where.bucket, dir + "manifest.json", bytes_of(manifest_text));
    m_s3->put(m_where.bucket, dir + kUploadManifest, bytes_of(upload_record(src, m, files, copy_s, read_back_s)));
}

fs::path MirrorTier::fetch(const std::string& name, const fs::path& scratch) const
{
    if (is_local())
        return m_where.path / name;
    std::error_code ec;
    fs::remove_all(scratch, ec);
    fsutil::make_directories(scratch, false); // a scratch copy: loaded, then removed
    fsutil::UniqueFd out_dir = fsutil::open_directory(scratch);
    // The manifest first, then exactly the rank files it names at the sizes it gives: nothing else
    // a bucket holds under the step is written to disk.
    const std::string dir = key(name) + "/";
    const auto text = m_s3->get(m_where.bucket, dir + "manifest.json", kMaxManifestBytes);
    if (!text)
        throw Error(ProblemKind::missing_file, display(name) + "/manifest.json: no such object",
                    storage::object_url(m_where.bucket, dir + "manifest.json"));
    const Manifest m = parse_manifest(*text, display(name) + "/manifest.json");
    fsutil::write_file_atomic(out_dir.get(), "manifest.json", *text, scratch.string(), false);
    parallel_for(m.shards.size(), kTransfers, [&](std::size_t i) {
        const ShardRecord& record = m.shards[i];
        if (fsutil::unsafe_name_reason(record.path) || record.path.find('/') != std::string::npos)
            throw Error(ProblemKind::path_outside_checkpoint,
                        display(name) + "/manifest.json: rank " + std::to_string(record.rank) + "'s path '" +
                            printable(record.path) + "' is not a file name in the step",
                        record.path, record.rank);
        const std::string object = dir + record.path;
        const auto info = m_s3->head(m_where.bucket, object);
        if (!info)
            throw Error(ProblemKind::missing_shard, storage::object_url(m_where.bucket, object) + ": no such object",
                        record.path, record.rank);
        if (info->size != record.bytes)
            throw Error(ProblemKind::size_mismatch,
                        storage::object_url(m_where.bucket, object) + " (rank " + std::to_string(record.rank) +
                            "): " + std::to_string(info->size) + " bytes where the manifest says " +
                            std::to_string(record.bytes),
                        record.path, record.rank);
        fsutil::UniqueFd fd = fsutil::create_exclusive(out_dir.get(), record.path);
        if (!fd)
            throw Error(ProblemKind::io_error, (scratch / record.path).string() + ": cannot create the fetched copy");
        std::vector<std::byte> buffer(static_cast<std::size_t>(std::min<uint64_t>(record.bytes, kPart)));
        for (uint64_t at = 0; at < record.bytes; at += kPart) {
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(kPart, record.bytes - at));
            m_s3->read(m_where.bucket, object, at, std::span(buffer.data(), n));
            if (!fsutil::write_all(fd.get(), buffer.data(), n))
                throw Error(ProblemKind::io_error, (scratch / record.path).string() + ": write failed");
        }
    });
    return scratch;
}

} // namespace shardscope
