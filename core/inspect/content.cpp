#include "core/inspect/content.h"
#include "core/inspect/internal/layout.h"

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/verify_json.h"
#include "core/util/fsutil.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

namespace shardscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kBlockElements = 16384; // read per step (64 KiB of F32): stays in L2 for the kernel's passes

using inspect::lay_out_tensors;

std::string part_name(const TensorPart& part)
{
    return part.rank >= 0 ? "rank " + std::to_string(part.rank) + " (" + part.file + ")" : part.file;
}

std::string tensor_name(const TensorContent& t)
{
    return "'" + printable(t.name) + "'" + (t.state.empty() ? std::string() : " (" + t.state + ")");
}

// Reads one part block by block into `stats`; false with `problem` set when it cannot be read.
bool scan_part(int dirfd, const fs::path& dir, const TensorContent& tensor, const TensorPart& part,
               const ContentOptions& options, std::atomic<uint64_t>& done, uint64_t total, ValueStats& stats,
               std::optional<Problem>& problem)
{
    const fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, part.file);
    const std::string shown = (dir / part.file).string();
    if (file.status != fsutil::OpenStatus::ok) {
        problem = Problem{ProblemKind::unreadable, part.rank, part.file, shown + ": " + file.reason};
        return false;
    }
    const uint64_t size = element_size(tensor.type);
    uint64_t end = 0;
    if (__builtin_mul_overflow(part.numel, size, &end) || __builtin_add_overflow(end, part.byte_offset, &end) ||
        end > file.size) {
        problem = Problem{ProblemKind::range_outside_file, part.rank, part.file,
                          shown + ": " + tensor_name(tensor) + " runs past the end of the " +
                              std::to_string(file.size) + "-byte file"};
        return false;
    }
    std::vector<std::byte> bytes(kBlockElements * size);
    for (uint64_t at = 0; at < part.numel; at += kBlockElements) {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            return true;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, part.numel - at));
        if (!fsutil::read_exact(file.fd.get(), bytes.data(), n * size, part.byte_offset + at * size)) {
            problem = Problem{ProblemKind::unreadable, part.rank, part.file,
                              shown + ": cannot read " + tensor_name(tensor) + ": " + std::strerror(errno)};
            return false;
        }
        accumulate_elements(tensor.type, bytes.data(), n, stats);
        const uint64_t now = done += n * size;
        if (options.progress)
            options.progress(now, total);
    }
    return true;
}

// How many of `n` parameters are not their master rounded to BF16 (NaN masters aside: NaN has
// many encodings, and nonfinite_values reports them). Branch-free, so it vectorises: this pass
// reads 6 of every 14 bytes of a native checkpoint again.
uint64_t bf16_mismatches(const float* master, const uint16_t* param, std::size_t n)
{
    uint64_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const uint32_t bits = std::bit_cast<uint32_t>(master[i]);
        const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16; // float_to_bf16 for non-NaN
        const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
        count += !nan & (uint16_t(rounded) != param[i]);
    }
    return count;
}

uint64_t f16_mismatches(const float* master, const uint16_t* param, std::size_t n)
{
    uint64_t count = 0;
    for (std::size_t i = 0; i < n; ++i)
        count += !std::isnan(master[i]) && float_to_f16(master[i]) != param[i];
    return count;
}

// Parameters must be their master weights rounded to the parameter dtype (how every mixed-
// precision optimizer step ends); anything else means the two were saved from different steps.
std::optional<Problem> check_param_master(int dirfd, const fs::path& dir, const ParamMasterSlice& r,
                                          const ContentOptions& options)
{
    const fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, r.file);
    if (file.status != fsutil::OpenStatus::ok)
        return std::nullopt; // the scan of the same file reports it
    const std::string shown = "rank " + std::to_string(r.rank) + ": " + (dir / r.file).string();
    const ParamDtype dtype = r.param_type == ElementType::F16 ? ParamDtype::F16 : ParamDtype::BF16;
    std::vector<uint16_t> param(kBlockElements);
    std::vector<float> master(kBlockElements);
    uint64_t mismatches = 0, first = 0;
    for (uint64_t at = 0; at < r.numel; at += kBlockElements) {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            return std::nullopt;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, r.numel - at));
        if (!fsutil::read_exact(file.fd.get(), param.data(), n * 2, r.param_offset + at * 2) ||
            !fsutil::read_exact(file.fd.get(), master.data(), n * 4, r.master_offset + at * 4))
            return Problem{ProblemKind::unreadable, r.rank, r.file,
                           shown + ": cannot read param and master to compare them: " + std::strerror(errno)};
        const uint64_t before = mismatches;
        mismatches += dtype == ParamDtype::BF16 ? bf16_mismatches(master.data(), param.data(), n)
                                                : f16_mismatches(master.data(), param.data(), n);
        if (before == 0 && mismatches > 0) // the block that holds the first one: find it
            for (std::size_t i = 0; i < n; ++i)
                if (!std::isnan(master[i]) &&
                    (dtype == ParamDtype::BF16 ? float_to_bf16(master[i]) : float_to_f16(master[i])) != param[i]) {
                    first = r.flat_offset + at + i;
                    break;
                }
    }
    if (mismatches == 0)
        return std::nullopt;
    return Problem{ProblemKind::param_master_mismatch, r.rank, r.file,
                   "rank " + std::to_string(r.rank) + ": " + (dir / r.file).string() + ": " + std::to_string(mismatches) +
                       " parameters are not their master weight rounded to " + std::string(to_string(dtype)) +
                       " (the first at flat index " + std::to_string(first) +
                       "): param and master were not saved from the same step"};
}

void check_health(ContentReport& report)
{
    for (const TensorContent& t : report.tensors) {
        const ValueStats& s = t.stats;
        if (s.nonfinite() > 0) {
            std::string where;
            int rank = -1;
            std::string path;
            int holders = 0;
            for (std::size_t p = 0; p < t.parts.size(); ++p)
                if (t.part_stats[p].nonfinite() > 0) {
                    if (holders++ == 0) {
                        rank = t.parts[p].rank;
                        path = t.parts[p].file;
                    }
                    if (holders <= 4)
                        where += (holders > 1 ? ", " : "") + part_name(t.parts[p]) + " holds " +
                                 std::to_string(t.part_stats[p].nonfinite());
                }
            if (holders > 4)
                where += " and " + std::to_string(holders - 4) + " more";
            report.problems.push_back({ProblemKind::nonfinite_values, holders == 1 ? rank : -1, path,
                                       tensor_name(t) + " has " + std::to_string(s.nan) + " NaN, " +
                                           std::to_string(s.posinf) + " +Inf and " + std::to_string(s.neginf) +
                                           " -Inf of " + std::to_string(s.numel) + " values: " + where});
        }
        if (t.state == "exp_avg_sq" && s.negatives > 0) {
            std::string where;
            for (std::size_t p = 0; p < t.parts.size(); ++p)
                if (t.part_stats[p].negatives > 0) {
                    where = part_name(t.parts[p]);
                    break;
                }
            report.problems.push_back({ProblemKind::negative_second_moment, -1, "",
                                       tensor_name(t) + " has " + std::to_string(s.negatives) +
                                           " negative values (first in " + where +
                                           "): Adam's second moment is a running mean of squares"});
        }
        if (s.numel > 0 && s.zeros == s.numel)
            report.warnings.push_back({ProblemKind::all_zero_tensor, -1, t.parts.empty() ? "" : t.parts[0].file,
                                       tensor_name(t) + ": all " + std::to_string(s.numel) + " values are zero"});
    }
}

json finite_or_null(const ValueStats& s, double value)
{
    return s.finite > 0 ? json(value) : json(nullptr);
}

json stats_json(const ValueStats& s)
{
    return {{"numel", s.numel},
            {"nan", s.nan},
            {"posinf", s.posinf},
            {"neginf", s.neginf},
            {"zeros", s.zeros},
            {"min", finite_or_null(s, s.min)},
            {"max", finite_or_null(s, s.max)},
            {"mean", finite_or_null(s, s.mean)},
            {"std", finite_or_null(s, s.std_dev())},
            {"abs_max", finite_or_null(s, s.abs_max)},
            {"l2", finite_or_null(s, s.l2())}};
}

} // namespace

ContentReport plan_content(const fs::path& path, const ContentOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    ContentReport report;
    report.dir = lay_out_tensors(path, options, report);
    for (TensorContent& tensor : report.tensors)
        tensor.part_stats.assign(tensor.parts.size(), {});
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

std::size_t content_work_items(const ContentReport& report)
{
    std::size_t parts = 0;
    for (const TensorContent& tensor : report.tensors)
        parts += tensor.parts.size();
    return parts + report.param_checks.size();
}

std::vector<std::optional<Problem>> scan_content(ContentReport& report, const ContentOptions& options,
                                                 const ItemFilter& mine)
{
    const auto start = std::chrono::steady_clock::now();
    const fs::path& dir = report.dir;
    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    // Every part (and every rank's param/master check) is one work item, spread over the threads.
    struct Item {
        std::size_t tensor = 0, part = 0;
    };
    std::vector<Item> items;
    std::vector<std::size_t> chosen; // indices into items, then param checks after them
    uint64_t total = 0;
    for (std::size_t t = 0; t < report.tensors.size(); ++t) {
        TensorContent& tensor = report.tensors[t];
        for (std::size_t p = 0; p < tensor.parts.size(); ++p) {
            if (!mine || mine(items.size())) {
                chosen.push_back(items.size());
                total += tensor.parts[p].numel * element_size(tensor.type);
            }
            items.push_back({t, p});
        }
    }
    for (std::size_t r = 0; r < report.param_checks.size(); ++r)
        if (!mine || mine(items.size() + r))
            chosen.push_back(items.size() + r);
    std::atomic<uint64_t> done{0};
    std::vector<std::optional<Problem>> item_problems(items.size() + report.param_checks.size());
    parallel_for(chosen.size(), options.threads, [&](std::size_t c) {
        const std::size_t i = chosen[c];
        if (i >= items.size()) {
            item_problems[i] = check_param_master(dirfd.get(), dir, report.param_checks[i - items.size()], options);
            return;
        }
        TensorContent& tensor = report.tensors[items[i].tensor];
        scan_part(dirfd.get(), dir, tensor, tensor.parts[items[i].part], options, done, total,
                  tensor.part_stats[items[i].part], item_problems[i]);
    });
    report.cancelled = options.cancel && options.cancel->load();
    report.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return item_problems;
}

void finish_content(ContentReport& report, std::vector<std::optional<Problem>> item_problems)
{
    for (TensorContent& tensor : report.tensors) {
        tensor.stats = {};
        for (const ValueStats& part : tensor.part_stats)
            tensor.stats.merge(part);
    }
    for (auto& p : item_problems)
        if (p && report.problems.size() < 100)
            report.problems.push_back(std::move(*p));
    if (!report.cancelled)
        check_health(report);
}

ContentReport inspect_content(const fs::path& path, const ContentOptions& options)
{
    ContentReport report = plan_content(path, options);
    auto problems = scan_content(report, options);
    finish_content(report, std::move(problems));
    return report;
}

namespace {

// Doubles travel as their bits: exact, and an overflowed sum (inf) survives where JSON has no inf.
uint64_t bits_of(double value)
{
    return std::bit_cast<uint64_t>(value);
}

double double_of(const json& j)
{
    return std::bit_cast<double>(j.get<uint64_t>());
}

} // namespace

json value_stats_json(const ValueStats& s)
{
    return {{"numel", s.numel},
            {"nan", s.nan},
            {"posinf", s.posinf},
            {"neginf", s.neginf},
            {"zeros", s.zeros},
            {"negatives", s.negatives},
            {"finite", s.finite},
            {"doubles", {bits_of(s.min), bits_of(s.max), bits_of(s.abs_max), bits_of(s.mean), bits_of(s.m2),
                         bits_of(s.sum_squares)}},
            {"histogram", s.histogram}};
}

ValueStats value_stats_from_json(const json& j)
{
    ValueStats s;
    s.numel = j.at("numel").get<uint64_t>();
    s.nan = j.at("nan").get<uint64_t>();
    s.posinf = j.at("posinf").get<uint64_t>();
    s.neginf = j.at("neginf").get<uint64_t>();
    s.zeros = j.at("zeros").get<uint64_t>();
    s.negatives = j.at("negatives").get<uint64_t>();
    s.finite = j.at("finite").get<uint64_t>();
    const json& d = j.at("doubles");
    s.min = double_of(d.at(0));
    s.max = double_of(d.at(1));
    s.abs_max = double_of(d.at(2));
    s.mean = double_of(d.at(3));
    s.m2 = double_of(d.at(4));
    s.sum_squares = double_of(d.at(5));
    s.histogram = j.at("histogram").get<std::array<uint64_t, kHistogramBins>>();
    return s;
}

json content_report_json(const ContentReport& report)
{
    json tensors = json::array();
    for (const TensorContent& t : report.tensors) {
        json entry = stats_json(t.stats);
        entry["name"] = t.name;
        if (!t.state.empty())
            entry["state"] = t.state;
        entry["dtype"] = std::string(to_string(t.type));
        entry["shape"] = t.shape;
        entry["histogram"] = {{"low_exponent", kHistogramLowExponent}, {"counts", t.stats.histogram}};
        json parts = json::array();
        for (std::size_t p = 0; p < t.parts.size(); ++p) {
            json part = stats_json(t.part_stats[p]);
            if (t.parts[p].rank >= 0)
                part["rank"] = t.parts[p].rank;
            part["file"] = t.parts[p].file;
            part["first_element"] = t.parts[p].first_element;
            if (!t.parts[p].box_offsets.empty()) {
                part["chunk_offsets"] = t.parts[p].box_offsets;
                part["chunk_sizes"] = t.parts[p].box_sizes;
            }
            parts.push_back(std::move(part));
        }
        entry["parts"] = std::move(parts);
        tensors.push_back(std::move(entry));
    }
    auto problems = [](const std::vector<Problem>& list) {
        json out = json::array();
        for (const Problem& p : list)
            out.push_back(problem_json(p));
        return out;
    };
    return {{"ok", report.ok()},
            {"format", report.format},
            {"path", report.dir.string()},
            {"tensors", std::move(tensors)},
            {"problems", problems(report.problems)},
            {"warnings", problems(report.warnings)},
            {"cancelled", report.cancelled},
            {"seconds", report.seconds}};
}

} // namespace shardscope
