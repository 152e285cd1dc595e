// stats and diff across processes: every process lays the checkpoint(s) out from the headers and
// metadata, reads the work items i with i mod P = p (a tensor part, a param part with its master,
// a stretch of a paired tensor), and sends their exact partial results to process 0, which merges
// them in item order — so the figures are shardctl's, bit for bit — and prints.

#include "app/cli_common/inspect_options.h"
#include "app/shardctl_mpi/commands.h"

#include "core/checkpoint/verify_json.h"

namespace shardctl_mpi {

using namespace shardscope;
using namespace shardctl;
using nlohmann::json;

namespace {

// One result between processes. Messages quote file names, which need not be UTF-8: replaced,
// never an exception outside a collective (which would abort the job).
std::string wire(const json& result)
{
    return result.dump(-1, ' ', false, json::error_handler_t::replace);
}

// What a process laid out, in a few bytes: every tensor part's file, offset and size. Each
// process plans on its own; work item i must mean the same part everywhere.
void digest_parts(const ContentReport& report, uint64_t& hash)
{
    auto mix = [&hash](std::string_view bytes) {
        for (const char c : bytes)
            hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull; // FNV-1a
        hash = (hash ^ 0xff) * 1099511628211ull;
    };
    for (const TensorContent& t : report.tensors) {
        mix(t.name);
        mix(t.state + ":" + std::to_string(t.master) + ":" + std::to_string(t.scale));
        for (const TensorPart& p : t.parts)
            mix(p.file + ":" + std::to_string(p.byte_offset) + ":" + std::to_string(p.numel));
    }
}

// Collective: every process's plan equals process 0's, or all stop with the same sentence.
void agree_on_plan(MpiJob& job, uint64_t hash, std::size_t items)
{
    const std::string mine = std::to_string(hash) + "/" + std::to_string(items);
    const std::string first = job.broadcast(mine);
    std::optional<Problem> differs;
    if (first != mine)
        differs = Problem{.kind = ProblemKind::unreadable,
                          .message = "process " + std::to_string(job.rank()) +
                              " laid the checkpoint out differently from process 0 (a file one of them could not read, "
                              "or one that changed meanwhile): no result"};
    job.agree_or_throw(differs);
}

// Process 0's exit status, on every process.
int agreed_status(MpiJob& job, int status)
{
    return std::stoi(job.broadcast(std::to_string(status)));
}

} // namespace

int run_stats(MpiJob& job, const QStringList& arguments)
{
    const auto args = parse_stats_args(arguments, mpi_json_option(), mpi_threads_option());
    if (!args)
        return kUsage;
    ContentReport report;
    job.agree_or_throw(attempt([&] { report = plan_content(args->path, args->options); }));
    uint64_t hash = 14695981039346656037ull;
    digest_parts(report, hash);
    agree_on_plan(job, hash, content_work_items(report));
    const auto mine = [&](std::size_t item) { return static_cast<int>(item % std::size_t(job.size())) == job.rank(); };
    std::vector<std::optional<Problem>> problems;
    job.agree_or_throw(attempt([&] { problems = scan_content(report, args->options, mine); }));
    // Item i's result: the statistics of its part (and of its master part with the check of the
    // params against it), and its problem.
    const std::vector<ContentItem> items = content_items(report);
    std::vector<std::string> results;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (!mine(i))
            continue;
        const TensorContent& tensor = report.tensors[items[i].tensor];
        const std::size_t p = items[i].part;
        json result = {{"item", i},
                       {"stats", value_stats_json(tensor.part_stats[p])},
                       {"problem", problems[i] ? problem_wire_json(*problems[i]) : json()}};
        if (tensor.master >= 0) {
            result["master_stats"] = value_stats_json(report.tensors[std::size_t(tensor.master)].part_stats[p]);
            result["check"] = {tensor.part_checks[p].mismatches, tensor.part_checks[p].first};
        }
        results.push_back(wire(result));
    }
    const std::vector<std::string> gathered = job.gather_strings(results);
    int status = kOk;
    if (job.coordinator()) {
        std::vector<std::optional<Problem>> all(problems.size());
        for (const std::string& text : gathered) {
            const json result = json::parse(text);
            const std::size_t i = result.at("item").get<std::size_t>();
            TensorContent& tensor = report.tensors[items.at(i).tensor];
            const std::size_t p = items[i].part;
            tensor.part_stats[p] = value_stats_from_json(result.at("stats"));
            if (tensor.master >= 0) {
                report.tensors[std::size_t(tensor.master)].part_stats[p] =
                    value_stats_from_json(result.at("master_stats"));
                tensor.part_checks[p] = {result.at("check").at(0).get<uint64_t>(),
                                         result.at("check").at(1).get<uint64_t>()};
            }
            if (!result.at("problem").is_null())
                all.at(i) = problem_from_wire_json(result.at("problem"));
        }
        finish_content(report, std::move(all));
        status = print_stats(report, args->json, {{"processes", job.size()}});
    }
    return agreed_status(job, status);
}

int run_diff(MpiJob& job, const QStringList& arguments)
{
    const auto args = parse_diff_args(arguments, mpi_json_option(), mpi_threads_option());
    if (!args)
        return kUsage;
    DiffReport report;
    job.agree_or_throw(attempt([&] { report = plan_diff(args->a, args->b, args->options); }));
    uint64_t hash = 14695981039346656037ull;
    digest_parts(report.a, hash);
    digest_parts(report.b, hash);
    agree_on_plan(job, hash, diff_work_items(report));
    const auto mine = [&](std::size_t item) { return static_cast<int>(item % std::size_t(job.size())) == job.rank(); };
    std::vector<DiffSums> sums;
    job.agree_or_throw(attempt([&] { sums = run_diff(report, mine); }));
    std::vector<std::string> results;
    for (std::size_t i = 0; i < sums.size(); ++i)
        if (mine(i))
            results.push_back(wire({{"item", i}, {"sums", diff_sums_json(sums[i])}}));
    const std::vector<std::string> gathered = job.gather_strings(results);
    int status = kOk;
    if (job.coordinator()) {
        for (const std::string& text : gathered) {
            const json result = json::parse(text);
            sums.at(result.at("item").get<std::size_t>()) = diff_sums_from_json(result.at("sums"));
        }
        finish_diff(report, sums);
        status = print_diff(report, args->json, {{"processes", job.size()}});
    }
    return agreed_status(job, status);
}

} // namespace shardctl_mpi
