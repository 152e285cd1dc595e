#include "app/cli_common/cli.h"

#include <QCoreApplication>

#include "core/checkpoint/verify_json.h"
#include "core/open/detect.h"
#include "core/storage/location.h"
#include "core/util/printable.h"

#include <csignal>
#include <cstdio>
#include <iostream>

namespace shardctl {

namespace {

// What the command has said so far, for finish_json_command.
bool g_json_printed = false;
// --json as the command's own parser read it (`--out --json` gives --out a value, not the flag),
// known also when the rest of its options did not parse.
bool g_json_requested = false;
nlohmann::json g_failure; // the first failure said on stderr, as problem_json

// --no-verify-tls and --endpoint as the command's parser read them: what location_argument gives
// every URL.
bool g_verify_tls = true;
std::string g_endpoint;

// Options that take a URL: a location (train's and status's --mirror: a bucket) or the S3 endpoint.
const QStringList kUrlOptions = {QStringLiteral("mirror"), QStringLiteral("endpoint")};
// Commands that read a checkpoint wherever it lives: their path arguments may be URLs.
const QStringList kLocationCommands = {
    QStringLiteral("info"),    QStringLiteral("verify"), QStringLiteral("stats"),       QStringLiteral("diff"),
    QStringLiteral("convert"), QStringLiteral("status"), QStringLiteral("plan-reshard")};

// Set by a program whose commands read and write local folders only (shardctl-mpi).
bool g_local_paths_only = false;

// A URL where a command takes a local path is refused before anything runs: `s3://ckpt/run`
// taken as a path would be the relative folder `s3:/ckpt/run`, created and written while the
// user believes the bucket holds the data.
bool refuse_url(const QString& value, const QString& where, const QString& usage_name)
{
    const std::string text = local(value);
    if (!shardscope::storage::is_url(text))
        return false;
    try {
        (void)shardscope::storage::parse_location(text);
    } catch (const shardscope::Error& e) {
        fail(e);
        return true;
    }
    fail(kUsage,
         shardscope::printable(text) + ": " + local(where) + " of '" + local(QCoreApplication::applicationName()) +
             " " + local(usage_name) +
             "' is a local path; s3:// and http(s):// locations are not read or written there");
    return true;
}

} // namespace

void local_paths_only()
{
    g_local_paths_only = true;
}

std::string local(const QString& text)
{
    return text.toStdString();
}

shardscope::storage::Location location_argument(const QString& text)
{
    const std::string value = local(text);
    if (!shardscope::storage::is_url(value))
        return shardscope::storage::Location(std::filesystem::path(value));
    shardscope::storage::Location where = shardscope::storage::parse_location(value);
    where.verify_tls = g_verify_tls;
    if (where.scheme == shardscope::storage::Scheme::s3)
        where.endpoint = g_endpoint;
    return where;
}

shardscope::storage::Location checkpoint_argument(const QString& text)
{
    shardscope::storage::Location where = location_argument(text);
    std::error_code ec;
    if (!where.is_local() || !std::filesystem::is_regular_file(where.path, ec))
        return where;
    const std::filesystem::path absolute = std::filesystem::absolute(where.path, ec);
    const int up = shardscope::levels_to_its_checkpoint(absolute);
    // A rank file named from inside its rank folder: its step is above the working directory.
    std::filesystem::path folder = up > 1 ? absolute : where.path;
    for (int levels = up; levels > 0; --levels)
        folder = folder.has_parent_path() ? folder.parent_path() : std::filesystem::path(".");
    return folder == where.path ? where : shardscope::storage::Location(folder);
}

int fail(int code, const std::string& sentence)
{
    std::fflush(stdout);
    if (g_failure.is_null())
        g_failure = {{"kind", code == kUsage ? "usage" : "check_failed"},
                     {"message", shardscope::printable(sentence, 4096)}};
    // The one way errors reach the terminal: whatever a sentence quotes from a file is escaped.
    std::cerr << "shardctl: " << shardscope::printable(sentence, 4096) << std::endl;
    return code;
}

int fail(const shardscope::Error& error)
{
    const bool first = g_failure.is_null();
    const int code = fail(shardscope::exit_code_for(error.kind()), error.what());
    if (first) {
        g_failure = shardscope::problem_json(error.problem());
        g_failure["message"] = shardscope::printable(error.what(), 4096);
    }
    return code;
}

int finish_json_command(int code, const shardscope::Problem* failure)
{
    if (failure) {
        g_failure = shardscope::problem_json(*failure);
        g_failure["message"] = shardscope::printable(failure->message, 4096);
    }
    if (code != kOk && !g_json_printed && g_json_requested) {
        const nlohmann::json problem =
            g_failure.is_null() ? nlohmann::json{{"kind", "io_error"}, {"message", "failed"}} : g_failure;
        print_json({{"ok", false}, {"error", problem}, {"problems", nlohmann::json::array({problem})}});
    }
    return code;
}

bool parse(QCommandLineParser& parser, const QStringList& arguments, int positional, const QString& usage_name)
{
    return parse_options(parser, arguments, usage_name) && check_positional(parser, positional, usage_name);
}

bool parse_options(QCommandLineParser& parser, const QStringList& arguments, const QString& usage_name)
{
    parser.addHelpOption();
    const bool parsed = parser.parse(arguments);
    // optionNames() lists the options found that the command defines (isSet would warn about a
    // command without --json).
    g_json_requested = parser.optionNames().contains(QStringLiteral("json"));
    if (!parsed) {
        fail(kUsage, local(parser.errorText()) + " (see shardctl " + local(usage_name) + " --help)");
        return false;
    }
    g_verify_tls = !parser.optionNames().contains(QStringLiteral("no-verify-tls"));
    g_endpoint.clear();
    if (parser.optionNames().contains(QStringLiteral("endpoint"))) {
        g_endpoint = local(parser.value(QStringLiteral("endpoint")));
        if (!g_endpoint.starts_with("http://") && !g_endpoint.starts_with("https://")) {
            // Not echoed: a malformed value may hold credentials.
            fail(kUsage, "--endpoint: an S3 endpoint is an http:// or https:// URL (https://s3.example.com:9000)");
            return false;
        }
    }
    if (parser.isSet(QStringLiteral("help"))) {
        std::cout << local(parser.helpText());
        std::exit(0);
    }
    // An empty value names no file and no number: taken as a path it would be resolved against
    // whatever the command makes of "" (the working directory, a folder named by the rest).
    for (const QString& name : parser.optionNames())
        for (const QString& value : parser.values(name))
            if (value.isEmpty()) {
                fail(kUsage,
                     "--" + local(name) + " is given an empty value (see shardctl " + local(usage_name) + " --help)");
                return false;
            }
    for (const QString& name : parser.optionNames())
        if (!kUrlOptions.contains(name))
            for (const QString& value : parser.values(name))
                if (refuse_url(value, QStringLiteral("--") + name, usage_name))
                    return false;
    return true;
}

bool check_positional(const QCommandLineParser& parser, int positional, const QString& usage_name)
{
    const bool locations = !g_local_paths_only && kLocationCommands.contains(usage_name);
    for (const QString& value : parser.positionalArguments()) {
        if (value.isEmpty()) {
            fail(kUsage, "the path argument is empty (see shardctl " + local(usage_name) + " --help)");
            return false;
        }
        if (!locations) {
            if (refuse_url(value, QStringLiteral("the path argument"), usage_name))
                return false;
            continue;
        }
        try {
            (void)location_argument(value);
        } catch (const shardscope::Error& e) {
            fail(e);
            return false;
        }
    }
    const auto count = parser.positionalArguments().size();
    if (count != positional) {
        fail(kUsage,
             "'" + local(usage_name) + "' expects " + std::to_string(positional) + " path argument(s), got " +
                 std::to_string(count) + " (see shardctl " + local(usage_name) + " --help)");
        return false;
    }
    return true;
}

std::optional<long long> int_option(const QCommandLineParser& parser, const QString& name, long long min_value,
                                    long long max_value)
{
    bool ok = false;
    const QString text = parser.value(name);
    const long long value = text.toLongLong(&ok);
    if (!ok || value < min_value || value > max_value) {
        fail(kUsage,
             "--" + local(name) + " must be an integer from " + std::to_string(min_value) + " to " +
                 std::to_string(max_value) + ", not '" + local(text) + "'");
        return std::nullopt;
    }
    return value;
}

QCommandLineOption json_option(const QString& help)
{
    return {QStringLiteral("json"), help};
}

QList<QCommandLineOption> remote_options()
{
    return {{QStringLiteral("no-verify-tls"),
             QStringLiteral("Do not check the TLS certificate of an https:// server or S3 endpoint (a self-signed "
                            "test server): anyone on the network path could then serve other bytes.")},
            {QStringLiteral("endpoint"),
             QStringLiteral("The S3 endpoint of s3:// locations (an on-premises gateway, MinIO); default: "
                            "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS's endpoint for the region."),
             QStringLiteral("URL")}};
}

QCommandLineOption threads_option(const QString& help, const QString& default_value)
{
    return {QStringLiteral("threads"), help, QStringLiteral("T"), default_value};
}

std::string format_seconds(double seconds)
{
    // The tiers are chosen on the rounded value, so 9.9996 reads "10.00", not "10.000".
    const int decimals = seconds < 9.9995 ? 3 : seconds < 99.995 ? 2 : 0;
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, seconds);
    return text;
}

void print_json(const nlohmann::json& object)
{
    // Names read from files may be invalid UTF-8: replaced (U+FFFD), never an exception with
    // nothing on stdout.
    g_json_printed = true;
    std::cout << object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

std::ostream& json_output()
{
    g_json_printed = true;
    return std::cout;
}

void print_json_text(std::string_view text)
{
    g_json_printed = true;
    std::cout << text << std::endl;
}

void print_line(const std::string& text)
{
    // Names in the text come from files and servers: a control byte in one (a terminal escape)
    // is shown as \xNN, as in errors, not obeyed by the terminal. The text's own line breaks stay.
    std::string shown;
    for (std::size_t start = 0;;) {
        const std::size_t end = text.find('\n', start);
        shown += shardscope::printable(std::string_view(text).substr(start, end - start), text.size());
        if (end == std::string::npos)
            break;
        shown += '\n';
        start = end + 1;
    }
    std::cout << shown << '\n';
}

namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free); // set from a signal handler

extern "C" void on_interrupt(int)
{
    g_interrupted.store(true);
}

} // namespace

const std::atomic<bool>* cancel_on_interrupt()
{
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESETHAND; // the next one is the default: the process ends
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    return &g_interrupted;
}

} // namespace shardctl
