#pragma once
// Internal to core/foreign: the files a Megatron-LM torch_dist iteration has beside its DCP
// layout (megatron_dist.cpp), checked after verify_dcp by verify_megatron.

#include "core/checkpoint/verify.h"
#include "core/foreign/megatron.h"

#include <optional>

namespace shardscope::foreign {

// common.pt (torch.save of the state that is not sharded): CRC of every entry unless
// `check_data` is false, as every torch archive is checked. Appended to report.shards; a
// missing common.pt is a problem when `required` (metadata.json names common_backend "torch").
void check_common_pt(const storage::Folder& listed, VerifyReport& report, const VerifyOptions& options, bool check_data,
                     bool required);

// integrity.json, when the folder has one: every listed file's SHA-256, in parallel on the
// verify threads (with `check_data`; without, the list is only parsed). A digest that differs is
// hash_mismatch naming the file, a listed file that is absent missing_file, a name leaving the
// folder path_outside_checkpoint; files it does not list are not its concern. The files' checks
// are merged into report.shards (a DCP data file keeps its row, its status the worse of the two).
void check_integrity_json(const storage::Folder& listed, VerifyReport& report, const VerifyOptions& options,
                          bool check_data);

} // namespace shardscope::foreign
