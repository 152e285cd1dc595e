// demo-save, info, verify and load: thin wrappers that parse options, call the core and print.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/cli_common/run_options.h"

#include "core/checkpoint/directory.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/checkpoint/verify.h"
#include "core/run/demo.h"
#include "core/run/lifecycle.h"
#include "core/open/nearby.h"
#include "core/open/verify.h"
#include "core/checkpoint/verify_json.h"
#include "core/report/verdict.h"
#include "core/open/detect.h"
#include "core/foreign/summary_json.h"
#include "core/util/parallel.h"
#include "core/util/printable.h"

#include <QElapsedTimer>
#include <cstdio>
#include <iostream>

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;
using nlohmann::json;

namespace {

std::string file_label(const ShardCheck& s)
{
    return s.rank >= 0 ? "rank " + std::to_string(s.rank) + "  " + printable(s.path, 4096) : printable(s.path, 4096);
}

// After "no checkpoint found": what would have opened, and the checkpoint next to PATH when there
// is one (the GUI offers the same).
void explain_no_checkpoint(const storage::Location& where)
{
    std::cerr << "shardctl: " << kWhatShardScopeOpens << "\n";
    const auto nearby = nearby_checkpoint(where);
    if (!nearby)
        return;
    // The command that reads it, with the options that reached this one's server.
    std::string command = "shardctl verify " + storage::to_string(nearby->location);
    if (!where.endpoint.empty())
        command += " --endpoint " + where.endpoint;
    if (!where.is_local() && !where.verify_tls)
        command += " --no-verify-tls";
    std::cerr << "shardctl: did you mean " << printable(describe_nearby(*nearby)) << "? " << printable(command) << "\n";
}

} // namespace

int run_demo_save(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Write a synthetic sharded checkpoint. The global state depends only on --seed and --numel, "
                       "so the same seed saved at different world sizes holds the same flat vectors."));
    add_demo_save_options(parser);
    parser.addOptions({
        {QStringLiteral("world-size"), QStringLiteral("Number of ranks."), QStringLiteral("N")},
        threads_option(),
        json_option(),
    });
    if (!parse(parser, arguments, 0, QStringLiteral("demo-save")))
        return kUsage;
    const auto args = read_demo_save_options(parser, std::nullopt);
    if (!args)
        return kUsage;

    QElapsedTimer timer;
    timer.start();
    // Two phases, as a distributed job would run them: each rank generates and writes its own
    // shard (here on threads, so peak memory is a few ranks' state, not the whole model), then one
    // coordinator commits.
    const int n = args->world_size;
    std::vector<ShardRecord> records(static_cast<std::size_t>(n));
    {
        std::error_code ec;
        if (fs::exists(args->out / "manifest.json", ec))
            throw Error(ProblemKind::already_exists,
                        (args->out / "manifest.json").string() +
                            " exists: refusing to overwrite a complete checkpoint");
    }
    parallel_for(records.size(), args->threads, [&](std::size_t r) {
        const RankState state = make_demo_rank(args->seed, args->numel, n, static_cast<int>(r), args->dtype);
        records[r] = write_rank_shard(args->out, state, n);
    });
    const Manifest m = commit(args->out, std::move(records),
                              demo_checkpoint_meta(n, args->step, args->seed, args->dtype, args->numel));
    const double seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
    if (parser.isSet(QStringLiteral("json"))) {
        print_json(demo_save_json(args->out, m, seconds));
    } else {
        print_line("wrote " + args->out.string() + ": " + std::to_string(m.world_size) + " shards, " +
                   human_bytes(m.total_bytes()) + ", step " + std::to_string(m.step) + " in " +
                   format_seconds(seconds) + " s");
    }
    return kOk;
}

namespace {

// info --json of a foreign checkpoint: its summary, files and problems. The tensor list (10^5
// entries for a mixture-of-experts checkpoint) is left out of the DOM: print_foreign_info streams it.
void add_foreign_info(json& out, const VerifyReport& report)
{
    out["path"] = report.dir.string();
    const ForeignSummary& f = *report.foreign;
    out.update(foreign_summary_json(ForeignSummary{.rows = f.rows,
                                                   .tensors = {},
                                                   .tensors_total = f.tensors_total,
                                                   .layout = {},
                                                   .world_size = f.world_size,
                                                   .step = f.step}));
    json files = json::array();
    for (const auto& s : report.shards) {
        json entry = {{"path", s.path}, {"bytes", s.actual_bytes}, {"status", std::string(to_string(s.status))}};
        if (s.rank >= 0)
            entry["rank"] = s.rank;
        if (!s.detail.empty())
            entry["detail"] = s.detail;
        files.push_back(std::move(entry));
    }
    out["files"] = files;
    uint64_t total_bytes = 0;
    for (const auto& s : report.shards)
        total_bytes += s.actual_bytes;
    out["file_count"] = report.shards.size();
    out["total_bytes"] = total_bytes;
    json problems = json::array();
    for (const auto& p : report.problems)
        problems.push_back(problem_json(p));
    out["problems"] = problems;
}

// Prints `out` (add_foreign_info's) with the tensor list streamed in where the text has a marker.
// The marker is found with its top-level indentation, which no value read from a file can forge.
// Reading and the summary's DOM, which can fail, are done before the first byte; the tensors are
// then written from the list to stdout in 64 KiB pieces, never whole in memory (the text of 10^5
// tensors is ~30 MB, and it was built twice over). What can still fail after the first byte is an
// allocation of the 64 KiB writer (out of memory), which would leave the object cut short.
void print_foreign_info(json& out, const VerifyReport& report)
{
    const std::string marker = json("\x01shardscope:tensors\x01").dump();
    out["tensors"] = "\x01shardscope:tensors\x01";
    const std::string text = out.dump(2, ' ', false, json::error_handler_t::replace);
    const std::string placed = "\n  \"tensors\": " + marker;
    const std::size_t at = text.find(placed);
    if (at == std::string::npos) { // cannot happen; print the object without its tensors
        print_json_text(text);
        return;
    }
    std::ostream& stdout_json = json_output();
    stdout_json.write(text.data(), static_cast<std::streamsize>(at + placed.size() - marker.size()));
    write_tensors_json(stdout_json, report.foreign->tensors, 2, 1);
    stdout_json << std::string_view(text).substr(at + placed.size()) << std::endl;
}

} // namespace

int run_info(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Detect a checkpoint's format and summarize it."));
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("Checkpoint directory, root or file."));
    parser.addOptions({json_option()});
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("info")))
        return kUsage;
    const storage::Location where = checkpoint_argument(parser.positionalArguments().at(0));
    const DetectedFormat detected = detect_format(where);
    const fs::path& path = detected.path;
    if (detected.problem) // a root whose `latest` is bad: that, not a missing manifest, is what is wrong
        throw Error(*detected.problem);
    const bool as_json = parser.isSet(QStringLiteral("json"));
    json out = {{"format", std::string(to_string(detected.format))},
                {"path", detected.path.string()},
                {"detected_by", detected.reason},
                {"files", detected.files}};
    if (detected.format == CheckpointFormat::unknown) {
        if (as_json)
            print_json(out);
        return fail(kCheckFailed, path.string() + ": not a recognised checkpoint (" + detected.reason + ")");
    }
    if (detected.format == CheckpointFormat::shardscope) {
        const Manifest m = detected.dir.valid() ? read_manifest(detected.dir) : read_manifest(detected.path);
        out["world_size"] = m.world_size;
        out["step"] = m.step;
        out["wall_clock_seconds"] = m.wall_clock_seconds;
        out["param_dtype"] = std::string(to_string(m.param_dtype));
        out["param_numel_total"] = m.param_numel_total;
        out["total_bytes"] = m.total_bytes();
        out["tensors"] = m.tensors.size();
        json shards = json::array();
        for (const auto& s : m.shards)
            shards.push_back({{"rank", s.rank},
                              {"path", s.path},
                              {"bytes", s.bytes},
                              {"param_shard_offset", s.param_shard_offset},
                              {"param_shard_numel", s.param_shard_numel},
                              {"sha256", s.sha256}});
        out["shards"] = shards;
        if (!m.training_state.is_null())
            out["training_state"] = m.training_state;
        if (as_json) {
            print_json(out);
            return kOk;
        }
        print_line(detected.path.string() + ": ShardScope checkpoint (schema_version 1)");
        print_line("  world size  " + std::to_string(m.world_size));
        print_line("  step        " + std::to_string(m.step));
        print_line("  parameters  " + std::to_string(m.param_numel_total) + " " +
                   std::string(to_string(m.param_dtype)) + " + fp32 master, exp_avg, exp_avg_sq");
        print_line("  total size  " + human_bytes(m.total_bytes()) + " in " + std::to_string(m.shards.size()) +
                   " shards");
        for (const auto& s : m.shards)
            print_line("  rank " + std::to_string(s.rank) + "  " + s.path + "  " + human_bytes(s.bytes) + "  params [" +
                       std::to_string(s.param_shard_offset) + ", " +
                       std::to_string(s.param_shard_offset + s.param_shard_numel) + ")  sha256 " +
                       s.sha256.substr(0, 12));
        return kOk;
    }
    if (is_foreign(detected)) {
        // Structure only (headers, metadata, zip directories): `verify` reads every byte.
        const VerifyReport report = verify_checkpoint(detected, VerifyOptions{}, /*check_data=*/false);
        if (as_json) { // built only when printed: 10^5 tensors make a large object
            add_foreign_info(out, report);
            print_foreign_info(out, report);
        } else {
            print_line(report.dir.string() + ": " + std::string(to_string(detected.format)) + " checkpoint (" +
                       detected.reason + ")");
            for (const auto& [key, value] : report.foreign->rows)
                print_line("  " + key + ": " + value);
            for (const auto& s : report.shards)
                print_line("  " + file_label(s) + "  " + human_bytes(s.actual_bytes) + "  " +
                           std::string(to_string(s.status)) + (s.detail.empty() ? "" : "  " + s.detail));
            constexpr std::size_t kShown = 50;
            for (std::size_t i = 0; i < report.foreign->tensors.size() && i < kShown; ++i) {
                const ForeignTensorView t = report.foreign->tensors[i];
                const std::string shape = join_dims(t.shape);
                // A name's own line break is shown as \x0a: print_line keeps the text's breaks.
                print_line("  tensor " + printable(t.name, 4096) + "  " + std::string(t.dtype) + " " + shape + "  " +
                           human_bytes(t.bytes) +
                           (t.file.empty() ? "" : "  " + printable(t.file, 4096) + " @" + std::to_string(t.offset)) +
                           (t.detail.empty() ? "" : "  " + std::string(t.detail)));
                constexpr std::size_t kShownChunks = 16;
                if (t.chunks.size() > 1) // one chunk is the line above
                    for (std::size_t c = 0; c < t.chunks.size() && c < kShownChunks; ++c) {
                        const ForeignChunkView chunk = t.chunks[c];
                        print_line("    chunk at " + join_dims(chunk.offsets) + " size " + join_dims(chunk.sizes) +
                                   "  " +
                                   (chunk.file.empty() ? std::string("no storage")
                                                       : printable(chunk.file, 4096) + " bytes [" +
                                            std::to_string(chunk.offset) + ", +" + std::to_string(chunk.length) + ")"));
                    }
                if (t.chunks.size() > kShownChunks)
                    print_line("    ... " + std::to_string(t.chunks.size() - kShownChunks) +
                               " more chunks (--json lists them)");
            }
            if (report.foreign->tensors_total > kShown)
                print_line("  ... " + std::to_string(report.foreign->tensors_total - kShown) +
                           " more tensors (--json lists them)");
        }
        if (report.problems.empty())
            return kOk;
        for (const auto& p : report.problems)
            fail(kCheckFailed, p.message);
        return kCheckFailed;
    }
    if (as_json) {
        print_json(out);
        return kOk;
    }
    print_line(detected.path.string() + ": " + std::string(to_string(detected.format)) + " checkpoint (" +
               detected.reason + "), " + std::to_string(detected.files.size()) + " file(s)");
    for (const auto& f : detected.files)
        print_line("  " + f);
    return kOk;
}

int run_verify(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Check every invariant of a checkpoint and every shard's hash. PATH may be a checkpoint "
                       "directory or a root with a `latest` file."));
    add_verify_options(parser);
    parser.addOptions({json_option(),
                       threads_option(),
                       {QStringLiteral("content"),
                        QStringLiteral("Read every tensor's values too and give the resume verdict (exit 0 only when "
                                       "safe).")}});
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("verify")))
        return kUsage;
    VerifyOptions options;
    if (!read_verify_options(parser, options))
        return kUsage;
    const storage::Location where = checkpoint_argument(parser.positionalArguments().at(0));
    const fs::path path = where.is_local() ? where.path : fs::path(where.text);
    if (where.is_local()) {
        std::error_code ec;
        if (fs::exists(path, ec) && !fs::is_directory(path, ec) && path.extension() != ".safetensors" &&
            !is_torch_file(path))
            return fail(kUsage,
                        path.string() +
                            ": verify takes a checkpoint directory (or a .safetensors or torch.save file, the file "
                            "a format is known by: manifest.json, an index, .metadata, or a DeepSpeed or Megatron "
                            "rank file), not a file");
    }
    const bool with_content = parser.isSet(QStringLiteral("content"));
    const ResumeCheck checked = check_resume(where, options, with_content);
    const VerifyReport& report = checked.verify;
    const ResumeVerdict& verdict = checked.verdict;

    uint64_t hashed = 0;
    for (const auto& s : report.shards)
        hashed += s.actual_bytes;
    if (parser.isSet(QStringLiteral("json"))) {
        print_json(resume_check_json(checked));
    } else {
        if (report.manifest)
            print_line(report.dir.string() + ": world_size " + std::to_string(report.manifest->world_size) + ", step " +
                       std::to_string(report.manifest->step));
        if (report.foreign)
            print_line(report.dir.string() + ": " + report.format);
        for (const auto& s : report.shards)
            print_line("  " + (report.foreign ? file_label(s) : "rank " + std::to_string(s.rank) + "  " + s.path) +
                       "  " + human_bytes(s.expected_bytes) + "  " + std::string(to_string(s.status)));
        for (const auto& tmp : report.leftover_tmp_files)
            print_line("  leftover from an interrupted write: " + tmp);
        if (report.ok() && verify_read_data(report))
            print_line("OK: " + std::to_string(report.shards.size()) + " shards verified (" + human_bytes(hashed) +
                       " in " + format_seconds(report.seconds) + " s)");
        else if (report.ok())
            print_line("OK: " +
                       (report.shards.size() == 1 ? std::string("1 file's header")
                                                  : std::to_string(report.shards.size()) + " files' headers") +
                       " and byte ranges checked (" + human_bytes(hashed) +
                       "; the tensor data is not read: " + report.format + " records no checksum of it" +
                       (with_content ? "" : "; --content reads every value") + ")");
        if (with_content) {
            print_line("verdict: " + std::string(to_string(verdict.state)) + ": " + printable(verdict.title));
            print_line("  " + printable(verdict.meaning));
        }
    }
    if (with_content) { // the verdict decides: safe or not
        if (verdict.safe())
            return kOk;
        for (const auto& p : verdict.reasons)
            fail(kCheckFailed, p.message);
        if (verdict.reasons.empty())
            fail(kCheckFailed, report.dir.string() + ": " + verdict.title);
        if (verdict.no_checkpoint)
            explain_no_checkpoint(where);
        return kCheckFailed;
    }
    if (report.ok())
        return kOk;
    for (const auto& p : report.problems)
        fail(kCheckFailed, p.message);
    if (no_checkpoint_found(report))
        explain_no_checkpoint(where);
    if (report.cancelled)
        std::cerr << "shardctl: verification was cancelled\n";
    return kCheckFailed;
}

int run_load(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Load every rank through the library's load path (all invariants and hashes checked) and "
        "print SHA-256 digests of the reassembled flat param, master, exp_avg and exp_avg_sq. A root loads its "
        "newest healthy step."));
    add_load_options(parser);
    parser.addOptions(resume_options());
    parser.addOptions({threads_option(), json_option()});
    if (!parse(parser, arguments, 1, QStringLiteral("load")))
        return kUsage;
    const auto args = read_load_options(parser);
    if (!args)
        return kUsage;
    ResumeOptions options;
    options.expected_world_size = args->expected_world_size;
    options.load.threads = args->threads;
    read_resume_options(parser, options);
    const bool as_json = parser.isSet(QStringLiteral("json"));
    const ResumePoint point = load_step_or_root(args->path, options);
    const LoadedCheckpoint& loaded = point.checkpoint;
    print_load_result(as_json, loaded.dir, loaded.manifest, flat_state_digests(loaded.ranks), {},
                      report_resume_choice(point.skipped, loaded.unread));
    return kOk;
}

} // namespace shardctl
