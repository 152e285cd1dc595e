#pragma once
// Shared by the foreign-format verifiers (index, DCP, DeepSpeed, Megatron): running per-file
// checks in parallel with the same callbacks native verification uses, opening every named file
// confined beneath the checkpoint directory, and the summary rows.

#include "core/checkpoint/verify.h"
#include "core/storage/folder.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

#include <functional>
#include <string>
#include <vector>

namespace shardscope::foreign {

// The per-file body: `file` is opened (status ok) when the body is called; it sets check.status
// (ok / invalid / ...) and appends problems naming the file.
using FileBody = std::function<void(std::size_t index, storage::OpenedObject& file, ShardCheck& check,
                                    std::vector<Problem>& problems)>;

// For every report.shards[i] (path filled in): opens it in `folder`, records size, runs
// `body`, reports progress (the file's size when done, or the body's own progress through
// `advance`), and appends problems in file order. Missing / symlinked / non-regular files get
// their status and a problem of kind `missing_kind` / path_outside_checkpoint / unreadable.
void check_files(const storage::Folder& folder, VerifyReport& report, const VerifyOptions& options,
                 const FileBody& body, ProblemKind missing_kind = ProblemKind::missing_file);

// Bytes-done reporting for bodies that read a file in chunks (CRC checks): call from the body.
struct Progress {
    std::function<void(uint64_t bytes_of_this_file)> advance;
};
// The Progress of the file being checked on this thread (valid only inside a FileBody).
Progress& current_progress();

bool cancelled(const VerifyOptions& options);

// How problems name a checked file: "rank R: <dir>/<path>", or the path alone without a rank.
std::string shown_file(const std::filesystem::path& dir, const ShardCheck& check);

void add_row(ForeignSummary& summary, std::string key, std::string value);

// A foreign report to fill: its format, the directory checked, and a summary whose first row is
// "format" = `format_row` (the format's name, or a longer description of it).
VerifyReport new_report(const std::string& format, const std::filesystem::path& dir, const std::string& format_row);

// How many tensors the summary lists (the count is kept in tensors_total).
inline constexpr std::size_t kMaxListedTensors = 100000;

} // namespace shardscope::foreign
