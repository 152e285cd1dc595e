"""write_rank_shard + commit across real processes (torch.distributed, gloo, 4 ranks): every process
writes its own rank file from torch tensors, rank 0 commits the gathered records, and the result is
the same checkpoint, byte for byte in every shard, as one process's save_sharded of the same state.
A rank killed before its shard is written leaves no manifest: the step reads as a partial write,
never as a checkpoint, and the job can write the step again once the leftovers are removed."""

import datetime
import itertools
import os
import signal
import sys

import numpy as np

import pyutil
from pyutil import shardctl

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(pyutil.SKIP)

import shardscope

WORLD, NUMEL, STEP = 4, 10_007, 42  # a prime numel: the ranks' slices differ in length
TRAINING_STATE = {"optimizer": {"name": "adamw", "step": STEP}, "trainer": {"steps_done": STEP}}


def global_state():
    """The state every process can rebuild alone: torch's own bf16 rounding for the parameters."""
    gen = torch.Generator().manual_seed(7)
    master = torch.randn(NUMEL, generator=gen)
    return {"param": master.to(torch.bfloat16).view(torch.int16), "master": master,
            "exp_avg": 0.1 * torch.randn(NUMEL, generator=gen), "exp_avg_sq": torch.rand(NUMEL, generator=gen) ** 2}


def rank_dict(state, rank):
    lo, hi = NUMEL * rank // WORLD, NUMEL * (rank + 1) // WORLD
    return {"rank": rank, "offset": lo, **{k: v[lo:hi].contiguous().numpy() for k, v in state.items()}}


def worker(rank, init_file, step_dir, die_rank, results):
    # A short timeout: the survivors of a lost rank give up instead of waiting gloo's 30 minutes.
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=20))
    if rank == die_rank:
        os.kill(os.getpid(), signal.SIGKILL)  # as a node lost before it wrote: no shard, no record
    record = shardscope.write_rank_shard(step_dir, rank_dict(global_state(), rank), WORLD)
    records = [None] * WORLD
    dist.all_gather_object(records, record)
    if rank == 0:
        shardscope.commit(step_dir, records, {"world_size": WORLD, "step": STEP, "dtype": "bf16",
                                              "training_state": TRAINING_STATE})
    dist.barrier()  # nobody reads before the manifest is durable
    mine = shardscope.load(step_dir, WORLD)[rank]
    expected = rank_dict(global_state(), rank)
    same = all(np.array_equal(mine[k].view(np.uint8), expected[k].view(np.uint8))
               for k in ("param", "master", "exp_avg", "exp_avg_sq"))
    results[rank] = same and mine["offset"] == expected["offset"]
    dist.destroy_process_group()


LAUNCHES = itertools.count()


def launch(tmp, step_dir, die_rank=-1):
    """(exit codes of the 4 processes, what each found when it read its own slice back)."""
    init_file = os.path.join(tmp, f"rendezvous-{next(LAUNCHES)}")  # a file:// rendezvous is used once
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        results = manager.dict()
        procs = [ctx.Process(target=worker, args=(r, init_file, step_dir, die_rank, results)) for r in range(WORLD)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        for p in procs:  # a rank blocked on a dead peer past the timeout is a failure, not a hang
            if p.is_alive():
                p.kill()
                p.join()
        return [p.exitcode for p in procs], dict(results)


class TwoPhaseAcrossProcesses(pyutil.TempDirTest):
    def test_four_processes_write_one_checkpoint(self):
        step_dir = self.path("step-00000042")
        codes, read_back = launch(self.tmp, step_dir)
        self.assertEqual(codes, [0] * WORLD)
        self.assertEqual(read_back, {r: True for r in range(WORLD)})
        status, report = shardctl("verify", step_dir, "--expect-world-size", WORLD)
        self.assertEqual(status, 0, report)
        self.assertTrue(report["ok"])
        # the same state saved by one process: the same bytes in every rank file
        single = self.path("single")
        state = global_state()
        shardscope.save_sharded(single, STEP, [rank_dict(state, r) for r in range(WORLD)],
                                training_state=TRAINING_STATE)
        for r in range(WORLD):
            with open(os.path.join(step_dir, f"rank{r}.safetensors"), "rb") as a, \
                    open(os.path.join(single, f"rank{r}.safetensors"), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"rank {r}'s file differs from save_sharded's")
        self.assertEqual(shardscope.manifest(step_dir)["shards"], shardscope.manifest(single)["shards"])

    def test_a_rank_lost_before_writing_leaves_no_checkpoint(self):
        step_dir = self.path("step-00000042")
        codes, read_back = launch(self.tmp, step_dir, die_rank=2)
        self.assertEqual(codes[2], -signal.SIGKILL)
        self.assertTrue(all(c != 0 for c in codes), f"a survivor claimed success: {codes}")
        self.assertEqual(read_back, {})
        self.assertFalse(os.path.exists(os.path.join(step_dir, "manifest.json")))
        status, report = shardctl("verify", step_dir)
        self.assertNotEqual(status, 0)
        self.assertFalse(report["ok"])
        self.assertIn(report["problems"][0]["kind"], ("partial_write", "not_a_checkpoint"), report)
        with self.assertRaises(shardscope.Error):
            shardscope.load(step_dir, WORLD)
        # the restarted job clears the leftovers and writes the step again, whole
        for name in os.listdir(step_dir):
            os.unlink(os.path.join(step_dir, name))
        codes, read_back = launch(self.tmp, step_dir)
        self.assertEqual(codes, [0] * WORLD)
        self.assertTrue(shardscope.verify(step_dir)["ok"])


if __name__ == "__main__":
    pyutil.main()
