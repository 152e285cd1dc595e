// Megatron-LM's torch_dist iterations (megatron/core/dist_checkpointing): a DCP folder whose
// Metadata carries `mcore_data`, plus metadata.json (the CheckpointingConfig), common.pt (the
// state that is not sharded, torch.save) and, when saved with integrity on, integrity.json.
// Megatron verifies integrity.json on one process, file after file; here the files are hashed
// in parallel on the verify threads, through the same Folder readers the other checks use.

#include "core/foreign/internal/megatron_dist.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/util/hashing.h"
#include "core/util/internal/json_limits.h"
#include "core/util/printable.h"

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

namespace shardscope {

namespace {

[[noreturn]] void bad(ProblemKind kind, const std::string& display, const std::string& what)
{
    throw Error(kind, display + ": " + what, display);
}

// A JSON object of small nesting, or Error naming the file: both files are a flat object (with
// one nested `files` object in integrity.json).
nlohmann::ordered_json parse_object(std::string_view text, const std::string& display, const char* what)
{
    JsonLimits limits;
    limits.max_depth = 3;
    limits.unique_top_keys = true;
    const JsonScan scan = scan_json_limits(text, limits);
    if (!scan.violation.empty())
        bad(ProblemKind::invalid_manifest, display, std::string(what) + " " + scan.violation);
    if (!scan.duplicate_key.empty())
        bad(ProblemKind::invalid_manifest, display, "names '" + printable(scan.duplicate_key) + "' twice");
    nlohmann::ordered_json json;
    try {
        json = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        bad(ProblemKind::invalid_manifest, display, std::string("not valid JSON (") + e.what() + ")");
    }
    if (!json.is_object())
        bad(ProblemKind::invalid_manifest, display, std::string(what) + " is not a JSON object");
    return json;
}

bool is_lower_hex(const std::string& s)
{
    return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

} // namespace

MegatronCheckpointConfig parse_megatron_metadata_json(std::string_view text, const std::string& display)
{
    const nlohmann::ordered_json json = parse_object(text, display, "metadata.json");
    MegatronCheckpointConfig config;
    for (const auto& [key, value] : json.items())
        config.fields.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
    const auto backend = json.find("sharded_backend");
    if (backend == json.end() || !backend->is_string())
        bad(ProblemKind::invalid_manifest, display,
            "has no sharded_backend string, which Megatron needs to load the checkpoint");
    config.sharded_backend = backend->get<std::string>();
    if (const auto common = json.find("common_backend"); common != json.end() && common->is_string())
        config.common_backend = common->get<std::string>();
    return config;
}

MegatronIntegrity parse_megatron_integrity(std::string_view text, const std::string& display)
{
    const nlohmann::ordered_json json = parse_object(text, display, "integrity.json");
    // Megatron reads a manifest without `algorithm` as sha256, and refuses any other.
    if (const auto algorithm = json.find("algorithm"); algorithm != json.end())
        if (!algorithm->is_string() || algorithm->get<std::string>() != "sha256")
            bad(ProblemKind::unsupported_schema, display,
                "algorithm " + printable(algorithm->dump()) + " is not sha256, the only one Megatron writes");
    const auto files = json.find("files");
    if (files == json.end() || !files->is_object())
        bad(ProblemKind::invalid_manifest, display, "has no `files` object of file names and SHA-256 digests");
    MegatronIntegrity out;
    for (const auto& [name, digest] : files->items()) {
        if (!digest.is_string() || digest.get<std::string>().size() != 64 || !is_lower_hex(digest.get<std::string>()))
            bad(ProblemKind::invalid_manifest, display,
                "the digest of '" + printable(name) + "' is not 64 lowercase hex digits");
        out.files.emplace_back(name, digest.get<std::string>());
    }
    return out;
}

namespace foreign {

namespace {

// The passes after verify_dcp report no rows live: theirs arrive with the final report (the DCP
// files' rows were listed and updated already). The overall progress goes on past the bytes
// already checked (`report`'s files), so that a bar does not sit full while integrity.json's
// files are hashed. Cancelling still stops them.
VerifyOptions quiet(const VerifyOptions& options, const VerifyReport& report)
{
    VerifyOptions out = options;
    out.callbacks = {};
    if (options.callbacks.progress) {
        uint64_t before = 0;
        for (const ShardCheck& s : report.shards)
            before += s.actual_bytes;
        out.callbacks.progress = [before, progress = options.callbacks.progress](uint64_t done, uint64_t total) {
            progress(before + done, before + total);
        };
    }
    return out;
}

// SHA-256 of an opened file, in chunks, reporting bytes done.
std::string file_sha256(storage::OpenedObject& file, const std::string& shown, const VerifyOptions& options)
{
    constexpr std::size_t kChunk = 4u << 20;
    const auto buffer = std::make_unique<char[]>(kChunk);
    Sha256 sha;
    for (uint64_t done = 0; done < file.size;) {
        if (cancelled(options))
            return {};
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, file.size - done));
        if (!file.reader->read(buffer.get(), n, done))
            throw Error(ProblemKind::unreadable, shown + ": cannot be read at byte " + std::to_string(done));
        sha.update(buffer.get(), n);
        done += n;
        current_progress().advance(done);
    }
    return sha.hex_digest();
}

} // namespace

void check_common_pt(const storage::Folder& listed, VerifyReport& report, const VerifyOptions& options, bool check_data,
                     bool required)
{
    if (!required && !listed.has("common.pt"))
        return;
    VerifyReport common;
    common.dir = report.dir;
    common.foreign.emplace();
    common.shards.push_back(ShardCheck{.path = "common.pt"});
    check_archives(listed, common, quiet(options, report), ProblemKind::missing_file, check_data);
    // Its tensors (if any) are not the sharded ones the summary lists: counted in a row only.
    const ShardCheck& checked = common.shards[0];
    add_row(*report.foreign, "common.pt",
            checked.status == ShardStatus::ok ? checked.detail : std::string(to_string(checked.status)));
    report.shards.push_back(std::move(common.shards[0]));
    report.problems.insert(report.problems.end(), common.problems.begin(), common.problems.end());
    report.cancelled = report.cancelled || common.cancelled;
}

void check_integrity_json(const storage::Folder& listed, VerifyReport& report, const VerifyOptions& options,
                          bool check_data)
{
    if (!listed.has("integrity.json"))
        return;
    const std::string display = (report.dir / "integrity.json").string();
    MegatronIntegrity integrity;
    try {
        integrity =
            parse_megatron_integrity(listed.read_small("integrity.json", kMaxMegatronJsonBytes, display), display);
    } catch (const Error& e) {
        rethrow_remote(e);
        Problem p = e.problem();
        p.path = "integrity.json";
        report.problems.push_back(std::move(p));
        add_row(*report.foreign, "integrity.json", "unusable");
        return;
    }
    if (!check_data) {
        add_row(*report.foreign, "integrity.json",
                std::to_string(integrity.files.size()) + " files listed (not hashed)");
        return;
    }
    VerifyReport hashed;
    hashed.dir = report.dir;
    for (const auto& [name, digest] : integrity.files)
        hashed.shards.push_back(ShardCheck{.path = name});
    check_files(listed, hashed, quiet(options, report),
                [&](std::size_t i, storage::OpenedObject& file, ShardCheck& check, std::vector<Problem>& problems) {
                    const std::string shown = shown_file(report.dir, check);
                    check.actual_digest = file_sha256(file, shown, options);
                    if (check.actual_digest.empty() || check.actual_digest == integrity.files[i].second)
                        return;
                    check.status = ShardStatus::hash_mismatch;
                    check.detail = shown + ": its SHA-256 is " + check.actual_digest + ", integrity.json records " +
                        integrity.files[i].second;
                    problems.push_back(
                        {.kind = ProblemKind::hash_mismatch, .message = check.detail, .path = check.path});
                });
    report.cancelled = report.cancelled || hashed.cancelled;

    // A file the DCP checks already found missing is said once.
    auto already_missing = [&](const std::string& path) {
        return std::any_of(report.problems.begin(), report.problems.end(), [&](const Problem& p) {
            return p.path == path && (p.kind == ProblemKind::missing_file || p.kind == ProblemKind::missing_shard);
        });
    };
    std::size_t differ = 0;
    std::vector<Problem> found;
    for (Problem& p : hashed.problems) {
        if (p.kind == ProblemKind::missing_file) {
            if (already_missing(p.path))
                continue;
            p.message += " (listed in integrity.json)";
        }
        found.push_back(std::move(p));
    }
    std::map<std::string, std::size_t> row_of;
    for (std::size_t i = 0; i < report.shards.size(); ++i)
        row_of.emplace(report.shards[i].path, i);
    for (ShardCheck& h : hashed.shards) {
        differ += h.status != ShardStatus::ok && h.status != ShardStatus::pending;
        if (h.status == ShardStatus::missing)
            h.detail += " (listed in integrity.json)";
        const auto row = row_of.find(h.path);
        if (row == row_of.end()) {
            report.shards.push_back(std::move(h));
            continue;
        }
        ShardCheck& existing = report.shards[row->second];
        if (!h.actual_digest.empty())
            existing.actual_digest = h.actual_digest;
        if (existing.status == ShardStatus::ok && h.status != ShardStatus::ok && h.status != ShardStatus::pending) {
            existing.status = h.status;
            existing.detail = h.detail;
        }
    }
    report.problems.insert(report.problems.end(), found.begin(), found.end());
    add_row(*report.foreign, "integrity.json",
            std::to_string(integrity.files.size()) + " files (SHA-256): " +
                (differ == 0 && !hashed.cancelled ? std::string("all match")
                                                  : std::to_string(differ) + " differ, missing or unusable"));
}

} // namespace foreign

} // namespace shardscope
