// How each format lays its tensors out in files (internal/layout.h): which byte runs of which
// files hold which tensor, per rank or file or chunk, found from headers and metadata alone.

#include "core/inspect/internal/layout.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/safetensors.h"
#include "core/foreign/dcp.h"
#include "core/foreign/deepspeed.h"
#include "core/foreign/detect.h"
#include "core/foreign/io/zip_reader.h"
#include "core/foreign/megatron.h"
#include "core/foreign/safetensors_index.h"
#include "core/foreign/torch_archive.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

#include <algorithm>
#include <fnmatch.h>
#include <map>
#include <optional>

namespace shardscope::inspect {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStates[4] = {"param", "master", "exp_avg", "exp_avg_sq"};

bool selected(const ContentOptions& options, const std::string& name)
{
    if (options.tensor_globs.empty())
        return true;
    for (const auto& glob : options.tensor_globs)
        if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0)
            return true;
    return false;
}

// The header of a safetensors file (the file is closed again: a checkpoint may have more ranks
// than a process has descriptors). Error naming the file and rank when it cannot be used.
SafetensorsHeader read_header(int dirfd, const fs::path& dir, const std::string& name, int rank)
{
    const std::string display = (dir / name).string();
    const fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, name);
    if (file.status != fsutil::OpenStatus::ok)
        throw Error(file.status == fsutil::OpenStatus::outside   ? ProblemKind::path_outside_checkpoint
                    : file.status == fsutil::OpenStatus::missing ? ProblemKind::missing_shard
                                                                 : ProblemKind::unreadable,
                    (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + display + ": " + file.reason,
                    name, rank);
    return read_safetensors_header(file.fd.get(), file.size, display, rank);
}

void plan_native(const fs::path& dir, int dirfd, const ContentOptions& options, ContentReport& report,
                 std::vector<RankVectors>& ranks)
{
    const Manifest m = read_manifest(dir);
    // Overlapping or gapped ranks would be counted twice or not at all: verify's findings first.
    if (auto problems = check_manifest(m, -1, (dir / "manifest.json").string()); !problems.empty()) {
        report.problems = std::move(problems);
        return;
    }
    std::vector<TensorInfo> tensors = m.tensors;
    if (tensors.empty()) // no tensor list: each state's flat vector is one tensor
        tensors.push_back({.name = "flat", .shape = {m.param_numel_total}, .offset = 0, .numel = m.param_numel_total});
    // A rank file that cannot be read is a problem of the report; the other ranks are still read.
    std::vector<std::optional<SafetensorsHeader>> headers;
    for (const auto& shard : m.shards) {
        try {
            headers.push_back(read_header(dirfd, dir, shard.path, shard.rank));
        } catch (const Error& e) {
            report.problems.push_back(e.problem());
            headers.emplace_back();
            continue;
        }
        const auto* param = headers.back()->find("param");
        const auto* master = headers.back()->find("master");
        if (param && master)
            ranks.push_back({.rank = shard.rank,
                             .file = shard.path,
                             .param_type = m.param_dtype == ParamDtype::F16 ? ElementType::F16 : ElementType::BF16,
                             .param_offset = headers.back()->data_start() + param->begin,
                             .master_offset = headers.back()->data_start() + master->begin,
                             .numel = std::min({shard.param_shard_numel, master->bytes() / 4, param->bytes() / 2}),
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
                if (!headers[r])
                    continue; // reported above
                const SafetensorsTensor* stored = headers[r]->find(state);
                if (!stored || (begin - shard.param_shard_offset + (end - begin)) * size > stored->bytes()) {
                    if (report.problems.size() < 100)
                        report.problems.push_back({ProblemKind::invalid_shard, shard.rank, shard.path,
                                                   "rank " + std::to_string(shard.rank) + ": " +
                                                       (dir / shard.path).string() + " has no '" + state +
                                                       "' covering its slice of '" + printable(t.name) + "'"});
                    continue;
                }
                content.parts.push_back({.rank = shard.rank,
                                         .file = shard.path,
                                         .byte_offset = headers[r]->data_start() + stored->begin +
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
        SafetensorsHeader header;
        try {
            header = read_header(dirfd, dir, file, -1);
        } catch (const Error& e) {
            report.problems.push_back(e.problem());
            continue;
        }
        for (const auto& t : header.tensors) {
            if (!selected(options, t.name))
                continue;
            const auto type = element_type_from_safetensors(t.dtype);
            if (!type) { // complex or another type statistics do not cover
                report.warnings.push_back({ProblemKind::unreadable, -1, file,
                                           (dir / file).string() + ": tensor '" + printable(t.name) + "' has dtype '" +
                                               printable(t.dtype) + "', which stats does not read"});
                continue;
            }
            TensorContent content{.name = t.name, .type = *type, .shape = t.shape};
            content.parts.push_back({.file = file,
                                     .byte_offset = header.data_start() + t.begin,
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

// Files whose names differ only in a data- or tensor-parallel rank hold slices of the same
// tensors; a layer index or a pipeline stage names different tensors (DeepSpeed's layer files and
// Megatron's stages number their layers locally). The rank digits become '*':
//   bf16_zero_pp_rank_3_mp_rank_01_optim_states.pt -> bf16_zero_pp_rank_*_mp_rank_*_optim_states.pt
//   layer_05-model_01-model_states.pt              -> layer_05-model_*-model_states.pt
//   mp_rank_01_002/model_optim_rng.pt              -> mp_rank_*_002/model_optim_rng.pt
std::string slice_group(std::string file)
{
    for (const std::string_view marker : {"zero_pp_rank_", "mp_rank_", "-model_"}) {
        const std::size_t at = file.find(marker);
        if (at == std::string::npos)
            continue;
        std::size_t begin = at + marker.size(), end = begin;
        while (end < file.size() && file[end] >= '0' && file[end] <= '9')
            ++end;
        if (end > begin)
            file.replace(begin, end - begin, "*");
    }
    return file;
}

// Lays out the tensors of torch.save archives (each file's data.pkl through the restricted reader,
// never unpickled). Tensors of the same name in several files (DeepSpeed's ZeRO partitions,
// tensor-parallel slices) become one tensor with a part per file.
void plan_torch(const fs::path& dir, int dirfd, const std::vector<TorchFile>& files, const ContentOptions& options,
                ContentReport& report)
{
    std::map<std::pair<std::string, std::string>, std::size_t> by_key; // (slice group, name) -> tensor
    std::map<std::string, std::vector<std::size_t>> by_name;              // name -> its tensors
    std::vector<std::string> group_of;                                    // per tensor planned here
    const std::size_t base = report.tensors.size();
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
            const std::string group = slice_group(tf.file);
            auto [it, inserted] = by_key.try_emplace({group, ref.name}, report.tensors.size());
            if (inserted) {
                by_name[ref.name].push_back(report.tensors.size());
                group_of.push_back(group);
                report.tensors.push_back({.name = ref.name, .type = *type, .shape = ref.shape});
            }
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
    for (const auto& [name, indices] : by_name) // one name in several layers or stages: say whose
        if (indices.size() > 1)
            for (const std::size_t i : indices)
                report.tensors[i].name = group_of[i - base] + ": " + name;
    for (std::size_t i = base; i < report.tensors.size(); ++i) // slices of several files: flattened
        if (TensorContent& t = report.tensors[i]; t.parts.size() > 1) {
            uint64_t total = 0;
            for (const TensorPart& p : t.parts)
                total += p.numel;
            t.shape = {total};
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
            if (files.size() >= 256) // a cache, not every rank's file at once: descriptors are finite
                files.clear();
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

} // namespace

fs::path lay_out_tensors(const fs::path& path, const ContentOptions& options, ContentReport& report,
                         std::vector<RankVectors>& ranks)
{
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
    return dir;
}

} // namespace shardscope::inspect
