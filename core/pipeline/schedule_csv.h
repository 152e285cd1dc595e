#pragma once
// torch.distributed.pipelining's CSV schedule format (what torchtitan's
// pipeline_parallel_schedule_csv loads through _PipelineScheduleRuntime._load_csv), both ways.
//
// One line per rank (pipeline stage of ours, in rank order), one cell per action in execution
// order. An action is [stage][type][microbatch] with stage = torch's *stage index*, i.e. our
// piece (partition.h): "0F0", "5I3", "5W3", "2B1". Types: F forward, B full backward, I backward
// for inputs, W backward for weights; UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B and
// RECV_B (communication, "3SEND_F1") are accepted and skipped, since the simulator derives every
// send from the dependencies. An overlapped pair is "(0F4;7B1)OVERLAP_F_B". Empty cells (torch's
// idle steps) are skipped.
//
// Reading: ranks = lines, stages per rank v from the stage indices (the looped or the V
// placement, nothing else), microbatches M = largest index + 1. A schedule with any I or W
// splits the backward, and a full B in it becomes B then W. Every rank must list F, B (or I and
// W) of each of its stages for each microbatch exactly once; anything else is an
// invalid_schedule error naming the line and cell.

#include "core/pipeline/schedule.h"

#include <string>
#include <string_view>

namespace shardscope::pipeline {

// The compute-only CSV of `schedule` ('\n' line ends, no header): B is "I" when the schedule
// splits the backward and "B" otherwise; an overlapped F and B whose W follows at once are one
// "(F;B)OVERLAP_F_B" cell with a full backward.
std::string schedule_csv(const Schedule& schedule);

// Parses CSV text into a custom Schedule (spec.kind == custom, p2p latency 0). `source` names the
// file in error messages. O(size of the text).
Schedule parse_schedule_csv(std::string_view text, const std::string& source);
// Reads and parses a file; a missing or unreadable file is an io error naming it.
Schedule load_schedule_csv(const std::string& path);

} // namespace shardscope::pipeline
