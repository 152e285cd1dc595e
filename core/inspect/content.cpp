#include "core/inspect/content.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/verify_json.h"
#include "core/checkpoint/dtype.h"
#include "core/checkpoint/safetensors.h"
#include "core/foreign/dcp.h"
#include "core/foreign/deepspeed.h"
#include "core/foreign/detect.h"
#include "core/foreign/io/zip_reader.h"
#include "core/foreign/megatron.h"
#include "core/foreign/torch_archive.h"
#include "core/foreign/safetensors_index.h"
#include "core/util/fsutil.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fnmatch.h>
#include <map>
#include <optional>

namespace shardscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kStates[4] = {"param", "master", "exp_avg", "exp_avg_sq"};
constexpr std::size_t kBlockElements = 16384; // decoded per step: 128 KiB of doubles per thread

bool selected(const ContentOptions& options, const std::string& name)
{
    if (options.tensor_globs.empty())
        return true;
    for (const auto& glob : options.tensor_globs)
        if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0)
            return true;
    return false;
}

struct OpenedHeader {
    fsutil::OpenedFile file;
    SafetensorsHeader header;
};

OpenedHeader open_safetensors(int dirfd, const fs::path& dir, const std::string& name, int rank)
{
    const std::string display = (dir / name).string();
    OpenedHeader out{fsutil::open_beneath_for_read(dirfd, name), {}};
    if (out.file.status != fsutil::OpenStatus::ok)
        throw Error(out.file.status == fsutil::OpenStatus::outside ? ProblemKind::path_outside_checkpoint
                                                                    : ProblemKind::unreadable,
                    (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + display + ": " +
                        out.file.reason,
                    name, rank);
    out.header = read_safetensors_header(out.file.fd.get(), out.file.size, display, rank);
    return out;
}

// Where rank r's param and master lie, for the param/master rounding check.
struct RankVectors {
    int rank = -1;
    std::string file;
    ElementType param_type = ElementType::BF16;
    uint64_t param_offset = 0, master_offset = 0, numel = 0, flat_offset = 0;
};

void plan_native(const fs::path& dir, int dirfd, const ContentOptions& options, ContentReport& report,
                 std::vector<RankVectors>& ranks)
{
    const Manifest m = read_manifest(dir);
    std::vector<TensorInfo> tensors = m.tensors;
    if (tensors.empty()) // no tensor list: each state's flat vector is one tensor
        tensors.push_back({.name = "flat", .shape = {m.param_numel_total}, .offset = 0, .numel = m.param_numel_total});
    std::vector<OpenedHeader> headers;
    for (const auto& shard : m.shards) {
        if (auto why = fsutil::unsafe_name_reason(shard.path))
            throw Error(ProblemKind::path_outside_checkpoint,
                        (dir / "manifest.json").string() + ": rank " + std::to_string(shard.rank) + "'s path '" +
                            printable(shard.path) + "' " + *why,
                        "manifest.json", shard.rank);
        headers.push_back(open_safetensors(dirfd, dir, shard.path, shard.rank));
        const auto* param = headers.back().header.find("param");
        const auto* master = headers.back().header.find("master");
        if (param && master)
            ranks.push_back({.rank = shard.rank,
                             .file = shard.path,
                             .param_type = m.param_dtype == ParamDtype::F16 ? ElementType::F16 : ElementType::BF16,
                             .param_offset = headers.back().header.data_start() + param->begin,
                             .master_offset = headers.back().header.data_start() + master->begin,
                             .numel = std::min<uint64_t>(shard.param_shard_numel, master->bytes() / 4),
                             .flat_offset = shard.param_shard_offset});
    }
    for (const auto& t : tensors) {
        if (!selected(options, t.name))
            continue;
        for (const char* state : kStates) {
            TensorContent content{.name = t.name, .state = state, .shape = t.shape};
            content.type = std::string_view(state) == "param"
                               ? (m.param_dtype == ParamDtype::F16 ? ElementType::F16 : ElementType::BF16)
                               : ElementType::F32;
            const uint64_t size = element_size(content.type);
            for (std::size_t r = 0; r < m.shards.size(); ++r) {
                const ShardRecord& shard = m.shards[r];
                const uint64_t begin = std::max(t.offset, shard.param_shard_offset);
                const uint64_t end = std::min(t.offset + t.numel, shard.param_shard_offset + shard.param_shard_numel);
                if (begin >= end)
                    continue;
                const SafetensorsTensor* stored = headers[r].header.find(state);
                if (!stored || (begin - shard.param_shard_offset + (end - begin)) * size > stored->bytes())
                    throw Error(ProblemKind::invalid_shard,
                                "rank " + std::to_string(shard.rank) + ": " + (dir / shard.path).string() + " has no '" +
                                    state + "' covering its slice of '" + printable(t.name) + "'",
                                shard.path, shard.rank);
                content.parts.push_back({.rank = shard.rank,
                                         .file = shard.path,
                                         .byte_offset = headers[r].header.data_start() + stored->begin +
                                                        (begin - shard.param_shard_offset) * size,
                                         .numel = end - begin,
                                         .first_element = begin - t.offset});
            }
            std::sort(content.parts.begin(), content.parts.end(),
                      [](const TensorPart& a, const TensorPart& b) { return a.first_element < b.first_element; });
            report.tensors.push_back(std::move(content));
        }
    }
}

void plan_safetensors(const fs::path& dir, int dirfd, const std::vector<std::string>& files,
                      const ContentOptions& options, ContentReport& report)
{
    for (const auto& file : files) {
        const OpenedHeader opened = open_safetensors(dirfd, dir, file, -1);
        for (const auto& t : opened.header.tensors) {
            if (!selected(options, t.name))
                continue;
            const auto type = element_type_from_safetensors(t.dtype);
            if (!type) // read_safetensors_header only accepts known dtypes; be explicit anyway
                throw Error(ProblemKind::invalid_shard,
                            (dir / file).string() + ": tensor '" + printable(t.name) + "' has dtype '" +
                                printable(t.dtype) + "', which stats cannot read",
                            file);
            TensorContent content{.name = t.name, .type = *type, .shape = t.shape};
            content.parts.push_back({.file = file,
                                     .byte_offset = opened.header.data_start() + t.begin,
                                     .numel = t.bytes() / element_size(*type)});
            report.tensors.push_back(std::move(content));
        }
    }
}

// torch.save's dtype names (from the storage class) as element types; nullopt for what
// statistics do not cover (complex numbers) or an unknown storage.
std::optional<ElementType> torch_element_type(const std::string& dtype)
{
    static const std::map<std::string, ElementType> types = {
        {"float32", ElementType::F32}, {"float64", ElementType::F64}, {"float16", ElementType::F16},
        {"bfloat16", ElementType::BF16}, {"int64", ElementType::I64}, {"int32", ElementType::I32},
        {"int16", ElementType::I16},   {"int8", ElementType::I8},     {"uint8", ElementType::U8},
        {"bool", ElementType::BOOL},
    };
    const auto it = types.find(dtype);
    return it == types.end() ? std::nullopt : std::optional(it->second);
}

// True when the view covers exactly `numel` consecutive storage elements in some order (a
// contiguous tensor, or a permutation of one such as a transpose): statistics do not depend on
// the order, so it is read as one run.
bool dense_view(const std::vector<uint64_t>& shape, const std::vector<int64_t>& stride)
{
    if (stride.size() != shape.size())
        return false;
    std::vector<std::pair<int64_t, uint64_t>> dims; // (stride, size) of dimensions that matter
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] > 1)
            dims.push_back({stride[d], shape[d]});
    std::sort(dims.begin(), dims.end());
    int64_t expected = 1;
    for (const auto& [st, size] : dims) {
        if (st != expected)
            return false;
        if (__builtin_mul_overflow(expected, static_cast<int64_t>(size), &expected))
            return false;
    }
    return true;
}

struct TorchFile {
    std::string file; // relative to the checkpoint directory
    int rank = -1;
};

// Lays out the tensors of torch.save archives (each file's data.pkl through the restricted reader,
// never unpickled). Tensors of the same name in several files (DeepSpeed's ZeRO partitions,
// tensor-parallel slices) become one tensor with a part per file.
void plan_torch(const fs::path& dir, int dirfd, const std::vector<TorchFile>& files, const ContentOptions& options,
                ContentReport& report)
{
    std::map<std::string, std::size_t> by_name;
    for (const TorchFile& tf : files) {
        const std::string shown = (tf.rank >= 0 ? "rank " + std::to_string(tf.rank) + ": " : std::string()) +
                                  (dir / tf.file).string();
        fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, tf.file);
        if (file.status != fsutil::OpenStatus::ok) {
            report.problems.push_back({file.status == fsutil::OpenStatus::missing ? ProblemKind::missing_file
                                                                                    : ProblemKind::unreadable,
                                       tf.rank, tf.file, shown + ": " + file.reason});
            continue;
        }
        const ZipReadAt read = zip_read_fd(file.fd.get());
        TorchArchiveListing listing;
        ZipDirectory directory;
        try {
            directory = read_zip_directory(read, file.size, shown);
            listing = list_torch_archive(read, file.size, directory, shown);
        } catch (const Error& e) {
            report.problems.push_back({e.kind(), tf.rank, tf.file, e.what()});
            continue;
        }
        for (const Problem& p : listing.problems)
            report.problems.push_back({p.kind, tf.rank, tf.file, p.message});
        std::map<std::string, const ZipEntry*> entries;
        for (const ZipEntry& e : directory.entries)
            entries[e.name] = &e;
        for (const TorchTensorRef& ref : listing.refs) {
            if (!selected(options, ref.name))
                continue;
            const std::string what = shown + ": tensor '" + printable(ref.name) + "'";
            const auto type = torch_element_type(ref.dtype);
            if (!type) {
                report.warnings.push_back({ProblemKind::unreadable, tf.rank, tf.file,
                                           what + " has dtype '" + printable(ref.dtype) + "', which stats does not read"});
                continue;
            }
            uint64_t numel = 1;
            bool overflow = false;
            for (const uint64_t d : ref.shape)
                overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
            const auto entry = entries.find(listing.prefix + "data/" + ref.storage_key); // prefix ends in /
            if (overflow || entry == entries.end()) {
                report.problems.push_back({overflow ? ProblemKind::invalid_archive : ProblemKind::missing_tensor,
                                           tf.rank, tf.file,
                                           what + (overflow ? ": its shape's element count overflows"
                                                            : ": its storage '" + printable(ref.storage_key) +
                                                                  "' is not in the archive")});
                continue;
            }
            const ZipEntry& stored = *entry->second;
            const ZipEntryCheck located = locate_zip_entry(read, directory, stored);
            if (!located.ok || stored.method != 0) {
                report.problems.push_back({ProblemKind::invalid_archive, tf.rank, tf.file,
                                           what + ": " + (located.ok ? "its storage is compressed, which torch.save "
                                                                       "never does; not read"
                                                                     : located.problem)});
                continue;
            }
            if (numel > 0 && !dense_view(ref.shape, ref.stride)) {
                report.warnings.push_back({ProblemKind::unreadable, tf.rank, tf.file,
                                           what + " is a strided view with gaps or repeats; stats does not read it"});
                continue;
            }
            const uint64_t size = element_size(*type);
            uint64_t end = 0;
            if (__builtin_add_overflow(ref.storage_offset, numel, &end) || __builtin_mul_overflow(end, size, &end) ||
                end > stored.uncompressed_size) {
                report.problems.push_back({ProblemKind::range_outside_file, tf.rank, tf.file,
                                           what + ": its offset and shape reach past the end of its " +
                                               std::to_string(stored.uncompressed_size) + "-byte storage"});
                continue;
            }
            auto [it, inserted] = by_name.try_emplace(ref.name, report.tensors.size());
            if (inserted)
                report.tensors.push_back({.name = ref.name, .type = *type, .shape = ref.shape});
            TensorContent& tensor = report.tensors[it->second];
            if (tensor.type != *type) {
                report.problems.push_back({ProblemKind::invalid_archive, tf.rank, tf.file,
                                           what + " is " + std::string(to_string(*type)) + " here but " +
                                               std::string(to_string(tensor.type)) + " in another file"});
                continue;
            }
            uint64_t first = 0;
            for (const TensorPart& p : tensor.parts)
                first += p.numel;
            tensor.parts.push_back({.rank = tf.rank,
                                    .file = tf.file,
                                    .byte_offset = located.data_offset + ref.storage_offset * size,
                                    .numel = numel,
                                    .first_element = first});
        }
    }
}

// DCP: every chunk of every tensor is a part (rank from its file name), read inside the
// torch.save archive FileSystemWriter stores it as, or as raw elements.
void plan_dcp(const fs::path& dir, int dirfd, const ContentOptions& options, ContentReport& report)
{
    const std::string meta_path = (dir / ".metadata").string();
    const DcpMetadata meta =
        decode_dcp_metadata(fsutil::read_small_file(dirfd, ".metadata", kMaxDcpMetadataBytes, meta_path), meta_path);
    std::map<std::string, fsutil::OpenedFile> files;
    for (const DcpTensor& t : meta.tensors) {
        if (!selected(options, t.fqn))
            continue;
        const auto type = torch_element_type(t.dtype);
        if (!type) {
            report.warnings.push_back({ProblemKind::unreadable, -1, ".metadata",
                                       meta_path + ": tensor '" + printable(t.fqn) + "' has dtype '" +
                                           printable(t.dtype) + "', which stats does not read"});
            continue;
        }
        TensorContent content{.name = t.fqn, .type = *type, .shape = t.size};
        uint64_t first = 0;
        for (const DcpChunk& c : t.chunks) {
            const std::string what = "'" + printable(t.fqn) + "' chunk " + join_dims(c.offsets);
            uint64_t numel = 1, bytes = 0;
            bool overflow = false;
            for (const uint64_t d : c.sizes)
                overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
            overflow = overflow || __builtin_mul_overflow(numel, element_size(*type), &bytes);
            if (!c.storage.present || c.storage.transformed || overflow) {
                report.problems.push_back({overflow ? ProblemKind::invalid_manifest : ProblemKind::missing_tensor, -1,
                                           c.storage.file,
                                           meta_path + ": " + what +
                                               (overflow ? ": its element count overflows"
                                                : c.storage.transformed
                                                    ? " is stored through a storage extension (transform), not read"
                                                    : " has no storage")});
                continue;
            }
            const int rank = dcp_rank_of(c.storage.file);
            const std::string shown =
                (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + (dir / c.storage.file).string();
            auto [it, inserted] = files.try_emplace(c.storage.file);
            if (inserted)
                it->second = fsutil::open_beneath_for_read(dirfd, c.storage.file);
            if (it->second.status != fsutil::OpenStatus::ok) {
                report.problems.push_back({it->second.status == fsutil::OpenStatus::missing ? ProblemKind::missing_file
                                                                                            : ProblemKind::unreadable,
                                           rank, c.storage.file, shown + ": " + it->second.reason});
                continue;
            }
            uint64_t end = 0;
            if (__builtin_add_overflow(c.storage.offset, c.storage.length, &end) || end > it->second.size) {
                report.problems.push_back({ProblemKind::range_outside_file, rank, c.storage.file,
                                           shown + ": " + what + " runs past the end of the file"});
                continue;
            }
            try {
                const uint64_t at =
                    locate_dcp_chunk_data(zip_read_fd(it->second.fd.get()), c.storage, bytes, shown + ": " + what);
                content.parts.push_back(
                    {.rank = rank, .file = c.storage.file, .byte_offset = at, .numel = numel, .first_element = first});
                first += numel;
            } catch (const Error& e) {
                report.problems.push_back({e.kind(), rank, c.storage.file, e.what()});
            }
        }
        report.tensors.push_back(std::move(content));
    }
}

// The .pt files a DeepSpeed or Megatron checkpoint consists of, with their ranks, as the
// structure-only verifier lists them; the directory they are relative to goes into `dir`.
std::vector<TorchFile> torch_files_of(const VerifyReport& listed, fs::path& dir)
{
    dir = listed.dir;
    std::vector<TorchFile> files;
    for (const ShardCheck& s : listed.shards)
        if (s.path.ends_with(".pt") && s.status != ShardStatus::missing)
            files.push_back({s.path, s.rank});
    return files;
}

bool is_torch_file(const fs::path& path)
{
    const auto ext = path.extension();
    return ext == ".pt" || ext == ".pth" || ext == ".bin";
}

std::string part_name(const TensorPart& part)
{
    return part.rank >= 0 ? "rank " + std::to_string(part.rank) + " (" + part.file + ")" : part.file;
}

std::string tensor_name(const TensorContent& t)
{
    return "'" + printable(t.name) + "'" + (t.state.empty() ? std::string() : " (" + t.state + ")");
}

// Reads one part block by block into `stats`; false with `problem` set when it cannot be read.
bool scan_part(int dirfd, const fs::path& dir, const TensorContent& tensor, const TensorPart& part,
               const ContentOptions& options, std::atomic<uint64_t>& done, uint64_t total, ValueStats& stats,
               std::optional<Problem>& problem)
{
    const fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, part.file);
    const std::string shown = (dir / part.file).string();
    if (file.status != fsutil::OpenStatus::ok) {
        problem = Problem{ProblemKind::unreadable, part.rank, part.file, shown + ": " + file.reason};
        return false;
    }
    const uint64_t size = element_size(tensor.type);
    uint64_t end = 0;
    if (__builtin_mul_overflow(part.numel, size, &end) || __builtin_add_overflow(end, part.byte_offset, &end) ||
        end > file.size) {
        problem = Problem{ProblemKind::range_outside_file, part.rank, part.file,
                          shown + ": " + tensor_name(tensor) + " runs past the end of the " +
                              std::to_string(file.size) + "-byte file"};
        return false;
    }
    std::vector<std::byte> bytes(kBlockElements * size);
    std::vector<double> values(kBlockElements);
    for (uint64_t at = 0; at < part.numel; at += kBlockElements) {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            return true;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, part.numel - at));
        if (!fsutil::read_exact(file.fd.get(), bytes.data(), n * size, part.byte_offset + at * size)) {
            problem = Problem{ProblemKind::unreadable, part.rank, part.file,
                              shown + ": cannot read " + tensor_name(tensor) + ": " + std::strerror(errno)};
            return false;
        }
        decode_elements(tensor.type, bytes.data(), n, values.data());
        stats.add(values.data(), n);
        const uint64_t now = done += n * size;
        if (options.progress)
            options.progress(now, total);
    }
    return true;
}

// Parameters must be their master weights rounded to the parameter dtype (how every mixed-
// precision optimizer step ends); anything else means the two were saved from different steps.
std::optional<Problem> check_param_master(int dirfd, const fs::path& dir, const RankVectors& r,
                                          const ContentOptions& options)
{
    const fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, r.file);
    if (file.status != fsutil::OpenStatus::ok)
        return std::nullopt; // the scan of the same file reports it
    const ParamDtype dtype = r.param_type == ElementType::F16 ? ParamDtype::F16 : ParamDtype::BF16;
    std::vector<uint16_t> param(kBlockElements);
    std::vector<float> master(kBlockElements);
    uint64_t mismatches = 0, first = 0;
    for (uint64_t at = 0; at < r.numel; at += kBlockElements) {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            return std::nullopt;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, r.numel - at));
        if (!fsutil::read_exact(file.fd.get(), param.data(), n * 2, r.param_offset + at * 2) ||
            !fsutil::read_exact(file.fd.get(), master.data(), n * 4, r.master_offset + at * 4))
            return std::nullopt;
        for (std::size_t i = 0; i < n; ++i) {
            if (std::isnan(master[i])) // NaN has many encodings; nonfinite_values reports it
                continue;
            if (float_to_param(master[i], dtype) != param[i] && mismatches++ == 0)
                first = r.flat_offset + at + i;
        }
    }
    if (mismatches == 0)
        return std::nullopt;
    return Problem{ProblemKind::param_master_mismatch, r.rank, r.file,
                   "rank " + std::to_string(r.rank) + ": " + (dir / r.file).string() + ": " + std::to_string(mismatches) +
                       " parameters are not their master weight rounded to " + std::string(to_string(dtype)) +
                       " (the first at flat index " + std::to_string(first) +
                       "): param and master were not saved from the same step"};
}

void check_health(ContentReport& report)
{
    for (const TensorContent& t : report.tensors) {
        const ValueStats& s = t.stats;
        if (s.nonfinite() > 0) {
            std::string where;
            int rank = -1;
            std::string path;
            int holders = 0;
            for (std::size_t p = 0; p < t.parts.size(); ++p)
                if (t.part_stats[p].nonfinite() > 0) {
                    if (holders++ == 0) {
                        rank = t.parts[p].rank;
                        path = t.parts[p].file;
                    }
                    if (holders <= 4)
                        where += (holders > 1 ? ", " : "") + part_name(t.parts[p]) + " holds " +
                                 std::to_string(t.part_stats[p].nonfinite());
                }
            if (holders > 4)
                where += " and " + std::to_string(holders - 4) + " more";
            report.problems.push_back({ProblemKind::nonfinite_values, holders == 1 ? rank : -1, path,
                                       tensor_name(t) + " has " + std::to_string(s.nan) + " NaN, " +
                                           std::to_string(s.posinf) + " +Inf and " + std::to_string(s.neginf) +
                                           " -Inf of " + std::to_string(s.numel) + " values: " + where});
        }
        if (t.state == "exp_avg_sq" && s.negatives > 0) {
            std::string where;
            for (std::size_t p = 0; p < t.parts.size(); ++p)
                if (t.part_stats[p].negatives > 0) {
                    where = part_name(t.parts[p]);
                    break;
                }
            report.problems.push_back({ProblemKind::negative_second_moment, -1, "",
                                       tensor_name(t) + " has " + std::to_string(s.negatives) +
                                           " negative values (first in " + where +
                                           "): Adam's second moment is a running mean of squares"});
        }
        if (s.numel > 0 && s.zeros == s.numel)
            report.warnings.push_back({ProblemKind::all_zero_tensor, -1, t.parts.empty() ? "" : t.parts[0].file,
                                       tensor_name(t) + ": all " + std::to_string(s.numel) + " values are zero"});
    }
}

json finite_or_null(const ValueStats& s, double value)
{
    return s.finite > 0 ? json(value) : json(nullptr);
}

json stats_json(const ValueStats& s)
{
    return {{"numel", s.numel},
            {"nan", s.nan},
            {"posinf", s.posinf},
            {"neginf", s.neginf},
            {"zeros", s.zeros},
            {"min", finite_or_null(s, s.min)},
            {"max", finite_or_null(s, s.max)},
            {"mean", finite_or_null(s, s.mean)},
            {"std", finite_or_null(s, s.std_dev())},
            {"abs_max", finite_or_null(s, s.abs_max)},
            {"l2", finite_or_null(s, s.l2())}};
}

} // namespace

ContentReport inspect_content(const fs::path& path, const ContentOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    ContentReport report;
    std::vector<RankVectors> ranks;
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw Error(ProblemKind::cannot_open, path.string() + ": no such file or directory", path.string());
    fs::path dir = path;
    fsutil::UniqueFd dirfd;
    auto open_dir = [&](const fs::path& d) {
        report.dir = dir = d;
        dirfd = fsutil::open_directory(dir);
    };
    if (!fs::is_directory(path, ec) && is_torch_file(path)) { // one torch.save file
        report.format = "torch";
        open_dir(path.parent_path().empty() ? fs::path(".") : path.parent_path());
        plan_torch(dir, dirfd.get(), {{path.filename().string(), -1}}, options, report);
    } else if (fs::exists(path / "pytorch_model.bin.index.json", ec) || fs::exists(path / "pytorch_model.bin", ec)) {
        report.format = "torch";
        open_dir(path);
        std::vector<TorchFile> files = {{"pytorch_model.bin", -1}};
        if (fsutil::exists_at(dirfd.get(), "pytorch_model.bin.index.json")) {
            report.format = "torch-index";
            const std::string display = (dir / "pytorch_model.bin.index.json").string();
            const SafetensorsIndex index = parse_safetensors_index( // the same weight_map JSON
                fsutil::read_small_file(dirfd.get(), "pytorch_model.bin.index.json", kMaxIndexBytes, display), display);
            files.clear();
            for (const auto& f : index.files)
                files.push_back({f, -1});
        }
        plan_torch(dir, dirfd.get(), files, options, report);
    } else {
        const DetectedFormat detected = detect_format(path);
        report.format = std::string(to_string(detected.format));
        std::vector<std::string> files = detected.files;
        if (!fs::is_directory(detected.path, ec)) { // a single .safetensors file: read it from its folder
            files = {detected.path.filename().string()};
            open_dir(detected.path.parent_path().empty() ? fs::path(".") : detected.path.parent_path());
        } else {
            open_dir(detected.path);
        }
        switch (detected.format) {
        case CheckpointFormat::shardscope:
            open_dir(resolve_checkpoint_dir(dir));
            plan_native(dir, dirfd.get(), options, report, ranks);
            break;
        case CheckpointFormat::safetensors: plan_safetensors(dir, dirfd.get(), files, options, report); break;
        case CheckpointFormat::safetensors_index: {
            const std::string index_name = "model.safetensors.index.json"; // what detect_format found
            const std::string display = (dir / index_name).string();
            const SafetensorsIndex index = parse_safetensors_index(
                fsutil::read_small_file(dirfd.get(), index_name, kMaxIndexBytes, display), display);
            plan_safetensors(dir, dirfd.get(), index.files, options, report);
            break;
        }
        case CheckpointFormat::torch_dcp: plan_dcp(dir, dirfd.get(), options, report); break;
        case CheckpointFormat::deepspeed:
        case CheckpointFormat::megatron: {
            const VerifyReport listed = detected.format == CheckpointFormat::deepspeed
                                            ? verify_deepspeed(path, VerifyOptions{}, false)
                                            : verify_megatron(path, VerifyOptions{}, false);
            fs::path step_dir;
            const std::vector<TorchFile> files_of = torch_files_of(listed, step_dir);
            if (files_of.empty() && fs::exists(listed.dir / ".metadata", ec)) { // Megatron saved as DCP
                open_dir(listed.dir);
                plan_dcp(dir, dirfd.get(), options, report);
                break;
            }
            if (files_of.empty())
                throw Error(ProblemKind::invalid_argument,
                            path.string() + ": stats found no torch.save files to read in this " + report.format +
                                " checkpoint" + (listed.problems.empty() ? "" : ": " + listed.problems[0].message),
                            path.string());
            open_dir(step_dir);
            plan_torch(dir, dirfd.get(), files_of, options, report);
            break;
        }
        default:
            throw Error(ProblemKind::invalid_argument,
                        path.string() + ": not a checkpoint stats can read (" + detected.reason +
                            "); it reads ShardScope, safetensors, torch.save, DCP, DeepSpeed and Megatron checkpoints",
                        path.string());
        }
    }

    // Every part (and every rank's param/master check) is one work item, spread over the threads.
    struct Item {
        std::size_t tensor = 0, part = 0;
    };
    std::vector<Item> items;
    uint64_t total = 0;
    for (std::size_t t = 0; t < report.tensors.size(); ++t) {
        TensorContent& tensor = report.tensors[t];
        tensor.part_stats.assign(tensor.parts.size(), {});
        for (std::size_t p = 0; p < tensor.parts.size(); ++p) {
            items.push_back({t, p});
            total += tensor.parts[p].numel * element_size(tensor.type);
        }
    }
    std::atomic<uint64_t> done{0};
    std::vector<std::optional<Problem>> item_problems(items.size() + ranks.size());
    parallel_for(items.size() + ranks.size(), options.threads, [&](std::size_t i) {
        if (i >= items.size()) {
            item_problems[i] = check_param_master(dirfd.get(), dir, ranks[i - items.size()], options);
            return;
        }
        TensorContent& tensor = report.tensors[items[i].tensor];
        scan_part(dirfd.get(), dir, tensor, tensor.parts[items[i].part], options, done, total,
                  tensor.part_stats[items[i].part], item_problems[i]);
    });
    report.cancelled = options.cancel && options.cancel->load();
    for (TensorContent& tensor : report.tensors)
        for (const ValueStats& part : tensor.part_stats)
            tensor.stats.merge(part);
    for (auto& p : item_problems)
        if (p && report.problems.size() < 100)
            report.problems.push_back(std::move(*p));
    if (!report.cancelled)
        check_health(report);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

json content_report_json(const ContentReport& report)
{
    json tensors = json::array();
    for (const TensorContent& t : report.tensors) {
        json entry = stats_json(t.stats);
        entry["name"] = t.name;
        if (!t.state.empty())
            entry["state"] = t.state;
        entry["dtype"] = std::string(to_string(t.type));
        entry["shape"] = t.shape;
        entry["histogram"] = {{"low_exponent", kHistogramLowExponent}, {"counts", t.stats.histogram}};
        json parts = json::array();
        for (std::size_t p = 0; p < t.parts.size(); ++p) {
            json part = stats_json(t.part_stats[p]);
            if (t.parts[p].rank >= 0)
                part["rank"] = t.parts[p].rank;
            part["file"] = t.parts[p].file;
            part["first_element"] = t.parts[p].first_element;
            parts.push_back(std::move(part));
        }
        entry["parts"] = std::move(parts);
        tensors.push_back(std::move(entry));
    }
    auto problems = [](const std::vector<Problem>& list) {
        json out = json::array();
        for (const Problem& p : list)
            out.push_back(problem_json(p));
        return out;
    };
    return {{"ok", report.ok()},
            {"format", report.format},
            {"path", report.dir.string()},
            {"tensors", std::move(tensors)},
            {"problems", problems(report.problems)},
            {"warnings", problems(report.warnings)},
            {"cancelled", report.cancelled},
            {"seconds", report.seconds}};
}

} // namespace shardscope
