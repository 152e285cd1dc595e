#pragma once
// Typed errors shared by every part of the core. A problem always says what kind of failure it
// is (scripts switch on the kind), and a sentence naming the file and the rank where they apply.

#include <stdexcept>
#include <string>
#include <string_view>

namespace shardscope {

enum class ProblemKind {
    // checkpoint invariants (shardctl verify's contract kinds)
    world_size_mismatch,
    shard_count_mismatch,
    duplicate_rank,
    missing_shard,
    size_mismatch,
    hash_mismatch,
    partial_write,
    layout_gap,
    layout_overlap,
    path_outside_checkpoint,
    invalid_manifest,
    unsupported_schema,
    invalid_shard,
    unreadable,
    // foreign formats (safetensors index, torch DCP, DeepSpeed, Megatron)
    missing_file, // a file the index / metadata / naming sequence refers to is absent
    missing_tensor, // a tensor the index maps to a file is not in that file
    unmapped_tensor, // a file holds a tensor the index does not map to it
    range_outside_file, // a byte range the metadata names runs past its file's end
    crc_mismatch, // a zip entry's CRC-32 or size differs from its directory record
    invalid_archive, // a zip archive that cannot be parsed
    invalid_pickle, // malformed pickle data (truncated, stack underflow, ...)
    forbidden_pickle_opcode, // pickle opcode the restricted reader refuses to interpret
    // tensor content (shardctl stats)
    nonfinite_values, // NaN or +-Inf in a tensor
    negative_second_moment, // exp_avg_sq < 0, which Adam cannot produce
    param_master_mismatch, // a parameter is not its fp32 master weight rounded to the param dtype
    all_zero_tensor, // a warning: every element is zero (exit status unchanged)
    invalid_fp8_scale, // an FP8 weight's *_scale_inv partner is missing, of the wrong dtype or shape, or unreadable
    replicas_differ, // the copies of a tensor every tensor-parallel rank holds whole (a norm) differ
    // loading and resuming
    unread_state, // the checkpoint holds state (a tensor, a training-state item) the loader would drop
    // operations
    cannot_open, // the path given by the user does not exist or cannot be read
    already_exists,
    io_error,
    remote_error, // an object store or web server refused, failed or answered what S3/HTTP does not allow
    cancelled,
    root_locked, // another job holds the checkpoint root's writer lock
    invalid_argument,
    invalid_profile,
    invalid_schedule,
    deadlock,
};

std::string_view to_string(ProblemKind kind);

// A problem is a finding about a checkpoint (or a profile, a schedule): rank -1 and an empty
// path mean "the checkpoint as a whole". The fields are in the order Error's constructor takes
// them, and initialisers name them (.kind, .message, .path, .rank).
struct Problem {
    ProblemKind kind = ProblemKind::invalid_manifest;
    std::string message; // one sentence naming the file and the rank
    std::string path; // the file, relative to the checkpoint, where there is one; a server's failure: the URL
    int rank = -1; // -1 where no rank applies
};

// Thrown where an operation cannot go on (load, save, parse). Verification instead collects
// Problems into its report, so one bad shard does not hide the others.
class Error : public std::runtime_error {
public:
    explicit Error(Problem problem);
    Error(ProblemKind kind, std::string message, std::string path = {}, int rank = -1);
    const Problem& problem() const noexcept { return m_problem; }
    ProblemKind kind() const noexcept { return m_problem.kind; }

private:
    Problem m_problem;
};

// Called first in a handler of Error where a problem is kept as the checkpoint's: rethrows the
// error when a server failed (remote_error) or the user cancelled (a request stopped deep below,
// core/util/cancel.h), which say nothing about the checkpoint and stop the command instead,
// rather than become one of its findings.
inline void rethrow_remote(const Error& e)
{
    if (e.kind() == ProblemKind::remote_error || e.kind() == ProblemKind::cancelled)
        throw;
}

// The exit status shardctl uses for a failure of this kind: 2 for usage and environment errors,
// 1 for everything that says the checkpoint or schedule itself is bad.
int exit_code_for(ProblemKind kind);

} // namespace shardscope
