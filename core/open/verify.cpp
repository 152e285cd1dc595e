#include "core/open/verify.h"

#include "core/foreign/dcp.h"
#include "core/foreign/dcp_hf.h"
#include "core/foreign/deepspeed.h"
#include "core/foreign/fp8_scales.h"
#include "core/foreign/megatron.h"
#include "core/foreign/safetensors_index.h"
#include "core/foreign/torch_save.h"

#include "core/util/cancel.h"

#include <algorithm>
#include <chrono>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

// torch's Hugging Face storage, consolidated (the index and model-*.safetensors) with the per-rank
// shards it was consolidated from still in sharded/ (a torchtitan step saved with consolidation):
// the index is what is verified, and the summary says that the shards were not, and how to.
void note_unread_shards(const storage::Folder& dir, VerifyReport& report)
{
    // A web server has no listing: asking whether sharded/ is there would probe every entry file.
    if (!report.foreign || (!dir.is_local() && dir.location().scheme != storage::Scheme::s3) ||
        !dir.is_folder("sharded"))
        return;
    std::size_t shards = 0;
    try {
        const storage::Folder sharded = dir.subfolder("sharded");
        shards = std::count_if(sharded.names.begin(), sharded.names.end(),
                               [](const std::string& n) { return is_dcp_hf_shard_name(n); });
    } catch (const Error& e) {
        rethrow_remote(e);
        return;
    }
    if (shards > 0)
        report.foreign->rows.push_back({"sharded/",
                                        std::to_string(shards) +
                                            " per-rank shard files beside the consolidated ones, not "
                                            "read here (verify " +
                                            (dir.path / "sharded").string() + " checks them)"});
}

// What the format's own verifier reports, before the rows saying where its step came from.
VerifyReport verify_foreign(const DetectedFormat& detected, const VerifyOptions& options, bool check_data)
{
    const storage::Folder& dir = detected.dir;
    switch (detected.format) {
    case CheckpointFormat::safetensors: return verify_safetensors_files(dir, options);
    case CheckpointFormat::safetensors_index: {
        VerifyReport report = verify_safetensors_index(dir, options);
        note_unread_shards(dir, report);
        return report;
    }
    case CheckpointFormat::torch_dcp: return verify_dcp(dir, options, check_data);
    case CheckpointFormat::torch_dcp_hf: return verify_dcp_hf(dir, options, check_data);
    case CheckpointFormat::deepspeed: return verify_deepspeed(dir, options, check_data);
    case CheckpointFormat::megatron: return verify_megatron(dir, options, check_data);
    case CheckpointFormat::torch: return verify_torch_save(dir, detected.files, "", options, check_data);
    case CheckpointFormat::torch_index:
        return verify_torch_save(dir, {}, "pytorch_model.bin.index.json", options, check_data);
    default: break;
    }
    throw Error(ProblemKind::invalid_argument, detected.path.string() + ": not a foreign checkpoint format",
                detected.path.string());
}

// Where a root's step came from goes right after the summary's "format" row, in the report a viewer
// gets before the files are checked as in the final one.
void add_origin(const DetectedFormat& detected, VerifyReport& report)
{
    if (!report.foreign)
        return;
    auto& rows = report.foreign->rows;
    auto at = rows.begin();
    if (at != rows.end() && at->first == "format")
        ++at;
    rows.insert(at, detected.origin.begin(), detected.origin.end());
    if (detected.step && !report.foreign->step)
        report.foreign->step = detected.step;
}

// A folder detection did not recognise goes to the native verifier, which tells an interrupted
// ShardScope save (shard or .tmp files without a manifest: partial_write) from a folder holding no
// checkpoint at all. The latter is said as such: "manifest.json does not exist" reads as a save
// that never committed.
VerifyReport verify_unknown(const DetectedFormat& detected, const VerifyOptions& options)
{
    VerifyReport report = verify_native(detected.dir, options);
    const bool interrupted = std::any_of(report.problems.begin(), report.problems.end(),
                                         [](const Problem& p) { return p.kind != ProblemKind::invalid_manifest; });
    if (report.manifest || interrupted || !report.leftover_tmp_files.empty())
        return report;
    report.format = std::string(to_string(CheckpointFormat::unknown));
    report.problems = {Problem{.kind = ProblemKind::invalid_manifest,
                               .message = detected.path.string() + ": no checkpoint found (" + detected.reason + ")"}};
    return report;
}

VerifyReport verify_detected(const DetectedFormat& detected, const VerifyOptions& options, bool check_data)
{
    if (!is_foreign(detected)) {
        if (!detected.dir.valid()) // not a directory: the native verifier says why it cannot be opened
            return verify_native(detected.path, options);
        if (!detected.problem)
            return detected.format == CheckpointFormat::unknown ? verify_unknown(detected, options)
                                                                : verify_native(detected.dir, options);
        VerifyReport report;
        report.dir = detected.path;
        report.problems.push_back(*detected.problem);
        return report;
    }
    if (detected.problem) {
        VerifyReport report;
        report.format = std::string(to_string(detected.format));
        report.dir = detected.path;
        report.foreign.emplace();
        report.foreign->rows.push_back({"format", report.format});
        report.problems.push_back(*detected.problem);
        return report;
    }
    if (detected.origin.empty() && !detected.step) {
        VerifyReport report = verify_foreign(detected, options, check_data);
        check_fp8_scale_partners(report);
        return report;
    }
    VerifyOptions inner = options;
    if (options.callbacks.files_listed)
        inner.callbacks.files_listed = [&](const VerifyReport& listed) {
            VerifyReport shown = listed;
            add_origin(detected, shown);
            options.callbacks.files_listed(shown);
        };
    VerifyReport report = verify_foreign(detected, inner, check_data);
    check_fp8_scale_partners(report);
    add_origin(detected, report);
    return report;
}

} // namespace

VerifyReport verify_checkpoint(const DetectedFormat& detected, const VerifyOptions& options, bool check_data)
{
    const CancelScope scope(options.cancel); // so does a read of a shard that hangs
    const auto start = std::chrono::steady_clock::now();
    VerifyReport report = verify_detected(detected, options, check_data);
    report.fast = options.fast;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
}

storage::Location verified_location(const storage::Location& given, const VerifyReport& verified)
{
    std::error_code ec;
    const bool one_file = given.is_local() ? !fs::is_directory(given.path, ec)
                                           : std::string_view(given.prefix).ends_with(".safetensors") ||
            (verified.format == "torch" && is_torch_file(fs::path(given.prefix)));
    if (one_file)
        return given;
    if (given.is_local())
        return storage::Location(verified.dir);
    storage::Location step = storage::parse_location(verified.dir.string());
    step.verify_tls = given.verify_tls; // reached as the user asked, at the endpoint they gave
    step.endpoint = given.endpoint;
    return step;
}

VerifyReport verify_checkpoint(const storage::Location& path, const VerifyOptions& options)
{
    const CancelScope scope(options.cancel); // a listing that hangs stops when the verify is cancelled
    return verify_checkpoint(detect_format(path), options);
}

} // namespace shardscope
