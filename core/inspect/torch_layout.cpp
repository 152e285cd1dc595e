// The tensor layouts of the torch-based formats (internal/layout.h): torch.save archives (single
// files, pytorch_model.bin indexes, DeepSpeed, Megatron) and DCP chunks, read through the
// restricted pickle reader only.

#include "core/inspect/internal/layout.h"
#include "core/inspect/internal/tensor_reader.h"

#include "core/foreign/dcp.h"
#include "core/foreign/dcp_transform.h"
#include "core/foreign/safetensors_index.h"
#include "core/foreign/io/zip_reader.h"
#include "core/foreign/torch_archive.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>

namespace shardscope::inspect {

namespace {
// How many times over an expanded torch.save view may repeat its storage: a bias broadcast over a
// batch or a sequence is read, a 1 KB file that claims 2^50 elements is not.
constexpr uint64_t kMaxViewRepeats = 1 << 16;
} // namespace

namespace fs = std::filesystem;

namespace {

// torch.save's dtype names (from the storage class) as element types; nullopt for what
// statistics do not cover (complex numbers) or an unknown storage.
std::optional<ElementType> torch_element_type(const std::string& dtype)
{
    // The float8 names come from DCP metadata: torch.save storages have no FP8 class this reader knows.
    static const std::map<std::string, ElementType> types = {
        {"float32", ElementType::F32},
        {"float64", ElementType::F64},
        {"float16", ElementType::F16},
        {"bfloat16", ElementType::BF16},
        {"int64", ElementType::I64},
        {"int32", ElementType::I32},
        {"int16", ElementType::I16},
        {"int8", ElementType::I8},
        {"uint8", ElementType::U8},
        {"bool", ElementType::BOOL},
        {"float8_e4m3fn", ElementType::F8_E4M3},
        {"float8_e5m2", ElementType::F8_E5M2},
    };
    const auto it = types.find(dtype);
    return it == types.end() ? std::nullopt : std::optional(it->second);
}

// True when the view is stored row-major with no gaps: read in storage order, it is in the
// tensor's own element order.
bool contiguous(const std::vector<uint64_t>& shape, const std::vector<int64_t>& stride)
{
    if (stride.size() != shape.size())
        return false;
    int64_t expected = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
        if (shape[d] > 1 && stride[d] != expected)
            return false;
        expected *= static_cast<int64_t>(shape[d]); // the product is numel, which was checked
    }
    return true;
}

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

// Whether every copy holds the same bytes as the first (a tensor each tensor-parallel rank holds
// whole): 0 when they do (copies over 4 MiB are taken as equal unread: these are norms and biases,
// a few KiB each, and a position embedding at most); else the index of the first copy that differs,
// or copies.size() when one cannot be read (not shown to be one tensor, and no finding).
std::size_t differing_copy(const storage::Folder& folder, const std::vector<TensorPart>& copies, uint64_t element)
{
    constexpr uint64_t kMaxCompared = 4u << 20, kPiece = 64u << 10;
    uint64_t bytes = 0;
    if (copies.empty() || __builtin_mul_overflow(copies[0].numel, element, &bytes) || bytes > kMaxCompared)
        return 0;
    std::vector<storage::OpenedObject> opened;
    for (std::size_t c = 0; c < copies.size(); ++c) {
        if (copies[c].numel != copies[0].numel)
            return c;
        opened.push_back(folder.open(copies[c].file));
        if (opened.back().status != fsutil::OpenStatus::ok)
            return copies.size();
    }
    std::vector<std::byte> first(kPiece), other(kPiece);
    for (uint64_t at = 0; at < bytes; at += kPiece) {
        const std::size_t n = std::size_t(std::min(kPiece, bytes - at));
        if (!opened[0].read(first.data(), n, copies[0].byte_offset + at))
            return copies.size();
        for (std::size_t c = 1; c < copies.size(); ++c) {
            if (!opened[c].read(other.data(), n, copies[c].byte_offset + at))
                return copies.size();
            if (std::memcmp(first.data(), other.data(), n) != 0)
                return c;
        }
    }
    return 0;
}

} // namespace

// Lays out the tensors of torch.save archives (each file's data.pkl through the restricted reader,
// never unpickled). Tensors of the same name in several files (DeepSpeed's ZeRO partitions,
// tensor-parallel slices) become one tensor with a part per file.
void plan_torch(const storage::Folder& folder, const std::vector<TorchFile>& files, const ContentOptions& options,
                ContentReport& report, std::vector<TorchArchive>* archives, const std::vector<std::string>& saved,
                IndexCheck* check)
{
    std::vector<std::string> every_file = saved;
    if (every_file.empty())
        for (const TorchFile& tf : files)
            every_file.push_back(tf.file);
    const fs::path& dir = folder.path;
    std::map<std::pair<std::string, std::string>, std::size_t> by_key; // (slice group, name) -> tensor
    std::vector<std::string> group_of; // per tensor planned here
    std::vector<std::vector<std::vector<uint64_t>>> part_shapes; // per tensor planned here: its parts' shapes
    std::map<std::pair<std::string, std::string>, std::vector<uint64_t>> stored_shapes; // (slice group, name)
    // Megatron's pipeline stages hold tensors under names the model does not have (their layers
    // numbered from 0): which tensors the globs select is told by the model's names, once every
    // file is listed. Until then each tensor is laid out, and what is wrong with one kept aside.
    const bool stages = std::any_of(every_file.begin(), every_file.end(),
                                    [](const std::string& f) { return pipeline_stage(slice_group(f)) >= 0; });
    std::vector<std::pair<std::string, std::string>> every_tensor; // (slice group, name) of every ref
    struct Finding {
        std::pair<std::string, std::string> tensor; // (slice group, name)
        Problem problem;
        bool left_out = false;
    };
    std::vector<Finding> findings;
    std::map<std::string, std::set<int>> tensor_parallel_ranks; // slice group -> the ranks of its files
    std::set<std::string> old_qkv_order; // slice groups with a file older than checkpoint_version 2.0
    for (const std::string& f : every_file)
        tensor_parallel_ranks[slice_group(f)].insert(tensor_parallel_rank(f));
    const std::size_t base = report.tensors.size();
    std::set<std::string> listed; // the files whose tensors were listed
    for (const TorchFile& tf : files) {
        const std::string shown =
            (tf.rank >= 0 ? "rank " + std::to_string(tf.rank) + ": " : std::string()) + (dir / tf.file).string();
        storage::OpenedObject file = folder.open(tf.file);
        if (file.status != fsutil::OpenStatus::ok) {
            report.problems.push_back({.kind = file.status == fsutil::OpenStatus::missing ? ProblemKind::missing_file
                                                                                          : ProblemKind::unreadable,
                                       .message = shown + ": " + file.reason,
                                       .path = tf.file,
                                       .rank = tf.rank});
            continue;
        }
        const ZipReadAt read = storage::read_function(*file.reader);
        TorchArchiveListing listing;
        ZipDirectory directory;
        try {
            directory = read_zip_directory(read, file.size, shown);
            listing = list_torch_archive(read, file.size, directory, shown);
            if (listing.megatron.checkpoint_version && *listing.megatron.checkpoint_version < 2.0)
                old_qkv_order.insert(slice_group(tf.file));
        } catch (const Error& e) {
            rethrow_remote(e);
            report.problems.push_back({.kind = e.kind(), .message = e.what(), .path = tf.file, .rank = tf.rank});
            continue;
        }
        for (const Problem& p : listing.problems)
            report.problems.push_back({.kind = p.kind, .message = p.message, .path = tf.file, .rank = tf.rank});
        std::map<std::string, const ZipEntry*> entries;
        for (const ZipEntry& e : directory.entries)
            entries[e.name] = &e;
        TorchArchive* archive = nullptr;
        if (archives) {
            archives->push_back({.file = tf, .zero = std::move(listing.zero)});
            archive = &archives->back();
        }
        if (listing.problems.empty()) // else what the file holds is not known whole: none said lacking
            listed.insert(tf.file);
        for (const TorchTensorRef& ref : listing.refs) {
            // A tensor a file holds that the index maps elsewhere is not the checkpoint's (a
            // stale file's); it would be joined to the mapped one as a slice of it.
            if (check && !check->holds(tf.file, ref.name, selected(options, ref.name)))
                continue;
            // Tensors the globs leave out are still located for the archive: an assembled ZeRO
            // parameter the globs select is read from flat groups they do not.
            const std::string group = slice_group(tf.file);
            every_tensor.push_back({group, ref.name});
            const bool wanted = stages || selected(options, ref.name);
            if (!wanted && !archive)
                continue;
            // What is wrong with a tensor is said when it is wanted; else it is only not located.
            auto problem = [&](Problem p) {
                if (stages)
                    findings.push_back({.tensor = {group, ref.name}, .problem = std::move(p)});
                else if (wanted)
                    report.problems.push_back(std::move(p));
            };
            auto left_out = [&](Problem p) {
                if (stages)
                    findings.push_back({.tensor = {group, ref.name}, .problem = std::move(p), .left_out = true});
                else if (wanted)
                    leave_out(report, std::move(p));
            };
            const std::string what = shown + ": tensor '" + printable(ref.name) + "'";
            const auto type = torch_element_type(ref.dtype);
            if (!type) {
                left_out({.kind = ProblemKind::unreadable,
                          .message =
                              what + " has dtype '" + printable(ref.dtype) + "', whose values ShardScope does not read",
                          .path = tf.file,
                          .rank = tf.rank});
                continue;
            }
            uint64_t numel = 0;
            const bool overflow = !checked_volume(ref.shape, numel);
            const auto entry = entries.find(listing.prefix + "data/" + ref.storage_key); // prefix ends in /
            if (overflow || entry == entries.end()) {
                problem({.kind = overflow ? ProblemKind::invalid_archive : ProblemKind::missing_tensor,
                         .message = what +
                             (overflow ? ": its shape's element count overflows"
                                       : ": its storage '" + printable(ref.storage_key) + "' is not in the archive"),
                         .path = tf.file,
                         .rank = tf.rank});
                continue;
            }
            const ZipEntry& stored = *entry->second;
            const ZipEntryCheck located = locate_zip_entry(read, directory, stored);
            if (!located.ok || stored.method != 0) {
                problem({.kind = ProblemKind::invalid_archive,
                         .message = what + ": " +
                             (located.ok ? "its storage is compressed, which torch.save "
                                           "never does; not read"
                                         : located.problem),
                         .path = tf.file,
                         .rank = tf.rank});
                continue;
            }
            // The storage elements it spans: numel for a transpose, more for a slice with a step
            // (x[:, ::2]), fewer for an expanded tensor (stride 0).
            const std::optional<uint64_t> span =
                stored_span({.numel = numel, .view_shape = ref.shape, .view_strides = ref.stride});
            if (!span) {
                problem({.kind = ProblemKind::invalid_archive,
                         .message = what + ": its strides are negative, not one per dimension or too large",
                         .path = tf.file,
                         .rank = tf.rank});
                continue;
            }
            // An expanded view repeats its stored elements: a few bytes of file could otherwise
            // stand for petabytes to read, compare or write out.
            if (numel > 0 && numel / std::max<uint64_t>(*span, 1) > kMaxViewRepeats) {
                left_out({.kind = ProblemKind::unreadable,
                          .message = what + " repeats its " + std::to_string(*span) + " stored elements " +
                              std::to_string(numel / *span) + " times over (more than " +
                              std::to_string(kMaxViewRepeats) + "), which ShardScope does not read",
                          .path = tf.file,
                          .rank = tf.rank});
                continue;
            }
            const uint64_t size = element_size(*type);
            uint64_t end = 0;
            if (__builtin_add_overflow(ref.storage_offset, *span, &end) || __builtin_mul_overflow(end, size, &end) ||
                end > stored.uncompressed_size) {
                problem({.kind = ProblemKind::range_outside_file,
                         .message = what + ": its offset, shape and strides reach past the end of its " +
                             std::to_string(stored.uncompressed_size) + "-byte storage",
                         .path = tf.file,
                         .rank = tf.rank});
                continue;
            }
            TensorPart located_part{.rank = tf.rank,
                                    .file = tf.file,
                                    .byte_offset = located.data_offset + ref.storage_offset * size,
                                    .numel = numel};
            // A transpose, a slice with a step or an expanded tensor: read element by element in
            // the view's own order, as torch would give them.
            if (numel > 0 && !contiguous(ref.shape, ref.stride)) {
                located_part.view_shape = ref.shape;
                located_part.view_strides = ref.stride;
            }
            if (archive)
                archive->tensors.try_emplace(
                    ref.name, TorchArchive::Tensor{.type = *type, .shape = ref.shape, .part = located_part});
            stored_shapes.try_emplace({group, ref.name}, ref.shape);
            if (!wanted)
                continue;
            auto [it, inserted] = by_key.try_emplace({group, ref.name}, report.tensors.size());
            if (inserted) {
                group_of.push_back(group);
                part_shapes.emplace_back();
                report.tensors.push_back({.name = ref.name, .type = *type, .shape = ref.shape});
            }
            TensorContent& tensor = report.tensors[it->second];
            if (tensor.type != *type) {
                problem({.kind = ProblemKind::invalid_archive,
                         .message = what + " is " + std::string(to_string(*type)) + " here but " +
                             std::string(to_string(tensor.type)) + " in another file",
                         .path = tf.file,
                         .rank = tf.rank});
                continue;
            }
            uint64_t first = 0;
            for (const TensorPart& p : tensor.parts)
                first += p.numel;
            located_part.first_element = first;
            tensor.parts.push_back(std::move(located_part));
            part_shapes[it->second - base].push_back(ref.shape);
        }
    }
    if (check)
        check->say_lacking([&](std::size_t f) { return listed.contains(check->index().files[f]); },
                           [&](std::string_view name) { return selected(options, std::string(name)); });
    // Slices of several files: Megatron's tensor-parallel slices joined into the tensor they are
    // cut from, anything else laid end to end.
    for (std::size_t i = base; i < report.tensors.size(); ++i) {
        TensorContent& t = report.tensors[i];
        const std::string& group = group_of[i - base];
        const int ranks = int(tensor_parallel_ranks[group].size());
        // One rank's slice where several ranks saved the group is not the tensor either.
        if (t.parts.size() > 1 || ranks > 1) {
            const StoredShape shape_of = [&](const std::string& name) -> std::optional<std::vector<uint64_t>> {
                const auto found = stored_shapes.find({group, name});
                return found == stored_shapes.end() ? std::nullopt : std::optional(found->second);
            };
            // Copies that should be one tensor and are not: the ranks diverged.
            const SameValues same = [&](const std::vector<TensorPart>& copies) {
                const std::size_t c = differing_copy(folder, copies, element_size(t.type));
                if (c == 0 || c >= copies.size())
                    return c == 0;
                const TensorPart& one = copies[0];
                const TensorPart& other = copies[c];
                Problem p{.kind = ProblemKind::replicas_differ,
                          .message = (other.rank >= 0 ? "rank " + std::to_string(other.rank) + ": " : std::string()) +
                              (dir / other.file).string() + ": tensor '" + printable(t.name) +
                              "', which every tensor-parallel rank holds whole, differs from its copy in " +
                              printable(one.file) + ": the ranks diverged (read end to end, each copy counted)",
                          .path = other.file,
                          .rank = other.rank};
                if (stages)
                    findings.push_back({.tensor = {group, t.name}, .problem = std::move(p)});
                else
                    report.problems.push_back(std::move(p));
                return false;
            };
            if (join_tensor_parallel(t, std::move(part_shapes[i - base]), ranks, old_qkv_order.contains(group),
                                     shape_of, same))
                continue;
            // In rank order, not file-name order ("zero_pp_rank_10" sorts before "_2"): the
            // flattened order is the ranks' concatenation, the same at any file naming.
            if (std::all_of(t.parts.begin(), t.parts.end(), [](const TensorPart& p) { return p.rank >= 0; }))
                std::stable_sort(t.parts.begin(), t.parts.end(),
                                 [](const TensorPart& a, const TensorPart& b) { return a.rank < b.rank; });
            uint64_t total = 0;
            for (TensorPart& p : t.parts) {
                p.first_element = total;
                total += p.numel;
            }
            t.shape = {total};
            t.concatenated = true;
        }
    }
    // The model's names, the globs applied to them, and what is wrong with the tensors they select.
    std::set<int> stage_files;
    for (const std::string& f : every_file)
        if (const int stage = pipeline_stage(slice_group(f)); stage >= 0)
            stage_files.insert(stage);
    const LayerNumbering model_name = number_stage_layers(every_tensor, stage_files);
    for (Finding& f : findings)
        if (selected(options, model_name(f.tensor.first, f.tensor.second)))
            f.left_out ? leave_out(report, std::move(f.problem)) : report.problems.push_back(std::move(f.problem));
    std::size_t kept = base;
    for (std::size_t i = base; i < report.tensors.size(); ++i) {
        std::string name = model_name(group_of[i - base], report.tensors[i].name);
        if (!selected(options, name))
            continue;
        if (kept != i) {
            report.tensors[kept] = std::move(report.tensors[i]);
            group_of[kept - base] = std::move(group_of[i - base]);
        }
        report.tensors[kept++].name = std::move(name);
    }
    report.tensors.resize(kept);
    std::map<std::string, std::vector<std::size_t>> by_name; // name -> its tensors
    for (std::size_t i = base; i < report.tensors.size(); ++i)
        by_name[report.tensors[i].name].push_back(i);
    for (const auto& [name, indices] : by_name) // one name in several layers or stages: say whose
        if (indices.size() > 1)
            for (const std::size_t i : indices)
                report.tensors[i].name = group_of[i - base] + ": " + name;
}

// DCP: every chunk of every tensor is a part (rank from its file name), read inside the
// torch.save archive FileSystemWriter stores it as, or as raw elements.
void plan_dcp(const storage::Folder& folder, const ContentOptions& options, ContentReport& report)
{
    const fs::path& dir = folder.path;
    const std::string meta_path = (dir / ".metadata").string();
    plan_dcp_layout(folder, decode_dcp_metadata_file(folder, ".metadata", meta_path),
                    {.described = meta_path, .path = ".metadata"}, options, report);
}

void plan_dcp_layout(const storage::Folder& folder, const DcpMetadata& meta, const DcpTilingSource& tiling,
                     const ContentOptions& options, ContentReport& report)
{
    const std::string& meta_path = tiling.described;
    const fs::path& dir = folder.path;
    std::map<std::string, storage::OpenedObject> files;
    std::map<std::string, uint64_t> unknown_transforms; // chunks each unknown extension keeps from being read
    for (const DcpTensor& t : meta.tensors) {
        if (!selected(options, t.fqn))
            continue;
        const auto type = torch_element_type(t.dtype);
        if (!type) {
            leave_out(report,
                      {.kind = ProblemKind::unreadable,
                       .message = meta_path + ": tensor '" + printable(t.fqn) + "' has dtype '" + printable(t.dtype) +
                           "', whose values ShardScope does not read",
                       .path = tiling.path});
            continue;
        }
        TensorContent content{.name = t.fqn, .type = *type, .shape = t.size};
        // Chunks that overlap, leave a hole or lie outside the tensor: its values cannot be told,
        // so none is read (the tensor stays listed, as one whose values are missing).
        const std::size_t before = report.problems.size();
        check_dcp_tiling(meta, t, tiling, report.problems);
        if (report.problems.size() > before) {
            report.tensors.push_back(std::move(content));
            continue;
        }
        uint64_t first = 0;
        for (const DcpChunk& chunk : meta.chunks_of(t)) {
            const DcpStorage c = meta.storage(chunk);
            const auto offsets = meta.offsets(chunk), sizes = meta.sizes(chunk);
            const std::string what = "'" + printable(t.fqn) + "' chunk " + join_dims(offsets);
            uint64_t numel = 0, bytes = 0;
            const bool overflow =
                !checked_volume(sizes, numel) || __builtin_mul_overflow(numel, element_size(*type), &bytes);
            const bool zstd = c.transformed && dcp_transform_known(c.transform);
            if (c.transformed && !zstd && !overflow) { // said once for the checkpoint, below
                ++unknown_transforms[c.transform.empty() ? "?" : c.transform];
                continue;
            }
            if (!c.present || overflow) {
                report.problems.push_back(
                    {.kind = overflow ? ProblemKind::invalid_manifest : ProblemKind::missing_tensor,
                     .message =
                         meta_path + ": " + what + (overflow ? ": its element count overflows" : " has no storage"),
                     .path = c.file});
                continue;
            }
            const int rank = dcp_rank_of(c.file);
            const std::string shown =
                (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + (dir / c.file).string();
            if (files.size() >= 256) // a cache, not every rank's file at once: descriptors are finite
                files.clear();
            auto [it, inserted] = files.try_emplace(c.file);
            if (inserted)
                it->second = folder.open(c.file);
            if (it->second.status != fsutil::OpenStatus::ok) {
                report.problems.push_back({.kind = it->second.status == fsutil::OpenStatus::missing
                                               ? ProblemKind::missing_file
                                               : ProblemKind::unreadable,
                                           .message = shown + ": " + it->second.reason,
                                           .path = c.file,
                                           .rank = rank});
                continue;
            }
            uint64_t end = 0;
            if (__builtin_add_overflow(c.offset, c.length, &end) || end > it->second.size) {
                report.problems.push_back({.kind = ProblemKind::range_outside_file,
                                           .message = shown + ": " + what + " runs past the end of the file",
                                           .path = c.file,
                                           .rank = rank});
                continue;
            }
            try {
                TensorPart part{.rank = rank,
                                .file = c.file,
                                .numel = numel,
                                .first_element = first,
                                .box_offsets = {offsets.begin(), offsets.end()},
                                .box_sizes = {sizes.begin(), sizes.end()}};
                if (zstd) { // where the elements are in the decompressed archive (read again to scan)
                    const std::vector<std::byte> item =
                        inflate_dcp_zstd(storage::read_function(*it->second.reader), c.offset, c.length,
                                         dcp_inflated_limit(bytes), shown + ": " + what + " (zstd-compressed)");
                    const ZipReadAt memory = [&](void* buffer, std::size_t size, uint64_t offset) {
                        if (offset > item.size() || size > item.size() - offset)
                            return false;
                        std::memcpy(buffer, item.data() + offset, size);
                        return true;
                    };
                    DcpStorage inner = c;
                    inner.offset = 0;
                    inner.length = item.size();
                    part.byte_offset =
                        locate_dcp_chunk_data(memory, inner, bytes, shown + ": " + what + " (decompressed)");
                    part.zstd_offset = c.offset;
                    part.zstd_length = c.length;
                } else {
                    part.byte_offset = locate_dcp_chunk_data(storage::read_function(*it->second.reader), c, bytes,
                                                             shown + ": " + what);
                }
                content.parts.push_back(std::move(part));
                first += numel;
            } catch (const Error& e) {
                rethrow_remote(e);
                report.problems.push_back({.kind = e.kind(), .message = e.what(), .path = c.file, .rank = rank});
            }
        }
        report.tensors.push_back(std::move(content));
    }
    for (const auto& [transform, chunks] : unknown_transforms)
        report.problems.push_back({.kind = ProblemKind::missing_tensor,
                                   .message = meta_path + ": " + std::to_string(chunks) +
                                       (chunks == 1 ? " chunk is" : " chunks are") +
                                       " written through storage extension '" + printable(transform) +
                                       "' (transform_descriptors), which ShardScope cannot undo: not read",
                                   .path = tiling.path});
}

// A universal checkpoint's parameter files, each planned on its own (every one holds a tensor
// named "param"), then renamed for the folder it is in.
void plan_universal(const storage::Folder& folder, const std::vector<TorchFile>& files,
                    const std::vector<TorchArchive>& engine, const ContentOptions& options, ContentReport& report)
{
    std::map<std::string, std::size_t> parameters; // name -> its fp32 tensor in report.tensors
    ContentOptions every = options; // the tensor inside is "param"; the parameter's name is selected
    every.tensor_globs.clear();
    for (const TorchFile& tf : files) {
        const std::string_view path = tf.file; // zero/<name>/<file>
        const std::size_t slash = path.rfind('/');
        if (!path.starts_with("zero/") || slash <= 5)
            continue; // zero/optimizer_state.pt: the optimizer's hyperparameters
        const std::string name(path.substr(5, slash - 5));
        const std::string_view file = path.substr(slash + 1);
        const std::string state = file == "fp32.pt" ? "" : file == "exp_avg.pt" ? "exp_avg" : "exp_avg_sq";
        if ((file != "fp32.pt" && file != "exp_avg.pt" && file != "exp_avg_sq.pt") || !selected(options, name))
            continue; // step.pt: a count, not a tensor of the model
        ContentReport one;
        plan_torch(folder, {tf}, every, one);
        std::move(one.problems.begin(), one.problems.end(), std::back_inserter(report.problems));
        std::move(one.warnings.begin(), one.warnings.end(), std::back_inserter(report.warnings));
        const auto param = std::find_if(one.tensors.begin(), one.tensors.end(),
                                        [](const TensorContent& t) { return t.name == "param"; });
        if (param == one.tensors.end()) {
            if (one.problems.empty())
                report.problems.push_back({.kind = ProblemKind::missing_tensor,
                                           .message = (folder.path / printable(tf.file)).string() +
                                               ": no tensor 'param' in it, where a universal checkpoint keeps the "
                                               "parameter's values",
                                           .path = tf.file});
            continue;
        }
        param->name = name;
        param->state = state;
        param->assembled = true;
        if (state.empty())
            parameters[name] = report.tensors.size();
        report.tensors.push_back(std::move(*param));
    }
    std::set<std::string> carried;
    for (const TorchArchive& archive : engine) {
        for (const auto& [key, tensor] : archive.tensors) {
            if (!key.starts_with("module."))
                continue;
            const std::string name = key.substr(7);
            const bool alias = std::any_of(archive.zero.shared_params.begin(), archive.zero.shared_params.end(),
                                           [&](const auto& shared) { return shared.first == name; });
            if (parameters.contains(name) || alias || !selected(options, name) || !carried.insert(name).second)
                continue;
            report.tensors.push_back(
                {.name = name, .type = tensor.type, .shape = tensor.shape, .parts = {tensor.part}, .assembled = true});
        }
        for (const auto& [alias, source] : archive.zero.shared_params)
            if (const auto it = parameters.find(source); it != parameters.end() && !parameters.contains(alias) &&
                selected(options, alias) && carried.insert(alias).second) {
                TensorContent copy = report.tensors[it->second]; // a copy: push_back may move the vector
                copy.name = alias;
                report.tensors.push_back(std::move(copy));
            }
    }
}

// The .pt files a DeepSpeed or Megatron checkpoint consists of, with their ranks, as the
// structure-only verifier lists them.
std::vector<TorchFile> torch_files_of(const VerifyReport& listed)
{
    std::vector<TorchFile> files;
    for (const ShardCheck& s : listed.shards)
        if (s.path.ends_with(".pt") && s.status != ShardStatus::missing)
            files.push_back({s.path, s.rank});
    return files;
}

std::vector<std::string> saved_torch_files(const VerifyReport& listed)
{
    std::vector<std::string> files;
    for (const ShardCheck& s : listed.shards)
        if (s.path.ends_with(".pt"))
            files.push_back(s.path);
    return files;
}

} // namespace shardscope::inspect
