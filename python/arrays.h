#pragma once
// Per-rank state (and the manifest around it) between Python and the core, without copies.
//
// In: a rank dict {"rank", "offset", "param", "master", "exp_avg", "exp_avg_sq", "dtype"?} whose
// arrays expose the buffer protocol (numpy arrays; a torch CPU tensor through .numpy(), bf16/fp16
// ones as raw bits: t.view(torch.int16).numpy()). The core writes straight from those buffers,
// which stay exported (so they cannot be resized or freed) until the call returns.
// Out: the loaded vectors are moved into numpy arrays that own them.

#include "core/checkpoint/state.h"

#include <optional>
#include <pybind11/pybind11.h>
#include <string>
#include <vector>

namespace shardscope::python {

namespace py = pybind11;

// A rank's view and the buffer exports that keep its memory in place. Destroy with the GIL held.
struct HeldRank {
    RankStateView view;
    std::vector<py::buffer_info> buffers;
};

// "bf16", "BF16", "f16", "fp16", ... (the manifest parser's spellings).
ParamDtype dtype_from_python(py::handle text);

// One rank dict. A missing "rank" or "offset" is refused unless a default is given (save_sharded
// numbers ranks by position and places them back to back); a "dtype" key must agree with `dtype`
// (without one, as for digests, the rank's own dtype is taken). Every check (types, 1-D,
// contiguity, equal lengths) happens here, before anything is written.
HeldRank rank_from_python(py::handle rank, std::optional<ParamDtype> dtype, std::optional<int> default_rank,
                          std::optional<uint64_t> default_offset);
std::vector<HeldRank> ranks_from_python(py::handle ranks, std::optional<ParamDtype> dtype);

// {"rank", "offset", "dtype", "param" (uint16 bits), "master", "exp_avg", "exp_avg_sq" (float32)}
py::dict rank_to_python(RankState&& state);
py::list ranks_to_python(std::vector<RankState>&& ranks);

// A tensor layout list ([{"name", "offset", "numel", "shape"?}]) read by the manifest parser
// itself against the flat vector's length, so a save writes exactly what a load accepts.
std::vector<TensorInfo> tensors_from_python(py::handle tensors, uint64_t numel_total);

// The manifest as manifest.json holds it (serialize_manifest), as a dict.
py::object manifest_to_python(const Manifest& manifest);

} // namespace shardscope::python
