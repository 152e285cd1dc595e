// shardctl stats and diff (docs/shardctl.md, "stats" and "diff"): the flags and the output are
// cli_common's (shared with shardctl-mpi); the work is core/inspect's.

#include "app/cli_common/inspect_options.h"
#include "app/shardctl/commands.h"

namespace shardctl {

using namespace shardscope;

int run_stats(const QStringList& arguments)
{
    const auto args = parse_stats_args(arguments, json_option(), threads_option());
    if (!args)
        return kUsage;
    return print_stats(inspect_content(args->path, args->options), args->json); // Error: main
}

int run_diff(const QStringList& arguments)
{
    const auto args = parse_diff_args(arguments, json_option(), threads_option());
    if (!args)
        return kUsage;
    return print_diff(diff_checkpoints(args->a, args->b, args->options), args->json);
}

} // namespace shardctl
