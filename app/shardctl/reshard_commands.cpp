// plan-reshard and reshard: N -> M resharding, previewed or executed.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/cli_common/run_options.h"

#include "core/report/report.h"
#include "core/checkpoint/directory.h"
#include "core/checkpoint/reshard.h"
#include "core/open/detect.h"
#include "core/storage/location.h"

#include <QElapsedTimer>

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;

namespace {

void print_plan(const ReshardPlan& plan)
{
    print_line("reshard " + std::to_string(plan.source_world_size) + " -> " + std::to_string(plan.target_world_size) +
               " ranks, " + std::to_string(plan.numel_total) + " parameters");
    for (const auto& t : plan.targets) {
        std::string sources;
        for (const auto& r : t.runs)
            sources += (sources.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r.source_rank) + " [" +
                std::to_string(r.source_offset) + ", " + std::to_string(r.source_offset + r.numel) + ")";
        print_line("  new rank " + std::to_string(t.rank) + "  [" + std::to_string(t.offset) + ", " +
                   std::to_string(t.offset + t.numel) + ")  from " + (sources.empty() ? "nothing" : sources));
    }
    print_line("  bytes read " + std::to_string(plan.bytes_read) + ", written " + std::to_string(plan.bytes_written) +
               ", staying on the same rank " + std::to_string(plan.bytes_staying) + ", moving " +
               std::to_string(plan.bytes_moving));
}

} // namespace

int run_plan_reshard(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Preview an N -> M reshard: which byte ranges go where."));
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory or root."));
    parser.addOptions(
        {{QStringLiteral("to"), QStringLiteral("The new world size."), QStringLiteral("M")}, json_option()});
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("plan-reshard")))
        return kUsage;
    const auto to = target_option(parser);
    if (!to)
        return kUsage;
    const ReshardPlan plan =
        plan_reshard(read_manifest_at(checkpoint_argument(parser.positionalArguments().at(0))), *to);
    if (parser.isSet(QStringLiteral("json")))
        print_json(reshard_plan_json(plan)); // also the GUI report's and reshard --json's `plan`
    else
        print_plan(plan);
    return kOk;
}

int run_reshard(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Reshard a checkpoint to M ranks into a new directory. The source is verified and never modified."));
    add_reshard_options(parser);
    parser.addOptions({threads_option(), json_option()});
    if (!parse(parser, arguments, 1, QStringLiteral("reshard")))
        return kUsage;
    const auto args = read_reshard_options(parser);
    if (!args)
        return kUsage;
    ReshardOptions options;
    options.threads = args->threads;
    const fs::path& out = args->out;
    QElapsedTimer timer;
    timer.start();
    const ReshardResult result = reshard(args->source, args->to, out, options);
    const double seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
    if (parser.isSet(QStringLiteral("json"))) {
        print_json(reshard_result_json(result, out, seconds));
    } else {
        print_plan(result.plan);
        print_line("wrote " + out.string() + ": " + std::to_string(result.manifest.world_size) + " shards in " +
                   format_seconds(seconds) + " s");
    }
    return kOk;
}

} // namespace shardctl
