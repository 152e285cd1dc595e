#include "core/storage/folder.h"

#include "core/storage/s3.h"
#include "core/util/error.h"
#include "core/util/printable.h"

#include <algorithm>
#include <functional>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <list>
#include <mutex>
#include <set>
#include <span>
#include <sys/stat.h>

namespace shardscope::storage {

namespace fs = std::filesystem;

namespace {

// Far more objects than any checkpoint folder holds (a step of 4096 ranks and their optimizer
// files, a run of hundreds of steps), few enough that a hostile listing is refused, not followed.
constexpr std::size_t kMaxListedObjects = 500'000;

// The files each checkpoint format is recognised by (format.md, 7): what a folder URL, which
// HTTP cannot list, is asked for.
constexpr std::string_view kEntryNames[] = {"manifest.json",
                                            "latest",
                                            "model.safetensors.index.json",
                                            "model.safetensors",
                                            ".metadata",
                                            "latest_checkpointed_iteration.txt",
                                            "pytorch_model.bin.index.json",
                                            "pytorch_model.bin"};
constexpr std::string_view kTorchDistNames[] = {"metadata.json", "common.pt", "integrity.json"};

// DeepSpeed's rank files, numbered: each series is asked for from rank 0 on until kProbedPastAMiss
// names in a row are missing, so that a missing rank among present ones is a gap the verifier
// names (a missing last rank cannot be told from the end, as without a manifest anywhere). %D is
// the data-parallel rank, %M the model-parallel one (two digits).
// The model files come first: where one answers (ZeRO-3's per-rank ones included), the step is
// DeepSpeed's and the optimizer series are followed past a missing rank 0.
constexpr std::string_view kRankSeries[] = {"mp_rank_%M_model_states.pt", "zero_pp_rank_%D_mp_rank_00_model_states.pt",
                                            "zero_pp_rank_%D_mp_rank_00_optim_states.pt",
                                            "bf16_zero_pp_rank_%D_mp_rank_00_optim_states.pt"};
constexpr int kMaxProbedRanks = 4096;
constexpr int kProbedPastAMiss = 4;
// HEADs one folder's probe may take: a full grid of kMaxProbedRanks Megatron ranks and the series
// that find it fit.
constexpr int kMaxProbeHeads = 2 * kMaxProbedRanks;
// While a folder is probed (probe()), how many more HEADs it may take: a server that answers for
// every name would otherwise have each rank series followed to kMaxProbedRanks, and every rank of
// a Megatron grid asked for, a hundred thousand requests before a single sentence.
thread_local int* t_probe_heads_left = nullptr;

// Megatron's per-rank layout (before torch_dist): a folder mp_rank_TT (tensor-parallel rank) or
// mp_rank_TT_PPP (and pipeline stage) holding model_optim_rng.pt (and distrib_optim.pt).
constexpr std::string_view kMegatronRankFiles[] = {"model_optim_rng.pt", "distrib_optim.pt"};

std::string megatron_rank_folder(int tp, int pp) // pp < 0: no pipeline stages
{
    char name[32];
    if (pp < 0)
        std::snprintf(name, sizeof name, "mp_rank_%02d", tp);
    else
        std::snprintf(name, sizeof name, "mp_rank_%02d_%03d", tp, pp);
    return name;
}

std::string rank_name(std::string_view series, int rank)
{
    std::string out(series);
    char digits[16];
    if (const std::size_t at = out.find("%D"); at != std::string::npos)
        out.replace(at, 2, std::to_string(rank));
    if (const std::size_t at = out.find("%M"); at != std::string::npos) {
        std::snprintf(digits, sizeof digits, "%02d", rank);
        out.replace(at, 2, digits);
    }
    return out;
}

OpenedObject from_local(fsutil::OpenedFile file)
{
    OpenedObject out{.status = file.status, .size = file.size, .reason = std::move(file.reason)};
    if (file.status == fsutil::OpenStatus::ok)
        out.reader = std::make_unique<FileReader>(std::move(file.fd));
    return out;
}

std::string_view last_component(std::string_view path)
{
    const std::size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Whether the last component of a URL's path has an extension, as a file's name does.
bool has_extension(std::string_view path)
{
    const std::string_view last = last_component(path);
    return last.find('.') != std::string_view::npos && last != "." && last != "..";
}

// Whether the last component of a URL's path may name a file: it has an extension, or it is an
// entry file without one (`latest`). A HEAD then says whether it is one.
bool names_file(std::string_view path)
{
    const std::string_view last = last_component(path);
    return has_extension(path) ||
        std::find(std::begin(kEntryNames), std::end(kEntryNames), last) != std::end(kEntryNames);
}

} // namespace

struct Folder::Remote {
    Remote(S3Client c, std::string b) : client(std::move(c)), bucket(std::move(b)) {}
    S3Client client;
    std::string bucket; // "" for an HTTP(S) server
    std::string base; // the key prefix of the folder first opened: "" or "run/step-1/"
    // S3: what the listings said, one folder level at a time (a "/"-delimited listing of a folder
    // when it is first looked into): the objects (keys relative to `base`) with their sizes and
    // ETags, the folders seen ("a/", "a/b/"), and the levels listed ("" for base itself). A run
    // root in a bucket is not listed to its last object to read one step.
    bool listed = false;
    mutable std::mutex listing_mutex;
    // What a listing said of an object: every read of it asks for that ETag (If-Match), so that
    // an object replaced while a checkpoint is read is said as such, not read as other bytes.
    struct Known {
        uint64_t size = 0;
        std::string etag; // "" when the server gave none
    };
    mutable std::map<std::string, Known, std::less<>> objects;
    mutable std::set<std::string, std::less<>> folders;
    mutable std::set<std::string, std::less<>> levels;

    // Lists the level `prefix` ("" or "a/b/") once; the caller holds listing_mutex.
    void list_level(const std::string& prefix) const
    {
        if (levels.contains(prefix))
            return;
        const S3Level level = client.list_level(bucket, base + prefix, kMaxListedObjects);
        for (const ObjectInfo& object : level.objects)
            objects.emplace(object.key.substr(base.size()), Known{.size = object.size, .etag = object.etag});
        for (const std::string& folder : level.prefixes)
            folders.insert(folder.substr(base.size()));
        levels.insert(prefix);
    }

    void forget_listings()
    {
        objects.clear();
        folders.clear();
        levels.clear();
    }

    static std::string parent_of(std::string_view relative)
    {
        const std::size_t slash = relative.rfind('/');
        return slash == std::string_view::npos ? std::string() : std::string(relative.substr(0, slash + 1));
    }

    // S3: whether `prefix` ("a/b/") is a folder: its parent level lists it.
    bool listed_folder(const std::string& prefix) const
    {
        std::lock_guard lock(listing_mutex);
        list_level(parent_of(std::string_view(prefix).substr(0, prefix.size() - 1)));
        return folders.contains(prefix);
    }
    // HTTP(S) has no listing: objects are asked for one by one (HEAD), each once; the answers are
    // kept (readers on several threads ask for the same files).
    mutable std::mutex asked_mutex;
    mutable std::map<std::string, std::optional<Known>, std::less<>> asked;

    // Reads smaller than a block (a zip entry's header and name, a small tensor, a pickle) are
    // served from the aligned block of the object they fall in, fetched once and kept among the
    // last kBlocks fetched, which every reader of the folder shares (the scan opens an object once
    // per tensor, on several threads): a torch.save file or a DCP of thousands of small entries
    // costs a GET per block, not several per entry. Reads of a block or more are one GET of exactly
    // their bytes.
    static constexpr std::size_t kBlock = 256 << 10;
    static constexpr std::size_t kBlocks = 16; // 4 MiB
    struct Block {
        std::string key;
        uint64_t start = 0;
        std::vector<std::byte> bytes;
    };
    mutable std::mutex blocks_mutex;
    mutable std::list<Block> blocks; // most recently used first
    // Small objects read whole (read_small: `latest`, manifests, indexes), each once a command
    // (several checks read a step's manifest), as one GET of the object as it now is.
    mutable std::map<std::string, std::string, std::less<>> wholes;

    std::string read_whole(const std::string& key, uint64_t max_bytes, const std::string& display_path) const
    {
        {
            std::lock_guard lock(blocks_mutex);
            if (const auto it = wholes.find(key); it != wholes.end())
                return it->second;
        }
        auto contents = client.get(bucket, key, max_bytes);
        if (!contents)
            throw Error(ProblemKind::cannot_open, display_path + ": the object no longer exists", display_path);
        std::lock_guard lock(blocks_mutex);
        if (contents->size() <= kBlock && wholes.size() < 64)
            wholes.emplace(key, *contents);
        return std::move(*contents);
    }

    void read(const std::string& key, const Known& object, std::byte* out, std::size_t size, uint64_t offset) const
    {
        if (size >= kBlock) {
            client.read(bucket, key, offset, {out, size}, object.etag, object.size);
            return;
        }
        std::lock_guard lock(blocks_mutex);
        while (size > 0) {
            const uint64_t start = offset / kBlock * kBlock;
            auto it = std::find_if(blocks.begin(), blocks.end(),
                                   [&](const Block& b) { return b.start == start && b.key == key; });
            if (it == blocks.end()) {
                Block b{.key = key, .start = start};
                b.bytes.resize(static_cast<std::size_t>(std::min<uint64_t>(kBlock, object.size - start)));
                client.read(bucket, key, start, b.bytes, object.etag, object.size); // throws before anything is kept
                blocks.push_front(std::move(b));
                if (blocks.size() > kBlocks)
                    blocks.pop_back();
                it = blocks.begin();
            } else if (it != blocks.begin()) {
                blocks.splice(blocks.begin(), blocks, it);
                it = blocks.begin();
            }
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(size, start + it->bytes.size() - offset));
            std::memcpy(out, it->bytes.data() + (offset - start), n);
            out += n;
            offset += n;
            size -= n;
        }
    }

    // The bytes of `key` from `offset` to the end of the block held that starts there, if one is.
    std::optional<std::vector<std::byte>> held_block(const std::string& key, uint64_t offset) const
    {
        std::lock_guard lock(blocks_mutex);
        for (const Block& b : blocks)
            if (b.key == key && b.start == offset)
                return b.bytes;
        return std::nullopt;
    }

    std::optional<Known> object_of(const std::string& relative) const
    {
        if (listed) {
            std::lock_guard lock(listing_mutex);
            list_level(parent_of(relative));
            const auto it = objects.find(relative);
            return it == objects.end() ? std::nullopt : std::optional<Known>(it->second);
        }
        {
            std::lock_guard lock(asked_mutex);
            if (const auto it = asked.find(relative); it != asked.end())
                return it->second;
        }
        if (t_probe_heads_left && (*t_probe_heads_left)-- <= 0)
            throw Error(ProblemKind::remote_error,
                        client.object_name(bucket, base) + ": the server answers for more of the names a " +
                            "checkpoint's files could have than any checkpoint has (" + std::to_string(kMaxProbeHeads) +
                            " asked for); not read as a checkpoint folder",
                        client.object_name(bucket, base));
        // A web server's HEAD gives no ETag to hold its reads to: behind a load balancer each node
        // may give its own for the same bytes. Its streams still hold to their first answer's.
        const auto info = client.head(bucket, base + relative);
        const std::optional<Known> known = info ? std::optional<Known>(Known{.size = info->size}) : std::nullopt;
        std::lock_guard lock(asked_mutex);
        asked.emplace(relative, known);
        return known;
    }
    std::optional<uint64_t> size_of(const std::string& relative) const
    {
        const auto known = object_of(relative);
        return known ? std::optional<uint64_t>(known->size) : std::nullopt;
    }

    // The entries directly beneath `prefix` ("" or "a/b/"), sorted, from its level's listing.
    std::vector<std::string> names_beneath(const std::string& prefix) const
    {
        std::lock_guard lock(listing_mutex);
        list_level(prefix);
        std::vector<std::string> out;
        for (auto it = objects.lower_bound(prefix); it != objects.end() && it->first.starts_with(prefix); ++it)
            if (const std::string rest = it->first.substr(prefix.size());
                !rest.empty() && rest.find('/') == std::string::npos) // "" is a folder marker object
                out.push_back(rest);
        for (auto it = folders.lower_bound(prefix); it != folders.end() && it->starts_with(prefix); ++it)
            if (const std::string rest = it->substr(prefix.size()); rest.find('/') == rest.size() - 1)
                out.push_back(rest.substr(0, rest.size() - 1));
        std::sort(out.begin(), out.end()); // "a.b" sorts before "a/x"
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }

    // The names directly beneath `prefix` ("a/b/") of objects that have already answered a HEAD:
    // a folder known without asking for its entry files again (a Megatron rank folder found by
    // its model_optim_rng.pt).
    std::vector<std::string> answered_beneath(const std::string& prefix) const
    {
        std::vector<std::string> out;
        std::lock_guard lock(asked_mutex);
        for (auto it = asked.lower_bound(prefix); it != asked.end() && it->first.starts_with(prefix); ++it)
            if (const std::string rest = it->first.substr(prefix.size());
                it->second && rest.find('/') == std::string::npos)
                out.push_back(rest);
        return out;
    }

    bool answered_as_file(const std::string& relative) const
    {
        std::lock_guard lock(asked_mutex);
        const auto it = asked.find(relative);
        return it != asked.end() && it->second.has_value();
    }

    // A numbered series (DeepSpeed's rank files, Megatron's rank folders) followed from 0 while
    // its names answer, past at most kProbedPastAMiss missing ones in a row, so that a gap among
    // present ones is seen, and no further than kMaxProbedRanks: `found` is called for each index
    // that answers. Returns one past the last of them (0: none). Without `past_a_missing_first`
    // the series is followed only where its first name is there (a HEAD, not five, for a series
    // the folder does not have); with it, a missing rank 0 is a gap like any other.
    int follow_series(const std::function<bool(int)>& answers, const std::function<void(int)>& found,
                      bool past_a_missing_first = false) const
    {
        int end = 0;
        for (int i = 0, misses = 0; i < kMaxProbedRanks && misses <= kProbedPastAMiss; ++i)
            if (answers(i)) {
                found(i);
                end = i + 1;
                misses = 0;
            } else if (i == 0 && !past_a_missing_first) {
                break;
            } else {
                ++misses;
            }
        return end;
    }

    // A Megatron iteration's rank folders beneath `prefix`: where rank (0, 0) answers, the
    // tensor-parallel ranks (stage 0's, then the last stage's) and the stages of the first and the
    // last rank are followed, then every rank of that grid (at most kMaxProbedRanks) asked for, so that a
    // missing one among them is a gap the verifier names.
    void probe_megatron_ranks(const std::string& prefix, std::vector<std::string>& out) const
    {
        const auto present = [&](int tp, int pp) {
            return size_of(prefix + megatron_rank_folder(tp, pp) + "/model_optim_rng.pt").has_value();
        };
        const auto nothing = [](int) {};
        // Every series past a missing rank 0 too (mp_rank_00_000 lost, tensor-parallel size 1
        // or more): its loss is then named, not taken for an empty folder.
        for (const int first_stage : {-1, 0}) {
            int tp = follow_series([&](int t) { return present(t, first_stage); }, nothing, true);
            int pp = 1;
            if (first_stage == 0) {
                for (const int t : {0, std::max(tp, 1) - 1}) // either may lack a stage the other has
                    pp = std::max(pp, follow_series([&](int s) { return present(t, s); }, nothing, true));
                if (tp == 0 && pp > 1)
                    tp = 1; // rank 0 has later stages: stage 0 is what was lost
                // The last stage may have a tensor-parallel rank the first one lacks.
                const int last = pp - 1;
                if (tp > 0)
                    tp = std::max(tp, follow_series([&](int t) { return present(t, last); }, nothing, true));
            }
            if (tp == 0)
                continue;
            if (int64_t(tp) * pp > kMaxProbedRanks)
                pp = std::max(1, kMaxProbedRanks / tp);
            for (int t = 0; t < tp; ++t)
                for (int s = 0; s < pp; ++s)
                    if (present(t, first_stage < 0 ? -1 : s))
                        out.push_back(megatron_rank_folder(t, first_stage < 0 ? -1 : s));
        }
    }

    // DeepSpeed's pipeline engine's layer files beneath `prefix`: layer_LL-model_states.pt, or
    // with tensor slices layer_LL-model_MM-model_states.pt. The layer indices skip where a layer
    // holds no state (no file is saved for it), which the series' misses allow for. A layer is
    // asked for by every slice of the first and the last layer's, so that a slice missing for one
    // layer is named as locally. Whether any layer file answered.
    bool probe_deepspeed_layers(const std::string& prefix, std::vector<std::string>& out) const
    {
        const auto layer_file = [](int layer, int slice) { // slice < 0: no tensor slices
            char name[64];
            if (slice < 0)
                std::snprintf(name, sizeof name, "layer_%02d-model_states.pt", layer);
            else
                std::snprintf(name, sizeof name, "layer_%02d-model_%02d-model_states.pt", layer, slice);
            return std::string(name);
        };
        const auto present = [&](int layer, int slice) {
            return size_of(prefix + layer_file(layer, slice)).has_value();
        };
        if (follow_series([&](int l) { return present(l, -1); }, [&](int l) { out.push_back(layer_file(l, -1)); },
                          true) > 0)
            return true;
        std::vector<int> layers;
        follow_series([&](int l) { return present(l, 0); }, [&](int l) { layers.push_back(l); }, true);
        if (layers.empty())
            return false;
        int slices = 1;
        for (const int l : {layers.front(), layers.back()})
            slices = std::max(slices, follow_series([&](int m) { return present(l, m); }, [](int) {}, true));
        // Layers whose slice 0 is the one lost are found by their other slices.
        layers.clear();
        follow_series(
            [&](int l) {
                for (int m = 0; m < slices; ++m)
                    if (present(l, m))
                        return true;
                return false;
            },
            [&](int l) { layers.push_back(l); }, true);
        for (const int l : layers)
            for (int m = 0; m < slices; ++m)
                if (present(l, m))
                    out.push_back(layer_file(l, m));
        return true;
    }

    // The entry files of kEntryNames that answer a HEAD beneath `prefix` (with a .metadata,
    // torch_dist's files beside it), else the rank files that do: what a folder URL holds.
    std::vector<std::string> probe(const std::string& prefix) const
    {
        // This probe's HEADs, on this thread: not a read on another thread, nor another probe.
        int heads_left = kMaxProbeHeads;
        struct Budget {
            int* previous;
            explicit Budget(int* heads) : previous(std::exchange(t_probe_heads_left, heads)) {}
            ~Budget() { t_probe_heads_left = previous; }
            Budget(const Budget&) = delete;
            Budget& operator=(const Budget&) = delete;
        } const budget(&heads_left);
        std::vector<std::string> out;
        for (const std::string_view entry : kEntryNames)
            if (size_of(prefix + std::string(entry)))
                out.emplace_back(entry);
        if (std::find(out.begin(), out.end(), ".metadata") != out.end()) // Megatron's torch_dist beside it
            for (const std::string_view entry : kTorchDistNames)
                if (size_of(prefix + std::string(entry)))
                    out.emplace_back(entry);
        // Rank files are what a folder without any entry file holds (a DeepSpeed step, a Megatron
        // iteration or rank folder): not asked for beside an entry file, which says the format.
        if (!out.empty()) {
            std::sort(out.begin(), out.end());
            return out;
        }
        for (const std::string_view file : kMegatronRankFiles)
            if (size_of(prefix + std::string(file)))
                out.emplace_back(file);
        if (!out.empty()) { // a Megatron rank folder: nothing more in it
            std::sort(out.begin(), out.end());
            return out;
        }
        probe_megatron_ranks(prefix, out);
        // In a DeepSpeed step (its model states are there) an optimizer series is followed past
        // a missing rank 0, so that its loss is named rather than the series taken as absent.
        bool deepspeed = false;
        for (const std::string_view series : kRankSeries)
            deepspeed = follow_series([&](int rank) { return size_of(prefix + rank_name(series, rank)).has_value(); },
                                      [&](int rank) { out.push_back(rank_name(series, rank)); }, deepspeed) > 0 ||
                deepspeed;
        // The pipeline engine's layer files, beside its mp_rank files: where they answer and no
        // mp_rank file did, that series is followed past a missing rank 0 too, so that its loss is
        // named (a pipeline step holds no optimizer files that would have shown the step's).
        if (probe_deepspeed_layers(prefix, out) && !deepspeed)
            follow_series([&](int rank) { return size_of(prefix + rank_name(kRankSeries[0], rank)).has_value(); },
                          [&](int rank) { out.push_back(rank_name(kRankSeries[0], rank)); }, true);
        std::sort(out.begin(), out.end());
        return out;
    }
};

namespace {

class RemoteReader final : public Reader {
public:
    RemoteReader(std::shared_ptr<const Folder::Remote> remote, std::string key, Folder::Remote::Known object)
        : m_remote(std::move(remote)), m_key(std::move(key)), m_object(std::move(object))
    {}
    bool read(void* buffer, std::size_t size, uint64_t offset) const override
    {
        if (offset > m_object.size || size > m_object.size - offset) {
            errno = 0; // shorter than the read: as a file that shrank
            return false;
        }
        m_remote->read(m_key, m_object, static_cast<std::byte*>(buffer), size, offset);
        return true;
    }
    std::optional<uint64_t> stream(uint64_t offset, uint64_t size,
                                   const std::function<bool(const char*, std::size_t)>& consume) const override
    {
        if (offset > m_object.size || size > m_object.size - offset)
            throw Error(ProblemKind::range_outside_file,
                        m_remote->client.object_name(m_remote->bucket, m_key) + ": a read past the object's end",
                        m_remote->client.object_name(m_remote->bucket, m_key));
        // A block already fetched where the stream begins (a shard's header was read from its
        // first block) is handed over from memory and the stream asks for what follows: one
        // request a shard, not two that overlap.
        // Only where the block's GET was held to the listing's ETag, as the stream is: a web
        // server's (no ETag to hold them to) could mix two versions of the object.
        uint64_t handed = 0;
        if (const auto held = m_object.etag.empty() ? std::nullopt : m_remote->held_block(m_key, offset);
            held && !held->empty()) {
            const auto n = static_cast<std::size_t>(std::min<uint64_t>(size, held->size()));
            if (!consume(reinterpret_cast<const char*>(held->data()), n))
                return n;
            handed = n;
        }
        if (handed == size)
            return handed;
        return handed +
            m_remote->client.stream(m_remote->bucket, m_key, offset + handed, size - handed, consume, m_object.etag,
                                    m_object.size);
    }

private:
    std::shared_ptr<const Folder::Remote> m_remote;
    std::string m_key;
    Folder::Remote::Known m_object;
};

} // namespace

Folder::Folder(fsutil::ListedDirectory listed) : path(listed.path), names(listed.names), m_local(std::move(listed))
{
    m_location = Location(path);
}

Folder::Folder(Folder&&) noexcept = default;
Folder& Folder::operator=(Folder&&) noexcept = default;
Folder::~Folder() = default;

Folder Folder::open(const Location& location)
{
    if (location.is_local())
        return Folder(fsutil::open_listed(location.path));

    const bool s3 = location.scheme == Scheme::s3;
    S3Config config;
    if (s3) {
        config = s3_config_from_environment(location.endpoint);
    } else {
        config.endpoint = (location.scheme == Scheme::https ? "https://" : "http://") + location.authority;
        config.anonymous = true;
    }
    config.verify_tls = location.verify_tls;
    auto remote = std::make_shared<Remote>(S3Client(std::move(config)), location.bucket);
    const std::string text = to_string(location);
    Folder folder;
    folder.m_location = location;
    folder.path = text;

    // A URL naming one object is read as its folder: `base` becomes the folder's prefix.
    const std::size_t slash = location.prefix.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : location.prefix.substr(0, slash + 1);
    const auto as_parent = [&] {
        remote->base = parent;
        folder.path = fs::path(text).parent_path();
        folder.m_location.prefix = parent.empty() ? "" : parent.substr(0, parent.size() - 1);
        folder.m_location.text = to_string(folder.m_location);
    };
    if (s3) {
        remote->listed = true;
        remote->base = location.prefix.empty() ? "" : location.prefix + "/";
        folder.names = remote->names_beneath("");
        // Not a prefix: perhaps one object (s3://bucket/run/model.safetensors.index.json), read
        // with the rest of its folder, which the index or metadata names files in.
        if (folder.names.empty() && !location.prefix.empty() && remote->client.head(remote->bucket, location.prefix)) {
            as_parent();
            remote->forget_listings();
            folder.names = remote->names_beneath("");
        }
        if (folder.names.empty())
            throw Error(ProblemKind::cannot_open, text + ": no such object and no objects beneath it", text);
    } else {
        // HTTP cannot list: a URL whose last part answers a HEAD is a file; otherwise it names a
        // folder (even with a dot in its name, as "Llama-3.1-8B"), found by its entry files.
        if (names_file(location.prefix)) {
            remote->base = "";
            std::optional<uint64_t> file;
            try {
                file = remote->size_of(location.prefix);
            } catch (const Error& e) {
                // A folder named `latest` may answer its HEAD with a redirect to "latest/": it is
                // then probed as the folder it is.
                if (has_extension(location.prefix) || e.kind() != ProblemKind::remote_error)
                    throw;
            }
            if (file) {
                as_parent();
                auto answer = remote->asked.extract(location.prefix); // its HEAD, now beneath the new base
                answer.key() = location.prefix.substr(parent.size());
                remote->asked.insert(std::move(answer));
                folder.names = {location.prefix.substr(parent.size())};
            }
        }
        if (folder.names.empty()) {
            remote->base = location.prefix.empty() ? "" : location.prefix + "/";
            folder.names = remote->probe("");
        }
        if (folder.names.empty())
            throw Error(ProblemKind::cannot_open,
                        text +
                            ": the server has no such file, nor any of the files a checkpoint folder is recognised "
                            "by (manifest.json, an index, .metadata, ...)",
                        text);
    }
    folder.m_remote = std::move(remote);
    return folder;
}

bool Folder::has(std::string_view name) const
{
    return std::binary_search(names.begin(), names.end(), name);
}

OpenedObject Folder::open(std::string_view name) const
{
    if (!m_remote)
        return from_local(fsutil::open_beneath_for_read(m_local.fd.get(), name));
    OpenedObject out;
    if (auto why = fsutil::unsafe_name_reason(name)) {
        out.status = fsutil::OpenStatus::outside;
        out.reason = *why;
        return out;
    }
    const std::string relative = m_prefix + std::string(name);
    const auto object = m_remote->object_of(relative);
    if (!object) {
        out.status = fsutil::OpenStatus::missing;
        out.reason =
            m_remote->listed && is_folder(name) ? "it is a folder, not an object" : "the object does not exist";
        if (m_remote->listed && is_folder(name))
            out.status = fsutil::OpenStatus::not_regular;
        return out;
    }
    out.status = fsutil::OpenStatus::ok;
    out.size = object->size;
    out.reader = std::make_unique<RemoteReader>(m_remote, m_remote->base + relative, *object);
    return out;
}

OpenedObject Folder::open_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const
{
    if (!m_remote)
        return from_local(fsutil::open_small_file(m_local.fd.get(), name, max_bytes, display_path));
    OpenedObject object = open(name);
    if (object.status == fsutil::OpenStatus::missing)
        throw Error(ProblemKind::cannot_open, display_path + ": " + object.reason, display_path);
    if (object.status == fsutil::OpenStatus::outside)
        throw Error(ProblemKind::path_outside_checkpoint, display_path + ": " + object.reason, display_path);
    if (object.status != fsutil::OpenStatus::ok)
        throw Error(ProblemKind::unreadable, display_path + ": " + object.reason, display_path);
    if (object.size > max_bytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": the object is " + std::to_string(object.size) +
                        " bytes, more than the limit of " + std::to_string(max_bytes),
                    display_path);
    return object;
}

std::string Folder::read_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const
{
    if (!m_remote)
        return fsutil::read_small_file(m_local.fd.get(), name, max_bytes, display_path);
    (void)open_small(name, max_bytes, display_path); // there, an object, within the limit when listed
    // One GET of the whole object, not a range of the listed size nor a cached block: a small
    // object rewritten in place (a root's `latest`, which a running job moves on) reads as it now
    // is, whatever its length now (within max_bytes).
    return m_remote->read_whole(m_remote->base + m_prefix + std::string(name), max_bytes, display_path);
}

bool Folder::exists(std::string_view name) const
{
    if (!m_remote)
        return fsutil::exists_at(m_local.fd.get(), std::string(name));
    if (fsutil::unsafe_name_reason(name))
        return false;
    return m_remote->size_of(m_prefix + std::string(name)).has_value() || is_folder(name);
}

bool Folder::is_file(std::string_view name) const
{
    if (fsutil::unsafe_name_reason(name))
        return false;
    if (!m_remote) {
        struct stat st {};
        return ::fstatat(m_local.fd.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode);
    }
    return m_remote->size_of(m_prefix + std::string(name)).has_value();
}

bool Folder::is_folder(std::string_view name) const
{
    if (!m_remote) {
        struct stat st {};
        return !fsutil::unsafe_name_reason(name) &&
            ::fstatat(m_local.fd.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode);
    }
    if (fsutil::unsafe_name_reason(name))
        return false;
    const std::string beneath = m_prefix + std::string(name) + "/";
    if (!m_remote->listed) { // HTTP cannot list: a folder is where a checkpoint's entry file answers
        if (m_remote->answered_as_file(m_prefix + std::string(name)))
            return false; // a name that answered a HEAD as a file (a rank file) is no folder
        return !m_remote->answered_beneath(beneath).empty() || !m_remote->probe(beneath).empty();
    }
    return m_remote->listed_folder(beneath);
}

Folder Folder::subfolder(std::string_view name) const
{
    const std::string display = (path / std::string(name)).string();
    if (auto why = fsutil::unsafe_name_reason(name); why || name.find('/') != std::string_view::npos)
        throw Error(ProblemKind::path_outside_checkpoint,
                    display + ": " + (why ? *why : std::string("not a single folder name")), display);
    if (!m_remote) {
        const std::string component(name);
        fsutil::UniqueFd fd(
            ::openat(m_local.fd.get(), component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) {
            const int err = errno;
            struct stat st {};
            if (::fstatat(m_local.fd.get(), component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                throw Error(ProblemKind::path_outside_checkpoint,
                            display + ": a symlink, which a checkpoint may not contain", display);
            if (err == ENOTDIR)
                throw Error(ProblemKind::invalid_manifest, display + ": not a folder", display);
            throw Error(ProblemKind::cannot_open, display + ": " + std::strerror(err), display);
        }
        fsutil::ListedDirectory listed{.path = path / component, .fd = std::move(fd)};
        listed.names = fsutil::list_directory(listed.fd.get());
        std::sort(listed.names.begin(), listed.names.end());
        return Folder(std::move(listed));
    }
    Folder sub;
    sub.m_remote = m_remote;
    sub.m_prefix = m_prefix + std::string(name) + "/";
    sub.m_location = m_location.child(name);
    sub.path = display;
    if (m_remote->listed) {
        sub.names = m_remote->names_beneath(sub.m_prefix);
    } else { // what already answered beneath it (a rank folder's file), else its entry files
        sub.names = m_remote->answered_beneath(sub.m_prefix);
        if (sub.names.empty())
            sub.names = m_remote->probe(sub.m_prefix);
        std::sort(sub.names.begin(), sub.names.end());
    }
    if (sub.names.empty()) {
        const bool object = m_remote->size_of(m_prefix + std::string(name)).has_value();
        throw Error(object ? ProblemKind::invalid_manifest : ProblemKind::cannot_open,
                    display + (object ? ": an object, not a folder" : ": no objects beneath it"), display);
    }
    return sub;
}

std::function<bool(void*, std::size_t, uint64_t)> read_function(const Reader& reader)
{
    return [&reader](void* buffer, std::size_t size, uint64_t offset) { return reader.read(buffer, size, offset); };
}

} // namespace shardscope::storage
