// train: a deterministic simulated training run that checkpoints into a root, and resumes.

#include "cli.h"

#include "core/lifecycle.h"
#include "core/reshard.h"
#include "core/training.h"

#include <QElapsedTimer>
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
    parser.addOptions({
        {QStringLiteral("root"), QStringLiteral("Checkpoint root directory."), QStringLiteral("DIR")},
        {QStringLiteral("steps"), QStringLiteral("Total optimizer steps of the run."), QStringLiteral("S")},
        {QStringLiteral("save-every"), QStringLiteral("Checkpoint every K steps (default 10)."), QStringLiteral("K"), QStringLiteral("10")},
        {QStringLiteral("keep"), QStringLiteral("Complete steps to keep locally (default 3)."), QStringLiteral("K2"), QStringLiteral("3")},
        {QStringLiteral("world-size"), QStringLiteral("Data-parallel ranks (default 1)."), QStringLiteral("N"), QStringLiteral("1")},
        {QStringLiteral("numel"), QStringLiteral("Model parameters (default 65536)."), QStringLiteral("P"), QStringLiteral("65536")},
        {QStringLiteral("seed"), QStringLiteral("Seed of data, weights and noise (default 1)."), QStringLiteral("X"), QStringLiteral("1")},
        {QStringLiteral("dtype"), QStringLiteral("Parameter dtype: f16 or bf16 (default bf16)."), QStringLiteral("f16|bf16"), QStringLiteral("bf16")},
        {QStringLiteral("batch"), QStringLiteral("Global batch size (default 16)."), QStringLiteral("B"), QStringLiteral("16")},
        {QStringLiteral("lr-decay-steps"), QStringLiteral("Length of the cosine LR schedule (default 1000); part of the run's "
                                                          "configuration, unlike --steps, which only says where to stop."),
         QStringLiteral("L"), QStringLiteral("1000")},
        {QStringLiteral("async"), QStringLiteral("Save in the background (the loop stalls only for a snapshot).")},
        {QStringLiteral("mirror"), QStringLiteral("Second tier: copy each committed step there and verify it."), QStringLiteral("DIR2")},
        {QStringLiteral("mirror-keep"), QStringLiteral("Steps the mirror keeps (default 10)."), QStringLiteral("K3"), QStringLiteral("10")},
        {QStringLiteral("resume"), QStringLiteral("Continue from the root's `latest` (or the mirror's) if there is one.")},
        {QStringLiteral("no-fsync"), QStringLiteral("Skip fsync (faster, not crash-safe; for experiments).")},
        {QStringLiteral("json"), QStringLiteral("Print one JSON object on stdout.")},
    });
    if (!parse(parser, arguments, 0, QStringLiteral("train")))
        return kUsage;
    for (const char* required : {"root", "steps"})
        if (!parser.isSet(QLatin1String(required)))
            return fail(kUsage, std::string("train needs --") + required);
    const auto steps = int_option(parser, QStringLiteral("steps"), 1, 1ll << 40);
    const auto every = steps ? int_option(parser, QStringLiteral("save-every"), 1, 1ll << 40) : std::nullopt;
    const auto keep = every ? int_option(parser, QStringLiteral("keep"), 1, 1 << 20) : std::nullopt;
    const auto world = keep ? int_option(parser, QStringLiteral("world-size"), 1, 4096) : std::nullopt;
    const auto numel = world ? int_option(parser, QStringLiteral("numel"), 1, 1ll << 32) : std::nullopt;
    const auto seed = numel ? int_option(parser, QStringLiteral("seed"), 0, 1ll << 62) : std::nullopt;
    const auto batch = seed ? int_option(parser, QStringLiteral("batch"), 1, 1 << 16) : std::nullopt;
    const auto mirror_keep = batch ? int_option(parser, QStringLiteral("mirror-keep"), 1, 1 << 20) : std::nullopt;
    const auto decay = mirror_keep ? int_option(parser, QStringLiteral("lr-decay-steps"), 1, 1ll << 40) : std::nullopt;
    if (!decay)
        return kUsage;
    const auto dtype = param_dtype_from_string(local(parser.value(QStringLiteral("dtype"))));
    if (!dtype)
        return fail(kUsage, "--dtype must be f16 or bf16");

    TrainConfig config;
    config.world_size = static_cast<int>(*world);
    config.numel = static_cast<uint64_t>(*numel);
    config.seed = static_cast<uint64_t>(*seed);
    config.dtype = *dtype;
    config.batch_size = static_cast<int>(*batch);
    config.total_steps = static_cast<uint64_t>(*decay);

    ManagerOptions options;
    options.root = local(parser.value(QStringLiteral("root")));
    options.keep_last = static_cast<int>(*keep);
    options.mirror_keep_last = static_cast<int>(*mirror_keep);
    options.durable = !parser.isSet(QStringLiteral("no-fsync"));
    if (parser.isSet(QStringLiteral("mirror")))
        options.mirror = fs::path(local(parser.value(QStringLiteral("mirror"))));
    CheckpointManager manager(options);

    const bool has_checkpoint = read_latest(options.root).has_value() ||
                                (options.mirror && read_latest(*options.mirror).has_value());
    if (has_checkpoint && !parser.isSet(QStringLiteral("resume")))
        return fail(kUsage, options.root.string() + " already holds checkpoints of a run; pass --resume to continue it "
                                                    "or choose an empty --root");
    std::optional<Trainer> trainer;
    json resumed = nullptr;
    double wall_clock_base = 0;
    if (has_checkpoint) {
        bool used_mirror = false;
        LoadedCheckpoint loaded = manager.load_latest(-1, &used_mirror);
        const int saved_world = loaded.manifest.world_size;
        wall_clock_base = loaded.manifest.wall_clock_seconds;
        resumed = {{"step", loaded.manifest.step}, {"path", loaded.dir.string()}, {"world_size", saved_world},
                   {"from_mirror", used_mirror}};
        if (saved_world != config.world_size) // the job restarts on a different number of ranks
            loaded.ranks = reshard_in_memory(loaded.ranks, config.world_size);
        trainer.emplace(Trainer::resume(config, std::move(loaded)));
        if (!parser.isSet(QStringLiteral("json")))
            std::cerr << "shardctl: resuming at step " << trainer->steps_done() << " from " << resumed["path"].get<std::string>()
                      << (used_mirror ? " (the mirror's copy: the local one did not verify)" : "")
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
    while (trainer->steps_done() < static_cast<uint64_t>(*steps)) {
        trainer->step();
        const uint64_t done = trainer->steps_done();
        if (done % static_cast<uint64_t>(*every) != 0 && done != static_cast<uint64_t>(*steps))
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

    const StateDigests d = flat_state_digests(trainer->ranks());
    const auto latest = read_latest(options.root);
    if (parser.isSet(QStringLiteral("json"))) {
        print_json({{"ok", true}, {"steps", trainer->steps_done()}, {"final_loss", trainer->last_loss()},
                    {"world_size", config.world_size}, {"resumed_from", resumed}, {"saves", saves},
                    {"save_stall_ms", stall_ms}, {"latest", latest ? json(*latest) : json(nullptr)},
                    {"digests", {{"param", d.param}, {"master", d.master}, {"exp_avg", d.exp_avg}, {"exp_avg_sq", d.exp_avg_sq}}}});
    } else {
        char loss[64];
        std::snprintf(loss, sizeof loss, "%.17g", trainer->last_loss());
        print_line("trained to step " + std::to_string(trainer->steps_done()) + ", final loss " + loss + ", latest " +
                   latest.value_or("(none)"));
        print_line("  param       " + d.param);
        print_line("  master      " + d.master);
        print_line("  exp_avg     " + d.exp_avg);
        print_line("  exp_avg_sq  " + d.exp_avg_sq);
    }
    return kOk;
}

} // namespace shardctl
