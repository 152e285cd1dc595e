#include "core/util/error.h"

namespace shardscope {

std::string_view to_string(ProblemKind kind)
{
    switch (kind) {
    case ProblemKind::world_size_mismatch: return "world_size_mismatch";
    case ProblemKind::shard_count_mismatch: return "shard_count_mismatch";
    case ProblemKind::duplicate_rank: return "duplicate_rank";
    case ProblemKind::missing_shard: return "missing_shard";
    case ProblemKind::size_mismatch: return "size_mismatch";
    case ProblemKind::hash_mismatch: return "hash_mismatch";
    case ProblemKind::partial_write: return "partial_write";
    case ProblemKind::layout_gap: return "layout_gap";
    case ProblemKind::layout_overlap: return "layout_overlap";
    case ProblemKind::path_outside_checkpoint: return "path_outside_checkpoint";
    case ProblemKind::invalid_manifest: return "invalid_manifest";
    case ProblemKind::unsupported_schema: return "unsupported_schema";
    case ProblemKind::invalid_shard: return "invalid_shard";
    case ProblemKind::unreadable: return "unreadable";
    case ProblemKind::missing_file: return "missing_file";
    case ProblemKind::missing_tensor: return "missing_tensor";
    case ProblemKind::unmapped_tensor: return "unmapped_tensor";
    case ProblemKind::range_outside_file: return "range_outside_file";
    case ProblemKind::crc_mismatch: return "crc_mismatch";
    case ProblemKind::invalid_archive: return "invalid_archive";
    case ProblemKind::invalid_pickle: return "invalid_pickle";
    case ProblemKind::forbidden_pickle_opcode: return "forbidden_pickle_opcode";
    case ProblemKind::nonfinite_values: return "nonfinite_values";
    case ProblemKind::negative_second_moment: return "negative_second_moment";
    case ProblemKind::param_master_mismatch: return "param_master_mismatch";
    case ProblemKind::all_zero_tensor: return "all_zero_tensor";
    case ProblemKind::invalid_fp8_scale: return "invalid_fp8_scale";
    case ProblemKind::replicas_differ: return "replicas_differ";
    case ProblemKind::unread_state: return "unread_state";
    case ProblemKind::cannot_open: return "cannot_open";
    case ProblemKind::already_exists: return "already_exists";
    case ProblemKind::io_error: return "io_error";
    case ProblemKind::remote_error: return "remote_error";
    case ProblemKind::cancelled: return "cancelled";
    case ProblemKind::root_locked: return "root_locked";
    case ProblemKind::invalid_argument: return "invalid_argument";
    case ProblemKind::invalid_profile: return "invalid_profile";
    case ProblemKind::invalid_schedule: return "invalid_schedule";
    case ProblemKind::deadlock: return "deadlock";
    }
    return "unknown";
}

Error::Error(Problem problem) : std::runtime_error(problem.message), m_problem(std::move(problem)) {}

Error::Error(ProblemKind kind, std::string message, std::string path, int rank)
    : Error(Problem{.kind = kind, .message = std::move(message), .path = std::move(path), .rank = rank})
{}

int exit_code_for(ProblemKind kind)
{
    switch (kind) {
    case ProblemKind::cannot_open:
    case ProblemKind::io_error:
    case ProblemKind::remote_error:
    case ProblemKind::invalid_argument:
    case ProblemKind::already_exists:
    case ProblemKind::cancelled:
    case ProblemKind::root_locked: return 2;
    default: return 1;
    }
}

} // namespace shardscope
