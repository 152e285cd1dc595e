// status: what a checkpoint root holds and where it stands, read without the writer lock, so it
// can watch a running job: every step of each tier, uploads, the lock holder, free space, and
// what the next rotation would delete. A root another tool wrote (DeepSpeed, Megatron, torch DCP
// checkpoints side by side) shows its step folders and, with --content, where to resume.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"

#include "core/checkpoint/verify_json.h"
#include "core/open/detect.h"
#include "core/open/root_steps.h"
#include "core/report/verdict.h"
#include "core/run/root_status.h"
#include "core/storage/location.h"
#include "core/util/printable.h"

#include <algorithm>
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
    const bool in_bucket = storage::is_url(st["root"].get<std::string>());
    if (st["lock"].is_null()) {
        print_line(in_bucket ? "lock: none (a bucket holds no writer lock)" : "lock: none (no job writes this root)");
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
    if (const json& m = st["mirror"]; m.is_object() && m["error"].is_string())
        print_line("mirror not read: " + printable(m["error"].get<std::string>(), 4096));
    // A root in a bucket is the run's own copy there (JSON: its `local` tier), not a local disk.
    const std::string tier = in_bucket ? "  bucket: " : "  local: ";
    for (const auto& s : st["steps"]) {
        std::string line = "  " + s["name"].get<std::string>();
        const json& local = s["local"];
        if (local.is_null())
            line += tier + "-";
        else
            line += tier + (local["complete"].get<bool>() ? "complete" : "leftover") +
                (local["latest"].get<bool>() ? " (latest)" : "") + ", " + size_text(local["bytes"].get<uint64_t>()) +
                (local["complete"].get<bool>()
                     ? ", wall clock " + format_seconds(local["wall_clock_seconds"].get<double>()) + " s"
                     : std::string()) +
                (local["recorded_health"] == "unhealthy" ? ", recorded unhealthy (" +
                         printable(local["recorded_health_detail"].get<std::string>(), 300) + ")"
                                                         : std::string());
        if (s.contains("upload"))
            line += "  mirror: " + s["upload"].get<std::string>();
        if (s.contains("health"))
            line += "  health: " + s["health"].get<std::string>();
        if (!s["next_rotation_deletes"].empty())
            line += "  next rotation deletes it";
        print_line(line);
    }
    if (const json& kept = st["next_rotation"]["kept_as_newest_healthy"]; !kept.is_null())
        print_line("kept beyond --keep as the newest healthy step: " + kept.get<std::string>());
    if (!st["next_rotation"]["held_for_mirror"].empty())
        print_line("held locally until the mirror has them: " + st["next_rotation"]["held_for_mirror"].dump());
    if (st.contains("newest_healthy"))
        print_line("newest healthy step: " +
                   (st["newest_healthy"].is_null() ? std::string("(none)") : st["newest_healthy"].get<std::string>()));
}

// One step checked as verify --content checks it: its verdict's state as the step's `health`, its
// title as `health_title`. Whether it is safe to resume from.
bool add_step_health(const storage::Location& dir, json& step)
{
    const ResumeVerdict verdict = check_resume(dir, VerifyOptions{}, true).verdict;
    step["health"] = std::string(to_string(verdict.state));
    step["health_title"] = verdict.title;
    return verdict.safe();
}

// Every complete local step's health, and the newest step that is safe to resume from: at or
// before the one `latest` names, where a resume looks (format.md, 6.4). A root in a bucket: its
// steps read where they are.
void add_health(const storage::Location& root, json& st)
{
    st["newest_healthy"] = nullptr;
    bool past_latest = false;
    for (json& s : st["steps"]) {
        const json& local = s["local"];
        if (local.is_null() || !local["complete"].get<bool>())
            continue;
        if (add_step_health(root.child(s["name"].get<std::string>()), s) && !past_latest)
            st["newest_healthy"] = s["name"]; // steps are in ascending order
        past_latest = past_latest || local["latest"].get<bool>();
    }
}

// A root another tool wrote: its format, what its tag file names, every step folder (newest last)
// and, with `content`, each one's health and the newest healthy one. Nothing of ShardScope's own
// (lock, tiers, rotation) applies to it.
json foreign_status(const RootSteps& listed, bool content)
{
    json st = {{"ok", true},
               {"root", storage::to_string(listed.root)},
               {"format", std::string(to_string(listed.format))},
               {"latest", listed.tag ? json(*listed.tag) : json(nullptr)}};
    if (listed.tag_problem)
        st["latest_problem"] = problem_json(*listed.tag_problem);
    json steps = json::array();
    for (const RootStep& s : listed.steps)
        steps.push_back({{"step", s.step}, {"name", s.name}, {"latest", s.tagged}});
    if (content) {
        // At or before the tagged step, where a resume looks; any step without a tag file.
        st["newest_healthy"] = nullptr;
        bool past_tag = false;
        for (std::size_t i = 0; i < listed.steps.size(); ++i) {
            if (add_step_health(listed.steps[i].location, steps[i]) && !past_tag)
                st["newest_healthy"] = listed.steps[i].name; // newest last
            past_tag = past_tag || listed.steps[i].tagged;
        }
    }
    st["steps"] = std::move(steps);
    return st;
}

void print_foreign_text(const json& st)
{
    print_line(printable(st["root"].get<std::string>(), 4096) + ": " + st["format"].get<std::string>() +
               " root, latest " + (st["latest"].is_null() ? std::string("(none)") : st["latest"].get<std::string>()));
    if (st.contains("latest_problem"))
        print_line("latest: " + printable(st["latest_problem"]["message"].get<std::string>(), 4096));
    if (st["steps"].empty())
        print_line("  no step folders");
    for (const auto& s : st["steps"]) {
        std::string line = "  " + s["name"].get<std::string>() + "  step " + std::to_string(s["step"].get<uint64_t>()) +
            (s["latest"].get<bool>() ? " (latest)" : "");
        if (s.contains("health"))
            line += "  health: " + s["health"].get<std::string>() + " (" +
                printable(s["health_title"].get<std::string>(), 4096) + ")";
        print_line(line);
    }
    if (st.contains("newest_healthy"))
        print_line("newest healthy step: " +
                   (st["newest_healthy"].is_null() ? std::string("(none)") : st["newest_healthy"].get<std::string>()));
    else if (!st["steps"].empty())
        print_line("health not read: --content verifies each step and reads its values");
}

int print_foreign_status(const RootSteps& listed, bool content, bool as_json)
{
    const json st = foreign_status(listed, content);
    if (as_json)
        print_json(st);
    else
        print_foreign_text(st);
    return kOk;
}

// A root in a bucket, read where it lives: its steps and `latest` as the mirror tier reads a bucket
// (format.md 6.6), the same JSON as a local root's without lock or free space. When that listing
// finds no complete step-<N>, it may be another tool's root (torchtitan's step-<N> folders hold a
// DCP, not a manifest): listed again as one. A root in a bucket has no second tier.
int bucket_status(const storage::Location& where, bool mirror, int keep, bool content, bool as_json)
{
    if (mirror)
        throw Error(ProblemKind::invalid_argument,
                    where.text + ": --mirror is the second tier of a root on a local disk, not of one in a bucket",
                    where.text);
    RootStatus status = bucket_root_status(where, keep);
    if (std::none_of(status.steps.begin(), status.steps.end(), [](const StepInfo& s) { return s.complete; })) {
        // (A prefix with nothing beneath it is refused here: cannot_open.)
        const RootSteps listed = list_root_steps(where);
        if (listed.format != CheckpointFormat::shardscope && listed.format != CheckpointFormat::unknown)
            return print_foreign_status(listed, content, as_json);
    }
    json st = to_json(status);
    if (content)
        add_health(where, st);
    if (as_json)
        print_json(st);
    else
        print_text(st);
    return kOk;
}

} // namespace

int run_status(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Show a checkpoint root as a job writing it sees it: every step with its copies and upload state, "
        "the writer lock's holder, free space on each tier and what the next rotation would delete. Takes no lock. "
        "A DeepSpeed, Megatron or torch DCP root: its step folders (with --content, each one's health)."));
    parser.addPositionalArgument(QStringLiteral("ROOT"), QStringLiteral("Checkpoint root."));
    parser.addOptions({
        {QStringLiteral("mirror"), QStringLiteral("The run's second tier: a directory or s3://bucket/prefix."),
         QStringLiteral("DIR2")},
        {QStringLiteral("keep"), QStringLiteral("The run's --keep (default 3), for the rotation forecast."),
         QStringLiteral("K2"), QStringLiteral("3")},
        {QStringLiteral("mirror-keep"), QStringLiteral("The run's --mirror-keep (default 10)."), QStringLiteral("K3"),
         QStringLiteral("10")},
        {QStringLiteral("content"),
         QStringLiteral("Verify every complete local step and read its values: each step's health and the newest "
                        "healthy one.")},
        json_option(),
    });
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("status")))
        return kUsage;
    const auto keep = int_option(parser, QStringLiteral("keep"), 1, 1 << 20);
    const auto mirror_keep = keep ? int_option(parser, QStringLiteral("mirror-keep"), 1, 1 << 20) : std::nullopt;
    if (!mirror_keep)
        return kUsage;
    std::optional<storage::Location> mirror;
    if (parser.isSet(QStringLiteral("mirror")))
        mirror = location_argument(parser.value(QStringLiteral("mirror")));
    const storage::Location where = checkpoint_argument(parser.positionalArguments().at(0));
    const bool content = parser.isSet(QStringLiteral("content"));
    const bool as_json = parser.isSet(QStringLiteral("json"));
    if (!where.is_local())
        return bucket_status(where, mirror.has_value(), static_cast<int>(*keep), content, as_json);
    // ShardScope's own roots, and folders that are no root of a known format (an empty one a
    // job is about to fill), keep the native status; DeepSpeed, Megatron and DCP roots list their
    // step folders.
    const RootSteps listed = list_root_steps(where);
    if (listed.format != CheckpointFormat::shardscope && listed.format != CheckpointFormat::unknown) {
        if (mirror)
            throw Error(ProblemKind::invalid_argument,
                        where.text + " is a " + std::string(to_string(listed.format)) +
                            " root: --mirror is the second tier of a root ShardScope writes",
                        where.text);
        return print_foreign_status(listed, content, as_json);
    }
    const fs::path root = where.path;
    json st = to_json(root_status(root, mirror, static_cast<int>(*keep), static_cast<int>(*mirror_keep)));
    if (content)
        add_health(where, st);
    if (as_json)
        print_json(st);
    else
        print_text(st);
    return kOk;
}

} // namespace shardctl
