#include "core/foreign/safetensors_index.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/safetensors_listing.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;

namespace {

// Summary rows and the tensor list shared by the single-file and index verifiers.
void summarise_files(VerifyReport& report, const std::vector<std::optional<SafetensorsListing>>& headers,
                     uint64_t& tensor_bytes)
{
    ForeignSummary& summary = *report.foreign;
    summary.tensors.clear(); // the index's early list (list_from_index), now with what the headers say
    summary.tensors_total = 0;
    uint64_t per_dtype[256] = {}; // by SafetensorsListing's dtype index
    tensor_bytes = 0;
    // Which tensors are listed, sorted by name before they are added (the list appends): 8 bytes
    // a tensor, reserved at once, since the headers and the list being built are held meanwhile.
    struct Listed {
        uint32_t file, tensor;
    };
    std::size_t count = 0;
    for (const auto& h : headers)
        count += h ? h->tensors.size() : 0;
    std::vector<Listed> listed;
    listed.reserve(std::min<std::size_t>(count, foreign::kMaxListedTensors));
    for (std::size_t i = 0; i < headers.size(); ++i) {
        if (!headers[i])
            continue;
        const SafetensorsListing& h = *headers[i];
        for (std::size_t k = 0; k < h.tensors.size(); ++k) {
            const auto& t = h.tensors[k];
            ++summary.tensors_total;
            ++per_dtype[t.dtype];
            tensor_bytes += t.bytes();
            if (listed.size() < foreign::kMaxListedTensors)
                listed.push_back({uint32_t(i), uint32_t(k)});
        }
        for (const auto& [key, value] : headers[i]->metadata)
            add_row(summary, (headers.size() > 1 ? report.shards[i].path + ": " : std::string()) + "metadata." + key,
                    value.size() > 256 ? value.substr(0, 256) + "..." : value);
    }
    auto name_of = [&](const Listed& l) { return headers[l.file]->name(headers[l.file]->tensors[l.tensor]); };
    std::stable_sort(listed.begin(), listed.end(),
                     [&](const Listed& a, const Listed& b) { return name_of(a) < name_of(b); });
    std::size_t name_bytes = 0, dims = 0;
    for (const Listed& l : listed) {
        name_bytes += name_of(l).size();
        dims += headers[l.file]->tensors[l.tensor].rank;
    }
    summary.tensors.reserve(listed.size(), name_bytes, dims);
    for (const Listed& l : listed) {
        const SafetensorsListing& h = *headers[l.file];
        const auto& t = h.tensors[l.tensor];
        summary.tensors.add({.name = name_of(l),
                             .dtype = h.dtype(t),
                             .shape = h.shape(t),
                             .file = report.shards[l.file].path,
                             .offset = h.data_start() + t.begin,
                             .bytes = t.bytes()});
    }
    std::map<std::string_view, uint64_t> dtypes; // by name, as the summary row lists them
    for (std::size_t d = 0; d < safetensors_dtype_names().size(); ++d)
        if (per_dtype[d])
            dtypes[safetensors_dtype_names()[d]] = per_dtype[d];
    std::string mix;
    for (const auto& [dtype, count] : dtypes)
        mix += (mix.empty() ? "" : ", ") + std::string(dtype) + " x" + std::to_string(count);
    summary.rows.insert(summary.rows.begin() + std::min<std::ptrdiff_t>(2, std::ssize(summary.rows)),
                        {{"tensors", std::to_string(summary.tensors_total)},
                         {"tensor bytes", human_bytes(tensor_bytes) + " (" + std::to_string(tensor_bytes) + ")"},
                         {"dtypes", mix.empty() ? "-" : mix}});
}

// Reads every file's header in parallel; headers[i] set when file i is valid safetensors.
std::vector<std::optional<SafetensorsListing>> read_headers(const storage::Folder& folder, VerifyReport& report,
                                                            const VerifyOptions& options)
{
    std::vector<std::optional<SafetensorsListing>> headers(report.shards.size());
    foreign::check_files(folder, report, options,
                         [&](std::size_t i, storage::OpenedObject& file, ShardCheck& check, std::vector<Problem>&) {
                             headers[i] =
                                 read_safetensors_listing(*file.reader, file.size, (report.dir / check.path).string());
                         });
    return headers;
}

// The tensors as the index names them, in the final list's order (by name), for the files_listed
// callback: the app shows 10^5 rows while the headers are read instead of after (their dtype,
// shape and bytes follow with summarise_files).
void list_from_index(const SafetensorsIndex& index, VerifyReport& report)
{
    ForeignSummary& summary = *report.foreign;
    const auto& map = index.weight_map;
    std::vector<uint32_t> order(map.size());
    for (uint32_t i = 0; i < order.size(); ++i)
        order[i] = i;
    // Sorted before the cap, as summarise_files does: above it the early rows are the same
    // tensors as the final ones.
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return map.name(a) < map.name(b); });
    order.resize(std::min<std::size_t>(order.size(), foreign::kMaxListedTensors));
    std::size_t name_bytes = 0;
    for (const uint32_t i : order)
        name_bytes += map.name(i).size();
    summary.tensors.reserve(order.size(), name_bytes);
    for (const uint32_t i : order)
        summary.tensors.add({.name = map.name(i), .file = index.files[map.file(i)]});
    summary.tensors_total = map.size();
}

void flag(VerifyReport& report, std::size_t file, Problem problem)
{
    ShardCheck& check = report.shards[file];
    if (check.status == ShardStatus::ok) {
        check.status = ShardStatus::invalid;
        check.detail = problem.message;
    }
    report.problems.push_back(std::move(problem));
}

} // namespace

VerifyReport verify_safetensors_files(const storage::Folder& dir, const VerifyOptions& options)
{
    VerifyReport report;
    report.format = "safetensors";
    report.foreign.emplace();
    report.dir = dir.path;
    std::vector<std::string> names;
    for (const auto& name : dir.names)
        if (name.ends_with(".safetensors"))
            names.push_back(name);
    for (const auto& name : names)
        report.shards.push_back(ShardCheck{.rank = -1, .path = name});
    add_row(*report.foreign, "format", "safetensors");
    add_row(*report.foreign, "files", std::to_string(names.size()));
    const auto headers = read_headers(dir, report, options);
    uint64_t bytes = 0;
    summarise_files(report, headers, bytes);
    if (names.empty())
        report.problems.push_back(
            {.kind = ProblemKind::missing_file, .message = report.dir.string() + ": no .safetensors files"});
    return report;
}

IndexCheck::IndexCheck(const SafetensorsIndex& index, fs::path dir, std::function<void(Problem)> say)
    : m_index(index), m_dir(std::move(dir)), m_say(std::move(say)), m_held(index.weight_map.size(), 0)
{}

bool IndexCheck::holds(std::string_view file, std::string_view name, bool wanted)
{
    const auto entry = m_index.weight_map.find(name);
    if (entry && m_index.files[m_index.weight_map.file(*entry)] == file) {
        m_held[*entry] = 1;
        return true;
    }
    if (wanted)
        m_say({.kind = ProblemKind::unmapped_tensor,
               .message = (m_dir / file).string() + ": holds tensor '" + printable(name) + "', " +
                   (entry ? "which the index maps to " + printable(m_index.files[m_index.weight_map.file(*entry)])
                          : std::string("which the index does not map")),
               .path = std::string(file)});
    return false;
}

void IndexCheck::say_lacking(const std::function<bool(std::size_t file)>& read,
                             const std::function<bool(std::string_view name)>& wanted)
{
    const IndexWeightMap& map = m_index.weight_map;
    std::vector<std::size_t> lacking;
    for (std::size_t e = 0; e < map.size(); ++e)
        if (!m_held[e] && read(map.file(e)) && (!wanted || wanted(map.name(e))))
            lacking.push_back(e);
    std::sort(lacking.begin(), lacking.end(), [&](std::size_t a, std::size_t b) { return map.name(a) < map.name(b); });
    for (const std::size_t e : lacking) {
        const std::string& file = m_index.files[map.file(e)];
        m_say({.kind = ProblemKind::missing_tensor,
               .message = (m_dir / file).string() + ": lacks tensor '" + printable(map.name(e)) +
                   "', which the index maps to it",
               .path = file});
    }
}

std::optional<SafetensorsIndex> read_index_for(const storage::Folder& dir, const std::string& index_name,
                                               VerifyReport& report)
{
    const std::string shown = (dir.path / index_name).string();
    try {
        return parse_safetensors_index(dir.read_small(index_name, kMaxIndexBytes, shown), shown);
    } catch (const Error& e) {
        rethrow_remote(e);
        Problem p = e.problem();
        p.path = index_name;
        report.problems.push_back(std::move(p));
        return std::nullopt;
    }
}

VerifyReport verify_safetensors_index(const storage::Folder& listed, const VerifyOptions& options,
                                      const std::string& index_name)
{
    const fs::path& dir = listed.path;
    VerifyReport report = foreign::new_report("safetensors-index", dir, "safetensors-index");
    ForeignSummary& summary = *report.foreign;
    add_row(summary, "index", index_name);
    const std::string index_path = (dir / index_name).string();
    std::optional<SafetensorsIndex> read = read_index_for(listed, index_name, report);
    if (!read)
        return report;
    SafetensorsIndex& index = *read;
    add_row(summary, "files", std::to_string(index.files.size()));
    add_row(summary, "mapped tensors", std::to_string(index.weight_map.size()));
    if (index.total_size)
        add_row(summary, "metadata.total_size",
                human_bytes(*index.total_size) + " (" + std::to_string(*index.total_size) + ")");
    for (const auto& [key, value] : index.metadata)
        add_row(summary, "metadata." + key, value);

    std::map<std::string, std::size_t> file_index;
    for (const auto& name : index.files) {
        file_index[name] = report.shards.size();
        report.shards.push_back(ShardCheck{.rank = -1, .path = name});
    }
    if (options.callbacks.files_listed) // someone shows the rows as they come (the CLI does not)
        list_from_index(index, report);
    const auto headers = read_headers(listed, report, options);
    if (report.cancelled) { // the rows listed from the index alone are not a result
        report.foreign->tensors.clear();
        report.foreign->tensors_total = 0;
        return report;
    }
    // Cross-checks between the index and the files' headers, then the tensor list: the weight map
    // (a name and an index per tensor) is dropped before the list is built, so the two never
    // take memory at once (bench_open: the peak per tensor of a 10^5-tensor index).
    bool complete = true;
    uint64_t mapped_bytes = 0;
    std::size_t reported = 0;
    constexpr std::size_t kMaxListed = 1000; // one line per tensor up to here, then a count
    std::size_t suppressed = 0;
    auto report_problem = [&](std::size_t file, Problem p) {
        if (reported++ < kMaxListed)
            flag(report, file, std::move(p));
        else
            ++suppressed;
    };
    { // the check's marks go before the list is built, as the map does
        IndexCheck check(index, dir, [&](Problem p) {
            const std::size_t file = file_index.at(p.path);
            report_problem(file, std::move(p));
        });
        for (std::size_t i = 0; i < headers.size(); ++i) {
            if (!headers[i]) {
                complete = false;
                continue;
            }
            for (const auto& t : headers[i]->tensors)
                if (check.holds(index.files[i], headers[i]->name(t))) // shards[] are index.files, in order
                    mapped_bytes += t.bytes();
        }
        check.say_lacking([&](std::size_t file) { return headers[file].has_value(); });
    }
    if (suppressed)
        report.problems.push_back(
            {.kind = ProblemKind::missing_tensor,
             .message = index_path + ": " + std::to_string(suppressed) + " more tensor mismatches not listed",
             .path = index_name});
    if (complete && index.total_size && *index.total_size != mapped_bytes)
        report.problems.push_back({.kind = ProblemKind::size_mismatch,
                                   .message = index_path + ": metadata.total_size is " +
                                       std::to_string(*index.total_size) + " but the mapped tensors hold " +
                                       std::to_string(mapped_bytes) + " bytes",
                                   .path = index_name});
    index.weight_map = {};
    uint64_t all_bytes = 0;
    summarise_files(report, headers, all_bytes);
    // .safetensors files the index does not name are worth a note but are not an error.
    std::string stray;
    for (const auto& name : listed.names)
        if (name.ends_with(".safetensors") && !file_index.count(name))
            stray += (stray.empty() ? "" : ", ") + name;
    if (!stray.empty())
        add_row(summary, "files not in the index", stray);
    return report;
}

} // namespace shardscope
