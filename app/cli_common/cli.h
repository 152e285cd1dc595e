#pragma once
// What every shardctl and shardctl-mpi command shares: option parsing that maps usage errors to exit status 2,
// one-sentence errors on stderr, and JSON on stdout.

#include "core/storage/location.h"
#include "core/util/error.h"

#include <QCommandLineParser>
#include <QStringList>
#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace shardctl {

// kMirrorIncomplete: `train` finished and every local save committed, but a step the mirror is
// meant to hold has no verified copy there (docs/shardctl.md, 1.1).
enum ExitCode { kOk = 0, kCheckFailed = 1, kUsage = 2, kMirrorIncomplete = 3 };

// Prints "shardctl: <sentence>" to stderr and returns `code`.
int fail(int code, const std::string& sentence);
int fail(const shardscope::Error& error);

// --json promises one JSON object on stdout in every outcome: when the command, whose parse()
// found --json, returned `code` without printing one (a usage error, an exception), this prints
// {"ok": false, "error": {"kind", "message", ...}, "problems": [the same]} with the first failure
// said on stderr (kind "usage" for a usage error), or `failure` when given (an error the caller
// reported itself). Returns `code`.
int finish_json_command(int code, const shardscope::Problem* failure = nullptr);

// For a program whose commands read and write local folders only (shardctl-mpi): a URL is refused
// wherever a path goes, as by shardctl's local-only commands.
void local_paths_only();

// Parses `arguments` (the command's name first). On a usage error prints it and returns false;
// the caller returns kUsage. `positional` is how many positional arguments are required.
bool parse(QCommandLineParser& parser, const QStringList& arguments, int positional, const QString& usage_name);
// parse() in its two steps, for a command whose positional arguments depend on an option it
// takes (profile: PATH, or none with --from-trace).
bool parse_options(QCommandLineParser& parser, const QStringList& arguments, const QString& usage_name);
bool check_positional(const QCommandLineParser& parser, int positional, const QString& usage_name);

// Integer option values with a range check; nullopt after printing the error.
std::optional<long long> int_option(const QCommandLineParser& parser, const QString& name, long long min_value,
                                    long long max_value);

// --json and --threads T, whose help (and default) differ between shardctl and shardctl-mpi.
QCommandLineOption json_option(const QString& help = QStringLiteral("Print one JSON object on stdout."));
// --no-verify-tls and --endpoint URL, for the commands that read a location: location_argument()
// then leaves a server's TLS certificate unchecked, and reaches s3:// locations at that endpoint
// instead of the environment's.
QList<QCommandLineOption> remote_options();
QCommandLineOption threads_option(const QString& help = QStringLiteral("Worker threads (default: all cores)."),
                                  const QString& default_value = QStringLiteral("0"));

// A time for the text output, rounded: "0.042" (3 decimals below 10 s), "12.35" (2 below 100 s),
// "1234" above; the caller adds " s". (Cutting std::to_string's six decimals to five characters
// truncated instead of rounding and kept one decimal or none from 100 s on.)
std::string format_seconds(double seconds);

void print_json(const nlohmann::json& object);
// The same for an object already serialized (a document too large to build as a DOM first).
void print_json_text(std::string_view text);
// The same for a document written in parts straight to stdout (10^5 tensors: no copy of the
// whole text in memory): the returned stream is stdout; end the object with a newline.
std::ostream& json_output();
// A line of the text output on stdout, control bytes shown as \xNN (printable).
void print_line(const std::string& text);
std::string local(const QString& text); // QString -> UTF-8 std::string
// A checkpoint argument of a command that reads anywhere (info, verify, stats, diff, convert's
// source, status, plan-reshard; train's and status's --mirror): a local path, or an s3:// or
// http(s):// URL, its TLS certificates checked unless the command was given --no-verify-tls
// (remote_options), at the --endpoint given. Throws Error(invalid_argument) for a URL it cannot read.
shardscope::storage::Location location_argument(const QString& text);
// The same for the checkpoint a command reads (its PATH): a local file a format is known by
// (manifest.json, latest, an index, .metadata) or a DeepSpeed or Megatron rank file
// (core/open/detect.h levels_to_its_checkpoint), named instead of its checkpoint's folder,
// stands for that folder, as a URL naming it does.
shardscope::storage::Location checkpoint_argument(const QString& text);

// A flag that Ctrl-C (SIGINT) or SIGTERM sets, for a long operation's `cancel`: it stops, removes
// what it had not committed, and the command ends with the cancel's error. A second signal ends
// the process at once (the handler is installed once, for one signal each).
const std::atomic<bool>* cancel_on_interrupt();

} // namespace shardctl
