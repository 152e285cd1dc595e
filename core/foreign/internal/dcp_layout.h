#pragma once
// Internal to core/foreign: the part of DCP verification that follows the metadata, shared by the
// two ways a DCP layout is described: a pickled `.metadata` (dcp.cpp) and the DCP_SHARDING_INFO
// of Hugging Face storage's per-rank safetensors files (dcp_hf.cpp).

#include "core/checkpoint/verify.h"
#include "core/foreign/dcp.h"
#include "core/util/fsutil.h"

#include <functional>
#include <string>
#include <vector>

namespace shardscope {

// Where the layout was described, for the problems the description alone shows (a gap in a
// tensor's tiling, a chunk without storage).
struct DcpSource : DcpTilingSource {
    std::function<bool(const std::string& name)> is_data_file; // for "files not referenced"
};

// Checks `meta`'s layout against the folder and adds to `report` (whose summary exists): the
// summary rows and tensor list, the ownership layout, every data file's ranges (and, with
// `check_data`, their contents), the tiling of every tensor.
void verify_dcp_layout(const storage::Folder& listed, const DcpMetadata& meta, const DcpSource& src,
                       VerifyReport& report, const VerifyOptions& options, bool check_data);

// The summary's tensor list of a layout: the tensors and the non-tensor items, in metadata order
// (up to foreign::kMaxListedTensors).
void list_dcp_tensors(const DcpMetadata& meta, ForeignSummary& summary);

// dcp_describe.cpp: what the metadata alone says.
// The summary rows and the tensor list.
void describe_dcp_metadata(const DcpMetadata& meta, uint64_t chunks, std::size_t files, std::size_t ranks,
                           uint64_t data_bytes, const std::vector<std::string>& unreferenced, ForeignSummary& summary);
// The ownership layout: chunks end to end, by rank (see ForeignLayout).
ForeignLayout dcp_ownership_layout(const DcpMetadata& meta);

} // namespace shardscope
