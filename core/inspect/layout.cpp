// How each format lays its tensors out in files (internal/layout.h): which byte runs of which
// files hold which tensor, per rank or file or chunk, found from headers and metadata alone.

#include "core/inspect/internal/layout.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/safetensors.h"
#include "core/foreign/dcp_hf.h"
#include "core/foreign/deepspeed.h"
#include "core/open/detect.h"
#include "core/foreign/megatron.h"
#include "core/foreign/safetensors_index.h"
#include "core/inspect/internal/dequantize.h"
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

// The header of a safetensors file (the file is closed again: a checkpoint may have more ranks
// than a process has descriptors). Error naming the file and rank when it cannot be used.
SafetensorsHeader read_header(const storage::Folder& folder, const std::string& name, int rank)
{
    const std::string display = (folder.path / name).string();
    const storage::OpenedObject file = folder.open(name);
    if (file.status != fsutil::OpenStatus::ok)
        throw Error(file.status == fsutil::OpenStatus::outside       ? ProblemKind::path_outside_checkpoint
                        : file.status == fsutil::OpenStatus::missing ? ProblemKind::missing_shard
                                                                     : ProblemKind::unreadable,
                    (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + display + ": " + file.reason,
                    name, rank);
    return read_safetensors_header(*file.reader, file.size, display, rank);
}

// The param tensor is read with its master when their parts match one for one (they do unless a
// rank file lacks one of them, which is reported): kStates puts master right after param.
void pair_param_with_master(TensorContent& param, std::size_t master_index, const ContentReport& report)
{
    const TensorContent& master = report.tensors[master_index];
    if (param.parts.size() != master.parts.size())
        return;
    for (std::size_t p = 0; p < param.parts.size(); ++p)
        if (param.parts[p].rank != master.parts[p].rank || param.parts[p].file != master.parts[p].file ||
            param.parts[p].numel != master.parts[p].numel ||
            param.parts[p].first_element != master.parts[p].first_element)
            return;
    param.master = static_cast<int>(master_index);
}

void plan_native(const storage::Folder& folder, const ContentOptions& options, ContentReport& report)
{
    const fs::path& dir = folder.path;
    const Manifest m = read_manifest(folder);
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
            headers.push_back(read_header(folder, shard.path, shard.rank));
        } catch (const Error& e) {
            rethrow_remote(e);
            Problem p = e.problem();
            p.path = shard.path; // relative, as every problem's (a missing object's error names its URL)
            report.problems.push_back(std::move(p));
            headers.emplace_back();
            continue;
        }
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
                        report.problems.push_back({.kind = ProblemKind::invalid_shard,
                                                   .message = "rank " + std::to_string(shard.rank) + ": " +
                                                       (dir / shard.path).string() + " has no '" + state +
                                                       "' covering its slice of '" + printable(t.name) + "'",
                                                   .path = shard.path,
                                                   .rank = shard.rank});
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
            content.flat_offset = t.offset;
            report.tensors.push_back(std::move(content));
        }
        pair_param_with_master(report.tensors[report.tensors.size() - 4], report.tensors.size() - 3, report);
    }
}

// A tensor is read from the file the index maps it to; without an index, from the only file that
// holds it. What breaks that is a problem, as verify says it: a tensor two files hold (which one
// is the checkpoint's cannot be told), one the index maps to a file that lacks it, one a file
// holds that the index maps elsewhere or not at all.
void plan_safetensors(const storage::Folder& folder, const std::vector<std::string>& files,
                      const SafetensorsIndex* index, const ContentOptions& options, ContentReport& report)
{
    const fs::path& dir = folder.path;
    const auto problem = [&](Problem p) {
        if (report.problems.size() < 100)
            report.problems.push_back(std::move(p));
    };
    std::map<std::string, std::string, std::less<>> held_by; // tensor -> the file read for it
    std::optional<IndexCheck> check;
    if (index)
        check.emplace(*index, dir, problem);
    std::vector<bool> readable(files.size(), true);
    for (std::size_t f = 0; f < files.size(); ++f) {
        const std::string& file = files[f];
        SafetensorsHeader header;
        try {
            header = read_header(folder, file, -1);
        } catch (const Error& e) {
            rethrow_remote(e);
            Problem p = e.problem();
            p.path = file; // relative, as every problem's (a missing object's error names its URL)
            if (p.kind == ProblemKind::missing_shard) // a foreign file, as verify names it
                p.kind = ProblemKind::missing_file;
            problem(std::move(p));
            readable[f] = false;
            continue;
        }
        for (const auto& t : header.tensors) {
            if (check && !check->holds(file, t.name, selected(options, t.name)))
                continue;
            if (!selected(options, t.name))
                continue;
            if (const auto [seen, first] = held_by.try_emplace(t.name, file); !first) {
                problem({.kind = ProblemKind::layout_overlap,
                         .message = (dir / file).string() + ": holds tensor '" + printable(t.name) + "', which " +
                             printable(seen->second) + " holds too; which one is the checkpoint's cannot be told",
                         .path = file});
                continue;
            }
            const auto type = element_type_from_safetensors(t.dtype);
            if (!type) { // complex or another type statistics do not cover
                leave_out(report,
                          {.kind = ProblemKind::unreadable,
                           .message = (dir / file).string() + ": tensor '" + printable(t.name) + "' has dtype '" +
                               printable(t.dtype) + "', whose values ShardScope does not read",
                           .path = file});
                continue;
            }
            TensorContent content{.name = t.name, .type = *type, .shape = t.shape};
            content.parts.push_back(
                {.file = file, .byte_offset = header.data_start() + t.begin, .numel = t.bytes() / element_size(*type)});
            report.tensors.push_back(std::move(content));
        }
    }
    if (check) // files are index->files, in order
        check->say_lacking([&](std::size_t f) { return readable[f]; },
                           [&](std::string_view name) { return selected(options, std::string(name)); });
}

} // namespace

bool selected(const ContentOptions& options, const std::string& name)
{
    if (options.tensor_globs.empty())
        return true;
    for (const auto& glob : options.tensor_globs)
        if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0)
            return true;
    // A selected FP8 weight is read through its block scales: its partner comes along.
    if (!options.raw_fp8 && name.ends_with(kScaleSuffix))
        return selected(options, name.substr(0, name.size() - kScaleSuffix.size()));
    return false;
}

fs::path lay_out_tensors(const storage::Location& where, const ContentOptions& options, ContentReport& report)
{
    // The folder every later read of this report goes through (scan_content, diff).
    auto use = [&](storage::Folder folder) -> const storage::Folder& {
        report.folder = std::make_shared<const storage::Folder>(std::move(folder));
        report.dir = report.folder->path;
        return *report.folder;
    };
    const fs::path path = where.is_local() ? where.path : fs::path(storage::to_string(where));
    std::error_code ec;
    if (where.is_local() && !fs::exists(path, ec))
        throw Error(ProblemKind::cannot_open, path.string() + ": no such file or directory", path.string());
    if (where.is_local() && !fs::is_directory(path, ec) && is_torch_file(path)) { // one torch.save file
        report.format = "torch";
        const storage::Folder& folder =
            use(storage::Folder(fsutil::open_listed(path.parent_path().empty() ? fs::path(".") : path.parent_path())));
        plan_torch(folder, {{path.filename().string(), -1}}, options, report);
    } else {
        DetectedFormat detected = detect_format(where);
        if (detected.problem)
            throw Error(*detected.problem);
        report.format = std::string(to_string(detected.format));
        const std::vector<std::string>& files = detected.files;
        if (!detected.dir.valid())
            throw Error(ProblemKind::invalid_argument,
                        path.string() + ": not a checkpoint stats can read (" + detected.reason + ")", path.string());
        const storage::Folder& folder = use(std::move(detected.dir));
        const fs::path& dir = folder.path;
        switch (detected.format) {
        case CheckpointFormat::shardscope: plan_native(folder, options, report); break;
        case CheckpointFormat::safetensors: plan_safetensors(folder, files, nullptr, options, report); break;
        case CheckpointFormat::safetensors_index: {
            const std::string index_name = "model.safetensors.index.json"; // what detect_format found
            const std::string display = (dir / index_name).string();
            const SafetensorsIndex index =
                parse_safetensors_index(folder.read_small(index_name, kMaxIndexBytes, display), display);
            plan_safetensors(folder, index.files, &index, options, report);
            break;
        }
        case CheckpointFormat::torch: { // one archive, or pytorch_model.bin
            std::vector<TorchFile> archives;
            for (const std::string& f : files)
                archives.push_back({f, -1});
            plan_torch(folder, archives, options, report);
            break;
        }
        case CheckpointFormat::torch_index: {
            const std::string index_name = "pytorch_model.bin.index.json"; // the same weight_map JSON
            const std::string display = (dir / index_name).string();
            const SafetensorsIndex index =
                parse_safetensors_index(folder.read_small(index_name, kMaxIndexBytes, display), display);
            std::vector<TorchFile> archives;
            for (const std::string& f : index.files)
                archives.push_back({f, -1});
            IndexCheck check(index, dir, [&](Problem p) {
                if (report.problems.size() < 100)
                    report.problems.push_back(std::move(p));
            });
            plan_torch(folder, archives, options, report, nullptr, {}, &check);
            break;
        }
        case CheckpointFormat::torch_dcp: plan_dcp(folder, options, report); break;
        case CheckpointFormat::torch_dcp_hf: {
            DcpHfLayout layout = read_dcp_hf(folder);
            const DcpTilingSource tiling{
                .described = dir.string(), .from_headers = true, .files_left_out = !layout.problems.empty()};
            report.problems = std::move(layout.problems);
            plan_dcp_layout(folder, layout.meta, tiling, options, report);
            break;
        }
        case CheckpointFormat::deepspeed:
        case CheckpointFormat::megatron: {
            // A step saved as DCP (Megatron's torch_dist or torch_dcp): its tensors are the DCP
            // layout's (common.pt beside it holds the state that is not sharded; its .pt name
            // must not send the folder to the torch.save reader).
            if (folder.has(".metadata")) {
                plan_dcp(folder, options, report);
                break;
            }
            const VerifyReport listed = detected.format == CheckpointFormat::deepspeed
                ? verify_deepspeed(folder, VerifyOptions{}, false)
                : verify_megatron(folder, VerifyOptions{}, false);
            // A rank file the layout implies but that is not there is said as verify says it: the
            // tensors read from the ranks present lack its slices (a tensor-parallel half would
            // pass for the whole). ZeRO's optimizer files are the ZeRO assembly's to judge.
            // (Megatron's distrib_optim.pt holds optimizer state alone: a checkpoint stripped of it
            // for inference has every weight.)
            for (const Problem& problem : listed.problems)
                if (problem.kind == ProblemKind::missing_shard && !problem.path.empty() &&
                    !problem.path.ends_with("_optim_states.pt") && !problem.path.ends_with("distrib_optim.pt"))
                    report.problems.push_back(problem);
            const std::vector<TorchFile> files_of = torch_files_of(listed);
            if (files_of.empty())
                throw Error(ProblemKind::invalid_argument,
                            path.string() + ": stats found no torch.save files to read in this " + report.format +
                                " checkpoint" + (listed.problems.empty() ? "" : ": " + listed.problems[0].message),
                            path.string());
            if (detected.format == CheckpointFormat::deepspeed) {
                // A universal checkpoint's parameters are its zero/ files; the engine's files
                // beside them hold the 16-bit module copies.
                std::vector<TorchFile> engine, universal;
                for (const TorchFile& f : files_of)
                    (f.file.starts_with("zero/") ? universal : engine).push_back(f);
                std::vector<TorchArchive> archives;
                plan_torch(folder, engine, options, report, &archives, saved_torch_files(listed));
                if (universal.empty())
                    assemble_zero(archives, options, report);
                else
                    plan_universal(folder, universal, archives, options, report);
            } else {
                plan_torch(folder, files_of, options, report, nullptr, saved_torch_files(listed));
            }
            break;
        }
        default:
            throw Error(ProblemKind::invalid_argument,
                        path.string() + ": not a checkpoint stats can read (" + detected.reason +
                            "); it reads ShardScope, safetensors, torch.save, DCP, DeepSpeed and Megatron checkpoints",
                        path.string());
        }
    }
    return report.dir;
}

} // namespace shardscope::inspect
