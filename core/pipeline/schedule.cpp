#include "core/pipeline/schedule.h"

#include "core/pipeline/internal/schedule_builders.h"
#include "core/util/error.h"

#include <algorithm>
#include <string>

namespace shardscope::pipeline {
namespace {

[[noreturn]] void bad_spec(const std::string& sentence)
{
    throw Error(ProblemKind::invalid_schedule, sentence);
}

// The ops of a timeline at most: up to three (F, B, W) for each microbatch at each model chunk of
// each stage. Guards the op lists (and the simulator's N * v * M tables) against int overflow and
// memory: the simulator keeps about 50 bytes an op, 1.7 GB for this many (16M ops took 0.8 GB
// and 3 s). Far above what a real job or the GUI asks for: 128 stages x 4096 microbatches x 8
// chunks is a third of it.
constexpr long long kMaxOps = 1LL << 25;

std::vector<Op> gpipe(int microbatches)
{
    std::vector<Op> ops;
    ops.reserve(2 * static_cast<std::size_t>(microbatches));
    for (int m = 0; m < microbatches; ++m)
        ops.push_back({m, 0, OpKind::F});
    for (int m = 0; m < microbatches; ++m)
        ops.push_back({m, 0, OpKind::B});
    return ops;
}

std::vector<Op> one_f_one_b(int stages, int stage, int microbatches)
{
    std::vector<Op> ops;
    ops.reserve(2 * static_cast<std::size_t>(microbatches));
    const int warmup = std::min(stages - stage - 1, microbatches);
    for (int m = 0; m < warmup; ++m)
        ops.push_back({m, 0, OpKind::F});
    for (int i = 0; i + warmup < microbatches; ++i) {
        ops.push_back({warmup + i, 0, OpKind::F});
        ops.push_back({i, 0, OpKind::B});
    }
    for (int m = std::max(microbatches - warmup, 0); m < microbatches; ++m)
        ops.push_back({m, 0, OpKind::B});
    return ops;
}

// ZB-H1: the 1F1B order with B split off from W. Stage s (which 1F1B leaves holding only N - s
// activations) defers its W passes by s microbatches: W(i - s) follows B(i). The s deferred W's
// run after the last B, exactly where 1F1B's cool-down leaves stage s idle, so every stage ends
// up holding at most N microbatches (like 1F1B's stage 0) and the B chain that drains the
// pipeline is no longer slowed by W passes.
std::vector<Op> zb_h1(int stages, int stage, int microbatches)
{
    std::vector<Op> ops;
    ops.reserve(3 * static_cast<std::size_t>(microbatches));
    const int warmup = std::min(stages - stage - 1, microbatches);
    int next_w = 0;
    auto backward = [&](int i) {
        ops.push_back({i, 0, OpKind::B});
        if (i - stage >= 0)
            ops.push_back({next_w++, 0, OpKind::W});
    };
    for (int m = 0; m < warmup; ++m)
        ops.push_back({m, 0, OpKind::F});
    for (int i = 0; i + warmup < microbatches; ++i) {
        ops.push_back({warmup + i, 0, OpKind::F});
        backward(i);
    }
    for (int m = std::max(microbatches - warmup, 0); m < microbatches; ++m)
        backward(m);
    while (next_w < microbatches)
        ops.push_back({next_w++, 0, OpKind::W});
    return ops;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving. Virtual microbatch k (0 .. M*v-1)
// walks the chunks in groups of N microbatches: forward k runs chunk (k mod N*v) / N of
// microbatch (k / (N*v)) * N + k mod N; backwards visit the chunks in reverse.
Op interleaved_op(int k, int stages, int chunks, bool forward)
{
    const int group = k / (stages * chunks);
    const int in_group = k % (stages * chunks);
    const int chunk = in_group / stages;
    return {group * stages + in_group % stages, forward ? chunk : chunks - 1 - chunk, forward ? OpKind::F : OpKind::B};
}

std::vector<Op> interleaved(int stages, int stage, int microbatches, int chunks)
{
    const int total = microbatches * chunks;
    // With M == N Megatron runs every forward first: the steady-state formula would ask for
    // more warm-up than there are forwards on the early stages anyway.
    const int warmup =
        microbatches == stages ? total : std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
    std::vector<Op> ops;
    ops.reserve(2 * static_cast<std::size_t>(total));
    for (int k = 0; k < warmup; ++k)
        ops.push_back(interleaved_op(k, stages, chunks, true));
    for (int i = 0; i + warmup < total; ++i) {
        ops.push_back(interleaved_op(warmup + i, stages, chunks, true));
        ops.push_back(interleaved_op(i, stages, chunks, false));
    }
    for (int k = total - warmup; k < total; ++k)
        ops.push_back(interleaved_op(k, stages, chunks, false));
    return ops;
}

} // namespace

std::string_view to_string(ScheduleKind kind)
{
    return enum_name(kind, kScheduleKindNames, "unknown");
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view text)
{
    const auto kind = enum_from_name<ScheduleKind>(text, kScheduleKindNames);
    return kind == ScheduleKind::custom ? std::nullopt : kind;
}

int default_virtual_stages(ScheduleKind kind)
{
    return kind == ScheduleKind::interleaved || kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipe_v ? 2 : 1;
}

bool splits_backward(ScheduleKind kind)
{
    return kind == ScheduleKind::zb_h1 || kind == ScheduleKind::zb_h2 || kind == ScheduleKind::zb_v ||
        kind == ScheduleKind::dualpipe_v;
}

Placement placement_of(const ScheduleSpec& spec)
{
    if (spec.kind == ScheduleKind::custom)
        return spec.custom_placement;
    return spec.kind == ScheduleKind::zb_v || spec.kind == ScheduleKind::dualpipe_v ? Placement::vshape
                                                                                    : Placement::looped;
}

char to_char(OpKind kind)
{
    switch (kind) {
    case OpKind::F: return 'F';
    case OpKind::B: return 'B';
    case OpKind::W: return 'W';
    }
    return '?';
}

void check_spec(const ScheduleSpec& spec)
{
    if (spec.stages < 1)
        bad_spec("a pipeline needs at least 1 stage, not " + std::to_string(spec.stages));
    if (spec.microbatches < 1)
        bad_spec("a pipeline step needs at least 1 microbatch, not " + std::to_string(spec.microbatches));
    if (!(spec.p2p_latency_ms >= 0.0) || spec.p2p_latency_ms > 1e12)
        bad_spec("the p2p latency must be a finite number of ms >= 0");
    const bool vshape = spec.kind == ScheduleKind::zb_v || spec.kind == ScheduleKind::dualpipe_v;
    if (vshape && spec.virtual_stages != 2)
        bad_spec(std::string(to_string(spec.kind)) + " places exactly 2 model chunks per stage in a V, not " +
                 std::to_string(spec.virtual_stages));
    if (spec.kind == ScheduleKind::dualpipe_v && spec.microbatches < 2 * spec.stages)
        bad_spec("dualpipe-v needs at least 2N = " + std::to_string(2 * spec.stages) +
                 " microbatches (one per model "
                 "chunk in flight), not " +
                 std::to_string(spec.microbatches));
    if (spec.kind == ScheduleKind::custom) {
        if (spec.virtual_stages < 1)
            bad_spec("a schedule needs at least 1 model chunk per stage, not " + std::to_string(spec.virtual_stages));
        if (spec.custom_placement == Placement::vshape && spec.virtual_stages != 2)
            bad_spec("a V-shaped placement holds exactly 2 model chunks per stage, not " +
                     std::to_string(spec.virtual_stages));
    } else if (spec.kind == ScheduleKind::interleaved) {
        if (spec.virtual_stages < 2)
            bad_spec("the interleaved schedule needs at least 2 virtual stages (model chunks) per "
                     "stage, not " +
                     std::to_string(spec.virtual_stages) + "; with 1 it is plain 1f1b");
        if (spec.microbatches % spec.stages != 0)
            bad_spec("the interleaved schedule needs the number of microbatches (" + std::to_string(spec.microbatches) +
                     ") to be a multiple of the number of "
                     "stages (" +
                     std::to_string(spec.stages) +
                     "), as in Megatron-LM: "
                     "microbatches enter each model chunk in groups of one per stage");
    } else if (!vshape && spec.virtual_stages != 1) {
        bad_spec("virtual stages (" + std::to_string(spec.virtual_stages) +
                 ") need the "
                 "interleaved schedule; " +
                 std::string(to_string(spec.kind)) + " runs one model chunk per stage");
    }
    long long passes = 1LL * spec.stages * spec.microbatches; // two ints fit; a third may not
    if (__builtin_mul_overflow(passes, 1LL * spec.virtual_stages, &passes) || passes > kMaxOps / 3)
        bad_spec(std::to_string(spec.stages) + " stages x " + std::to_string(spec.microbatches) + " microbatches x " +
                 std::to_string(spec.virtual_stages) + " model chunks is too large to simulate (at most " +
                 std::to_string(kMaxOps / 3) + " microbatch passes, each up to 3 ops)");
}

Schedule build_schedule(const ScheduleSpec& spec)
{
    check_spec(spec);
    Schedule schedule;
    schedule.spec = spec;
    if (spec.kind == ScheduleKind::custom)
        bad_spec("a custom schedule is read from a file (shardctl schedule --from-csv), not built");
    schedule.split_backward = splits_backward(spec.kind);
    if (spec.kind == ScheduleKind::zb_h2) {
        schedule.stage_ops = internal::zb_h2(spec.stages, spec.microbatches);
        return schedule;
    }
    schedule.stage_ops.resize(static_cast<std::size_t>(spec.stages));
    for (int s = 0; s < spec.stages; ++s) {
        auto& ops = schedule.stage_ops[s];
        switch (spec.kind) {
        case ScheduleKind::gpipe: ops = gpipe(spec.microbatches); break;
        case ScheduleKind::one_f_one_b: ops = one_f_one_b(spec.stages, s, spec.microbatches); break;
        case ScheduleKind::zb_h1: ops = zb_h1(spec.stages, s, spec.microbatches); break;
        case ScheduleKind::interleaved:
            ops = interleaved(spec.stages, s, spec.microbatches, spec.virtual_stages);
            break;
        case ScheduleKind::zb_v: ops = internal::zb_v(spec.stages, s, spec.microbatches); break;
        case ScheduleKind::dualpipe_v: ops = internal::dualpipe_v(spec.stages, s, spec.microbatches); break;
        case ScheduleKind::zb_h2:
        case ScheduleKind::custom: break; // handled above
        }
    }
    return schedule;
}

} // namespace shardscope::pipeline
