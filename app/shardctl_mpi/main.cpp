// shardctl-mpi: shardctl's checkpoint commands with one MPI process per rank (or per P ranks):
//   mpirun -np 4 shardctl-mpi demo-save --out DIR --numel P --json
// Exit status as shardctl's (0 ok, 1 a check failed, 2 usage or environment), on every process.

#include "app/cli_common/cli.h"
#include "app/shardctl_mpi/commands.h"

#include <QCoreApplication>
#include <iostream>
#include <mpi.h>
#include <unistd.h>

namespace {

struct Command {
    const char* name;
    int (*run)(shardctl_mpi::MpiJob&, const QStringList&);
    const char* summary;
};

const Command kCommands[] = {
    {"demo-save", shardctl_mpi::run_demo_save, "each process writes its ranks' shards; process 0 commits"},
    {"load", shardctl_mpi::run_load, "each process loads its ranks; process 0 prints the digests"},
    {"verify", shardctl_mpi::run_verify, "each process verifies its ranks' shards; all agree"},
    {"reshard", shardctl_mpi::run_reshard, "each target rank reads exactly its copy runs; process 0 commits"},
    {"train", shardctl_mpi::run_train, "data-parallel training, one process per rank, checkpoints and resume"},
    {"stats", shardctl_mpi::run_stats, "each process reads a share of the tensor parts; process 0 merges"},
    {"diff", shardctl_mpi::run_diff, "each process compares a share of the tensors; process 0 merges"},
};

void print_usage(std::ostream& out)
{
    out << "usage: mpirun -np P shardctl-mpi <command> [options]   (shardctl's options; <command> --help)\n\n"
           "commands:\n";
    for (const Command& command : kCommands)
        out << "  " << command.name << std::string(12 - std::string(command.name).size(), ' ') << command.summary
            << '\n';
}

int report(const shardctl_mpi::MpiJob& job, int code, const std::string& sentence)
{
    std::fflush(stdout);
    // One write(2), so that mpirun's forwarding does not interleave it with other processes' lines.
    const std::string line =
        "shardctl-mpi[" + std::to_string(job.rank()) + "/" + std::to_string(job.size()) + "]: " + sentence + "\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
    return code;
}

} // namespace

int main(int argc, char** argv)
{
    shardctl_mpi::MpiJob job(&argc, &argv);
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("shardctl-mpi"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SHARDSCOPE_VERSION));
    shardctl::local_paths_only(); // every process opens its own ranks' files on its own disk

    QStringList arguments = QCoreApplication::arguments();
    if (arguments.size() < 2) {
        if (job.coordinator())
            print_usage(std::cerr);
        return shardctl::kUsage;
    }
    const QString name = arguments.at(1);
    if (name == QStringLiteral("--help") || name == QStringLiteral("-h") || name == QStringLiteral("help")) {
        if (job.coordinator())
            print_usage(std::cout);
        return shardctl::kOk;
    }
    for (const Command& command : kCommands) {
        if (name != QLatin1String(command.name))
            continue;
        arguments.removeFirst();
        try {
            const int code = command.run(job, arguments);
            return job.coordinator() ? shardctl::finish_json_command(code) : code;
        } catch (const shardctl_mpi::AgreedError& error) { // every process is here with the same error
            const int code = report(job, shardscope::exit_code_for(error.kind()), error.what());
            if (job.coordinator()) {
                const shardscope::Problem problem = error.problem();
                shardctl::finish_json_command(code, &problem);
            }
            // mpirun tears the job down when the first process exits non-zero: wait until every
            // process has reported, so each one's message reaches the user.
            job.barrier();
            return code;
        } catch (const std::exception& error) {
            // Only this process failed, outside an agreement: the others may wait in a collective
            // forever, so the whole job goes down (mpirun reports it).
            report(job, shardctl::kUsage,
                   std::string("error outside a collective step, aborting the job: ") + error.what());
            MPI_Abort(MPI_COMM_WORLD, shardctl::kUsage);
            return shardctl::kUsage;
        }
    }
    if (job.coordinator()) {
        std::cerr << "shardctl-mpi: unknown command '" << name.toStdString() << "'\n\n";
        print_usage(std::cerr);
    }
    return shardctl::kUsage;
}
