// status: what a checkpoint root holds and where it stands, read without the writer lock, so it
// can watch a running job: every step of each tier, uploads, the lock holder, free space, and
// what the next rotation would delete.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"

#include "core/report/verdict.h"
#include "core/run/root_status.h"
#include "core/util/printable.h"

#include <cstdio>

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;
using nlohmann::json;

namespace {

std::string size_text(uint64_t bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

void print_text(const json& st)
{
    print_line(printable(st["root"].get<std::string>(), 4096) + ": latest " +
               (st["latest"].is_null() ? std::string("(none)") : st["latest"].get<std::string>()));
    if (st["lock"].is_null()) {
        print_line("lock: none (no job writes this root)");
    } else {
        const json& l = st["lock"];
        LockHolder holder{.pid = l["pid"].get<int64_t>(),
                          .host = printable(l["host"].get<std::string>()),
                          .started_at = l["started_at"].get<int64_t>()};
        print_line("lock: " + describe(holder) +
                   (l["running"].is_null()         ? std::string(" (another host)")
                        : l["running"].get<bool>() ? std::string(" (running)")
                                                   : std::string(" (not running: a leftover)")));
    }
    for (const auto& t : st["space"])
        print_line(t["tier"].get<std::string>() + " free: " +
                   (t["free_bytes"].is_null() ? t.value("error", std::string("unknown"))
                                              : size_text(t["free_bytes"].get<uint64_t>()) + " of " +
                            size_text(t["total_bytes"].get<uint64_t>())));
    for (const auto& s : st["steps"]) {
        std::string line = "  " + s["name"].get<std::string>();
        const json& local = s["local"];
        if (local.is_null())
            line += "  local: -";
        else
            line += std::string("  local: ") + (local["complete"].get<bool>() ? "complete" : "leftover") +
                (local["latest"].get<bool>() ? " (latest)" : "") + ", " + size_text(local["bytes"].get<uint64_t>()) +
                (local["complete"].get<bool>()
                     ? ", wall clock " + format_seconds(local["wall_clock_seconds"].get<double>()) + " s"
                     : std::string());
        if (s.contains("upload"))
            line += "  mirror: " + s["upload"].get<std::string>();
        if (s.contains("health"))
            line += "  health: " + s["health"].get<std::string>();
        if (!s["next_rotation_deletes"].empty())
            line += "  next rotation deletes it";
        print_line(line);
    }
    if (!st["next_rotation"]["held_for_mirror"].empty())
        print_line("held locally until the mirror has them: " + st["next_rotation"]["held_for_mirror"].dump());
    if (st.contains("newest_healthy"))
        print_line("newest healthy step: " +
                   (st["newest_healthy"].is_null() ? std::string("(none)") : st["newest_healthy"].get<std::string>()));
}

// Every complete local step checked as verify --content checks it: its verdict's state as the
// step's `health`, and the newest step that is safe to resume from.
void add_health(const fs::path& root, json& st)
{
    st["newest_healthy"] = nullptr;
    for (json& s : st["steps"]) {
        const json& local = s["local"];
        if (local.is_null() || !local["complete"].get<bool>())
            continue;
        const ResumeCheck checked = check_resume(root / s["name"].get<std::string>(), VerifyOptions{}, true);
        s["health"] = std::string(to_string(checked.verdict.state));
        s["health_title"] = checked.verdict.title;
        if (checked.verdict.safe())
            st["newest_healthy"] = s["name"]; // steps are in ascending order
    }
}

} // namespace

int run_status(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Show a checkpoint root as a job writing it sees it: every step with its copies and upload state, "
        "the writer lock's holder, free space on each tier and what the next rotation would delete. Takes no lock."));
    parser.addPositionalArgument(QStringLiteral("ROOT"), QStringLiteral("Checkpoint root."));
    parser.addOptions({
        {QStringLiteral("mirror"), QStringLiteral("The run's second tier."), QStringLiteral("DIR2")},
        {QStringLiteral("keep"), QStringLiteral("The run's --keep (default 3), for the rotation forecast."),
         QStringLiteral("K2"), QStringLiteral("3")},
        {QStringLiteral("mirror-keep"), QStringLiteral("The run's --mirror-keep (default 10)."), QStringLiteral("K3"),
         QStringLiteral("10")},
        {QStringLiteral("content"),
         QStringLiteral("Verify every complete local step and read its values: each step's health and the newest "
                        "healthy one.")},
        json_option(),
    });
    if (!parse(parser, arguments, 1, QStringLiteral("status")))
        return kUsage;
    const auto keep = int_option(parser, QStringLiteral("keep"), 1, 1 << 20);
    const auto mirror_keep = keep ? int_option(parser, QStringLiteral("mirror-keep"), 1, 1 << 20) : std::nullopt;
    if (!mirror_keep)
        return kUsage;
    std::optional<fs::path> mirror;
    if (parser.isSet(QStringLiteral("mirror")))
        mirror = fs::path(local(parser.value(QStringLiteral("mirror"))));
    const fs::path root = local(parser.positionalArguments().at(0));
    json st = to_json(root_status(root, mirror, static_cast<int>(*keep), static_cast<int>(*mirror_keep)));
    if (parser.isSet(QStringLiteral("content")))
        add_health(root, st);
    if (parser.isSet(QStringLiteral("json")))
        print_json(st);
    else
        print_text(st);
    return kOk;
}

} // namespace shardctl
