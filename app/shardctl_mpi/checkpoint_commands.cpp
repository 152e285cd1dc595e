// demo-save, load, verify and reshard across processes. The pattern of every command: each
// process does its own ranks' work inside attempt(), then all agree (the lowest failing process's
// error is thrown on every process, before anything is committed); process 0 commits and prints.

#include "app/shardctl_mpi/commands.h"

#include "app/cli_common/cli.h"
#include "app/cli_common/run_options.h"
#include "core/run/demo.h"
#include "core/util/fsutil.h"
#include "core/util/parallel.h"
#include "core/checkpoint/rankio.h"
#include "core/checkpoint/verify_json.h"
#include "core/checkpoint/directory.h"
#include "core/report/report.h"
#include "core/report/verdict.h"
#include "core/checkpoint/reshard.h"

#include <QElapsedTimer>
#include <iostream>

namespace shardctl_mpi {

namespace fs = std::filesystem;
using namespace shardscope;
using namespace shardctl;
using nlohmann::json;

void print_json_on_coordinator(const MpiJob& job, const json& object)
{
    if (job.coordinator())
        print_json(object);
}

QCommandLineOption mpi_json_option()
{
    return json_option(QStringLiteral("Print one JSON object on stdout (process 0)."));
}

QCommandLineOption mpi_threads_option()
{
    return threads_option(QStringLiteral("Worker threads per process for its share of the work (default 1)."),
                          QStringLiteral("1"));
}

namespace {

// The lowest-indexed problem among a process's ranks: the one it reports for them all.
std::optional<Problem> first_problem(const std::vector<std::optional<Problem>>& problems)
{
    for (const auto& p : problems)
        if (p)
            return p;
    return std::nullopt;
}

// Each process writes its ranks' shards (threads over them); records come back in rank order.
// Any failure anywhere is agreed on before the caller commits.
std::vector<std::string> write_owned(MpiJob& job, const fs::path& out, int world, int threads,
                                     const std::function<RankState(int)>& make_state)
{
    const std::vector<int> mine = job.owned_ranks(world);
    std::vector<std::string> records(mine.size());
    std::vector<std::optional<Problem>> problems(mine.size());
    parallel_for(mine.size(), threads, [&](std::size_t i) {
        problems[i] = attempt([&] { records[i] = record_to_json(write_rank_shard(out, make_state(mine[i]), world)); });
    });
    job.agree_or_throw(first_problem(problems));
    return job.gather_strings(records);
}

// Process 0 commits the gathered records; every process learns whether that worked.
Manifest commit_on_coordinator(MpiJob& job, const fs::path& out, const std::vector<std::string>& gathered,
                               const CheckpointMeta& meta)
{
    Manifest m;
    std::optional<Problem> problem;
    if (job.coordinator())
        problem = attempt([&] {
            std::vector<ShardRecord> records;
            for (const auto& text : gathered)
                records.push_back(record_from_json(text));
            m = commit(out, std::move(records), meta);
        });
    job.agree_or_throw(problem);
    return m;
}

struct OpenedManifest {
    fs::path dir;
    Manifest manifest;
};

// Every process reads the manifest and checks its invariants (cheap); all agree.
OpenedManifest open_manifest(MpiJob& job, const fs::path& path, int expected_world_size)
{
    OpenedManifest out;
    job.agree_or_throw(attempt([&] {
        out.dir = resolve_checkpoint_dir(path);
        fsutil::UniqueFd dirfd = fsutil::open_directory(out.dir);
        if (!fsutil::exists_at(dirfd.get(), "manifest.json"))
            throw Error(missing_manifest_problem(fsutil::list_directory(dirfd.get()), out.dir));
        out.manifest = read_manifest(out.dir);
        const auto problems = check_manifest(out.manifest, expected_world_size, (out.dir / "manifest.json").string());
        if (!problems.empty())
            throw Error(problems.front());
    }));
    return out;
}

const ShardRecord& record_for(const Manifest& m, int rank)
{
    const ShardRecord* record = m.shard_for_rank(rank);
    if (!record) // check_manifest already proved every rank has one
        throw Error(ProblemKind::missing_shard, "rank " + std::to_string(rank) + " has no shard in the manifest");
    return *record;
}

} // namespace

int run_demo_save(MpiJob& job, const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Write a synthetic sharded checkpoint, each MPI process writing its own ranks' shards "
                       "(r, r+P, ...); process 0 commits. Same global state as shardctl demo-save."));
    add_demo_save_options(parser);
    parser.addOptions({
        {QStringLiteral("world-size"), QStringLiteral("Number of ranks (default: the number of processes)."),
         QStringLiteral("N")},
        mpi_threads_option(),
        mpi_json_option(),
    });
    if (!parse(parser, arguments, 0, QStringLiteral("demo-save")))
        return kUsage;
    const auto args = read_demo_save_options(parser, job.size());
    if (!args)
        return kUsage;
    const fs::path& out = args->out;
    const int n = args->world_size;

    job.agree_or_throw(attempt([&] {
        std::error_code ec;
        if (fs::exists(out / "manifest.json", ec))
            throw Error(ProblemKind::already_exists,
                        (out / "manifest.json").string() + " exists: refusing to overwrite a complete checkpoint");
        fsutil::make_directories(out);
    }));
    job.barrier(); // the clock starts when every process is ready
    QElapsedTimer timer;
    timer.start();
    const auto gathered = write_owned(
        job, out, n, args->threads, [&](int r) { return make_demo_rank(args->seed, args->numel, n, r, args->dtype); });
    // The same metadata shardctl demo-save writes, so the manifests differ in nothing else.
    const CheckpointMeta meta = demo_checkpoint_meta(n, args->step, args->seed, args->dtype, args->numel);
    const Manifest m = commit_on_coordinator(job, out, gathered, meta);
    const double seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
    if (!job.coordinator())
        return kOk;
    const double mb_per_s = seconds > 0 ? static_cast<double>(m.total_bytes()) / 1e6 / seconds : 0;
    if (parser.isSet(QStringLiteral("json"))) {
        json result = demo_save_json(out, m, seconds);
        result.update({{"processes", job.size()}, {"mb_per_s", mb_per_s}});
        print_json(result);
    } else {
        print_line("wrote " + out.string() + ": " + std::to_string(m.world_size) + " shards from " +
                   std::to_string(job.size()) + " processes, " + std::to_string(m.total_bytes()) + " bytes in " +
                   format_seconds(seconds) + " s (" + std::to_string(static_cast<long long>(mb_per_s)) +
                   " MB/s aggregate)");
    }
    return kOk;
}

int run_load(MpiJob& job, const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Each MPI process loads (and hash-checks) its own ranks; all agree; process 0 prints the "
                       "sharding-independent digests, equal to shardctl load's."));
    add_load_options(parser);
    parser.addOptions({mpi_threads_option(), mpi_json_option()});
    if (!parse(parser, arguments, 1, QStringLiteral("load")))
        return kUsage;
    const auto args = read_load_options(parser);
    if (!args)
        return kUsage;
    const auto [dir, m] = open_manifest(job, args->path, args->expected_world_size);

    const std::vector<int> mine = job.owned_ranks(m.world_size);
    std::vector<RankState> states(mine.size());
    std::vector<std::optional<Problem>> problems(mine.size());
    parallel_for(mine.size(), args->threads, [&](std::size_t i) {
        problems[i] = attempt([&] { states[i] = load_rank_shard(dir, m, record_for(m, mine[i])); });
    });
    job.agree_or_throw(first_problem(problems));

    const StateDigests d = job.flat_digests(states, m.world_size);
    if (job.coordinator())
        print_load_result(parser.isSet(QStringLiteral("json")), dir, m, d,
                          " on " + std::to_string(job.size()) + " processes", {{"processes", job.size()}});
    return kOk;
}

int run_verify(MpiJob& job, const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Each MPI process verifies its own ranks' shards; process 0 prints the report; all agree on "
                       "the result (ShardScope checkpoints only: foreign formats need shardctl verify)."));
    add_verify_options(parser);
    parser.addOptions({mpi_json_option(), mpi_threads_option()});
    if (!parse(parser, arguments, 1, QStringLiteral("verify")))
        return kUsage;
    VerifyOptions options;
    if (!read_verify_options(parser, options))
        return kUsage;
    const int expected_world = options.expected_world_size;
    const bool fast = options.fast;
    QElapsedTimer timer;
    timer.start();
    const auto [dir, m] = open_manifest(job, local(parser.positionalArguments().at(0)), expected_world);

    const std::vector<int> mine = job.owned_ranks(m.world_size);
    std::vector<std::string> checks(mine.size());
    std::vector<std::optional<Problem>> problems(mine.size());
    parallel_for(mine.size(), options.threads, [&](std::size_t i) {
        std::optional<Problem> found;
        auto thrown = attempt([&] {
            checks[i] = shard_check_json(check_rank_shard(dir, m, record_for(m, mine[i]), fast, found)).dump();
        });
        problems[i] = thrown ? thrown : found;
    });
    const std::optional<Problem> first = first_problem(problems);
    const auto gathered = job.gather_strings(checks);
    const auto agreed = job.agree(first);
    const double seconds = job.max_over_processes(static_cast<double>(timer.nsecsElapsed()) / 1e9);
    if (job.coordinator()) {
        std::vector<ShardCheck> checks;
        for (const auto& text : gathered)
            checks.push_back(shard_check_from_json(json::parse(text)));
        if (parser.isSet(QStringLiteral("json"))) {
            const VerifyReport report = gathered_verify_report(dir, m, std::move(checks), agreed, fast, seconds);
            json out = verify_report_json(report);
            out["verdict"] = verdict_json(resume_verdict(report, nullptr, expected_world)); // values: stats
            out["processes"] = job.size();
            print_json(out);
        } else if (!agreed) {
            print_line("OK: " + std::to_string(m.shards.size()) + " shards verified by " + std::to_string(job.size()) +
                       " processes in " + format_seconds(seconds) + " s");
        }
    }
    if (agreed)
        throw AgreedError(*agreed);
    return kOk;
}

int run_reshard(MpiJob& job, const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Reshard a checkpoint to M ranks into a new directory: each process verifies its source "
                       "shards, then builds its target ranks by reading exactly their copy runs; process 0 commits."));
    add_reshard_options(parser);
    parser.addOptions({mpi_threads_option(), mpi_json_option()});
    if (!parse(parser, arguments, 1, QStringLiteral("reshard")))
        return kUsage;
    const auto args = read_reshard_options(parser);
    if (!args)
        return kUsage;
    const fs::path& out = args->out;
    QElapsedTimer timer;
    timer.start();
    const auto [dir, m] = open_manifest(job, args->source, -1);
    ReshardPlan plan;
    job.agree_or_throw(attempt([&] { plan = plan_reshard(m, args->to); }));

    // The destination: refused if it is the source, inside it, or not empty (checked once, by
    // process 0, before any process creates anything).
    job.agree_or_throw(job.coordinator() ? attempt([&] {
        check_reshard_destination(dir, out);
        refuse_dropped_state(dir, m); // a source shard holding state the target would lack
        fsutil::make_directories(out);
    })
                                         : std::nullopt);

    // Source verification: each process hashes the source shards it owns.
    {
        const std::vector<int> mine = job.owned_ranks(m.world_size);
        std::vector<std::optional<Problem>> problems(mine.size());
        parallel_for(mine.size(), args->threads, [&](std::size_t i) {
            auto p = attempt([&] { check_rank_shard(dir, m, record_for(m, mine[i]), false, problems[i]); });
            if (p)
                problems[i] = p;
        });
        job.agree_or_throw(first_problem(problems));
    }
    const auto gathered = write_owned(job, out, plan.target_world_size, args->threads, [&](int r) {
        return read_reshard_target(dir, m, plan.targets[static_cast<std::size_t>(r)]);
    });
    const Manifest written = commit_on_coordinator(job, out, gathered, resharded_meta(m, plan.target_world_size));
    const double seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
    if (!job.coordinator())
        return kOk;
    if (parser.isSet(QStringLiteral("json"))) {
        json object = reshard_result_json({.plan = std::move(plan), .manifest = written}, out, seconds);
        object["processes"] = job.size();
        print_json(object);
    } else {
        print_line("wrote " + out.string() + ": " + std::to_string(written.world_size) + " shards from " +
                   std::to_string(job.size()) + " processes in " + format_seconds(seconds) + " s");
    }
    return kOk;
}

} // namespace shardctl_mpi
