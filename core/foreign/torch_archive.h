#pragma once
// torch.save archives (zip: <prefix>/data.pkl, <prefix>/data/<storage key>, <prefix>/version):
// their storages and tensors, listed from data.pkl through the restricted pickle reader, never
// unpickled. DeepSpeed (deepspeed.h) and Megatron (megatron.h) folders are built from them.

#include "core/checkpoint/foreign_summary.h"
#include "core/foreign/io/zip_reader.h"
#include "core/util/error.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

inline constexpr uint64_t kMaxTorchPickleBytes = 256ull << 20; // data.pkl read at most

struct TorchStorage {
    std::string key; // the entry name under <prefix>/data/
    std::string dtype; // from the storage type (FloatStorage -> float32); "" if unknown
    uint64_t numel = 0; // as recorded in data.pkl (0 when unknown)
    uint64_t entry_bytes = 0;
    bool has_entry = false;
};

// Where a tensor's elements are (torch._utils._rebuild_tensor_v2's arguments): element
// (storage_offset + sum of index[d] * stride[d]) of storage `storage_key`.
struct TorchTensorRef {
    std::string name;
    std::string storage_key;
    std::string dtype; // "float32", ... ("" when the storage type is unknown)
    uint64_t storage_offset = 0;
    std::vector<uint64_t> shape;
    std::vector<int64_t> stride;
};

// What DeepSpeed saves beside a ZeRO checkpoint's tensors to put its model back together
// (zero_to_fp32's inputs), read from data.pkl's top-level dict when it has them. A model file
// (mp_rank_XX_model_states.pt, zero_pp_rank_D_mp_rank_XX_model_states.pt) has param_shapes; an
// optimizer file (*_optim_states.pt) has optimizer_state_dict.zero_stage (BF16_Optimizer's, stage 1,
// only single_partition_of_fp32_groups).
struct DeepSpeedZeroFields {
    using Shapes = std::vector<std::pair<std::string, std::vector<uint64_t>>>; // name, shape; in order
    std::vector<Shapes> param_shapes; // one list per optimizer param group
    Shapes frozen_param_shapes;
    std::vector<std::string> buffer_names;
    std::vector<std::pair<std::string, std::string>> shared_params; // alias, the parameter it is
    int64_t zero_stage = 0; // 1 to 3; 0: no ZeRO optimizer state here
    int64_t partition_count = 0; // the data-parallel size the groups are split over (largest of a list)
    bool model_file = false; // param_shapes was there (possibly empty)
    bool truncated = false; // the lists hold more names and dimensions than are read: not usable
};

// What Megatron-LM saves beside a rank's tensors in model_optim_rng.pt: the parallel sizes of its
// `args` (an argparse.Namespace, read as an inert object) and `checkpoint_version`. Unset where
// the file has none (other formats, or a value that is not a whole number).
struct MegatronArgs {
    std::optional<int64_t> tensor_parallel, pipeline_parallel, expert_parallel, virtual_pipeline;
    // Layouts whose folders the three sizes alone do not name: a multimodal encoder's own stages,
    // experts folded into tensor parallelism at another degree.
    std::optional<int64_t> encoder_pipeline, expert_tensor_parallel;
    bool distributed_optimizer = false; // use_distributed_optimizer, and the optimizer saved
    bool invalid = false; // a size that is no positive whole number (below 2^20): none is used
    std::optional<double> checkpoint_version;

    bool sizes() const { return !invalid && (tensor_parallel || pipeline_parallel); }
};

struct TorchArchiveListing {
    std::string prefix; // the archive's top folder, with its trailing slash
    std::vector<TorchStorage> storages; // sorted by key
    std::vector<ForeignTensor> tensors; // from data.pkl: dotted path, dtype, shape, storage key
    std::vector<TorchTensorRef> refs; // the same tensors, with offset and strides
    uint64_t tensors_total = 0;
    DeepSpeedZeroFields zero;
    MegatronArgs megatron;
    std::vector<Problem> problems; // data.pkl that cannot be read, storages that disagree
};

// Lists storages and tensors of an archive whose directory is already read (entries are not
// CRC-checked here). `display_path` names the file in problems.
TorchArchiveListing list_torch_archive(const ZipReadAt& read, uint64_t file_size, const ZipDirectory& directory,
                                       const std::string& display_path);
// The same over bytes in memory (tests, fuzzing); throws Error(invalid_archive) on a bad zip.
TorchArchiveListing list_torch_archive(std::string_view file, const std::string& display_path = "<archive>");

} // namespace shardscope
