#pragma once
// torch.save archives (zip: <prefix>/data.pkl, <prefix>/data/<storage key>, <prefix>/version):
// their storages and tensors, listed from data.pkl through the restricted pickle reader, never
// unpickled. DeepSpeed (deepspeed.h) and Megatron (megatron.h) folders are built from them.

#include "core/checkpoint/foreign_summary.h"
#include "core/foreign/io/zip_reader.h"
#include "core/util/error.h"

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

struct TorchArchiveListing {
    std::string prefix; // the archive's top folder, with its trailing slash
    std::vector<TorchStorage> storages; // sorted by key
    std::vector<ForeignTensor> tensors; // from data.pkl: dotted path, dtype, shape, storage key
    std::vector<TorchTensorRef> refs; // the same tensors, with offset and strides
    uint64_t tensors_total = 0;
    std::vector<Problem> problems; // data.pkl that cannot be read, storages that disagree
};

// Lists storages and tensors of an archive whose directory is already read (entries are not
// CRC-checked here). `display_path` names the file in problems.
TorchArchiveListing list_torch_archive(const ZipReadAt& read, uint64_t file_size, const ZipDirectory& directory,
                                       const std::string& display_path);
// The same over bytes in memory (tests, fuzzing); throws Error(invalid_archive) on a bad zip.
TorchArchiveListing list_torch_archive(std::string_view file, const std::string& display_path = "<archive>");

} // namespace shardscope
