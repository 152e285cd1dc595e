#pragma once
// What the numbers in a checkpoint look like (shardctl stats, the app's Tensors tab, the
// report's content-health section; docs/shardctl.md, "stats"): per tensor the statistics of
// stats.h, whole and per part (a rank's slice or a file), and the health checks a diverged or
// broken run leaves behind. Values are read straight from the files; hashes are verify's business.

#include "core/checkpoint/state.h"
#include "core/inspect/elements.h"
#include "core/inspect/stats.h"
#include "core/storage/folder.h"
#include "core/util/error.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shardscope {

// The elements of a tensor that one file holds: a run of the flattened tensor (most formats),
// a DCP chunk's box, or a strided torch.save view (see below).
struct TensorPart {
    int rank = -1; // the rank whose file holds it, -1 when the format has no ranks
    std::string file; // relative to the checkpoint directory
    uint64_t byte_offset = 0; // of its first element in the file
    uint64_t numel = 0;
    uint64_t first_element = 0; // its place in the whole tensor, flattened
    // Most parts are a run of the flattened tensor stored in order. Two kinds are not:
    // a DCP chunk is a box of the tensor (offsets and sizes per dimension), stored row-major;
    std::vector<uint64_t> box_offsets, box_sizes;
    // a torch.save view stored out of row-major order (a transpose, a slice with a step, an
    // expanded tensor) is stored with these element strides: element (i0, i1, ...) of view_shape
    // is at byte_offset + element size * sum(ik * stride k).
    std::vector<uint64_t> view_shape;
    std::vector<int64_t> view_strides;
    // A DCP item written through torch's ZStandard extension: the file holds zstd frames at
    // [zstd_offset, + zstd_length), and byte_offset counts from the start of what they decompress
    // to (the chunk's torch.save archive), which is read whole into memory.
    uint64_t zstd_offset = 0, zstd_length = 0;
};

// A param part checked against its master part: how many of its parameters are not their master
// weight rounded to the param dtype, and the first of them (an element index within the part).
struct MasterCheck {
    uint64_t mismatches = 0;
    uint64_t first = 0;
};

// A tensor as a format lays it out: what to read for it, and the results once read.
struct TensorContent {
    std::string name;
    std::string state; // native checkpoints: param, master, exp_avg or exp_avg_sq; else ""
    ElementType type = ElementType::F32;
    std::vector<uint64_t> shape;
    std::vector<TensorPart> parts; // in element order
    std::vector<ValueStats> part_stats; // one per part, after scanning
    ValueStats stats; // the whole tensor: the parts merged in order
    // Native param tensors: the index in ContentReport::tensors of the master tensor whose parts
    // match these one for one (same rank, place and size). Each param part is read together with
    // its master part, so the check that params are their masters rounded costs no second read.
    int master = -1;
    uint64_t flat_offset = 0; // native: where the tensor starts in the flat vector
    std::vector<MasterCheck> part_checks; // with a master: one per part, after scanning
    // An FP8 weight stored block-quantized (DeepSeek-V3 style: a partner `<name>_scale_inv`, F32,
    // one scale per 128x128 block): the index in ContentReport::tensors of that scale tensor and
    // its values row-major, read when the tensors were laid out. Its statistics (and diff's
    // values) are then of stored value times scale; -1 when the stored values are read raw.
    int scale = -1;
    std::vector<float> scale_inv;
    // DeepSpeed ZeRO: a tensor of the model put together as zero_to_fp32 does (a parameter gathered
    // from the ranks' flat fp32 partitions, a buffer, a frozen or shared parameter, or with `state`
    // a parameter's Adam moment), named as the engine names it. When a layout has such tensors they
    // are its model (convert writes them).
    bool assembled = false;
    // A flat partition those are read from: its padding holds whatever DeepSpeed left in memory,
    // so its health is the assembled tensors' (no finding of its own).
    bool zero_partition = false;
    // torch.save files that differ in a rank hold a tensor of this name each (tensor-parallel
    // slices no rule of Megatron's layers joins, replicas, ZeRO partitions): laid end to end as one
    // flat tensor, which is what its statistics are of, but not a shape the model has (the files
    // do not say how they split it).
    bool concatenated = false;
};

struct ContentReport {
    std::string format;
    std::filesystem::path dir; // the step directory (or the file's folder) read
    // That folder, listed when the tensors were laid out: every value is read through it.
    std::shared_ptr<const storage::Folder> folder;
    std::vector<TensorContent> tensors;
    std::vector<Problem> problems; // health checks that failed and data that could not be read
    std::vector<Problem> warnings; // all_zero_tensor: worth a look, not a failure
    // Of the warnings, the tensors the files hold whose values are not read (a dtype statistics do
    // not cover): not in `tensors`, so convert would leave them out and diff cannot compare them.
    std::vector<Problem> left_out;
    bool cancelled = false;
    double seconds = 0;
    // A DeepSpeed ZeRO checkpoint whose model could not be put together (TensorContent::assembled):
    // why; empty when it was, or when the checkpoint is no ZeRO checkpoint.
    std::string zero_unassembled;

    bool ok() const { return problems.empty() && !cancelled; }
};

struct ContentOptions {
    std::vector<std::string> tensor_globs; // fnmatch(3) patterns on tensor names; empty: all
    int threads = 0; // 0: hardware threads
    const std::atomic<bool>* cancel = nullptr;
    ProgressFn progress; // bytes read so far, of all
    // FP8 weights with a `_scale_inv` partner are dequantized by it (and a selected weight brings
    // its partner along); true keeps the statistics of the stored FP8 values.
    bool raw_fp8 = false;
};

// inspect_content in three steps, for shardctl-mpi, whose processes each scan a share of the work
// items and send the part statistics to process 0, which merges them in order:
// plan_content lays the tensors out (no values read); the work items are every part in tensor
// order except those of a param's master tensor, which the param's item reads (content_items);
// scan_content reads the items `mine` accepts (all when it is empty) into the parts' statistics
// (and part_checks) and returns the problems found, indexed by item; finish_content merges the
// parts and runs the health checks.
ContentReport plan_content(const storage::Location& path, const ContentOptions& options = {});
struct ContentItem {
    std::size_t tensor = 0, part = 0;
};
std::vector<ContentItem> content_items(const ContentReport& report);
std::size_t content_work_items(const ContentReport& report);
using ItemFilter = std::function<bool(std::size_t item)>;
std::vector<std::optional<Problem>> scan_content(ContentReport& report, const ContentOptions& options,
                                                 const ItemFilter& mine = {});
void finish_content(ContentReport& report, std::vector<std::optional<Problem>> item_problems);

// The statistics as JSON (every field, doubles round-trip exactly) and back, between processes.
nlohmann::json value_stats_json(const ValueStats& stats);
ValueStats value_stats_from_json(const nlohmann::json& j);

// Reads every selected tensor of the checkpoint at `path` (a native step or root, a .safetensors
// file, a folder of them with or without model.safetensors.index.json). Throws Error for a path
// that cannot be used or a format whose tensor data this version cannot read; findings about the
// values go into the report.
ContentReport inspect_content(const storage::Location& path, const ContentOptions& options = {});

// The stats --json object: ok, format, path, tensors[], problems[], warnings[], cancelled, seconds.
nlohmann::json content_report_json(const ContentReport& report);

// What the health checks found in one tensor, once read: the first three are problems of the
// report (a failed check), all_zero a warning. One definition for the report's findings and the
// app's "only tensors with problems".
struct TensorHealth {
    bool nonfinite = false; // NaN or ±Inf
    bool negative_second_moment = false; // an exp_avg_sq tensor holds a negative value
    bool param_master_mismatch = false; // a param that is not its master weight rounded
    bool all_zero = false; // every value is zero
    bool problem() const { return nonfinite || negative_second_moment || param_master_mismatch; }
};
TensorHealth tensor_health(const TensorContent& tensor);

// A tensor whose values were read, in whole or in part, from some of a given set of files.
struct TensorFromFiles {
    std::size_t tensor = 0; // its index in ContentReport::tensors
    std::vector<std::size_t> files; // the files its parts were read from: indices into the set, ascending
    uint64_t numel = 0; // how many of its elements those parts hold
    // Elements no part holds at all: their file could not even be laid out (a truncated or invalid
    // header drops the file's parts), so its figures cover the rest only.
    uint64_t unread = 0;
};

// The tensors of `report` read from any of `files` (paths relative to the checkpoint directory, as
// TensorPart::file and verify's ShardCheck::path) and, when `files` is not empty, those with
// elements no part holds; in tensor order. Given the files that failed verification (failed_files
// in core/report/verdict.h), these are the tensors whose statistics are not the saved values, so
// that the app, the CLI and the reports mark the same ones. Reads nothing.
std::vector<TensorFromFiles> tensors_read_from(const ContentReport& report, const std::vector<std::string>& files);

} // namespace shardscope
