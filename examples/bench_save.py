#!/usr/bin/env python3
"""Saving training state from Python: shardscope against torch.save, measured in one run.

1. Throughput: the same state (1 GiB by default: bf16 parameters, fp32 master weights and two
   AdamW moments, split over 4 ranks) saved through shardscope.save_sharded (one file per rank,
   written in parallel straight from the tensors' memory, hashed while written, fsync, manifest
   last) and through torch.save of each rank's tensors followed by fsync of each file and of the
   directory (what a careful torch job does; without the fsync the figure is the page cache's).
2. Stall: a training loop that checkpoints every step, with CheckpointManager.save_async (the loop
   waits for a snapshot copy only) against a synchronous torch.save + fsync.

    PYTHONPATH=build/python python3 examples/bench_save.py --gib 1 --dir /tmp/bench

Run by hand (not by ctest): the figures depend on the disk. Prints one JSON object.
"""

import argparse
import json
import os
import shutil
import time

import torch

import shardscope


def make_state(numel, world):
    g = torch.Generator().manual_seed(1)
    master = torch.randn(numel, generator=g)
    state = {"param": master.to(torch.bfloat16), "master": master,
             "exp_avg": 0.01 * torch.randn(numel, generator=g), "exp_avg_sq": torch.rand(numel, generator=g) ** 2}
    bounds = [numel * r // world for r in range(world + 1)]
    # clone(): a slice is a view of the whole tensor, and torch.save of a view writes its entire
    # storage, so without the copy each rank file would hold all ranks' data (4x the bytes at 4
    # ranks). Copied here, once, outside every timed region.
    return [{k: v[bounds[r]:bounds[r + 1]].clone() for k, v in state.items()} | {"offset": bounds[r]}
            for r in range(world)]


def as_shardscope(ranks):
    """Rank dicts viewing the tensors' memory (bf16 as its bits): nothing is copied."""
    return [{"rank": r, "offset": t["offset"], "param": t["param"].view(torch.int16).numpy(),
             "master": t["master"].numpy(), "exp_avg": t["exp_avg"].numpy(), "exp_avg_sq": t["exp_avg_sq"].numpy()}
            for r, t in enumerate(ranks)]


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def torch_save(ranks, directory):
    os.makedirs(directory, exist_ok=True)
    for r, t in enumerate(ranks):
        with open(os.path.join(directory, f"rank{r}.pt"), "wb") as f:
            torch.save({k: v for k, v in t.items() if k != "offset"}, f)
            f.flush()
            os.fsync(f.fileno())
    fsync_dir(directory)


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def remove_tree(path):
    """Deletes a finished run's output so the disk does not fill; it does not drop the page cache."""
    shutil.rmtree(path, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=float, default=1.0, help="state size in GiB (14 bytes per parameter)")
    p.add_argument("--world-size", type=int, default=4)
    p.add_argument("--dir", default="/tmp/shardscope-bench")
    p.add_argument("--steps", type=int, default=3, help="checkpoints in the stall loop")
    p.add_argument("--compute-ms", type=float, default=None,
                   help="simulated compute between checkpoints (default: 1.5 x the measured shardscope save, so a "
                        "background write can finish before the next checkpoint, as it must in a real run)")
    args = p.parse_args()
    numel = int(args.gib * (1 << 30)) // 14
    ranks = make_state(numel, args.world_size)
    views = as_shardscope(ranks)
    nbytes = numel * 14
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)

    out = {"bytes": nbytes, "world_size": args.world_size, "torch": torch.__version__}
    # 1. throughput, alternating so neither always meets a warm or a cold disk first
    seconds = {"shardscope": [], "torch_save": []}
    for round_ in range(2):
        for name in (("shardscope", "torch_save") if round_ == 0 else ("torch_save", "shardscope")):
            target = os.path.join(args.dir, f"{name}-{round_}")
            if name == "shardscope":
                seconds[name].append(timed(lambda: shardscope.save_sharded(target, 1, views)))
            else:
                seconds[name].append(timed(lambda: torch_save(ranks, target)))
            remove_tree(target)
    for name, values in seconds.items():
        best = min(values)
        out[f"{name}_seconds"] = best
        out[f"{name}_gb_per_s"] = nbytes / best / 1e9

    # 2. the loop's stall per checkpoint (the first save_async also allocates its snapshot buffer)
    compute_ms = args.compute_ms if args.compute_ms is not None else 1500 * out["shardscope_seconds"]
    out["compute_ms_between_checkpoints"] = compute_ms

    def loop(checkpoint):
        stalls = []
        for step in range(1, args.steps + 1):
            deadline = time.perf_counter() + compute_ms / 1000  # "compute" that touches the state
            while time.perf_counter() < deadline:
                ranks[0]["master"][:1024].add_(1e-7)
            stalls.append(timed(lambda: checkpoint(step)))
        return stalls

    root = os.path.join(args.dir, "run")
    with shardscope.CheckpointManager(root, keep=2) as manager:
        async_stalls = loop(lambda step: manager.save_async(step, as_shardscope(ranks)))
        manager.wait()
    shutil.rmtree(root, ignore_errors=True)
    sync_stalls = loop(lambda step: torch_save(ranks, os.path.join(args.dir, f"torch-step-{step}")))
    out["stall_ms_save_async"] = [1000 * s for s in async_stalls]
    out["stall_ms_torch_save"] = [1000 * s for s in sync_stalls]
    shutil.rmtree(args.dir, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
