#pragma once
// Internal to core/inspect: how each format's tensors are laid out in files (layout.cpp), for
// content.cpp to read.

#include "core/checkpoint/verify.h"
#include "core/foreign/dcp.h"
#include "core/foreign/torch_archive.h"
#include "core/inspect/content.h"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {
class IndexCheck;
}

namespace shardscope::inspect {

// A torch.save file of a checkpoint: relative to its directory, and the rank it belongs to.
struct TorchFile {
    std::string file; // relative to the checkpoint directory
    int rank = -1;
};

// True when no --tensor glob is given or `name` matches one of them.
bool selected(const ContentOptions& options, const std::string& name);

// A tensor the files hold whose values are not read (a dtype statistics do not cover): one of the
// report's warnings, and what convert would leave out and diff cannot compare.
inline void leave_out(ContentReport& report, Problem p)
{
    report.left_out.push_back(p);
    report.warnings.push_back(std::move(p));
}

// The torch-based layouts (torch_layout.cpp): torch.save archives, with tensors of the same name
// in files that differ only in a data- or tensor-parallel rank merged as parts; DCP chunks; the
// .pt files of a DeepSpeed or Megatron listing (its directory into `dir`).
// `archives`, when given, receives every file's tensors as read (selected by the globs or not) and
// what DeepSpeed saved beside them, for assemble_zero.
struct TorchArchive {
    TorchFile file;
    struct Tensor {
        ElementType type = ElementType::F32;
        std::vector<uint64_t> shape;
        TensorPart part; // the whole tensor, a run of its storage
    };
    std::map<std::string, Tensor> tensors; // by name in the archive
    DeepSpeedZeroFields zero;
};
// `saved`, when given, names every file the checkpoint should have (a missing one too): the
// tensor-parallel ranks and pipeline stages are counted from it, so that one rank's slice of a
// checkpoint that lost the others is not taken for the tensor.
// `check`, when given (of pytorch_model.bin.index.json), decides which file a tensor is read from.
void plan_torch(const storage::Folder& folder, const std::vector<TorchFile>& files, const ContentOptions& options,
                ContentReport& report, std::vector<TorchArchive>* archives = nullptr,
                const std::vector<std::string>& saved = {}, IndexCheck* check = nullptr);
// DeepSpeed ZeRO: the model as zero_to_fp32 puts it together, appended to report.tensors (each
// TensorContent::assembled): buffers and frozen parameters from the model file(s), every trained
// parameter gathered from the ranks' flat fp32 partitions, aliases of shared parameters. A folder
// that is no ZeRO checkpoint adds nothing; one that cannot be assembled says why in a warning.
void assemble_zero(const std::vector<TorchArchive>& archives, const ContentOptions& options, ContentReport& report);
// The tensor-parallel rank in a file name: Megatron's mp_rank_TT[_PPP] folders, DeepSpeed's
// mp_rank_TT files and its pipeline layer files' -model_TT-; -1 when it has none.
int tensor_parallel_rank(std::string_view file);
// Megatron's tensor-parallel slices of `tensor` (a part per rank's file, `shapes` their stored
// shapes in the same order, `ranks` the tensor-parallel ranks whose files hold its group) as the
// tensor the model has (megatron_parallel.cpp says by which rule): boxes of the whole tensor, or
// one part for a tensor every rank holds whole, when `same_values` finds the copies equal.
// `stored_shape` gives another tensor's stored shape in the same files (whether an MLP is gated);
// `old_qkv_order`: the files were saved before Megatron's checkpoint_version 2.0 (QKV not joined).
// False, and nothing changed, when no rule covers the tensor, a rank lacks it, or its slices do
// not fit the rule.
using StoredShape = std::function<std::optional<std::vector<uint64_t>>(const std::string& name)>;
using SameValues = std::function<bool(const std::vector<TensorPart>& copies)>;
bool join_tensor_parallel(TensorContent& tensor, std::vector<std::vector<uint64_t>> shapes, int ranks,
                          bool old_qkv_order, const StoredShape& stored_shape, const SameValues& same_values);
// The pipeline stage of plan_torch's slice group of Megatron's per-rank folders
// ("mp_rank_*_SSS/..."), or -1.
int pipeline_stage(std::string_view group);
// Megatron's pipeline stages (mp_rank_TT_SSS folders) number their transformer layers from 0 each,
// and with a virtual pipeline save each model chunk c as "model<c>.". Given (slice group, name) of
// every tensor the files hold and the stages of the files, the model's name of each:
// "model.<stack>.layers.i." of chunk c on stage s becomes i plus the layers of that stack (the
// path before ".layers.": a decoder, an encoder, a vision tower) Megatron places before it (every
// chunk before c on all stages, then chunk c of the stages before s; counted, not assumed even)
// and "model<c>." becomes "model.". The names as saved when the files are no Megatron stages, a
// stage or chunk holds nothing (its file missing or unreadable), a stage does not number a stack's
// layers 0 .. k-1, or a folder other than the first stage's holds the input embedding
// (expert-parallel ranks' mp_rank_TT_EEE folders).
using LayerNumbering = std::function<std::string(const std::string& group, const std::string& name)>;
LayerNumbering number_stage_layers(const std::vector<std::pair<std::string, std::string>>& tensors,
                                   const std::set<int>& stages);
void plan_dcp(const storage::Folder& folder, const ContentOptions& options, ContentReport& report);
// The same for a layout already read (`tiling` says where, for messages about it): .metadata's,
// or the one torch's Hugging Face storage shards describe. A tensor whose chunks do not tile it
// (check_dcp_tiling) is refused in that problem and not read.
void plan_dcp_layout(const storage::Folder& folder, const DcpMetadata& meta, const DcpTilingSource& tiling,
                     const ContentOptions& options, ContentReport& report);
std::vector<TorchFile> torch_files_of(const VerifyReport& listed);
// Every .pt file that listing names, missing ones included.
std::vector<std::string> saved_torch_files(const VerifyReport& listed);
// DeepSpeed's universal checkpoint: `files` are its zero/<parameter>/<state>.pt files, each a
// torch.save of {"param": tensor, ...}; every fp32.pt becomes the parameter, assembled, and every
// exp_avg.pt / exp_avg_sq.pt its moment (TensorContent::state), as assemble_zero names them. The
// rest of the model comes from the engine's model files (`engine`, plan_torch's archives): each
// `module.<name>` without a zero/ folder (a buffer, a frozen parameter) as stored, and an alias of
// a shared parameter (shared_params) as the parameter it shares.
void plan_universal(const storage::Folder& folder, const std::vector<TorchFile>& files,
                    const std::vector<TorchArchive>& engine, const ContentOptions& options, ContentReport& report);

// Detects the format at `path` and fills report.format and report.tensors (with their parts; no
// values read yet; a native param tensor's master and flat_offset). Returns the directory the
// parts' files are relative to. Throws Error for a path or format that cannot be read; problems
// found on the way (a missing file, a bad archive) go into report.problems.
std::filesystem::path lay_out_tensors(const storage::Location& path, const ContentOptions& options,
                                      ContentReport& report);

} // namespace shardscope::inspect
