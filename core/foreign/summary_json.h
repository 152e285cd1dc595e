#pragma once
// The tensor list of a foreign summary as JSON text, streamed: `shardctl info --json` of 10^5
// tensors spent more time and memory building nlohmann's DOM of it than reading the checkpoint.
// The text is byte for byte what foreign_summary_json(summary)["tensors"] dumps to with
// dump(indent, ' ', false, error_handler_t::replace) at nesting `depth` (tst_foreign_safetensors
// and tst_foreign_dcp compare the two), so the DOM builder stays the one definition of the keys.

#include "core/checkpoint/foreign_summary.h"

#include <ostream>
#include <vector>

namespace shardscope {

void write_tensors_json(std::ostream& out, const ForeignTensorList& tensors, int indent, int depth);

} // namespace shardscope
