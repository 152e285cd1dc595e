#include "core/foreign/dcp.h"

#include "core/foreign/dcp_hf.h"
#include "core/foreign/dcp_transform.h"
#include "core/foreign/internal/common.h"
#include "core/foreign/internal/dcp_layout.h"
#include "core/foreign/torch_archive.h"
#include "core/foreign/io/zip_reader.h"
#include "core/checkpoint/internal/shardfile.h"
#include "core/util/volume.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;
namespace {

// The rank one component of a data file's path names: shard-<S>-..., or __<rank>_<n>[.distcp].
int rank_of_component(std::string_view name)
{
    if (name.starts_with("shard-"))
        return dcp_hf_shard_rank(name);
    if (!name.starts_with("__"))
        return -1;
    std::size_t i = 2;
    int rank = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && rank < 10'000'000)
        rank = rank * 10 + (name[i++] - '0');
    return i > 2 && i < name.size() && name[i] == '_' ? rank : -1;
}

} // namespace

int dcp_rank_of(const std::string& path)
{
    // A relative_path may lead through folders (S3 prefix strategies write __0_0/0.distcp and
    // the like): the innermost component that names a rank gives it.
    std::string_view rest(path);
    while (true) {
        const std::size_t slash = rest.rfind('/');
        if (const int rank = rank_of_component(rest.substr(slash == std::string_view::npos ? 0 : slash + 1));
            rank >= 0 || slash == std::string_view::npos)
            return rank;
        rest = rest.substr(0, slash);
    }
}

uint64_t locate_dcp_chunk_data(const ZipReadAt& file_read, const DcpStorage& storage, uint64_t element_bytes,
                               const std::string& shown)
{
    const uint64_t base = storage.offset, length = storage.length;
    const ZipReadAt read = [&](void* buffer, std::size_t size, uint64_t offset) {
        return offset <= length && size <= length - offset && file_read(buffer, size, base + offset);
    };
    unsigned char magic[4] = {0, 0, 0, 0};
    const bool archive =
        length >= 4 && read(magic, 4, 0) && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
    if (archive) {
        try {
            const ZipDirectory directory = read_zip_directory(read, length, shown);
            const TorchArchiveListing listing = list_torch_archive(read, length, directory, shown);
            if (listing.refs.size() == 1 && listing.problems.empty()) {
                const TorchTensorRef& ref = listing.refs[0];
                for (const ZipEntry& entry : directory.entries)
                    if (entry.name == listing.prefix + "data/" + ref.storage_key) {
                        const ZipEntryCheck located = locate_zip_entry(read, directory, entry);
                        if (!located.ok)
                            throw Error(ProblemKind::invalid_archive, shown + ": " + located.problem, storage.file);
                        // As verify requires: the storage is exactly the chunk's elements (in some
                        // order, which statistics do not depend on).
                        if (entry.method != 0 || ref.storage_offset != 0 || entry.uncompressed_size != element_bytes ||
                            located.data_offset > length || length - located.data_offset < element_bytes)
                            throw Error(ProblemKind::size_mismatch,
                                        shown + ": its archive's storage does not hold exactly the chunk's " +
                                            std::to_string(element_bytes) + " bytes uncompressed",
                                        storage.file);
                        return base + located.data_offset;
                    }
            }
        } catch (const Error& e) {
            rethrow_remote(e);
            if (length != element_bytes) // raw elements may start with the zip signature too
                throw;
        }
    }
    if (length != element_bytes)
        throw Error(ProblemKind::size_mismatch,
                    shown + ": " + std::to_string(length) + " bytes at offset " + std::to_string(base) +
                        " are neither a torch.save archive of the chunk nor its " + std::to_string(element_bytes) +
                        " raw bytes",
                    storage.file);
    return base;
}

namespace {

// One byte range of a .distcp file and what it must hold (32 bytes: one per chunk). What it is
// called in a message is worked out only for a message (RangeNames).
struct StoredRange {
    uint64_t offset = 0, length = 0;
    uint64_t element_bytes = 0; // chunk volume x element size; 0 when the dtype is unknown
    uint32_t index = 0; // the chunk's in meta.chunks, or the bytes item's when !tensor
    bool tensor = false;
    bool transformed = false; // a storage extension (compression) rewrote it
    uint16_t transform = 0; // which (DcpMetadata::transforms)
};

// The words for a range in messages: "'fqn' chunk [0, 0]" or "item 'fqn'", "12 float32 elements".
class RangeNames {
public:
    explicit RangeNames(const DcpMetadata& meta) : m_meta(meta)
    {
        m_tensor_of.reserve(meta.chunks.size());
        for (uint32_t t = 0; t < meta.tensors.size(); ++t)
            m_tensor_of.insert(m_tensor_of.end(), meta.tensors[t].chunk_count, t);
    }
    std::string what(const StoredRange& r) const
    {
        if (!r.tensor)
            return "item '" + m_meta.bytes[r.index].fqn + "'";
        return "'" + m_meta.tensors[m_tensor_of[r.index]].fqn + "' chunk " +
            join_dims(m_meta.offsets(m_meta.chunks[r.index]));
    }
    std::string elements(const StoredRange& r) const
    {
        const DcpTensor& t = m_meta.tensors[m_tensor_of[r.index]];
        uint64_t volume = 0;
        checked_volume(m_meta.sizes(m_meta.chunks[r.index]), volume);
        return std::to_string(volume) + " " + t.dtype + " elements";
    }

    const DcpMetadata& meta() const { return m_meta; }

private:
    const DcpMetadata& m_meta;
    std::vector<uint32_t> m_tensor_of; // chunk -> tensor
};

constexpr std::size_t kMaxContentProblems = 20; // per file; then a count

// The content of one range: a torch.save archive (DCP's FileSystemWriter) whose entries pass their
// CRC-32 and whose storages hold exactly the chunk's bytes, or, for a tensor chunk, the chunk's raw
// bytes. Nothing is unpickled: data.pkl goes through the restricted reader only.
void check_stored_range(const ZipReadAt& file_read, const StoredRange& r, const RangeNames& names,
                        const std::string& shown, const ShardCheck& check, std::vector<Problem>& problems,
                        std::size_t& reported, ProblemKind& first_dropped, const VerifyOptions& options)
{
    auto add = [&](ProblemKind kind, const std::string& message) {
        if (reported++ < kMaxContentProblems)
            problems.push_back({.kind = kind, .message = message, .path = check.path, .rank = check.rank});
        else if (reported == kMaxContentProblems + 1)
            first_dropped = kind;
    };
    if (r.transformed) {
        const auto& transforms = names.meta().transforms;
        if (r.transform == 0 || r.transform >= transforms.size() || !dcp_transform_known(transforms[r.transform]))
            return; // said once for the checkpoint (unknown_transforms)
        const std::string what = shown + ": " + names.what(r) + " (zstd-compressed, " + std::to_string(r.length) +
            " bytes at offset " + std::to_string(r.offset) + ")";
        std::vector<std::byte> inflated;
        try {
            inflated = inflate_dcp_zstd(file_read, r.offset, r.length, dcp_inflated_limit(r.element_bytes), what);
        } catch (const Error& e) {
            rethrow_remote(e);
            return add(e.kind(), e.what());
        }
        // What torch wrote before compressing: checked as an item stored as is.
        const ZipReadAt memory = [&](void* buffer, std::size_t size, uint64_t offset) {
            if (offset > inflated.size() || size > inflated.size() - offset)
                return false;
            std::memcpy(buffer, inflated.data() + offset, size);
            return true;
        };
        StoredRange plain = r;
        plain.offset = 0;
        plain.length = inflated.size();
        plain.transformed = false;
        return check_stored_range(memory, plain, names, shown + " (decompressed)", check, problems, reported,
                                  first_dropped, options);
    }
    unsigned char magic[4] = {0, 0, 0, 0};
    const bool archive = r.length >= 4 && file_read(magic, 4, r.offset) && magic[0] == 'P' && magic[1] == 'K' &&
        magic[2] == 3 && magic[3] == 4;
    if (!archive) {
        if (r.tensor && r.element_bytes && r.length != r.element_bytes)
            add(ProblemKind::size_mismatch,
                shown + ": " + names.what(r) + " is " + std::to_string(r.length) + " bytes at offset " +
                    std::to_string(r.offset) + ", neither a torch.save archive nor the " +
                    std::to_string(r.element_bytes) + " raw bytes of its " + names.elements(r));
        return; // a non-tensor item may hold any bytes
    }
    // The archive's own offsets count from its first byte, so it is read as a file of its own.
    const uint64_t base = r.offset, length = r.length;
    const ZipReadAt read = [&](void* buffer, std::size_t size, uint64_t offset) {
        return offset <= length && size <= length - offset && file_read(buffer, size, base + offset);
    };
    const std::string where =
        shown + ": " + names.what(r) + " (the torch.save archive at byte " + std::to_string(base) + ")";
    ZipDirectory directory;
    try {
        directory = read_zip_directory(read, length, where);
    } catch (const Error& e) {
        rethrow_remote(e);
        // Raw elements that merely start with the zip signature (plausible for 8-bit data).
        if (r.tensor && r.element_bytes && r.length == r.element_bytes)
            return;
        return add(e.kind(), e.what());
    }
    uint64_t done_before = 0;
    for (std::size_t i = 0; i < directory.entries.size(); ++i) {
        const auto result = check_zip_entry(read, length, directory, i, options.cancel, [&](uint64_t done) {
            foreign::current_progress().advance(base + std::min(length, done_before + done));
        });
        done_before += directory.entries[i].compressed_size;
        if (foreign::cancelled(options))
            return;
        if (!result.ok)
            add(result.crc_mismatch ? ProblemKind::crc_mismatch : ProblemKind::invalid_archive,
                where + ": " + result.problem);
    }
    if (!r.tensor || !r.element_bytes)
        return;
    const TorchArchiveListing listing = list_torch_archive(read, length, directory, where);
    for (const auto& p : listing.problems)
        add(p.kind, p.message);
    if (!listing.problems.empty())
        return;
    uint64_t stored = 0;
    for (const auto& storage : listing.storages)
        stored += storage.entry_bytes;
    if (stored != r.element_bytes)
        add(ProblemKind::size_mismatch,
            where + ": its storage holds " + std::to_string(stored) + " bytes but the " + names.elements(r) +
                " of the chunk need " + std::to_string(r.element_bytes));
}

// What the metadata says is stored where: every file's byte ranges (indexed like meta.files, the
// files of the storage entries that chunks and bytes items have), and what the metadata alone
// shows to be wrong (chunks without storage, chunks that do not tile their tensor).
struct StoredLayout {
    std::vector<std::vector<StoredRange>> ranges;
    uint64_t chunks = 0, data_bytes = 0;
    std::vector<Problem> problems;
    std::size_t missing_storage = 0; // problems beyond the first 100 are counted, not listed
};

std::size_t file_index(const DcpMetadata& meta, const std::string& file)
{
    return std::size_t(std::lower_bound(meta.files.begin(), meta.files.end(), file) - meta.files.begin());
}

uint16_t transform_index(const DcpMetadata& meta, const std::string& transform)
{
    const auto at = std::find(meta.transforms.begin(), meta.transforms.end(), transform);
    return at == meta.transforms.end() ? 0 : uint16_t(at - meta.transforms.begin());
}

// The storage extensions of a layout's items: the summary row, and one problem for the checkpoint
// (not one per item) naming those ShardScope cannot undo, whose items' contents go unread.
void describe_transforms(const StoredLayout& stored, const DcpMetadata& meta, const DcpSource& src, bool check_data,
                         VerifyReport& report)
{
    std::vector<uint64_t> items(meta.transforms.size() + 1);
    for (const auto& list : stored.ranges)
        for (const auto& r : list)
            if (r.transformed)
                ++items[r.transform < meta.transforms.size() && r.transform > 0 ? r.transform : meta.transforms.size()];
    std::string row, unknown;
    uint64_t unread = 0;
    for (std::size_t i = 1; i < items.size(); ++i) {
        if (!items[i])
            continue;
        const std::string name = i < meta.transforms.size() ? meta.transforms[i] : std::string("?");
        row += (row.empty() ? "" : "; ") + name + " (" + std::to_string(items[i]) + " items)";
        if (i == meta.transforms.size() || !dcp_transform_known(name)) {
            unknown += (unknown.empty() ? "'" : ", '") + name + "'";
            unread += items[i];
        }
    }
    if (!row.empty())
        foreign::add_row(*report.foreign, "storage extensions", row);
    if (unread && check_data)
        report.problems.push_back({.kind = ProblemKind::unreadable,
                                   .message = src.described + ": " + std::to_string(unread) +
                                       " stored items are written through storage extension " + unknown +
                                       " (transform_descriptors), which ShardScope cannot undo: their contents "
                                       "were not checked",
                                   .path = src.path});
}

StoredLayout collect_stored_ranges(const DcpMetadata& meta, const DcpSource& src)
{
    StoredLayout out;
    out.ranges.resize(meta.files.size());
    auto no_storage = [&](std::string message) {
        if (out.missing_storage++ < 100)
            out.problems.push_back(
                {.kind = ProblemKind::missing_tensor, .message = std::move(message), .path = src.path});
    };
    for (const auto& t : meta.tensors) {
        const uint64_t element = torch_dtype_size(t.dtype);
        for (const auto& c : meta.chunks_of(t)) {
            const auto index = static_cast<uint32_t>(&c - meta.chunks.data());
            ++out.chunks;
            if (c.file < 0) {
                no_storage(src.described + ": the chunk of '" + t.fqn + "' at " + join_dims(meta.offsets(c)) +
                           " has no storage entry");
                continue;
            }
            StoredRange range{.offset = c.offset,
                              .length = c.length,
                              .index = index,
                              .tensor = true,
                              .transformed = c.transformed,
                              .transform = c.transform};
            if (uint64_t volume = 0; !element || !checked_volume(meta.sizes(c), volume) ||
                __builtin_mul_overflow(volume, element, &range.element_bytes))
                range.element_bytes = 0; // unknown: the content check does not compare sizes
            out.ranges[c.file].push_back(range);
            out.data_bytes += c.length;
        }
        check_dcp_tiling(meta, t, src, out.problems);
    }
    for (uint32_t i = 0; i < meta.bytes.size(); ++i) {
        const auto& b = meta.bytes[i];
        if (!b.storage.present) {
            no_storage(src.described + ": item '" + b.fqn + "' has no storage entry");
            continue;
        }
        if (const std::size_t f = file_index(meta, b.storage.file);
            f < meta.files.size() && meta.files[f] == b.storage.file)
            out.ranges[f].push_back({.offset = b.storage.offset,
                                     .length = b.storage.length,
                                     .index = i,
                                     .tensor = false,
                                     .transformed = b.storage.transformed,
                                     .transform = transform_index(meta, b.storage.transform)});
        out.data_bytes += b.storage.length;
    }
    for (auto& list : out.ranges)
        std::sort(list.begin(), list.end(),
                  [](const StoredRange& x, const StoredRange& y) { return x.offset < y.offset; });
    return out;
}

// One data file: every range inside the file and none overlapping another; with `check_data`,
// each range's content (check_stored_range).
void check_data_file(const std::vector<StoredRange>& list, const RangeNames& names, const std::string& shown,
                     storage::OpenedObject& file, ShardCheck& check, std::vector<Problem>& problems,
                     const VerifyOptions& options, bool check_data)
{
    for (const auto& r : list) {
        uint64_t end = 0;
        if (__builtin_add_overflow(r.offset, r.length, &end) || end > file.size) {
            problems.push_back({.kind = ProblemKind::range_outside_file,
                                .message = shown + ": " + names.what(r) + " at bytes [" + std::to_string(r.offset) +
                                    ", +" + std::to_string(r.length) + ") runs past the end of the " +
                                    std::to_string(file.size) + "-byte file (truncated?)",
                                .path = check.path,
                                .rank = check.rank});
            return;
        }
    }
    for (std::size_t i = 1; i < list.size(); ++i)
        if (list[i - 1].offset + list[i - 1].length > list[i].offset) {
            problems.push_back({.kind = ProblemKind::layout_overlap,
                                .message = shown + ": the bytes of " + names.what(list[i - 1]) + " and " +
                                    names.what(list[i]) + " overlap",
                                .path = check.path,
                                .rank = check.rank});
            return;
        }
    uint64_t stored = 0;
    for (const auto& r : list)
        stored += r.length;
    check.detail = std::to_string(list.size()) + (list.size() == 1 ? " stored item (" : " stored items (") +
        human_bytes(stored) + ")" + (check_data ? ", contents checked" : "");
    if (!check_data)
        return;
    const ZipReadAt read = storage::read_function(*file.reader);
    std::size_t reported = 0;
    ProblemKind first_dropped = ProblemKind::crc_mismatch;
    for (const auto& r : list) {
        if (foreign::cancelled(options))
            return;
        check_stored_range(read, r, names, shown, check, problems, reported, first_dropped, options);
        foreign::current_progress().advance(r.offset + r.length);
    }
    if (reported > kMaxContentProblems)
        problems.push_back({.kind = first_dropped,
                            .message = shown + ": " + std::to_string(reported - kMaxContentProblems) +
                                " more problems with stored items, not listed",
                            .path = check.path,
                            .rank = check.rank});
}

} // namespace

void verify_dcp_layout(const storage::Folder& listed, const DcpMetadata& meta, const DcpSource& src,
                       VerifyReport& report, const VerifyOptions& options, bool check_data)
{
    const fs::path& dir = listed.path;
    // Collect: the stored ranges, and the data files that hold some, in rank order like native shards.
    const StoredLayout stored = collect_stored_ranges(meta, src);
    std::set<int> ranks;
    for (std::size_t f = 0; f < meta.files.size(); ++f) {
        if (stored.ranges[f].empty())
            continue;
        const int rank = dcp_rank_of(meta.files[f]);
        report.shards.push_back(ShardCheck{.rank = rank, .path = meta.files[f]});
        if (rank >= 0)
            ranks.insert(rank);
    }
    std::stable_sort(report.shards.begin(), report.shards.end(),
                     [](const ShardCheck& a, const ShardCheck& b) { return a.rank < b.rank; });
    std::vector<std::string> unreferenced; // data files nothing in the metadata points into
    for (const auto& name : listed.names)
        if (src.is_data_file(name)) {
            const std::size_t f = file_index(meta, name);
            if (f == meta.files.size() || meta.files[f] != name || stored.ranges[f].empty())
                unreferenced.push_back(name);
        }

    // Describe what the metadata holds before the files are read, so that a viewer shows it.
    describe_dcp_metadata(meta, stored.chunks, report.shards.size(), ranks.size(), stored.data_bytes, unreferenced,
                          *report.foreign);
    if (ForeignLayout layout = dcp_ownership_layout(meta); layout.total > 0)
        report.foreign->layout = std::move(layout);

    // Check every data file, then add what the metadata alone showed.
    const RangeNames names(meta);
    foreign::check_files(
        listed, report, options,
        [&](std::size_t, storage::OpenedObject& file, ShardCheck& check, std::vector<Problem>& problems) {
            check_data_file(stored.ranges[file_index(meta, check.path)], names, foreign::shown_file(dir, check), file,
                            check, problems, options, check_data);
        });
    report.problems.insert(report.problems.end(), stored.problems.begin(), stored.problems.end());
    describe_transforms(stored, meta, src, check_data, report);
    if (stored.missing_storage > 100)
        report.problems.push_back({.kind = ProblemKind::missing_tensor,
                                   .message = src.described + ": " + std::to_string(stored.missing_storage - 100) +
                                       " more chunks without storage",
                                   .path = src.path});
}

VerifyReport verify_dcp(const storage::Folder& listed, const VerifyOptions& options, bool check_data)
{
    const fs::path& dir = listed.path;
    VerifyReport report = foreign::new_report("torch-dcp", dir, "torch-dcp (torch.distributed.checkpoint)");
    DcpSource src;
    src.described = (dir / ".metadata").string();
    src.path = ".metadata";
    src.is_data_file = [](const std::string& n) { return n.ends_with(".distcp"); };
    DcpMetadata meta;
    try {
        DcpFirstTensors first_tensors;
        if (options.callbacks.first_tensors)
            first_tensors = [&](const DcpMetadata& first) {
                ForeignSummary first_summary;
                list_dcp_tensors(first, first_summary);
                options.callbacks.first_tensors(first_summary);
            };
        meta = decode_dcp_metadata_file(listed, ".metadata", src.described, std::move(first_tensors));
    } catch (const Error& e) {
        rethrow_remote(e);
        Problem p = e.problem();
        p.path = ".metadata";
        report.problems.push_back(std::move(p));
        return report;
    }
    verify_dcp_layout(listed, meta, src, report, options, check_data);
    return report;
}

} // namespace shardscope
