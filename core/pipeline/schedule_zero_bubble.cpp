#include "core/pipeline/internal/schedule_builders.h"

#include <algorithm>
#include <deque>
#include <utility>

namespace shardscope::pipeline::internal {

// ZB-H2. Stage s may hold 2(N - s) - 1 microbatches (stage 0: 2N - 1, the paper's budget), which
// is exactly the warm-up that keeps it busy until its first B arrives. In unit time steps every
// stage runs, in this order of preference: the next B if it is ready (the B chain is the
// critical path, so W passes never delay it and end up in the tail), the next F if it is ready
// and the budget allows, else the next W. The result is the paper's parallelogram: after its
// warm-up a stage repeats B, W, F and in the cool-down runs each B as soon as it arrives with W
// passes in between. Snapshots of the counters at the start of a step make every stage decide
// on what had finished by then, as a real run would.
std::vector<std::vector<Op>> zb_h2(int stages, int microbatches)
{
    const auto n = static_cast<std::size_t>(stages);
    std::vector<std::vector<Op>> out(n);
    for (auto& ops : out)
        ops.reserve(3 * static_cast<std::size_t>(microbatches));
    std::vector<int> f(n, 0), b(n, 0), w(n, 0); // ops started so far, per stage and kind
    std::vector<int> f_done, b_done;
    std::size_t finished = 0;
    bool moved = true, moved_before = true;
    // Every op ends one step after it starts, so two idle steps in a row would mean no stage can
    // ever move again; the greedy order cannot get there, but a loop must not be able to hang.
    while (finished < n && (moved || moved_before)) {
        f_done = f; // everything started before this step has ended by now
        b_done = b;
        finished = 0;
        moved_before = moved;
        moved = false;
        for (std::size_t s = 0; s < n; ++s) {
            auto& ops = out[s];
            const int budget = std::min(2 * stages - 1, microbatches);
            const bool b_ready = b[s] < microbatches && f_done[s] > b[s] && (s + 1 == n || b_done[s + 1] > b[s]);
            const bool f_ready = f[s] < microbatches && (s == 0 || f_done[s - 1] > f[s]) && f[s] - w[s] < budget;
            const std::size_t before = ops.size();
            if (b_ready)
                ops.push_back({b[s]++, 0, OpKind::B});
            else if (f_ready)
                ops.push_back({f[s]++, 0, OpKind::F});
            else if (w[s] < b_done[s])
                ops.push_back({w[s]++, 0, OpKind::W});
            moved |= ops.size() != before;
            if (w[s] == microbatches)
                ++finished;
        }
    }
    return out;
}

// ZB-V, in the order of the paper's Figure (and of torch.distributed.pipelining's
// ScheduleZBVZeroBubble): chunk 0 warms up with 2(N - s) - 1 forwards, then the two chunks
// alternate; chunk 1's first N - s backwards run with their W at once, which is what keeps the
// peak at 2N chunk activations. It is written for max(M, 2N - 1) microbatches and the ones past
// M are dropped, which leaves a valid (if no longer bubble-free) order for small M.
std::vector<Op> zb_v(int stages, int stage, int microbatches)
{
    const int total = std::max(2 * stages - 1, microbatches);
    std::vector<Op> ops;
    ops.reserve(6 * static_cast<std::size_t>(total));
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto add = [&](int microbatch, int chunk, OpKind kind) {
        if (microbatch < microbatches)
            ops.push_back({microbatch, chunk, kind});
    };
    for (int i = 0; i < 2 * (stages - stage) - 1; ++i)
        add(f0++, 0, OpKind::F);
    for (int i = 0; i < stage; ++i) {
        add(f1++, 1, OpKind::F);
        add(f0++, 0, OpKind::F);
    }
    for (int i = 0; i < stages - stage; ++i) {
        add(f1++, 1, OpKind::F);
        add(b1, 1, OpKind::B);
        add(b1++, 1, OpKind::W);
    }
    while (f1 < f0 || f0 < total) {
        if (f0 < total)
            add(f0++, 0, OpKind::F);
        add(b0, 0, OpKind::B);
        add(b0++, 0, OpKind::W);
        add(f1++, 1, OpKind::F);
        add(b1, 1, OpKind::B);
        add(b1++, 1, OpKind::W);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < stage; ++i) {
        add(b0++, 0, OpKind::B);
        add(b1++, 1, OpKind::B);
    }
    for (int i = 0; i < stages - stage; ++i) {
        add(b0++, 0, OpKind::B);
        add(w0++, 0, OpKind::W);
    }
    while (w1 < b1)
        add(w1++, 1, OpKind::W);
    while (w0 < b0)
        add(w0++, 0, OpKind::W);
    return ops;
}

// DualPipeV, the eight phases of DeepSeek's schedule as torch.distributed.pipelining builds it
// for stage s of N (M >= 2N): forwards of chunk 0, then of both chunks, a zero-bubble start of
// chunk 1's backwards, the steady state pairing a forward of one chunk with a full backward of
// the other, and a cool-down whose second half splits backwards again so W passes fill the
// drain. A full backward is B with its W straight after; a split one queues its W for the next
// free slot, oldest first.
std::vector<Op> dualpipe_v(int stages, int stage, int microbatches)
{
    std::vector<Op> ops;
    ops.reserve(6 * static_cast<std::size_t>(microbatches));
    int f[2] = {0, 0}, b[2] = {0, 0};
    std::deque<std::pair<int, int>> pending_w; // (chunk, microbatch)
    auto forward = [&](int chunk) { ops.push_back({f[chunk]++, chunk, OpKind::F}); };
    auto backward = [&](int chunk, bool split) {
        const int m = b[chunk]++;
        ops.push_back({m, chunk, OpKind::B});
        if (split)
            pending_w.emplace_back(chunk, m);
        else
            ops.push_back({m, chunk, OpKind::W});
    };
    auto weight = [&] {
        if (pending_w.empty())
            return;
        ops.push_back({pending_w.front().second, pending_w.front().first, OpKind::W});
        pending_w.pop_front();
    };
    const int before = stages - stage - 1; // stages after this one
    for (int i = 0; i < 2 * before; ++i)
        forward(0);
    for (int i = 0; i <= stage; ++i) {
        forward(0);
        forward(1);
    }
    for (int i = 0; i < before; ++i) {
        backward(1, true);
        weight();
        forward(1);
    }
    auto overlapped = [&](int forward_chunk) {
        forward(forward_chunk);
        ops.back().overlap_next = true;
        backward(1 - forward_chunk, false);
    };
    for (int i = 0; i < microbatches - 2 * stages + stage + 1; ++i) {
        if (i == 0 && stage == stages - 1) { // the V's turn: kept apart, which shortens the bubble
            forward(0);
            backward(1, false);
        } else {
            overlapped(0);
        }
        overlapped(1);
    }
    for (int i = 0; i < before; ++i) {
        backward(1, false);
        overlapped(1);
    }
    // The cool-down switches to split backwards half-way, odd stages one op earlier than even
    // ones, so neighbouring stages drain in step.
    bool split = false;
    const int tail = stage + 1;
    for (int i = 0; i < tail; ++i) {
        if (i == tail / 2 && stage % 2 == 1)
            split = true;
        backward(1, split);
        if (i == tail / 2 && stage % 2 == 0)
            split = true;
        backward(0, split);
    }
    for (int i = 0; i < before; ++i) {
        weight();
        backward(0, split);
    }
    while (!pending_w.empty())
        weight();
    return ops;
}

} // namespace shardscope::pipeline::internal
