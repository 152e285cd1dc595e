#include "core/inspect/diff.h"
#include "core/inspect/internal/dequantize.h"
#include "core/inspect/internal/tensor_reader.h"

#include "core/checkpoint/verify_json.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

namespace shardscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kStretchElements = uint64_t(1) << 22; // one work item: spreads big tensors over threads
constexpr std::size_t kBlockElements = 32768; // read and compared per step, each side

struct Item {
    std::size_t tensor = 0;
    uint64_t first = 0, count = 0;
};

bool comparable(DiffStatus s)
{
    return s == DiffStatus::identical || s == DiffStatus::dtype_changed;
}

std::vector<Item> items_of(const DiffReport& report)
{
    std::vector<Item> items;
    for (std::size_t t = 0; t < report.tensors.size(); ++t)
        if (comparable(report.tensors[t].status))
            for (uint64_t at = 0; at < report.tensors[t].numel; at += kStretchElements)
                items.push_back({t, at, std::min(kStretchElements, report.tensors[t].numel - at)});
    return items;
}

// Sum of squares of the finite values, four independent sums (the compiler may not reorder one).
double finite_squares(const double* a, std::size_t n)
{
    double sums[4] = {};
    for (std::size_t i = 0; i < n; ++i) {
        const double x = std::isfinite(a[i]) ? a[i] : 0.0;
        sums[i % 4] += x * x;
    }
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

// Compares one block of decoded values (and, for the bitwise test, their stored bytes).
void compare(const double* a, const double* b, const std::byte* raw_a, const std::byte* raw_b, std::size_t size,
             std::size_t n, uint64_t first, const DiffOptions& options, bool bytes, DiffSums& sums)
{
    const double atol = options.atol.value_or(0), rtol = options.rtol.value_or(0);
    for (std::size_t i = 0; i < n; ++i) {
        const double x = a[i], y = b[i];
        bool same;
        if (bytes)
            same = std::memcmp(raw_a + i * size, raw_b + i * size, size) == 0;
        else if (std::isnan(x) || std::isnan(y))
            same = std::isnan(x) && std::isnan(y);
        else if (std::isinf(x) || std::isinf(y))
            same = x == y;
        else
            same = std::abs(x - y) <= atol + rtol * std::abs(y);
        if (std::isfinite(x) && std::isfinite(y)) {
            const double d = x - y;
            sums.diff_squares += d * d;
            sums.a_squares += x * x;
            sums.max_abs_diff = std::max(sums.max_abs_diff, std::abs(d));
        }
        if (same)
            continue;
        if (sums.changed++ == 0)
            sums.first_changed = first + i;
        sums.nonfinite_changed += !std::isfinite(x) || !std::isfinite(y);
    }
}

DiffSums run_item(const DiffReport& report, const Item& item, std::atomic<uint64_t>& done, uint64_t total)
{
    const TensorDiff& diff = report.tensors[item.tensor];
    const TensorContent& ta = report.a.tensors[*diff.a];
    const TensorContent& tb = report.b.tensors[*diff.b];
    inspect::TensorReader read_a(*report.a.folder, ta), read_b(*report.b.folder, tb);
    const std::size_t size_a = element_size(ta.type), size_b = element_size(tb.type);
    // Bitwise: the stored bytes decide (a -0 is not a +0, NaN payloads count) when the types agree;
    // a block-quantized FP8 weight's bytes are not its values (the scales may differ), so those
    // are compared as dequantized values, equal when exactly equal.
    const bool dequantized = ta.scale >= 0 || tb.scale >= 0;
    const bool bytes = report.options.bitwise() && ta.type == tb.type && !dequantized;
    std::vector<std::byte> raw_a(kBlockElements * size_a), raw_b(kBlockElements * size_b);
    std::vector<double> va(kBlockElements), vb(kBlockElements);
    DiffSums sums;
    for (uint64_t at = item.first; at < item.first + item.count; at += kBlockElements) {
        if (report.options.cancel && report.options.cancel->load(std::memory_order_relaxed))
            break;
        const std::size_t n =
            static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, item.first + item.count - at));
        if ((sums.problem = read_a.read(at, n, raw_a.data())) || (sums.problem = read_b.read(at, n, raw_b.data())))
            break;
        decode_elements(ta.type, raw_a.data(), n, va.data());
        if (ta.scale >= 0)
            inspect::dequantize_row_major(ta, at, va.data(), n);
        if (bytes && std::memcmp(raw_a.data(), raw_b.data(), n * size_a) == 0) {
            sums.a_squares += finite_squares(va.data(), n); // the usual case: nothing else to count
        } else {
            decode_elements(tb.type, raw_b.data(), n, vb.data());
            if (tb.scale >= 0)
                inspect::dequantize_row_major(tb, at, vb.data(), n);
            compare(va.data(), vb.data(), raw_a.data(), raw_b.data(), size_a, n, at, report.options, bytes, sums);
        }
        const uint64_t now = done += n * (size_a + size_b);
        if (report.options.progress)
            report.options.progress(now, total);
    }
    return sums;
}

json optional_number(const std::optional<double>& value)
{
    return value ? json(*value) : json(nullptr);
}

uint64_t bits_of(double value)
{
    return std::bit_cast<uint64_t>(value);
}

} // namespace

std::string_view to_string(DiffStatus status)
{
    constexpr std::string_view names[] = {"identical",     "changed",       "only_in_a", "only_in_b",
                                          "shape_changed", "dtype_changed", "unreadable"};
    return names[static_cast<int>(status)];
}

void DiffSums::merge(const DiffSums& later)
{
    if (!first_changed)
        first_changed = later.first_changed;
    changed += later.changed;
    nonfinite_changed += later.nonfinite_changed;
    max_abs_diff = std::max(max_abs_diff, later.max_abs_diff);
    diff_squares += later.diff_squares;
    a_squares += later.a_squares;
    if (!problem)
        problem = later.problem;
}

std::optional<double> TensorDiff::rel_l2() const
{
    if (sums.diff_squares == 0)
        return 0.0;
    if (sums.a_squares == 0)
        return std::nullopt;
    return std::sqrt(sums.diff_squares) / std::sqrt(sums.a_squares);
}

const TensorDiff* largest_change(const DiffReport& report)
{
    const TensorDiff* largest = nullptr;
    for (const TensorDiff& t : report.tensors)
        if ((t.status == DiffStatus::changed || t.status == DiffStatus::dtype_changed) &&
            (!largest || t.rel_l2().value_or(INFINITY) > largest->rel_l2().value_or(INFINITY)))
            largest = &t;
    return largest;
}

bool DiffReport::identical() const
{
    return !cancelled && problems.empty() && std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& t) {
        return t.status == DiffStatus::identical;
    });
}

DiffReport plan_diff(const storage::Location& a, const storage::Location& b, const DiffOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    DiffReport report;
    report.options = options;
    report.path_a = storage::to_string(a);
    report.path_b = storage::to_string(b);
    ContentOptions content;
    content.tensor_globs = options.tensor_globs;
    content.raw_fp8 = options.raw_fp8;
    report.a = plan_content(a, content);
    report.b = plan_content(b, content);
    // A tensor a side holds but whose values are not read is not compared: the two are not
    // known to be identical.
    for (ContentReport* side : {&report.a, &report.b})
        for (const auto* found : {&side->problems, &side->left_out})
            for (const Problem& p : *found)
                if (report.problems.size() < 100)
                    report.problems.push_back(p);
    // A native checkpoint beside one without optimizer states: the model is its "param" state.
    // (A DeepSpeed ZeRO checkpoint's assembled moments have states too, but its model has none.)
    auto has_states = [](const ContentReport& r) {
        return std::any_of(r.tensors.begin(), r.tensors.end(),
                           [](const TensorContent& t) { return t.state == "param"; });
    };
    const bool states_a = has_states(report.a), states_b = has_states(report.b);
    report.states_as_param = states_a != states_b;
    auto key = [&](const TensorContent& t, bool states) {
        return std::pair(t.name, report.states_as_param && !states ? std::string("param") : t.state);
    };
    // Then only the model is compared: the native side's param state, the other side's tensors
    // without a state (a ZeRO checkpoint's assembled moments have one).
    auto kept = [&](const TensorContent& t, bool states) {
        return !report.states_as_param || (states ? t.state == "param" : t.state.empty());
    };
    std::map<std::pair<std::string, std::string>, std::size_t> in_b;
    for (std::size_t i = 0; i < report.b.tensors.size(); ++i)
        if (kept(report.b.tensors[i], states_b))
            in_b.emplace(key(report.b.tensors[i], states_b), i);
    std::vector<bool> paired(report.b.tensors.size());
    auto numel_of = [](const TensorContent& t) {
        uint64_t n = 0;
        return checked_volume(t.shape, n) ? n : 0;
    };
    // A shape its parts do not fill (a forged size, a rank file that could not be read) is not
    // compared: no work items for elements that are nowhere, and a problem saying so.
    auto covered = [&](const TensorContent& t, const ContentReport& side) {
        uint64_t n = 0, parts = 0;
        for (const TensorPart& p : t.parts)
            parts += p.numel; // bounded by the files' sizes: no overflow
        if (checked_volume(t.shape, n) && parts == n)
            return true;
        if (report.problems.size() < 100)
            report.problems.push_back(
                {.kind = ProblemKind::missing_tensor,
                 .message = side.dir.string() + ": tensor '" + printable(t.name) + "'" +
                     (t.state.empty() ? "" : " (" + t.state + ")") + ": its parts hold " + std::to_string(parts) +
                     " elements, its shape " + join_dims(t.shape) + " needs " +
                     (checked_volume(t.shape, n) ? std::to_string(n) : std::string("more than 2^64"))});
        return false;
    };
    for (std::size_t i = 0; i < report.a.tensors.size(); ++i) {
        const TensorContent& ta = report.a.tensors[i];
        if (!kept(ta, states_a))
            continue;
        const auto [name, state] = key(ta, states_a);
        TensorDiff diff{.name = name, .state = state, .a = i, .numel = numel_of(ta)};
        const auto it = in_b.find({name, state});
        if (it == in_b.end()) {
            diff.status = DiffStatus::only_in_a;
        } else {
            paired[it->second] = true;
            diff.b = it->second;
            const TensorContent& tb = report.b.tensors[it->second];
            diff.status = ta.shape != tb.shape ? DiffStatus::shape_changed
                : ta.type != tb.type           ? DiffStatus::dtype_changed
                                               : DiffStatus::identical;
            if (diff.status != DiffStatus::shape_changed && (!covered(ta, report.a) || !covered(tb, report.b)))
                diff.status = DiffStatus::unreadable;
        }
        report.tensors.push_back(std::move(diff));
    }
    for (std::size_t i = 0; i < report.b.tensors.size(); ++i)
        if (!paired[i] && kept(report.b.tensors[i], states_b)) {
            const auto [name, state] = key(report.b.tensors[i], states_b);
            report.tensors.push_back({.name = name,
                                      .state = state,
                                      .status = DiffStatus::only_in_b,
                                      .b = i,
                                      .numel = numel_of(report.b.tensors[i])});
        }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

std::size_t diff_work_items(const DiffReport& report)
{
    return items_of(report).size();
}

std::vector<DiffSums> run_diff(DiffReport& report, const ItemFilter& mine)
{
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Item> items = items_of(report);
    std::vector<std::size_t> chosen;
    uint64_t total = 0;
    for (std::size_t i = 0; i < items.size(); ++i)
        if (!mine || mine(i)) {
            chosen.push_back(i);
            const TensorDiff& d = report.tensors[items[i].tensor];
            total += items[i].count *
                (element_size(report.a.tensors[*d.a].type) + element_size(report.b.tensors[*d.b].type));
        }
    std::vector<DiffSums> sums(items.size());
    std::atomic<uint64_t> done{0};
    parallel_for(chosen.size(), report.options.threads,
                 [&](std::size_t c) { sums[chosen[c]] = run_item(report, items[chosen[c]], done, total); });
    report.cancelled = report.options.cancel && report.options.cancel->load();
    report.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return sums;
}

void finish_diff(DiffReport& report, const std::vector<DiffSums>& item_sums)
{
    const std::vector<Item> items = items_of(report);
    for (std::size_t i = 0; i < items.size() && i < item_sums.size(); ++i)
        report.tensors[items[i].tensor].sums.merge(item_sums[i]);
    for (TensorDiff& t : report.tensors) {
        if (!comparable(t.status))
            continue;
        if (t.sums.problem) {
            t.status = DiffStatus::unreadable;
            if (report.problems.size() < 100)
                report.problems.push_back(*t.sums.problem);
        } else if (t.sums.changed > 0 && t.status == DiffStatus::identical) {
            t.status = DiffStatus::changed;
        }
    }
}

DiffReport diff_checkpoints(const storage::Location& a, const storage::Location& b, const DiffOptions& options)
{
    DiffReport report = plan_diff(a, b, options);
    const std::vector<DiffSums> sums = run_diff(report);
    finish_diff(report, sums);
    return report;
}

json diff_report_json(const DiffReport& report)
{
    json tensors = json::array();
    std::map<DiffStatus, uint64_t> counts;
    for (const TensorDiff& t : report.tensors) {
        ++counts[t.status];
        const TensorContent* ta = t.a ? &report.a.tensors[*t.a] : nullptr;
        const TensorContent* tb = t.b ? &report.b.tensors[*t.b] : nullptr;
        json entry = {{"name", t.name}, {"status", std::string(to_string(t.status))}};
        if (!t.state.empty())
            entry["state"] = t.state;
        entry["dtype_a"] = ta ? json(std::string(to_string(ta->type))) : json(nullptr);
        entry["dtype_b"] = tb ? json(std::string(to_string(tb->type))) : json(nullptr);
        entry["shape_a"] = ta ? json(ta->shape) : json(nullptr);
        entry["shape_b"] = tb ? json(tb->shape) : json(nullptr);
        if (ta && ta->scale >= 0)
            entry["dequantized_by_a"] = report.a.tensors[static_cast<std::size_t>(ta->scale)].name;
        if (tb && tb->scale >= 0)
            entry["dequantized_by_b"] = report.b.tensors[static_cast<std::size_t>(tb->scale)].name;
        const bool compared = t.status == DiffStatus::identical || t.status == DiffStatus::changed ||
            t.status == DiffStatus::dtype_changed;
        entry["numel"] = t.numel;
        entry["changed_elements"] = compared ? json(t.sums.changed) : json(nullptr);
        entry["nonfinite_changed"] = compared ? json(t.sums.nonfinite_changed) : json(nullptr);
        entry["first_changed_element"] = compared && t.sums.first_changed ? json(*t.sums.first_changed) : json(nullptr);
        entry["max_abs_diff"] = compared ? json(t.sums.max_abs_diff) : json(nullptr);
        entry["rel_l2"] = compared ? optional_number(t.rel_l2()) : json(nullptr);
        tensors.push_back(std::move(entry));
    }
    json summary = {{"tensors", report.tensors.size()}};
    for (int s = 0; s <= static_cast<int>(DiffStatus::unreadable); ++s)
        summary[std::string(to_string(DiffStatus(s)))] = counts[DiffStatus(s)];
    const TensorDiff* largest = largest_change(report);
    summary["largest_rel_l2"] = largest
        ? json{{"name", largest->name}, {"state", largest->state}, {"rel_l2", optional_number(largest->rel_l2())}}
        : json(nullptr);
    json problems = json::array();
    for (const Problem& p : report.problems)
        problems.push_back(problem_json(p));
    auto side = [](const fs::path& path, const ContentReport& r) {
        return json{{"path", path.string()}, {"format", r.format}};
    };
    return {{"ok", report.identical()},
            {"a", side(report.path_a, report.a)},
            {"b", side(report.path_b, report.b)},
            {"bitwise", report.options.bitwise()},
            {"atol", optional_number(report.options.atol)},
            {"rtol", optional_number(report.options.rtol)},
            {"states_as_param", report.states_as_param},
            {"tensors", std::move(tensors)},
            {"summary", std::move(summary)},
            {"problems", std::move(problems)},
            {"cancelled", report.cancelled},
            {"seconds", report.seconds}};
}

json diff_sums_json(const DiffSums& s)
{
    json j = {{"changed", s.changed},
              {"nonfinite_changed", s.nonfinite_changed},
              {"first_changed", s.first_changed ? json(*s.first_changed) : json(nullptr)},
              {"doubles", {bits_of(s.max_abs_diff), bits_of(s.diff_squares), bits_of(s.a_squares)}}};
    if (s.problem)
        j["problem"] = problem_wire_json(*s.problem);
    return j;
}

DiffSums diff_sums_from_json(const json& j)
{
    DiffSums s;
    s.changed = j.at("changed").get<uint64_t>();
    s.nonfinite_changed = j.at("nonfinite_changed").get<uint64_t>();
    if (!j.at("first_changed").is_null())
        s.first_changed = j.at("first_changed").get<uint64_t>();
    const json& d = j.at("doubles");
    s.max_abs_diff = std::bit_cast<double>(d.at(0).get<uint64_t>());
    s.diff_squares = std::bit_cast<double>(d.at(1).get<uint64_t>());
    s.a_squares = std::bit_cast<double>(d.at(2).get<uint64_t>());
    if (j.contains("problem"))
        s.problem = problem_from_wire_json(j.at("problem"));
    return s;
}

} // namespace shardscope
