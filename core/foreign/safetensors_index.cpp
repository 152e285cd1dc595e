#include "core/foreign/safetensors_index.h"

#include "core/foreign/internal/common.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/internal/shardfile.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_set>

namespace shardscope {

namespace fs = std::filesystem;
using foreign::add_row;

namespace {

[[noreturn]] void bad_index(const std::string& path, const std::string& what)
{
    throw Error(ProblemKind::invalid_manifest, path + ": invalid safetensors index: " + what, path);
}

} // namespace

SafetensorsIndex parse_safetensors_index(std::string_view json, const std::string& path)
{
    if (json.size() > kMaxIndexBytes)
        bad_index(path, "it is " + std::to_string(json.size()) + " bytes, more than the " +
                            std::to_string(kMaxIndexBytes) + "-byte limit");
    // nlohmann keeps the last of duplicate keys silently: watch weight_map's keys as they arrive.
    std::string top_key;
    std::set<std::string> seen;
    std::string duplicate;
    uint64_t keys = 0;
    auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key) {
            if (depth == 1)
                top_key = parsed.get<std::string>();
            else if (depth == 2 && top_key == "weight_map") {
                if (++keys > kMaxIndexEntries)
                    throw std::length_error("too many weight_map entries");
                if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty())
                    duplicate = parsed.get<std::string>();
            }
        }
        return depth <= 16;
    };
    nlohmann::json index;
    try {
        index = nlohmann::json::parse(json.begin(), json.end(), callback);
    } catch (const nlohmann::json::exception& e) {
        bad_index(path, std::string("not valid JSON (") + e.what() + ")");
    } catch (const std::length_error&) {
        bad_index(path, "more than " + std::to_string(kMaxIndexEntries) + " weight_map entries");
    }
    if (!duplicate.empty())
        bad_index(path, "tensor '" + duplicate + "' appears twice in weight_map");
    if (!index.is_object())
        bad_index(path, "the index is not a JSON object");
    SafetensorsIndex out;
    const auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object())
        bad_index(path, "weight_map is missing or not an object");
    std::set<std::string> files;
    for (const auto& [tensor, file] : wm->items()) {
        if (!file.is_string())
            bad_index(path, "weight_map['" + tensor + "'] is not a file name");
        const std::string name = file.get<std::string>();
        if (const auto reason = fsutil::unsafe_name_reason(name))
            bad_index(path, "weight_map['" + tensor + "'] = '" + name + "': " + *reason);
        files.insert(name);
        if (files.size() > kMaxIndexFiles)
            bad_index(path, "more than " + std::to_string(kMaxIndexFiles) + " distinct files");
        out.weight_map.emplace(tensor, name);
    }
    out.files.assign(files.begin(), files.end());
    if (const auto md = index.find("metadata"); md != index.end() && !md->is_null()) {
        if (!md->is_object())
            bad_index(path, "metadata is not an object");
        for (const auto& [key, value] : md->items()) {
            if (key == "total_size") {
                if (value.is_number_unsigned())
                    out.total_size = value.get<uint64_t>();
                else if (value.is_number_float() && value.get<double>() >= 0 && value.get<double>() < 1.8e19 &&
                         value.get<double>() == static_cast<double>(static_cast<uint64_t>(value.get<double>())))
                    out.total_size = static_cast<uint64_t>(value.get<double>());
                else
                    bad_index(path, "metadata.total_size is not a non-negative integer");
                continue;
            }
            std::string text = value.is_string() ? value.get<std::string>() : value.dump();
            if (text.size() > 4096)
                text = text.substr(0, 4096) + "...";
            out.metadata.emplace(key, std::move(text));
        }
    }
    return out;
}

namespace {

// Summary rows and the tensor list shared by the single-file and index verifiers.
void summarise_files(VerifyReport& report, const std::vector<std::optional<SafetensorsHeader>>& headers,
                     uint64_t& tensor_bytes)
{
    ForeignSummary& summary = *report.foreign;
    std::map<std::string, uint64_t> dtypes;
    tensor_bytes = 0;
    for (std::size_t i = 0; i < headers.size(); ++i) {
        if (!headers[i])
            continue;
        for (const auto& t : headers[i]->tensors) {
            ++summary.tensors_total;
            ++dtypes[t.dtype];
            tensor_bytes += t.bytes();
            if (summary.tensors.size() < foreign::kMaxListedTensors)
                summary.tensors.push_back({.name = t.name,
                                           .dtype = t.dtype,
                                           .shape = t.shape,
                                           .file = report.shards[i].path,
                                           .offset = headers[i]->data_start() + t.begin,
                                           .bytes = t.bytes()});
        }
        for (const auto& [key, value] : headers[i]->metadata)
            add_row(summary, (headers.size() > 1 ? report.shards[i].path + ": " : std::string()) + "metadata." + key,
                    value.size() > 256 ? value.substr(0, 256) + "..." : value);
    }
    std::sort(summary.tensors.begin(), summary.tensors.end(),
              [](const ForeignTensor& a, const ForeignTensor& b) { return a.name < b.name; });
    std::string mix;
    for (const auto& [dtype, count] : dtypes)
        mix += (mix.empty() ? "" : ", ") + dtype + " x" + std::to_string(count);
    summary.rows.insert(summary.rows.begin() + std::min<std::ptrdiff_t>(2, std::ssize(summary.rows)),
                        {{"tensors", std::to_string(summary.tensors_total)},
                         {"tensor bytes", human_bytes(tensor_bytes) + " (" + std::to_string(tensor_bytes) + ")"},
                         {"dtypes", mix.empty() ? "-" : mix}});
}

// Reads every file's header in parallel; headers[i] set when file i is valid safetensors.
std::vector<std::optional<SafetensorsHeader>> read_headers(int dirfd, VerifyReport& report, const VerifyOptions& options)
{
    std::vector<std::optional<SafetensorsHeader>> headers(report.shards.size());
    foreign::check_files(dirfd, report, options,
                         [&](std::size_t i, fsutil::OpenedFile& file, ShardCheck& check, std::vector<Problem>&) {
                             headers[i] = read_safetensors_header(file.fd.get(), file.size,
                                                                  (report.dir / check.path).string());
                         });
    return headers;
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

VerifyReport verify_safetensors_files(const fs::path& path, const VerifyOptions& options)
{
    VerifyReport report;
    report.format = "safetensors";
    report.foreign.emplace();
    std::error_code ec;
    std::vector<std::string> names;
    if (fs::is_directory(path, ec)) {
        report.dir = path;
    } else {
        report.dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
        names.push_back(path.filename().string());
    }
    fsutil::UniqueFd dirfd = fsutil::open_directory(report.dir);
    if (names.empty()) {
        for (auto& name : fsutil::list_directory(dirfd.get()))
            if (name.ends_with(".safetensors"))
                names.push_back(std::move(name));
        std::sort(names.begin(), names.end());
    }
    for (const auto& name : names)
        report.shards.push_back(ShardCheck{.rank = -1, .path = name});
    add_row(*report.foreign, "format", "safetensors");
    add_row(*report.foreign, "files", std::to_string(names.size()));
    const auto headers = read_headers(dirfd.get(), report, options);
    uint64_t bytes = 0;
    summarise_files(report, headers, bytes);
    if (names.empty())
        report.problems.push_back({ProblemKind::missing_file, -1, {}, report.dir.string() + ": no .safetensors files"});
    return report;
}

VerifyReport verify_safetensors_index(const fs::path& dir, const VerifyOptions& options, const std::string& index_name)
{
    VerifyReport report = foreign::new_report("safetensors-index", dir, "safetensors-index");
    ForeignSummary& summary = *report.foreign;
    add_row(summary, "index", index_name);
    fsutil::UniqueFd dirfd = fsutil::open_directory(dir);
    const std::string index_path = (dir / index_name).string();
    SafetensorsIndex index;
    try {
        index = parse_safetensors_index(fsutil::read_small_file(dirfd.get(), index_name, kMaxIndexBytes, index_path),
                                        index_path);
    } catch (const Error& e) {
        Problem p = e.problem();
        p.path = index_name;
        report.problems.push_back(std::move(p));
        return report;
    }
    add_row(summary, "files", std::to_string(index.files.size()));
    add_row(summary, "mapped tensors", std::to_string(index.weight_map.size()));
    if (index.total_size)
        add_row(summary, "metadata.total_size", human_bytes(*index.total_size) + " (" + std::to_string(*index.total_size) + ")");
    for (const auto& [key, value] : index.metadata)
        add_row(summary, "metadata." + key, value);

    std::map<std::string, std::size_t> file_index;
    for (const auto& name : index.files) {
        file_index[name] = report.shards.size();
        report.shards.push_back(ShardCheck{.rank = -1, .path = name});
    }
    const auto headers = read_headers(dirfd.get(), report, options);
    if (report.cancelled)
        return report;
    uint64_t all_bytes = 0;
    summarise_files(report, headers, all_bytes);

    // Cross-checks between the index and the files' headers.
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
    for (std::size_t i = 0; i < headers.size(); ++i) {
        if (!headers[i]) {
            complete = false;
            continue;
        }
        const std::string& file = report.shards[i].path;
        const std::string shown = (dir / file).string();
        for (const auto& t : headers[i]->tensors) {
            const auto it = index.weight_map.find(t.name);
            if (it == index.weight_map.end())
                report_problem(i, {ProblemKind::unmapped_tensor, -1, file,
                                   shown + ": holds tensor '" + t.name + "', which the index does not map"});
            else if (it->second != file)
                report_problem(i, {ProblemKind::unmapped_tensor, -1, file,
                                   shown + ": holds tensor '" + t.name + "', which the index maps to " + it->second});
            else
                mapped_bytes += t.bytes();
        }
    }
    // Each file's tensor names, hashed: a MoE checkpoint maps 10^5 tensors over a few hundred files.
    std::vector<std::unordered_set<std::string_view>> held(headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i)
        if (headers[i])
            for (const auto& t : headers[i]->tensors)
                held[i].insert(t.name);
    for (const auto& [tensor, file] : index.weight_map) {
        const std::size_t i = file_index.at(file);
        if (headers[i] && !held[i].count(tensor))
            report_problem(i, {ProblemKind::missing_tensor, -1, file,
                               (dir / file).string() + ": lacks tensor '" + tensor + "', which the index maps to it"});
    }
    if (suppressed)
        report.problems.push_back({ProblemKind::missing_tensor, -1, index_name,
                                   index_path + ": " + std::to_string(suppressed) + " more tensor mismatches not listed"});
    if (complete && index.total_size && *index.total_size != mapped_bytes)
        report.problems.push_back({ProblemKind::size_mismatch, -1, index_name,
                                   index_path + ": metadata.total_size is " + std::to_string(*index.total_size) +
                                       " but the mapped tensors hold " + std::to_string(mapped_bytes) + " bytes"});
    // .safetensors files the index does not name are worth a note but are not an error.
    std::string stray;
    for (const auto& name : fsutil::list_directory(dirfd.get()))
        if (name.ends_with(".safetensors") && !file_index.count(name))
            stray += (stray.empty() ? "" : ", ") + name;
    if (!stray.empty())
        add_row(summary, "files not in the index", stray);
    return report;
}

} // namespace shardscope
