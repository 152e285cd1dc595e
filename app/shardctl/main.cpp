// shardctl: ShardScope's command line, for scripts and CI. Exit status: 0 all good, 1 a check
// failed, 2 usage or environment error.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"

#include <QCoreApplication>
#include <exception>
#include <iostream>

namespace {

struct Command {
    const char* name;
    int (*run)(const QStringList&);
    const char* summary;
};

const Command kCommands[] = {
    {"demo-save", shardctl::run_demo_save, "write a synthetic sharded checkpoint"},
    {"info", shardctl::run_info, "detect a checkpoint's format and summarize it"},
    {"verify", shardctl::run_verify, "check every invariant and every shard's hash"},
    {"load", shardctl::run_load, "load all ranks and print sharding-independent digests"},
    {"plan-reshard", shardctl::run_plan_reshard, "preview an N -> M reshard"},
    {"reshard", shardctl::run_reshard, "reshard a checkpoint to M ranks into a new directory"},
    {"train", shardctl::run_train, "deterministic training loop with periodic checkpoints and resume"},
    {"status", shardctl::run_status, "a checkpoint root's steps, uploads, writer lock and free space"},
    {"schedule", shardctl::run_schedule, "simulate one pipeline-parallel training step"},
    {"plan", shardctl::run_plan, "search the fastest pipeline x data-parallel setup that fits"},
    {"profile", shardctl::run_profile, "a layer-cost profile from a checkpoint or a profiler trace"},
    {"report", shardctl::run_report, "write the inspection report (json, md or html)"},
    {"stats", shardctl::run_stats, "statistics and health checks of every tensor's values"},
    {"diff", shardctl::run_diff, "what changed between two checkpoints, tensor by tensor"},
    {"convert", shardctl::run_convert, "write a checkpoint as a Hugging Face folder, a torch DCP or ShardScope"},
};

void print_usage(std::ostream& out)
{
    out << "usage: shardctl <command> [options]   (shardctl <command> --help for its options)\n\n"
           "commands:\n";
    for (const Command& command : kCommands)
        out << "  " << command.name << std::string(14 - std::string(command.name).size(), ' ') << command.summary
            << '\n';
}

} // namespace

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("shardctl"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SHARDSCOPE_VERSION));

    QStringList arguments = QCoreApplication::arguments();
    if (arguments.size() < 2) {
        print_usage(std::cerr);
        return shardctl::kUsage;
    }
    const QString name = arguments.at(1);
    if (name == QStringLiteral("--help") || name == QStringLiteral("-h") || name == QStringLiteral("help")) {
        print_usage(std::cout);
        return shardctl::kOk;
    }
    if (name == QStringLiteral("--version")) {
        std::cout << "shardctl " << SHARDSCOPE_VERSION << '\n';
        return shardctl::kOk;
    }
    for (const Command& command : kCommands) {
        if (name != QLatin1String(command.name))
            continue;
        arguments.removeFirst(); // the command parses "<name> [options]"
        int code = shardctl::kUsage;
        try {
            code = command.run(arguments);
        } catch (const shardscope::Error& error) {
            code = shardctl::fail(error);
        } catch (const std::bad_alloc&) {
            code = shardctl::fail(shardscope::Error(shardscope::ProblemKind::io_error, "out of memory"));
        } catch (const std::exception& error) {
            code = shardctl::fail(
                shardscope::Error(shardscope::ProblemKind::io_error, std::string("internal error: ") + error.what()));
        }
        return shardctl::finish_json_command(code);
    }
    std::cerr << "shardctl: unknown command '" << name.toStdString() << "'\n\n";
    print_usage(std::cerr);
    return shardctl::kUsage;
}
