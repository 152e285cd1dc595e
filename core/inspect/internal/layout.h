#pragma once
// Internal to core/inspect: how each format's tensors are laid out in files (layout.cpp), for
// content.cpp to read.

#include "core/inspect/content.h"

#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::inspect {

// Where rank r's param and master lie, for the param/master rounding check.
struct RankVectors {
    int rank = -1;
    std::string file;
    ElementType param_type = ElementType::BF16;
    uint64_t param_offset = 0, master_offset = 0, numel = 0, flat_offset = 0;
};

// Detects the format at `path` and fills report.format and report.tensors (with their parts; no
// values read yet), and `ranks` for the native param/master check. Returns the directory the
// parts' files are relative to. Throws Error for a path or format that cannot be read; problems
// found on the way (a missing file, a bad archive) go into report.problems.
std::filesystem::path lay_out_tensors(const std::filesystem::path& path, const ContentOptions& options,
                                      ContentReport& report, std::vector<RankVectors>& ranks);

} // namespace shardscope::inspect
