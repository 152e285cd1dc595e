#include "core/inspect/content.h"
#include "core/inspect/internal/halves.h"
#include "core/checkpoint/rounding.h"
#include "core/inspect/internal/dequantize.h"
#include "core/inspect/internal/layout.h"
#include "core/inspect/internal/tensor_reader.h"

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/verify_json.h"
#include "core/util/cancel.h"
#include "core/util/fsutil.h"
#include "core/util/mapped.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"
#include "core/util/volume.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

namespace shardscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kBlockElements = 16384; // read per step (64 KiB of F32): stays in L2 for the kernel's passes

using inspect::lay_out_tensors;

constexpr const char* kTruncated = "the file was truncated while it was being read";

std::string part_name(const TensorPart& part)
{
    return part.rank >= 0 ? "rank " + std::to_string(part.rank) + " (" + part.file + ")" : part.file;
}

std::string tensor_name(const TensorContent& t)
{
    std::string name = "'"; // appended, not "'" + ...: GCC 12 warns falsely about operator+(const char*, string&&)
    name += printable(t.name);
    name += "'";
    if (!t.state.empty())
        name += " (" + t.state + ")";
    return name;
}

// How a part is named in a message: "rank R: <file>: 'name' chunk".
std::string shown_part(const fs::path& dir, const TensorContent& tensor, const TensorPart& part)
{
    return (part.rank >= 0 ? "rank " + std::to_string(part.rank) + ": " : std::string()) + (dir / part.file).string() +
        ": " + tensor_name(tensor) + " chunk " + join_dims(part.box_offsets);
}

// A part's file, opened, when the part lies inside it; nullopt with `problem` set when not.
std::optional<storage::OpenedObject> open_part(const storage::Folder& folder, const TensorContent& tensor,
                                               const TensorPart& part, std::optional<Problem>& problem)
{
    const fs::path& dir = folder.path;
    storage::OpenedObject file = folder.open(part.file);
    const std::string shown = (dir / part.file).string();
    if (file.status != fsutil::OpenStatus::ok) {
        problem = Problem{.kind = ProblemKind::unreadable,
                          .message = shown + ": " + file.reason,
                          .path = part.file,
                          .rank = part.rank};
        return std::nullopt;
    }
    uint64_t end = 0;
    const std::optional<uint64_t> span = inspect::stored_span(part);
    const bool outside = part.zstd_length
        ? __builtin_add_overflow(part.zstd_offset, part.zstd_length, &end) || end > file.size
        : !span || __builtin_mul_overflow(*span, element_size(tensor.type), &end) ||
            __builtin_add_overflow(end, part.byte_offset, &end) || end > file.size;
    if (outside) {
        problem = Problem{.kind = ProblemKind::range_outside_file,
                          .message = shown + ": " + tensor_name(tensor) + " runs past the end of the " +
                              std::to_string(file.size) + "-byte file",
                          .path = part.file,
                          .rank = part.rank};
        return std::nullopt;
    }
    return file;
}

// Parameters must be their master weights rounded to the parameter dtype (how every mixed-
// precision optimizer step ends); anything else means the two were saved from different steps.
void check_against_master(ElementType param_type, const std::byte* param_bytes, const std::byte* master_bytes,
                          std::size_t n, uint64_t at, MasterCheck& check)
{
    const uint64_t found = count_unrounded(param_type == ElementType::F16 ? ParamDtype::F16 : ParamDtype::BF16,
                                           param_bytes, master_bytes, n);
    if (check.mismatches == 0 && found > 0) // the block that holds the first one: find it
        for (std::size_t i = 0; i < n; ++i) {
            float master;
            uint16_t param;
            std::memcpy(&master, master_bytes + 4 * i, 4);
            std::memcpy(&param, param_bytes + 2 * i, 2);
            if (!std::isnan(master) &&
                (param_type == ElementType::F16 ? float_to_f16(master) : float_to_bf16(master)) != param) {
                check.first = at + i;
                break;
            }
        }
    check.mismatches += found;
}

// The master part read in the same pass as a param part, and where its results go.
struct MasterPass {
    const TensorContent& tensor;
    const TensorPart& part;
    ValueStats& stats;
    MasterCheck& check;
};

// Where a part's elements come from, window by window: a mapping of its file (no copy out of
// the page cache, and a few MiB resident at a time), or, for a remote object or where the file
// system cannot map, a window read into a buffer (one ranged GET per window, not per block).
class PartSource {
public:
    PartSource(const storage::Reader& file, const TensorPart& part, std::size_t element_size)
        : file_(file), part_(part), size_(element_size),
          gathered_(!part.view_shape.empty() && !inspect::permutes_dense_storage(part.view_shape, part.view_strides))
    {}

    // A compressed part is decompressed whole first; why it cannot be, or nullopt.
    std::optional<std::string> prepare(const std::string& shown)
    {
        if (!part_.zstd_length)
            return std::nullopt;
        try {
            inflated_ = inspect::inflate_dcp_part(file_, part_, size_, shown);
        } catch (const Error& e) {
            rethrow_remote(e);
            return std::string(e.what());
        }
        return std::nullopt;
    }

    // Elements [at, at + n) of the part (within one block); nullptr with errno set when unreadable.
    const std::byte* elements(uint64_t at, std::size_t n)
    {
        if (part_.zstd_length) // prepare() checked that the part's elements are all there
            return inflated_.data() + part_.byte_offset + at * size_;
        if (has_window_ && at >= window_ && at + n <= window_ + window_numel_)
            return (mapped_ ? window_bytes_.data() : buffer_.data()) + (at - window_) * size_;
        has_window_ = false;
        window_ = at;
        window_numel_ = std::min<uint64_t>(file_.fd() >= 0 ? kWindowElements : kRemoteWindowElements, part_.numel - at);
        const uint64_t offset = part_.byte_offset + at * size_;
        const std::size_t bytes = static_cast<std::size_t>(window_numel_ * size_);
        if (gathered_) { // a slice with a step, an expanded tensor: its elements, not its storage's run
            buffer_.resize(bytes);
            mapped_ = false;
            if (!inspect::gather_view(part_, size_, at, window_numel_, buffer_.data(),
                                      [&](uint64_t stored, uint64_t elements, std::byte* into) {
                                          return file_.read(into, elements * size_, part_.byte_offset + stored * size_);
                                      }))
                return nullptr;
            has_window_ = true;
            return buffer_.data();
        }
        mapped_ = file_.fd() >= 0 && window_bytes_.map(file_.fd(), offset, bytes);
        if (!mapped_) {
            buffer_.resize(bytes);
            if (!file_.read(buffer_.data(), bytes, offset))
                return nullptr;
        }
        has_window_ = true;
        return mapped_ ? window_bytes_.data() : buffer_.data();
    }

private:
    static constexpr uint64_t kWindowElements = uint64_t(1) << 21; // 8 MiB of F32
    // A remote window is read into memory, not mapped: 8 MiB of F64 at most, with a 4 MiB master
    // window beside it, on each of storage::default_threads' 8 threads.
    static constexpr uint64_t kRemoteWindowElements = uint64_t(1) << 20;
    const storage::Reader& file_;
    const TensorPart& part_;
    std::size_t size_;
    // A view whose elements are not a permutation of a run of its storage is gathered element by
    // element; a transpose is read as the run it permutes (statistics do not depend on the order).
    bool gathered_;
    fsutil::MappedWindow window_bytes_;
    bool has_window_ = false, mapped_ = false;
    uint64_t window_ = 0, window_numel_ = 0;
    std::vector<std::byte> buffer_;
    std::vector<std::byte> inflated_;
};

// Reads one part block by block into `stats` (and its master, when given, into the master's
// statistics and the check); false with `problem` set when it cannot be read.
bool scan_part(const storage::Folder& folder, const TensorContent& tensor, const TensorPart& part,
               const ContentOptions& options, std::atomic<uint64_t>& done, uint64_t total, ValueStats& stats,
               std::optional<Problem>& problem, const std::optional<MasterPass>& master)
{
    const fs::path& dir = folder.path;
    const std::optional<storage::OpenedObject> file = open_part(folder, tensor, part, problem);
    if (!file)
        return false;
    std::optional<storage::OpenedObject> master_file;
    if (master && !(master_file = open_part(folder, master->tensor, master->part, problem)))
        return false;
    const uint64_t size = element_size(tensor.type);
    PartSource source(*file->reader, part, size);
    std::optional<PartSource> master_source;
    if (master)
        master_source.emplace(*master_file->reader, master->part, 4);
    const auto not_inflated = [&](const TensorPart& where, const std::string& why) {
        problem = Problem{.kind = ProblemKind::invalid_archive, .message = why, .path = where.file, .rank = where.rank};
        return false;
    };
    if (auto why = source.prepare(shown_part(dir, tensor, part)))
        return not_inflated(part, *why);
    if (master)
        if (auto why = master_source->prepare(shown_part(dir, master->tensor, master->part)))
            return not_inflated(master->part, *why);
    const auto cannot_read = [&](const TensorContent& t, const TensorPart& where, const std::string& why) {
        problem = Problem{.kind = ProblemKind::unreadable,
                          .message = (dir / where.file).string() + ": cannot read " + tensor_name(t) + ": " + why,
                          .path = where.file,
                          .rank = where.rank};
        return false;
    };
    std::vector<double> dequantized(tensor.scale >= 0 ? kBlockElements : 0);
    for (uint64_t at = 0; at < part.numel; at += kBlockElements) {
        if (options.cancel && options.cancel->load(std::memory_order_relaxed))
            return true;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockElements, part.numel - at));
        const std::byte* bytes = source.elements(at, n);
        // errno 0: a read ended at the end of the file, which was longer when it was opened.
        const auto why = [] { return errno ? std::string(std::strerror(errno)) : std::string(kTruncated); };
        if (!bytes)
            return cannot_read(tensor, part, why());
        const std::byte* master_bytes = master ? master_source->elements(at, n) : nullptr;
        if (master && !master_bytes)
            return cannot_read(master->tensor, master->part, why());
        // The kernels below are the only code that touches the mapping, and keep nothing that a
        // SIGBUS (the file truncated meanwhile) would leak when guarded_access abandons them.
        const bool read = fsutil::guarded_access([&] {
            if (tensor.scale >= 0) { // a block-quantized FP8 weight: its values are stored times scale
                decode_elements(tensor.type, bytes, n, dequantized.data());
                inspect::dequantize_stored(tensor, part, at, dequantized.data(), n);
                stats.add(dequantized.data(), n);
            } else {
                accumulate_elements(tensor.type, bytes, n, stats);
            }
            if (master) {
                accumulate_elements(ElementType::F32, master_bytes, n, master->stats);
                check_against_master(tensor.type, bytes, master_bytes, n, at, master->check);
            }
        });
        if (!read)
            return cannot_read(tensor, part, kTruncated);
        const uint64_t now = done += n * (size + (master ? 4 : 0));
        if (options.progress)
            options.progress(now, total);
    }
    return true;
}

// One problem per rank whose params are not their masters rounded: the count over all its
// tensors, and the first in flat order (tensors are in flat order, their parts too).
void report_param_master(ContentReport& report)
{
    struct RankFinding {
        std::string file;
        uint64_t mismatches = 0, first_flat = 0;
        std::string first_tensor;
        uint64_t first_element = 0;
    };
    std::map<int, RankFinding> ranks;
    const char* dtype = "";
    for (const TensorContent& t : report.tensors)
        for (std::size_t p = 0; t.master >= 0 && p < t.part_checks.size(); ++p) {
            const MasterCheck& c = t.part_checks[p];
            if (c.mismatches == 0)
                continue;
            dtype = t.type == ElementType::F16 ? "F16" : "BF16";
            RankFinding& f = ranks[t.parts[p].rank];
            if (f.mismatches == 0) {
                f.file = t.parts[p].file;
                f.first_element = t.parts[p].first_element + c.first;
                f.first_flat = t.flat_offset + f.first_element;
                f.first_tensor = t.name;
            }
            f.mismatches += c.mismatches;
        }
    for (const auto& [rank, f] : ranks)
        if (report.problems.size() < 100)
            report.problems.push_back({.kind = ProblemKind::param_master_mismatch,
                                       .message = "rank " + std::to_string(rank) + ": " +
                                           (report.dir / f.file).string() + ": " + std::to_string(f.mismatches) +
                                           " parameters are not their master weight rounded to " + dtype +
                                           " (the first at flat index " + std::to_string(f.first_flat) + ", element " +
                                           std::to_string(f.first_element) + " of '" + printable(f.first_tensor) +
                                           "'): param and master were not saved from the same step",
                                       .path = f.file,
                                       .rank = rank});
}

void check_health(ContentReport& report)
{
    for (const TensorContent& t : report.tensors) {
        const ValueStats& s = t.stats;
        const TensorHealth health = tensor_health(t);
        if (health.nonfinite) {
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
            report.problems.push_back({.kind = ProblemKind::nonfinite_values,
                                       .message = tensor_name(t) + " has " + std::to_string(s.nan) + " NaN, " +
                                           std::to_string(s.posinf) + " +Inf and " + std::to_string(s.neginf) +
                                           " -Inf of " + std::to_string(s.numel) + " values: " + where,
                                       .path = path,
                                       .rank = holders == 1 ? rank : -1});
        }
        if (health.negative_second_moment) {
            std::string where;
            for (std::size_t p = 0; p < t.parts.size(); ++p)
                if (t.part_stats[p].negatives > 0) {
                    where = part_name(t.parts[p]);
                    break;
                }
            report.problems.push_back({.kind = ProblemKind::negative_second_moment,
                                       .message = tensor_name(t) + " has " + std::to_string(s.negatives) +
                                           " negative values (first in " + where +
                                           "): Adam's second moment is a running mean of squares"});
        }
        if (health.all_zero)
            report.warnings.push_back(
                {.kind = ProblemKind::all_zero_tensor,
                 .message = tensor_name(t) + ": all " + std::to_string(s.numel) + " values are zero",
                 .path = t.parts.empty() ? "" : t.parts[0].file});
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

ContentReport plan_content(const storage::Location& path, const ContentOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    ContentReport report;
    report.dir = lay_out_tensors(path, options, report);
    if (!options.raw_fp8)
        inspect::pair_fp8_scales(report);
    for (TensorContent& tensor : report.tensors) {
        tensor.part_stats.assign(tensor.parts.size(), {});
        tensor.part_checks.assign(tensor.master >= 0 ? tensor.parts.size() : 0, {});
    }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

std::vector<ContentItem> content_items(const ContentReport& report)
{
    std::vector<bool> read_with_param(report.tensors.size(), false);
    for (const TensorContent& tensor : report.tensors)
        if (tensor.master >= 0)
            read_with_param[static_cast<std::size_t>(tensor.master)] = true;
    std::vector<ContentItem> items;
    for (std::size_t t = 0; t < report.tensors.size(); ++t)
        for (std::size_t p = 0; !read_with_param[t] && p < report.tensors[t].parts.size(); ++p)
            items.push_back({t, p});
    return items;
}

std::size_t content_work_items(const ContentReport& report)
{
    return content_items(report).size();
}

std::vector<std::optional<Problem>> scan_content(ContentReport& report, const ContentOptions& options,
                                                 const ItemFilter& mine)
{
    const auto start = std::chrono::steady_clock::now();
    if (!report.folder) // a report planned elsewhere (shardctl-mpi sends plans): its folder, again
        report.folder = std::make_shared<const storage::Folder>(
            storage::Folder::open(storage::is_url(report.dir.string()) ? storage::parse_location(report.dir.string())
                                                                       : storage::Location(report.dir)));
    const storage::Folder& folder = *report.folder;
    // Every part (a param part with its master part) is one work item, spread over the threads.
    const std::vector<ContentItem> items = content_items(report);
    std::vector<std::size_t> chosen;
    uint64_t total = 0;
    for (std::size_t i = 0; i < items.size(); ++i)
        if (!mine || mine(i)) {
            chosen.push_back(i);
            const TensorContent& tensor = report.tensors[items[i].tensor];
            total += tensor.parts[items[i].part].numel * (element_size(tensor.type) + (tensor.master >= 0 ? 4 : 0));
        }
    std::atomic<uint64_t> done{0};
    std::vector<std::optional<Problem>> item_problems(items.size());
    parallel_for(chosen.size(), storage::default_threads(folder, options.threads), [&](std::size_t c) {
        const std::size_t i = chosen[c];
        TensorContent& tensor = report.tensors[items[i].tensor];
        const std::size_t p = items[i].part;
        std::optional<MasterPass> master;
        if (tensor.master >= 0) {
            TensorContent& m = report.tensors[static_cast<std::size_t>(tensor.master)];
            master.emplace(MasterPass{m, m.parts[p], m.part_stats[p], tensor.part_checks[p]});
        }
        scan_part(folder, tensor, tensor.parts[p], options, done, total, tensor.part_stats[p], item_problems[i],
                  master);
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
    if (!report.cancelled) {
        report_param_master(report);
        check_health(report);
    }
}

ContentReport inspect_content(const storage::Location& path, const ContentOptions& options)
{
    const CancelScope scope(options.cancel); // a request that hangs stops when the scan is cancelled
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
    return {
        {"numel", s.numel},
        {"nan", s.nan},
        {"posinf", s.posinf},
        {"neginf", s.neginf},
        {"zeros", s.zeros},
        {"negatives", s.negatives},
        {"finite", s.finite},
        {"doubles",
         {bits_of(s.min), bits_of(s.max), bits_of(s.abs_max), bits_of(s.mean), bits_of(s.m2), bits_of(s.sum_squares)}},
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
        if (t.scale >= 0)
            entry["dequantized_by"] = report.tensors[static_cast<std::size_t>(t.scale)].name;
        if (t.assembled)
            entry["assembled"] = true;
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

namespace {

// Adam's second moment: a native exp_avg_sq state, or in other formats a tensor torch's Adam and
// AdamW saved (optimizer.state.<param>.exp_avg_sq, DeepSpeed's state.<group>.exp_avg_sq).
bool is_second_moment(const TensorContent& tensor)
{
    if (!tensor.state.empty())
        return tensor.state == "exp_avg_sq";
    return tensor.name == "exp_avg_sq" || tensor.name.ends_with(".exp_avg_sq");
}

} // namespace

TensorHealth tensor_health(const TensorContent& tensor)
{
    if (tensor.zero_partition)
        return {};
    const ValueStats& s = tensor.stats;
    return {.nonfinite = s.nonfinite() > 0,
            .negative_second_moment = is_second_moment(tensor) && s.negatives > 0,
            .param_master_mismatch = tensor.master >= 0 &&
                std::any_of(tensor.part_checks.begin(), tensor.part_checks.end(),
                            [](const MasterCheck& c) { return c.mismatches > 0; }),
            .all_zero = s.numel > 0 && s.zeros == s.numel};
}

std::vector<TensorFromFiles> tensors_read_from(const ContentReport& report, const std::vector<std::string>& files)
{
    std::vector<TensorFromFiles> out;
    if (files.empty())
        return out;
    // Compared as normalised relative paths ("./rank3.safetensors" is rank3.safetensors), each
    // distinct part file once: a DCP checkpoint has 10^5 parts in a few hundred files.
    auto normal = [](const std::string& path) { return fs::path(path).lexically_normal().generic_string(); };
    std::map<std::string, std::size_t, std::less<>> index;
    for (std::size_t f = 0; f < files.size(); ++f)
        index.try_emplace(normal(files[f]), f);
    std::map<std::string_view, std::optional<std::size_t>, std::less<>> file_of;
    for (std::size_t t = 0; t < report.tensors.size(); ++t) {
        TensorFromFiles from{.tensor = t};
        for (const TensorPart& part : report.tensors[t].parts) {
            auto [known, inserted] = file_of.try_emplace(part.file);
            if (inserted)
                if (const auto it = index.find(normal(part.file)); it != index.end())
                    known->second = it->second;
            if (!known->second)
                continue;
            from.numel += part.numel;
            if (std::find(from.files.begin(), from.files.end(), *known->second) == from.files.end())
                from.files.push_back(*known->second);
        }
        uint64_t whole = 0, held = 0;
        if (!checked_volume(report.tensors[t].shape, whole))
            whole = 0; // a shape no file can hold: nothing to count as missing
        for (const TensorPart& part : report.tensors[t].parts)
            held += part.numel;
        from.unread = whole > held ? whole - held : 0;
        if (from.files.empty() && from.unread == 0)
            continue;
        std::sort(from.files.begin(), from.files.end());
        out.push_back(std::move(from));
    }
    return out;
}

} // namespace shardscope
