// train: a deterministic simulated training run that checkpoints into a root, and resumes.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/cli_common/run_options.h"

#include "core/run/mirror_tier.h"
#include "core/run/lifecycle.h"
#include "core/checkpoint/reshard.h"
#include "core/run/training.h"
#include "core/storage/location.h"

#include "core/util/printable.h"

#include <QElapsedTimer>
#include <functional>
#include <cstdio>
#include <iostream>

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;
using nlohmann::json;

int run_train(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Run a small, deterministic data-parallel training loop (a linear model fitted with AdamW) that "
        "checkpoints into a root every K steps. Killed at any instant and resumed with --resume, it ends "
        "with exactly the digests and loss of an uninterrupted run."));
    add_train_options(parser);
    parser.addOptions({
        {QStringLiteral("world-size"), QStringLiteral("Data-parallel ranks (default 1)."), QStringLiteral("N"),
         QStringLiteral("1")},
        {QStringLiteral("async"), QStringLiteral("Save in the background (the loop stalls only for a snapshot).")},
        {QStringLiteral("mirror"),
         QStringLiteral("Second tier, a directory or s3://bucket/prefix: copy each committed step there "
                        "and read it back (resume falls back to it)."),
         QStringLiteral("DIR2")},
        {QStringLiteral("mirror-keep"), QStringLiteral("Steps the mirror keeps (default 10)."), QStringLiteral("K3"),
         QStringLiteral("10")},
        {QStringLiteral("inject-nan-at-step"),
         QStringLiteral("Test option: from step K on, plant a NaN in --inject-nan-state after every optimizer step, "
                        "as a diverging run would hold one."),
         QStringLiteral("K")},
        {QStringLiteral("inject-nan-state"),
         QStringLiteral("Where --inject-nan-at-step plants it: param, master, exp_avg or exp_avg_sq (default "
                        "master)."),
         QStringLiteral("STATE"), QStringLiteral("master")},
        json_option(),
    });
    parser.addOptions(resume_options());
    parser.addOptions(remote_options()); // --mirror in a bucket
    if (!parse(parser, arguments, 0, QStringLiteral("train")))
        return kUsage;
    auto args = read_train_options(parser);
    const auto world = args ? int_option(parser, QStringLiteral("world-size"), 1, 4096) : std::nullopt;
    const auto mirror_keep = world ? int_option(parser, QStringLiteral("mirror-keep"), 1, 1 << 20) : std::nullopt;
    if (!mirror_keep)
        return kUsage;
    TrainConfig& config = args->config;
    config.world_size = static_cast<int>(*world);
    std::optional<uint64_t> inject_at;
    if (parser.isSet(QStringLiteral("inject-nan-at-step"))) {
        const auto step = int_option(parser, QStringLiteral("inject-nan-at-step"), 1, INT64_MAX);
        if (!step)
            return kUsage;
        inject_at = static_cast<uint64_t>(*step);
    }
    const auto inject_state = state_vector_from_string(local(parser.value(QStringLiteral("inject-nan-state"))));
    if (!inject_state)
        return fail(kUsage,
                    "--inject-nan-state must be param, master, exp_avg or exp_avg_sq, not '" +
                        printable(local(parser.value(QStringLiteral("inject-nan-state"))), 100) + "'");
    ResumeOptions resume_with;
    read_resume_options(parser, resume_with);
    const bool as_json = parser.isSet(QStringLiteral("json"));

    ManagerOptions options;
    options.root = args->root;
    options.keep_last = args->keep;
    options.mirror_keep_last = static_cast<int>(*mirror_keep);
    options.durable = args->durable;
    if (parser.isSet(QStringLiteral("mirror")))
        options.mirror = location_argument(parser.value(QStringLiteral("mirror")));
    options.on_warning = [](const std::string& message) { // from upload threads too: one line at once
        std::fflush(stdout);
        std::cerr << ("shardctl: warning: " + printable(message, 4096) + "\n") << std::flush;
    };
    // Whether a run is there to resume (or not to be overwritten), where that depends on the
    // mirror's `latest`: a store that cannot be read says nothing either way, and training does
    // not start over what it cannot see.
    const auto mirror_holds_a_run = [&](const std::function<bool()>& ask) {
        try {
            return ask();
        } catch (const Error& e) {
            if (e.kind() != ProblemKind::remote_error)
                throw;
            throw Error(ProblemKind::remote_error,
                        "cannot tell whether " + storage::to_string(*options.mirror) +
                            " (--mirror) holds a run to resume, and the root has no `latest`: " + e.what() +
                            "; training does not start over a mirror it cannot read (start it again once the "
                            "store answers)",
                        e.problem().path);
        }
    };
    // A run already there, without --resume, is refused before anything is created, naming the
    // tier that holds it: a new root beside a mirror that holds a run would begin a second one there.
    if (!args->resume) {
        std::error_code ec;
        if (fs::exists(options.root / "latest", ec))
            return fail(
                kUsage,
                options.root.string() +
                    " already holds checkpoints of a run; pass --resume to continue it or choose an empty --root");
        // A mirror folder not made yet holds nothing (the manager makes it).
        if (options.mirror && (!options.mirror->is_local() || fs::is_directory(options.mirror->path, ec)) &&
            mirror_holds_a_run([&] { return MirrorTier(*options.mirror).read_latest().has_value(); }))
            return fail(kUsage,
                        storage::to_string(*options.mirror) +
                            " (--mirror) already holds checkpoints of a run; pass --resume to continue it from there "
                            "or choose an empty --mirror");
    }
    CheckpointManager manager(options);
    manager.lock_root(); // a second job on this root is refused now, not at its first save

    const bool has_checkpoint = mirror_holds_a_run([&] { return manager.holds_a_run(); });
    if (has_checkpoint && !args->resume)
        return fail(kUsage,
                    options.root.string() +
                        " already holds checkpoints of a run; pass --resume to continue it "
                        "or choose an empty --root");
    std::optional<Trainer> trainer;
    json resumed = nullptr;
    json resume_choice = json::object();
    double wall_clock_base = 0;
    if (has_checkpoint) {
        ResumePoint point = manager.load_resume_point(resume_with);
        const bool used_mirror = point.used_mirror;
        LoadedCheckpoint& loaded = point.checkpoint;
        const int saved_world = loaded.manifest.world_size;
        wall_clock_base = loaded.manifest.wall_clock_seconds;
        resumed = resumed_from_json(loaded.dir, loaded.manifest, used_mirror);
        if (saved_world != config.world_size) // the job restarts on a different number of ranks
            loaded.ranks = reshard_in_memory(loaded.ranks, config.world_size);
        std::vector<std::string> unread;
        trainer.emplace(
            Trainer::resume(config, std::move(loaded), resume_with.load.allow_unread_state ? &unread : nullptr));
        resume_choice = report_resume_choice(point.skipped, unread);
        if (!as_json)
            std::cerr << "shardctl: resuming at step " << trainer->steps_done() << " from "
                      << resumed["path"].get<std::string>()
                      << (used_mirror ? " (the mirror's copy: " + printable(point.mirror_reason, 400) + ")" : "")
                      << (saved_world != config.world_size ? " (resharded " + std::to_string(saved_world) + " -> " +
                                  std::to_string(config.world_size) + " ranks)"
                                                           : std::string())
                      << '\n';
    } else {
        trainer.emplace(config);
    }

    QElapsedTimer timer;
    timer.start();
    const bool async = parser.isSet(QStringLiteral("async"));
    double stall_ms = 0;
    int saves = 0;
    while (trainer->steps_done() < args->steps) {
        trainer->step();
        const uint64_t done = trainer->steps_done();
        if (inject_at && done >= *inject_at)
            trainer->plant_nan(*inject_state);
        if (done % args->save_every != 0 && done != args->steps)
            continue;
        SaveOptions meta;
        meta.wall_clock_seconds = wall_clock_base + static_cast<double>(timer.elapsed()) / 1000.0;
        meta.training_state = trainer->training_state();
        QElapsedTimer stall;
        stall.start();
        if (async)
            manager.save_async(trainer->ranks(), done, meta);
        else
            manager.save(trainer->ranks(), done, meta);
        stall_ms += static_cast<double>(stall.nsecsElapsed()) / 1e6;
        ++saves;
    }
    manager.wait();

    // The run is done; the mirror may still lack steps whose uploads failed: one more try each,
    // then the exit status says whether the mirror holds every step it is meant to.
    json mirror = nullptr;
    bool mirror_complete = true;
    if (options.mirror) {
        manager.retry_uploads();
        manager.wait();
        json steps = json::array();
        for (const UploadStatus& u : manager.upload_status()) {
            steps.push_back(to_json(u));
            if (u.state != UploadState::uploaded) {
                mirror_complete = false;
                std::cerr << "shardctl: " << u.name << " has no verified copy in the mirror"
                          << (u.error.empty() ? std::string() : ": " + printable(u.error, 4096)) << '\n';
            }
        }
        mirror = {{"path", storage::to_string(*options.mirror)}, {"complete", mirror_complete}, {"steps", steps}};
    }
    json extra = resume_choice;
    if (options.mirror)
        extra["mirror"] = mirror;
    print_train_result(as_json, *trainer, flat_state_digests(trainer->ranks()), config.world_size,
                       read_latest(options.root), resumed, saves, stall_ms, {}, extra);
    return mirror_complete ? kOk : kMirrorIncomplete;
}

} // namespace shardctl
