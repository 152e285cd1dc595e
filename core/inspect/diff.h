#pragma once
// What changed between two checkpoints (shardctl diff, the app's Compare with…, the report's
// diff section; docs/shardctl.md, "diff"). Tensors are paired by name (and state) across any two
// formats and world sizes, and compared element by element in the tensor's own row-major order,
// both sides streamed in aligned pieces: never a whole tensor in memory.

#include "core/inspect/content.h"

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct DiffOptions {
    // An element is unchanged when |a - b| <= atol + rtol * |b| (numpy's isclose; NaN equals
    // NaN, an infinity only itself). With neither given, unchanged means bitwise equal.
    std::optional<double> atol, rtol;
    std::vector<std::string> tensor_globs;
    int threads = 0;
    const std::atomic<bool>* cancel = nullptr;
    ProgressFn progress; // bytes read so far (both sides), of all
    bool raw_fp8 = false; // as ContentOptions: compare FP8 weights' stored values, not dequantized

    bool bitwise() const { return !atol && !rtol; }
};

enum class DiffStatus { identical, changed, only_in_a, only_in_b, shape_changed, dtype_changed, unreadable };
std::string_view to_string(DiffStatus status);

// The comparison of a stretch of one tensor; stretches merge exactly (in order).
struct DiffSums {
    uint64_t changed = 0;
    uint64_t nonfinite_changed = 0; // of those, pairs where a side is NaN or Inf (not in the sums below)
    std::optional<uint64_t> first_changed; // element index
    double max_abs_diff = 0; // over elements finite on both sides
    double diff_squares = 0, a_squares = 0; // sum (a-b)^2 and sum a^2 over the same elements
    std::optional<Problem> problem; // what stopped the reading

    void merge(const DiffSums& later);
};

struct TensorDiff {
    std::string name, state;
    DiffStatus status = DiffStatus::identical;
    std::optional<std::size_t> a, b; // indices into DiffReport::a.tensors / b.tensors
    uint64_t numel = 0;
    DiffSums sums;

    std::optional<double> rel_l2() const; // ||a - b|| / ||a||; nullopt when ||a|| = 0 < ||a - b||
};

struct DiffReport;
// The changed (or dtype-changed) tensor with the largest relative change, an infinite one first;
// null when nothing changed. The one answer to "what moved most" for the CLI, app and report.
const TensorDiff* largest_change(const DiffReport& report);

struct DiffReport {
    std::filesystem::path path_a, path_b; // as given
    ContentReport a, b; // each side as laid out (tensors and parts; no statistics)
    std::vector<TensorDiff> tensors; // A's order, then what only B has in B's order
    bool states_as_param = false; // one side is native, the other has no states: its "param" only
    DiffOptions options;
    std::vector<Problem> problems; // data that could not be read on either side
    bool cancelled = false;
    double seconds = 0;

    bool identical() const; // every tensor identical and nothing unreadable
};

// diff in three steps, as inspect_content (content.h), for shardctl-mpi: plan_diff lays out both
// sides and pairs their tensors; the work items are aligned stretches of the paired tensors;
// run_diff compares the items `mine` accepts (all when it is empty); finish_diff merges them.
DiffReport plan_diff(const storage::Location& a, const storage::Location& b, const DiffOptions& options);
std::size_t diff_work_items(const DiffReport& report);
std::vector<DiffSums> run_diff(DiffReport& report, const ItemFilter& mine = {});
void finish_diff(DiffReport& report, const std::vector<DiffSums>& items);

DiffReport diff_checkpoints(const storage::Location& a, const storage::Location& b, const DiffOptions& options = {});

// The diff --json object: ok, a, b, atol, rtol, tensors[], summary, problems[], cancelled, seconds.
nlohmann::json diff_report_json(const DiffReport& report);
// One item's sums between processes (doubles as their bits).
nlohmann::json diff_sums_json(const DiffSums& sums);
DiffSums diff_sums_from_json(const nlohmann::json& j);

} // namespace shardscope
