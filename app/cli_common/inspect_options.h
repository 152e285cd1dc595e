#pragma once
// What stats and diff of shardctl and shardctl-mpi have in common: their flags, read with the
// usual usage errors, and their output (the --json object or the text lines, then each problem
// on stderr), so that the two tools take the same flags and print the same results.

#include "app/cli_common/cli.h"

#include "core/inspect/content.h"
#include "core/inspect/diff.h"

#include <filesystem>
#include <optional>

namespace shardctl {

struct StatsArgs {
    shardscope::storage::Location path;
    shardscope::ContentOptions options;
    bool json = false;
};
// stats PATH [--json] [--tensor GLOB]... [--threads T] [--raw-fp8]; nullopt after a usage error was printed.
std::optional<StatsArgs> parse_stats_args(const QStringList& arguments, const QCommandLineOption& json,
                                          const QCommandLineOption& threads);

struct DiffArgs {
    shardscope::storage::Location a, b;
    shardscope::DiffOptions options;
    bool json = false;
};
// diff A B [--json] [--atol X] [--rtol Y] [--tensor GLOB]... [--threads T] [--raw-fp8]
std::optional<DiffArgs> parse_diff_args(const QStringList& arguments, const QCommandLineOption& json,
                                        const QCommandLineOption& threads);

// Prints the result (JSON object or text, then the problems on stderr; `extra` keys go into the
// object) and returns the exit status: 0 healthy / identical, 1 otherwise.
int print_stats(const shardscope::ContentReport& report, bool json, const nlohmann::json& extra = {});
int print_diff(const shardscope::DiffReport& report, bool json, const nlohmann::json& extra = {});

} // namespace shardctl
