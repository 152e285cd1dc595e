#pragma once
// "Can I resume from this?": one answer from the bytes (verify) and the values (stats) together,
// with its reasons and what was and was not checked. The CLI, the JSON, every report format, the
// app's banner and status bar and the Python module show this answer and no other.

#include "core/checkpoint/verify.h"
#include "core/inspect/content.h"
#include "core/util/enum_names.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// Worst first: a checkpoint with several findings takes the state of the worst.
enum class ResumeState {
    corrupt, // bytes differ from what was written, or the state is internally inconsistent
    incomplete, // a save that did not finish: files or the manifest are missing
    diverged, // intact files whose tensors hold NaN or Inf
    needs_reshard, // intact, but saved at another world size than the job runs at
    unchecked, // the bytes are fine but the values were not read (or not all of them)
    safe,
};
inline constexpr std::string_view kResumeStateNames[] = {"corrupt",       "incomplete", "diverged",
                                                         "needs_reshard", "unchecked",  "safe"};
static_assert(std::size(kResumeStateNames) == std::size_t(ResumeState::safe) + 1);
std::string_view to_string(ResumeState state);

struct ResumeVerdict {
    ResumeState state = ResumeState::unchecked;
    std::string title; // one line: "Diverged: 3 of 72 tensors hold NaN or Inf"
    std::string meaning; // what it means for resuming and what to do
    std::vector<Problem> reasons; // the findings that decided it (from verify, then from the values)
    std::vector<std::string> checked; // what was looked at, in words for this format
    std::vector<std::string> not_checked; // what was not, and why (a format without digests says so)
    int expected_world_size = -1; // needs_reshard: the world size to reshard to
    bool cancelled = false; // verification or the reading of the values stopped before the end
    // Nothing ShardScope opens was found (no_checkpoint_found): the state stays that of an
    // unreadable manifest for the exit status and the JSON, but a viewer shows it as neither good
    // nor bad — a folder to pick again, not a damaged checkpoint.
    bool no_checkpoint = false;
    std::vector<std::string> failed_files; // values were read from these, which failed verification

    bool safe() const { return state == ResumeState::safe; }
};

// The verdict of a verification and, when the values were read, of their content. `content`
// null: the values were not read (state unchecked at best). A content report of a checkpoint
// whose bytes failed verification never makes it better than what the bytes say.
ResumeVerdict resume_verdict(const VerifyReport& verify, const ContentReport* content, int expected_world_size = -1);

// {"state", "title", "meaning", "reasons": [{kind, message, path?, rank?}], "checked": [...],
//  "not_checked": [...]} (+ "reshard_to" for needs_reshard): the verdict object of verify --json,
// report --json, status --json and the Python module.
nlohmann::json verdict_json(const ResumeVerdict& verdict);

// The values of what `verify` read (the step directory it verified, or the one file `path` names),
// for the verdict: inspect_content, or a report holding the error when they cannot be read at all.
ContentReport read_values(const storage::Location& path, const VerifyReport& verify,
                          const ContentOptions& options = {});

// Verification, then (with `read_values_too`, unless it was cancelled) the values of what it read,
// then the verdict: what verify --content, status --content and the Python module run.
struct ResumeCheck {
    VerifyReport verify;
    std::optional<ContentReport> content; // when the values were read
    ResumeVerdict verdict;
};
ResumeCheck check_resume(const storage::Location& path, const VerifyOptions& options, bool read_values_too);

// verify --json's object (docs/shardctl.md, 3), for shardctl and the Python module alike: the files'
// report and the verdict. With the values read, `ok` is the verdict's, as the exit status is:
// intact files full of NaN are not ok.
nlohmann::json resume_check_json(const ResumeCheck& checked);

// The files that failed verification (their relative paths): statistics read from them are not
// the saved values and are shown as such.
std::vector<std::string> failed_files(const VerifyReport& verify);

} // namespace shardscope
