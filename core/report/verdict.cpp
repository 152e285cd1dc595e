#include "core/report/verdict.h"

#include "core/checkpoint/verify_json.h"
#include "core/open/nearby.h"
#include "core/open/verify.h"
#include "core/report/report.h"
#include "core/util/printable.h"

#include <algorithm>

namespace shardscope {

std::string_view to_string(ResumeState state)
{
    return enum_name(state, kResumeStateNames, "unchecked");
}

namespace {

// What the bytes say, problem by problem. Only ShardScope's own checkpoints are resharded here: a
// foreign step's rank files saved at other sizes than the rest are an inconsistent state.
ResumeState state_of(const Problem& p, bool foreign)
{
    switch (p.kind) {
    case ProblemKind::world_size_mismatch: return foreign ? ResumeState::corrupt : ResumeState::needs_reshard;
    case ProblemKind::partial_write:
    case ProblemKind::missing_shard:
    case ProblemKind::size_mismatch:
    case ProblemKind::missing_file:
    case ProblemKind::shard_count_mismatch: return ResumeState::incomplete;
    case ProblemKind::nonfinite_values: return ResumeState::diverged;
    default: return ResumeState::corrupt; // other bytes, an inconsistent state, or data that cannot be read
    }
}

// What was checked, in this format's terms: a format that records no digest cannot tell bytes
// that were wrong when written from right ones, and says so.
void describe_checks(const VerifyReport& verify, ResumeVerdict& verdict)
{
    const std::string& f = verify.format;
    const std::string files = std::to_string(verify.shards.size()) + (verify.shards.size() == 1 ? " file" : " files");
    if (no_checkpoint_found(verify)) {
        verdict.not_checked.push_back("nothing: no checkpoint ShardScope opens was found there");
        return;
    }
    if (f == "shardscope" && !verify.manifest) {
        verdict.not_checked.push_back("no manifest could be read, so no shard could be checked against it");
        return;
    }
    if (f == "shardscope") {
        verdict.checked.push_back("the manifest's invariants: world size, one shard per rank, a layout that tiles "
                                  "the parameters");
        verdict.checked.push_back("every shard's size and " + std::string(verify.fast ? "XXH3" : "SHA-256") +
                                  " against the manifest (" + std::to_string(verify.shards.size()) + " shards)");
        return;
    }
    if (f == "safetensors" || f == "safetensors-index") {
        if (f == "safetensors-index")
            verdict.checked.push_back("the index: every mapped tensor in its file, no unmapped tensor, total_size");
        verdict.checked.push_back("every header and tensor byte range, as strictly as the reference reader (" + files +
                                  ")");
        verdict.not_checked.push_back("safetensors records no digest: bytes that were wrong "
                                      "when written cannot be told from right ones");
        return;
    }
    if (f == "torch-dcp") {
        verdict.checked.push_back("the metadata: every chunk's tiling of its tensor and its byte range (" + files +
                                  ")");
        verdict.checked.push_back("every stored item's torch.save archive: its CRC-32s and size");
        verdict.not_checked.push_back("DCP records no digest of the data: a chunk written wrong with a matching CRC "
                                      "cannot be detected");
        return;
    }
    if (f == "torch-dcp-hf") {
        verdict.checked.push_back("every shard's safetensors header and DCP_SHARDING_INFO, and every chunk's tiling "
                                  "of its tensor and byte range (" +
                                  files + ")");
        verdict.not_checked.push_back("safetensors records no digest: bytes that were wrong "
                                      "when written cannot be told from right ones");
        return;
    }
    if (f == "deepspeed" || f == "megatron") {
        // Megatron's rank files save its args: their parallel sizes name every rank, a lost one too.
        const bool sized = verify.foreign &&
            std::any_of(verify.foreign->rows.begin(), verify.foreign->rows.end(),
                        [](const auto& row) { return row.first == "sizes from"; });
        verdict.checked.push_back(std::string(sized ? "the rank files the saved args' parallel sizes name"
                                                    : "the rank files the file names imply") +
                                  ", and the CRC-32 of every entry of every .pt archive (" + files + ")");
        if (!sized)
            verdict.not_checked.push_back(f +
                                          " writes no manifest: a rank missing from the naming sequence is found, "
                                          "one never named is not");
        return;
    }
    verdict.checked.push_back(files + " checked as " + f);
}

// DeepSpeed ZeRO's flat partitions that hold NaN or Inf in their padding, which is no value of the
// model (the tensors put together from them are checked): said where the values are said finite,
// so that the table's NaN counts are no contradiction.
std::string but_padding(const ContentReport& content)
{
    const auto padded = std::count_if(content.tensors.begin(), content.tensors.end(), [](const TensorContent& t) {
        return t.zero_partition && t.stats.nonfinite() > 0;
    });
    return padded == 0 ? std::string()
                       : " but the padding of " + std::to_string(padded) + " ZeRO partition" + (padded == 1 ? "" : "s");
}

std::string content_checks(const ContentReport& content)
{
    return "every tensor's values (" + std::to_string(content.tensors.size()) + " tensors): no NaN or Inf" +
        but_padding(content) +
        (content.format == "shardscope" ? ", no negative second moment, every parameter its master rounded" : "");
}

void set_bytes_failure(const VerifyReport& verify, ResumeVerdict& verdict)
{
    // The title names what decided the state: classify_failure ranks a world-size change first,
    // which must not headline a checkpoint that is also corrupt.
    VerifyReport deciding;
    deciding.dir = verify.dir;
    deciding.format = verify.format;
    deciding.manifest = verify.manifest;
    deciding.foreign = verify.foreign;
    for (const Problem& p : verify.problems)
        if (state_of(p, verify.foreign.has_value()) == verdict.state)
            deciding.problems.push_back(p);
    const FailureSummary failure = classify_failure(deciding);
    verdict.title = failure.title;
    verdict.meaning = failure.meaning;
}

bool is_reading_failure(const Problem& p);

void set_content_failure(const ContentReport& content, ResumeVerdict& verdict)
{
    // The finding that decided: the first NaN/Inf for a diverged step, else the first that is not
    // a reading failure (those are in not_checked, not in the reasons).
    const Problem& first = *std::find_if(content.problems.begin(), content.problems.end(), [&](const Problem& p) {
        return verdict.state == ResumeState::diverged ? p.kind == ProblemKind::nonfinite_values
                                                      : !is_reading_failure(p);
    });
    if (verdict.state == ResumeState::diverged) {
        std::size_t nonfinite = 0;
        for (const TensorContent& t : content.tensors)
            nonfinite += tensor_health(t).nonfinite;
        verdict.title = "Diverged: " + std::to_string(nonfinite) + " of " + std::to_string(content.tensors.size()) +
            " tensors hold NaN or Inf";
        verdict.meaning = "The run had diverged when this step was saved: do not resume from it; resume from an "
                          "earlier step whose tensors are finite. First: " +
            first.message;
        return;
    }
    if (first.kind == ProblemKind::negative_second_moment || first.kind == ProblemKind::param_master_mismatch) {
        verdict.title = "Inconsistent state: " + first.message;
        verdict.meaning = "The saved values break what training produces (a negative Adam second moment, or "
                          "parameters that are not their master weights): do not resume from this step; resume "
                          "from an earlier one.";
        return;
    }
    if (first.kind == ProblemKind::replicas_differ) {
        verdict.title = "Ranks diverged: " + first.message;
        verdict.meaning = "Tensor-parallel ranks hold different copies of a tensor each should hold the same: the "
                          "run's ranks had drifted apart when this step was saved. Do not resume from it; resume "
                          "from an earlier step whose copies agree.";
        return;
    }
    verdict.title = "Values unreadable: " + first.message;
    verdict.meaning = "Some tensor data could not be read, so this step cannot be loaded as saved: check the file "
                      "named, or resume from an earlier step.";
}

} // namespace

ContentReport read_values(const storage::Location& path, const VerifyReport& verify, const ContentOptions& options)
{
    const storage::Location what = verified_location(path, verify);
    try {
        return inspect_content(what, options);
    } catch (const Error& e) {
        rethrow_remote(e);
        ContentReport failed;
        failed.format = verify.format;
        failed.dir = verify.dir;
        failed.problems.push_back(e.problem());
        return failed;
    }
}

ResumeCheck check_resume(const storage::Location& path, const VerifyOptions& options, bool read_values_too)
{
    ResumeCheck out{.verify = verify_checkpoint(path, options)};
    if (read_values_too && !out.verify.cancelled) {
        ContentOptions values;
        values.threads = options.threads;
        values.cancel = options.cancel;
        out.content = read_values(path, out.verify, values);
    }
    out.verdict = resume_verdict(out.verify, out.content ? &*out.content : nullptr, options.expected_world_size);
    return out;
}

nlohmann::json resume_check_json(const ResumeCheck& checked)
{
    nlohmann::json out = verify_report_json(checked.verify);
    out["verdict"] = verdict_json(checked.verdict);
    if (checked.content)
        out["ok"] = checked.verdict.safe();
    return out;
}

std::vector<std::string> failed_files(const VerifyReport& verify)
{
    std::vector<std::string> out;
    for (const ShardCheck& s : verify.shards)
        if (s.status != ShardStatus::ok && s.status != ShardStatus::pending && s.status != ShardStatus::hashing)
            out.push_back(s.path);
    return out;
}

namespace {

// Statistics read from files that failed verification are not the saved values: named, so that
// nobody takes them for what the step holds.
void note_failed_files(const VerifyReport& verify, ResumeVerdict& verdict)
{
    verdict.failed_files = failed_files(verify);
    const auto& failed = verdict.failed_files;
    if (failed.empty())
        return;
    std::string names;
    for (std::size_t i = 0; i < failed.size() && i < 4; ++i)
        names += (i ? ", " : "") + printable(failed[i]);
    verdict.not_checked.push_back("the values read from " + names + (failed.size() > 4 ? ", ..." : "") +
                                  ", which failed verification, are not the saved values");
}

// A reading that could not start or go on (the format is not one stats reads, the step is gone,
// an I/O error) says nothing about the values: they stay unchecked rather than "corrupt".
bool is_reading_failure(const Problem& p)
{
    return p.kind == ProblemKind::invalid_argument || p.kind == ProblemKind::cannot_open ||
        p.kind == ProblemKind::io_error || p.kind == ProblemKind::cancelled;
}

// What the values say; their findings join the reasons, a reading failure joins not_checked.
ResumeState judge_values(const VerifyReport& verify, const ContentReport* content, ResumeVerdict& verdict)
{
    if (!content) {
        verdict.not_checked.push_back("the tensors' values were not read");
        return ResumeState::unchecked;
    }
    ResumeState values = ResumeState::safe;
    for (const Problem& p : content->problems) {
        if (is_reading_failure(p)) {
            verdict.not_checked.push_back("the tensors' values: " + p.message);
            values = std::min(values, ResumeState::unchecked);
            continue;
        }
        // NaN found before a cancel still counts: cancelling only keeps a step from being safe.
        values = std::min(values,
                          state_of(p, false) == ResumeState::diverged ? ResumeState::diverged : ResumeState::corrupt);
        verdict.reasons.push_back(p);
    }
    for (const Problem& w : content->warnings)
        if (w.kind != ProblemKind::all_zero_tensor && verdict.not_checked.size() < 8)
            verdict.not_checked.push_back(w.message);
    if (content->cancelled) {
        verdict.cancelled = true;
        verdict.not_checked.push_back("the tensors' values: reading them was cancelled");
        values = std::min(values, ResumeState::unchecked);
    }
    if (content->tensors.empty()) {
        verdict.not_checked.push_back("the tensors' values: no tensor could be read");
        return std::min(values, ResumeState::unchecked);
    }
    verdict.checked.push_back(content_checks(*content));
    note_failed_files(verify, verdict);
    return values;
}

} // namespace

ResumeVerdict resume_verdict(const VerifyReport& verify, const ContentReport* content, int expected_world_size)
{
    ResumeVerdict verdict;
    verdict.expected_world_size = expected_world_size;
    verdict.no_checkpoint = no_checkpoint_found(verify);
    describe_checks(verify, verdict);

    ResumeState bytes = ResumeState::safe;
    for (const Problem& p : verify.problems) {
        bytes = std::min(bytes, state_of(p, verify.foreign.has_value()));
        verdict.reasons.push_back(p);
    }
    // Files that do not hold what was written decide on their own: values read from them are not
    // the saved ones, and a value that cannot be read from a short file is that same short file.
    if (bytes <= ResumeState::incomplete) {
        verdict.state = bytes;
        set_bytes_failure(verify, verdict);
        if (content && !content->tensors.empty())
            note_failed_files(verify, verdict);
        return verdict;
    }
    if (verify.cancelled) { // an unfinished verification shows nothing intact, whatever it found first
        verdict.cancelled = true;
        verdict.state = ResumeState::unchecked;
        verdict.title = "Verification cancelled";
        verdict.meaning = "Not every file was checked; verify again before resuming.";
        verdict.not_checked.push_back("the files verification did not reach");
        return verdict;
    }

    const ResumeState values = judge_values(verify, content, verdict);
    verdict.state = std::min(bytes, values);
    if (verdict.state == bytes && bytes != ResumeState::safe) { // needs_reshard, the values no worse
        set_bytes_failure(verify, verdict);
        if (values == ResumeState::unchecked)
            verdict.not_checked.push_back("read the values too before resharding: a diverged run reshards just as "
                                          "well");
        return verdict;
    }
    if (verdict.state != ResumeState::safe && verdict.state != ResumeState::unchecked) {
        set_content_failure(*content, verdict);
        return verdict;
    }
    const std::string files = verify.format == "shardscope"
        ? (verify.shards.size() == 1 ? std::string("the shard is verified")
                                     : "all " + std::to_string(verify.shards.size()) + " shards verified")
        : (verify.shards.size() == 1 ? std::string("its file is intact")
                                     : "all " + std::to_string(verify.shards.size()) + " files intact");
    if (verdict.state == ResumeState::unchecked) {
        verdict.title = "Values not read: " + files;
        verdict.meaning = "The files are intact, but a run that had diverged would look the same: read the tensors' "
                          "values (shardctl verify --content, or the app's Tensors tab) before resuming.";
        return verdict;
    }
    verdict.title = "Safe to resume: " + files + ", all " + std::to_string(content->tensors.size()) +
        " tensors finite" + but_padding(*content);
    verdict.meaning = verdict.not_checked.empty()
        ? "The bytes are what was written and the values are what training produces: resume from this step."
        : "The files are intact as far as the format can tell and every value is finite: resume from this step. Not "
          "checked: " +
            verdict.not_checked.front() + ".";
    if (!verify.leftover_tmp_files.empty())
        verdict.meaning += " " + std::to_string(verify.leftover_tmp_files.size()) +
            " leftover .tmp file(s) from an interrupted save can be deleted.";
    return verdict;
}

nlohmann::json verdict_json(const ResumeVerdict& verdict)
{
    nlohmann::json reasons = nlohmann::json::array();
    for (const Problem& p : verdict.reasons)
        reasons.push_back(problem_json(p));
    nlohmann::json out = {{"state", std::string(to_string(verdict.state))},
                          {"title", verdict.title},
                          {"meaning", verdict.meaning},
                          {"reasons", std::move(reasons)},
                          {"checked", verdict.checked},
                          {"not_checked", verdict.not_checked}};
    if (verdict.state == ResumeState::needs_reshard && verdict.expected_world_size > 0)
        out["reshard_to"] = verdict.expected_world_size;
    return out;
}

} // namespace shardscope
