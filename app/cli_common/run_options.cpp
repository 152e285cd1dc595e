#include "app/cli_common/run_options.h"

#include "core/util/printable.h"

#include <cstdio>
#include <iostream>

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;
using nlohmann::json;

json digests_json(const StateDigests& d)
{
    return {{"param", d.param}, {"master", d.master}, {"exp_avg", d.exp_avg}, {"exp_avg_sq", d.exp_avg_sq}};
}

void print_digests(const StateDigests& d)
{
    print_line("  param       " + d.param);
    print_line("  master      " + d.master);
    print_line("  exp_avg     " + d.exp_avg);
    print_line("  exp_avg_sq  " + d.exp_avg_sq);
}

namespace {

std::optional<ParamDtype> dtype_option(const QCommandLineParser& parser)
{
    const std::string text = local(parser.value(QStringLiteral("dtype")));
    const auto dtype = param_dtype_from_string(text);
    if (!dtype)
        fail(kUsage, "--dtype must be f16 or bf16, not '" + text + "'");
    return dtype;
}

bool require(const QCommandLineParser& parser, const char* command, std::initializer_list<const char*> names)
{
    for (const char* name : names)
        if (!parser.isSet(QLatin1String(name))) {
            fail(kUsage, std::string(command) + " needs --" + name);
            return false;
        }
    return true;
}

} // namespace

void add_verify_options(QCommandLineParser& parser)
{
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory or root."));
    parser.addOptions({
        {QStringLiteral("fast"), QStringLiteral("Compare the XXH3 checksum instead of SHA-256.")},
        {QStringLiteral("expect-world-size"), QStringLiteral("Fail unless the checkpoint has N ranks."),
         QStringLiteral("N")},
    });
}

bool read_verify_options(const QCommandLineParser& parser, VerifyOptions& options)
{
    const auto threads = int_option(parser, QStringLiteral("threads"), 0, 1024);
    if (!threads)
        return false;
    options.threads = static_cast<int>(*threads);
    options.fast = parser.isSet(QStringLiteral("fast"));
    if (parser.isSet(QStringLiteral("expect-world-size"))) {
        const auto expected = int_option(parser, QStringLiteral("expect-world-size"), 1, kMaxWorldSize);
        if (!expected)
            return false;
        options.expected_world_size = static_cast<int>(*expected);
    }
    return true;
}

void add_demo_save_options(QCommandLineParser& parser)
{
    parser.addOptions({
        {QStringLiteral("out"), QStringLiteral("Checkpoint directory to create."), QStringLiteral("DIR")},
        {QStringLiteral("numel"), QStringLiteral("Total number of parameters."), QStringLiteral("P")},
        {QStringLiteral("step"), QStringLiteral("Training step (default 0)."), QStringLiteral("S"),
         QStringLiteral("0")},
        {QStringLiteral("seed"), QStringLiteral("Seed of the synthetic state (default 1)."), QStringLiteral("X"),
         QStringLiteral("1")},
        {QStringLiteral("dtype"), QStringLiteral("Parameter dtype: f16 or bf16 (default f16)."),
         QStringLiteral("f16|bf16"), QStringLiteral("f16")},
    });
}

std::optional<DemoSaveArgs> read_demo_save_options(const QCommandLineParser& parser,
                                                   std::optional<int> default_world_size)
{
    if (!require(parser, "demo-save", {"out", "numel"}))
        return std::nullopt;
    if (!default_world_size && !require(parser, "demo-save", {"world-size"}))
        return std::nullopt;
    const auto world = parser.isSet(QStringLiteral("world-size"))
        ? int_option(parser, QStringLiteral("world-size"), 1, kMaxWorldSize)
        : std::optional<long long>(*default_world_size);
    const auto numel = world ? int_option(parser, QStringLiteral("numel"), 0, 1ll << 40) : std::nullopt;
    const auto step = numel ? int_option(parser, QStringLiteral("step"), 0, 1ll << 53) : std::nullopt;
    const auto seed = step ? int_option(parser, QStringLiteral("seed"), 0, 1ll << 62) : std::nullopt;
    const auto threads = seed ? int_option(parser, QStringLiteral("threads"), 0, 1024) : std::nullopt;
    const auto dtype = threads ? dtype_option(parser) : std::nullopt;
    if (!dtype)
        return std::nullopt;
    return DemoSaveArgs{local(parser.value(QStringLiteral("out"))),
                        static_cast<int>(*world),
                        static_cast<uint64_t>(*numel),
                        static_cast<uint64_t>(*step),
                        static_cast<uint64_t>(*seed),
                        static_cast<int>(*threads),
                        *dtype};
}

json demo_save_json(const fs::path& out, const Manifest& m, double seconds)
{
    return {{"ok", true},
            {"path", out.string()},
            {"world_size", m.world_size},
            {"step", m.step},
            {"param_numel_total", m.param_numel_total},
            {"bytes", m.total_bytes()},
            {"seconds", seconds}};
}

void add_load_options(QCommandLineParser& parser)
{
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory or root."));
    parser.addOption({QStringLiteral("expect-world-size"), QStringLiteral("The world size the job runs with."),
                      QStringLiteral("N")});
}

std::optional<LoadArgs> read_load_options(const QCommandLineParser& parser)
{
    if (!parser.isSet(QStringLiteral("expect-world-size"))) {
        fail(kUsage, "load needs --expect-world-size N (the world size the job will resume with)");
        return std::nullopt;
    }
    const auto expected = int_option(parser, QStringLiteral("expect-world-size"), 1, kMaxWorldSize);
    const auto threads = expected ? int_option(parser, QStringLiteral("threads"), 0, 1024) : std::nullopt;
    if (!threads)
        return std::nullopt;
    return LoadArgs{local(parser.positionalArguments().at(0)), static_cast<int>(*expected), static_cast<int>(*threads)};
}

void print_load_result(bool as_json, const fs::path& dir, const Manifest& m, const StateDigests& digests,
                       const std::string& where, const json& extra)
{
    if (as_json) {
        json out = {{"ok", true},
                    {"path", dir.string()},
                    {"world_size", m.world_size},
                    {"step", m.step},
                    {"param_numel_total", m.param_numel_total},
                    {"param_dtype", std::string(to_string(m.param_dtype))},
                    {"digests", digests_json(digests)}};
        out.update(extra);
        print_json(out);
        return;
    }
    print_line(dir.string() + ": loaded " + std::to_string(m.world_size) + " ranks" + where + ", step " +
               std::to_string(m.step));
    print_digests(digests);
}

QList<QCommandLineOption> resume_options()
{
    return {
        {QStringLiteral("allow-unhealthy"),
         QStringLiteral("From a root, load its newest step even when its values are not healthy (default: the "
                        "newest healthy step, naming the ones passed over).")},
        {QStringLiteral("allow-partial-state"),
         QStringLiteral("Go on when the checkpoint holds state this command does not restore (named on stderr "
                        "and in the JSON) instead of refusing.")},
    };
}

void read_resume_options(const QCommandLineParser& parser, ResumeOptions& options)
{
    options.allow_unhealthy = parser.isSet(QStringLiteral("allow-unhealthy"));
    options.load.allow_unread_state = parser.isSet(QStringLiteral("allow-partial-state"));
}

json report_resume_choice(const std::vector<std::string>& skipped, const std::vector<std::string>& unread)
{
    // With --json too: stdout holds the one object, and what a resume passed over or dropped is
    // said where a person watching the job looks.
    for (const auto& s : skipped)
        std::cerr << "shardctl: passed over " << printable(s, 4096) << '\n';
    for (const auto& u : unread)
        std::cerr << "shardctl: not restored: " << printable(u, 4096) << '\n';
    return {{"skipped_unhealthy", skipped}, {"unread_state", unread}};
}

void add_train_options(QCommandLineParser& parser)
{
    parser.addOptions({
        {QStringLiteral("root"), QStringLiteral("Checkpoint root directory."), QStringLiteral("DIR")},
        {QStringLiteral("steps"), QStringLiteral("Total optimizer steps of the run."), QStringLiteral("S")},
        {QStringLiteral("save-every"), QStringLiteral("Checkpoint every K steps (default 10)."), QStringLiteral("K"),
         QStringLiteral("10")},
        {QStringLiteral("keep"), QStringLiteral("Complete steps to keep locally (default 3)."), QStringLiteral("K2"),
         QStringLiteral("3")},
        {QStringLiteral("numel"), QStringLiteral("Model parameters (default 65536)."), QStringLiteral("P"),
         QStringLiteral("65536")},
        {QStringLiteral("seed"), QStringLiteral("Seed of data, weights and noise (default 1)."), QStringLiteral("X"),
         QStringLiteral("1")},
        {QStringLiteral("dtype"), QStringLiteral("Parameter dtype: f16 or bf16 (default bf16)."),
         QStringLiteral("f16|bf16"), QStringLiteral("bf16")},
        {QStringLiteral("batch"), QStringLiteral("Global batch size (default 16)."), QStringLiteral("B"),
         QStringLiteral("16")},
        {QStringLiteral("lr-decay-steps"),
         QStringLiteral("Length of the cosine LR schedule (default 1000); part of the run's "
                        "configuration, unlike --steps, which only says where to stop."),
         QStringLiteral("L"), QStringLiteral("1000")},
        {QStringLiteral("resume"), QStringLiteral("Continue from the root's `latest` if there is one.")},
        {QStringLiteral("no-fsync"), QStringLiteral("Skip fsync (faster, not crash-safe; for experiments).")},
    });
}

std::optional<TrainArgs> read_train_options(const QCommandLineParser& parser)
{
    if (!require(parser, "train", {"root", "steps"}))
        return std::nullopt;
    const auto steps = int_option(parser, QStringLiteral("steps"), 1, 1ll << 40);
    const auto every = steps ? int_option(parser, QStringLiteral("save-every"), 1, 1ll << 40) : std::nullopt;
    const auto keep = every ? int_option(parser, QStringLiteral("keep"), 1, 1 << 20) : std::nullopt;
    const auto numel = keep ? int_option(parser, QStringLiteral("numel"), 1, 1ll << 32) : std::nullopt;
    const auto seed = numel ? int_option(parser, QStringLiteral("seed"), 0, 1ll << 62) : std::nullopt;
    const auto batch = seed ? int_option(parser, QStringLiteral("batch"), 1, 1 << 16) : std::nullopt;
    const auto decay = batch ? int_option(parser, QStringLiteral("lr-decay-steps"), 1, 1ll << 40) : std::nullopt;
    const auto dtype = decay ? dtype_option(parser) : std::nullopt;
    if (!dtype)
        return std::nullopt;
    TrainArgs args;
    args.root = local(parser.value(QStringLiteral("root")));
    args.steps = static_cast<uint64_t>(*steps);
    args.save_every = static_cast<uint64_t>(*every);
    args.keep = static_cast<int>(*keep);
    args.resume = parser.isSet(QStringLiteral("resume"));
    args.durable = !parser.isSet(QStringLiteral("no-fsync"));
    args.config.numel = static_cast<uint64_t>(*numel);
    args.config.seed = static_cast<uint64_t>(*seed);
    args.config.dtype = *dtype;
    args.config.batch_size = static_cast<int>(*batch);
    args.config.total_steps = static_cast<uint64_t>(*decay);
    return args;
}

json resumed_from_json(const fs::path& dir, const Manifest& m, bool from_mirror)
{
    return {{"step", m.step}, {"path", dir.string()}, {"world_size", m.world_size}, {"from_mirror", from_mirror}};
}

void print_train_result(bool as_json, const Trainer& trainer, const StateDigests& d, int world_size,
                        const std::optional<std::string>& latest, const json& resumed_from, int saves,
                        double save_stall_ms, const std::string& where, const json& extra)
{
    if (as_json) {
        json out = {{"ok", true},
                    {"steps", trainer.steps_done()},
                    {"final_loss", trainer.last_loss()},
                    {"world_size", world_size},
                    {"resumed_from", resumed_from},
                    {"saves", saves},
                    {"save_stall_ms", save_stall_ms},
                    {"latest", latest ? json(*latest) : json(nullptr)},
                    {"digests", digests_json(d)}};
        out.update(extra);
        print_json(out);
        return;
    }
    char loss[64];
    std::snprintf(loss, sizeof loss, "%.17g", trainer.last_loss()); // every bit, for comparing runs
    print_line("trained to step " + std::to_string(trainer.steps_done()) + where + ", final loss " + loss +
               ", latest " + latest.value_or("(none)"));
    print_digests(d);
}

std::optional<int> target_option(const QCommandLineParser& parser)
{
    if (!parser.isSet(QStringLiteral("to"))) {
        fail(kUsage, "--to M (the new world size) is required");
        return std::nullopt;
    }
    const auto to = int_option(parser, QStringLiteral("to"), 1, kMaxWorldSize);
    return to ? std::optional<int>(static_cast<int>(*to)) : std::nullopt;
}

void add_reshard_options(QCommandLineParser& parser)
{
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory or root."));
    parser.addOptions({{QStringLiteral("to"), QStringLiteral("The new world size."), QStringLiteral("M")},
                       {QStringLiteral("out"), QStringLiteral("New checkpoint directory (absent or empty)."),
                        QStringLiteral("DIR")}});
}

std::optional<ReshardArgs> read_reshard_options(const QCommandLineParser& parser)
{
    const auto to = target_option(parser);
    if (!to)
        return std::nullopt;
    if (!parser.isSet(QStringLiteral("out"))) {
        fail(kUsage, "--out DIR (where to write the resharded checkpoint) is required");
        return std::nullopt;
    }
    const auto threads = int_option(parser, QStringLiteral("threads"), 0, 1024);
    if (!threads)
        return std::nullopt;
    return ReshardArgs{local(parser.positionalArguments().at(0)), local(parser.value(QStringLiteral("out"))), *to,
                       static_cast<int>(*threads)};
}

} // namespace shardctl
