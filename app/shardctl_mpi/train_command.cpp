// train under MPI: one process per data-parallel rank (world size = number of processes). Each
// process holds and updates only its ZeRO slice; the forward pass's fixed-point partial sums are
// all-reduced exactly, so loss and digests equal single-process `shardctl train`'s bit for bit.
// Checkpoints: every process writes its shard, process 0 commits, moves `latest` and rotates.

#include "app/shardctl_mpi/commands.h"

#include "app/cli_common/cli.h"
#include "app/cli_common/run_options.h"
#include "core/run/lifecycle.h"
#include "core/checkpoint/rankio.h"
#include "core/checkpoint/reshard.h"
#include "core/run/training.h"
#include "core/util/fsutil.h"

#include <QElapsedTimer>
#include <ctime>
#include <iostream>

namespace shardctl_mpi {

namespace fs = std::filesystem;
using namespace shardscope;
using namespace shardctl;
using nlohmann::json;

int run_train(MpiJob& job, const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("shardctl train with one MPI process per rank (the world size is the number of processes). "
                       "Killed at any instant (the job dies) and resumed with --resume on the same or another number "
                       "of processes, it ends with exactly the digests and loss of an uninterrupted run."));
    add_train_options(parser);
    parser.addOptions({
        {QStringLiteral("world-size"), QStringLiteral("Must equal the number of processes if given."),
         QStringLiteral("N")},
        json_option(QStringLiteral("Print one JSON object on stdout (process 0).")),
    });
    parser.addOptions(resume_options());
    if (!parse(parser, arguments, 0, QStringLiteral("train")))
        return kUsage;
    auto args = read_train_options(parser);
    if (!args)
        return kUsage;
    if (parser.isSet(QStringLiteral("world-size"))) {
        const auto world = int_option(parser, QStringLiteral("world-size"), 1, 4096);
        if (!world)
            return kUsage;
        if (*world != job.size())
            return fail(kUsage,
                        "--world-size " + std::to_string(*world) + " differs from the " + std::to_string(job.size()) +
                            " MPI processes (one process per rank)");
    }
    TrainConfig& config = args->config;
    config.world_size = job.size();
    config.local_rank = job.rank();
    config.allreduce_sum = [&job](std::vector<int64_t>& values) { job.allreduce_sum(values); };
    const fs::path& root = args->root;
    const bool durable = args->durable;

    // Process 0 decides where to resume (the newest step recorded healthy, format.md 6.4: each
    // process loads only its own shard, so unrecorded values are not counted here); everyone
    // follows that decision.
    std::string latest_name;
    std::vector<std::string> skipped;
    const bool allow_unhealthy = parser.isSet(QStringLiteral("allow-unhealthy"));
    job.agree_or_throw(job.coordinator() ? attempt([&] {
        fsutil::make_directories(root, durable);
        const bool has_checkpoint = read_latest(root).has_value();
        if (has_checkpoint && args->resume) {
            const auto chosen = choose_resume_step(root, allow_unhealthy);
            latest_name = chosen->name;
            skipped = chosen->skipped;
        }
        if (has_checkpoint && !args->resume)
            throw Error(
                ProblemKind::invalid_argument,
                root.string() +
                    " already holds checkpoints of a run; pass --resume to continue it or choose an empty --root");
    })
                                         : std::nullopt);
    latest_name = job.broadcast(latest_name);

    std::optional<Trainer> trainer;
    std::vector<std::string> unread; // training-state items left unrestored (--allow-partial-state)
    json resumed = nullptr;
    double wall_clock_base = 0;
    job.agree_or_throw(attempt([&] {
        if (latest_name.empty()) {
            trainer.emplace(config);
            return;
        }
        const fs::path dir = root / latest_name;
        LoadedCheckpoint loaded;
        loaded.dir = dir;
        loaded.manifest = read_manifest(dir);
        const int saved_world = loaded.manifest.world_size;
        if (saved_world == job.size()) { // each process reads only its own shard
            const auto problems = check_manifest(loaded.manifest, saved_world, (dir / "manifest.json").string());
            if (!problems.empty())
                throw Error(problems.front());
            loaded.ranks = {load_rank_shard(dir, loaded.manifest, *loaded.manifest.shard_for_rank(job.rank()))};
        } else {
            // A different process count: the simple way — every process loads (and verifies) the
            // whole checkpoint, reslices in memory and keeps its own slice. Memory per process is
            // the whole state; fine for this training loop's sizes.
            loaded = load_sharded(dir, -1);
            auto ranks = reshard_in_memory(loaded.ranks, job.size());
            loaded.ranks = {std::move(ranks[static_cast<std::size_t>(job.rank())])};
        }
        wall_clock_base = loaded.manifest.wall_clock_seconds;
        resumed = resumed_from_json(dir, loaded.manifest, false);
        trainer.emplace(Trainer::resume(config, std::move(loaded),
                                        parser.isSet(QStringLiteral("allow-partial-state")) ? &unread : nullptr));
    }));
    if (job.coordinator() && !resumed.is_null() && !parser.isSet(QStringLiteral("json")))
        std::cerr << "shardctl-mpi: resuming at step " << trainer->steps_done() << " from "
                  << resumed["path"].get<std::string>() << " (saved by " << resumed["world_size"].get<int>()
                  << " ranks, now " << job.size() << ")\n";

    QElapsedTimer timer;
    timer.start();
    double stall_ms = 0;
    int saves = 0;
    std::string kept_told; // the step last said to be kept as the newest healthy one
    while (trainer->steps_done() < args->steps) {
        trainer->step();
        const uint64_t done = trainer->steps_done();
        if (done % args->save_every != 0 && done != args->steps)
            continue;
        QElapsedTimer stall;
        stall.start();
        const std::string name = step_dir_name(done);
        const fs::path dir = root / name;
        // A directory for this step is left over from a run killed while saving it (`latest`
        // names an earlier step). Committed but never published: moved aside, as
        // CheckpointManager does; uncommitted: removed (its .tmp and shard files are rewritten).
        job.agree_or_throw(job.coordinator() ? attempt([&] {
            std::error_code ec;
            if (fs::exists(dir / "manifest.json", ec)) {
                fs::rename(dir, root / (name + ".superseded-" + std::to_string(std::time(nullptr))));
                if (durable) // before the step is written anew under the same name
                    fsutil::fsync_or_throw(fsutil::open_directory(root).get(), root.string());
            } else {
                remove_step_dir(root, name, durable);
            }
            fsutil::make_directories(dir, durable);
        })
                                             : std::nullopt);
        std::string record;
        WriteOptions write;
        write.durable = durable;
        job.agree_or_throw(attempt(
            [&] { record = record_to_json(write_rank_shard(dir, trainer->ranks().front(), job.size(), write)); }));
        const auto records = job.gather_strings({record});
        job.agree_or_throw(job.coordinator() ? attempt([&] {
            CheckpointMeta meta;
            meta.world_size = job.size();
            meta.step = done;
            meta.wall_clock_seconds = wall_clock_base + static_cast<double>(timer.elapsed()) / 1000.0;
            meta.param_dtype = config.dtype;
            meta.param_numel_total = config.numel;
            meta.training_state = trainer->training_state();
            std::vector<ShardRecord> parsed;
            for (const auto& text : records)
                parsed.push_back(record_from_json(text));
            commit(dir, std::move(parsed), meta, durable);
            write_latest(root, name, durable); // only after the commit: `latest` is always complete
            // The manager's rule, the newest healthy step included (format.md 6.3).
            if (const auto kept = rotate_steps(root, args->keep, durable); kept && *kept != kept_told) {
                std::cerr << "shardctl-mpi: warning: keeping " << *kept << " beyond --keep " << args->keep
                          << ": it is the newest healthy step\n";
                kept_told = *kept;
            }
        })
                                             : std::nullopt);
        stall_ms += static_cast<double>(stall.nsecsElapsed()) / 1e6;
        ++saves;
    }

    const StateDigests d = job.flat_digests(trainer->ranks(), job.size());
    if (!job.coordinator())
        return kOk;
    const bool as_json = parser.isSet(QStringLiteral("json"));
    json extra = {{"processes", job.size()}};
    if (!resumed.is_null())
        extra.update(report_resume_choice(skipped, unread));
    print_train_result(as_json, *trainer, d, config.world_size, read_latest(root), resumed, saves, stall_ms,
                       " on " + std::to_string(job.size()) + " processes", extra);
    return kOk;
}

} // namespace shardctl_mpi
