#!/usr/bin/env python3
"""ZeRO-1 data-parallel training of a small transformer on CPU with torch.distributed (gloo),
checkpointed through shardscope.CheckpointManager. Killed with SIGKILL at any instant and rerun
with --resume, on the same or on another number of processes, it ends with exactly the loss and
the parameters of an uninterrupted run (tests/python/test_torch_zero.py checks it).

    export PYTHONPATH=build/python
    python3 examples/torch_zero_train.py --root /tmp/zero --steps 120 --nproc 4
    python3 examples/torch_zero_train.py --root /tmp/zero --steps 120 --nproc 2 --resume
    build/bin/shardctl verify /tmp/zero && build/bin/shardctl stats /tmp/zero

ZeRO-1: the bf16 model parameters are one flat vector that every rank holds; each rank owns a
slice of it and, for that slice only, the fp32 master weights and AdamW's two moments (a real
torch.optim.AdamW over the slice). Gradients are reduce-scattered (all-to-all, then a local sum),
the updated slices all-gathered. Each checkpoint is one shardscope rank file per rank, holding that
rank's slice; training_state holds the optimizer step and hyper-parameters, the LR scheduler's
state_dict, the data loader's position and shuffle generator, and torch's RNG state.

Why the result does not depend on the number of processes (nor on where a run was interrupted):
  * a global batch is always the same 12 microbatches of fixed shape, each run forward and
    backward alone with one intra-op thread, and dropout seeded per microbatch from a generator
    every rank advances identically, so a microbatch's gradient is the same on whichever rank;
  * gradients are summed in 64-bit fixed point, which is exact and so associative: the sum does
    not depend on which rank added which microbatch or in which order the reduction ran;
  * the flat vector is padded to a multiple of 64 x 12 elements, so with 1, 2, 3, 4, 6 or 12
    ranks every slice is a whole number of 64-element blocks and torch's vectorised element-wise
    kernels (AdamW) treat every element alike: a SIMD loop's scalar tail may round differently
    (a fused multiply-add in the vector body, a separate multiply and add in the tail).
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

import shardscope

MICROBATCHES = 12            # per global batch; divisible by every supported world size
BLOCK = 64 * MICROBATCHES    # the flat vector is padded to a multiple of this
FIXED_POINT = 2.0 ** 40      # gradient scale for the exact integer sum


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="checkpoint root (created if needed)")
    p.add_argument("--steps", type=int, required=True, help="train until this many optimizer steps are done")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--keep", type=int, default=3, help="complete checkpoints kept")
    p.add_argument("--mirror", help="second tier directory (resume falls back to it)")
    p.add_argument("--nproc", type=int, default=4, help="processes to start (ignored under torchrun)")
    p.add_argument("--resume", action="store_true", help="continue from the root's latest checkpoint if any")
    p.add_argument("--sync", action="store_true", help="save synchronously instead of in the background")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--micro-batch", type=int, default=2, help="sequences per microbatch")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--no-fsync", action="store_true", help="faster, not crash-safe")
    args = p.parse_args(argv)
    if MICROBATCHES % args.nproc:
        p.error(f"--nproc must divide {MICROBATCHES}")
    return args


# ---- the model ------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, dim, heads=2, dropout=0.1):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, h, mask):
        a = self.ln1(h)
        h = h + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return h + self.mlp(self.ln2(h))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h, self.mask)
        return self.head(self.norm(h))


def make_dataset(seed, vocab, seq, size):
    """Sequences from a random Markov chain: learnable, and the same on every rank."""
    g = torch.Generator().manual_seed(seed + 1000)
    transitions = torch.softmax(3 * torch.randn(vocab, vocab, generator=g), dim=-1)
    tokens = torch.empty(size, seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (size,), generator=g)
    for t in range(seq):
        tokens[:, t + 1] = torch.multinomial(transitions[tokens[:, t]], 1, generator=g).squeeze(1)
    return tokens


class Loader:
    """Epochs of shuffled global batches; its position and shuffle generator are checkpointed."""

    def __init__(self, size, batch, seed):
        self.size, self.batch = size, batch
        self.generator = torch.Generator().manual_seed(seed + 2000)
        self.epoch, self.offset = 0, 0
        self._start_epoch()

    def _start_epoch(self):
        # Kept so a resumed run draws exactly this epoch's order again.
        self.epoch_state = self.generator.get_state()
        self.order = torch.randperm(self.size, generator=self.generator)

    def next_batch(self):
        if self.offset + self.batch > self.size:
            self.epoch, self.offset = self.epoch + 1, 0
            self._start_epoch()
        batch = self.order[self.offset:self.offset + self.batch]
        self.offset += self.batch
        return batch

    def state(self):
        return {"epoch": self.epoch, "offset": self.offset, "dataset_size": self.size, "global_batch": self.batch,
                "epoch_generator_state": bytes(self.epoch_state.numpy()).hex()}

    def restore(self, s):
        self.epoch, self.offset = s["epoch"], s["offset"]
        self.generator.set_state(torch.tensor(list(bytes.fromhex(s["epoch_generator_state"])), dtype=torch.uint8))
        self._start_epoch()


# ---- ZeRO-1 ------------------------------------------------------------------------------------

class Zero1:
    """The flat bf16 parameters (replicated), this rank's fp32 master slice and its AdamW."""

    def __init__(self, model, rank, world, args):
        self.rank, self.world = rank, world
        self.params = list(model.parameters())
        self.layout, offset = [], 0
        for name, p in model.named_parameters():
            self.layout.append({"name": name, "offset": offset, "numel": p.numel(), "shape": list(p.shape)})
            offset += p.numel()
        self.numel = offset
        self.padded = -(-offset // BLOCK) * BLOCK
        self.slice = self.padded // world
        self.begin = rank * self.slice
        flat = torch.zeros(self.padded)
        flat[:offset] = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.bits = flat.to(torch.bfloat16).view(torch.int16)  # what every rank holds
        self.master = nn.Parameter(flat[self.begin:self.begin + self.slice].clone())
        self.optimizer = torch.optim.AdamW([self.master], lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                                           weight_decay=0.01, foreach=False)
        warmup, total = 10, max(args.steps, 11)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.1, 1 - s / total))

    def load_params_into(self):
        """The model computes in fp32 from the bf16 parameters (mixed precision)."""
        work = self.bits.view(torch.bfloat16).float()
        with torch.no_grad():
            for p, t in zip(self.params, self.layout):
                p.copy_(work[t["offset"]:t["offset"] + t["numel"]].view_as(p))

    def gradient_to_fixed(self):
        g = torch.zeros(self.padded, dtype=torch.float64)
        g[:self.numel] = torch.cat([p.grad.reshape(-1) for p in self.params]).double()
        return torch.round(g * FIXED_POINT).long()

    def step(self, fixed_sum):
        # Reduce-scatter: chunk j of every rank's sum goes to rank j, which adds them (exactly).
        received = torch.empty_like(fixed_sum)
        dist.all_to_all_single(received, fixed_sum)
        mine = received.view(self.world, self.slice).sum(0)
        self.master.grad = (mine.double() / (FIXED_POINT * MICROBATCHES)).float()
        self.optimizer.step()
        self.scheduler.step()
        # All-gather of the new bf16 slices (gloo has no 16-bit types: sent as int32 pairs).
        mine_bits = self.master.detach().to(torch.bfloat16).view(torch.int16).view(torch.int32)
        parts = [torch.empty_like(mine_bits) for _ in range(self.world)]
        dist.all_gather(parts, mine_bits)
        self.bits = torch.cat(parts).view(torch.int16)

    def optimizer_state(self):
        state = self.optimizer.state.get(self.master, {})
        zeros = torch.zeros(self.slice)
        return state.get("exp_avg", zeros), state.get("exp_avg_sq", zeros), int(state.get("step", torch.tensor(0.)).item())

    def restore(self, flat, training_state):
        """Takes this rank's slice of the loaded flat vectors, whatever world size saved them."""
        lo, hi = self.begin, self.begin + self.slice
        self.bits = torch.from_numpy(flat["param"].view(np.int16).copy())
        with torch.no_grad():
            self.master.copy_(torch.from_numpy(flat["master"][lo:hi]))
        opt = training_state["optimizer"]
        self.optimizer.load_state_dict({
            "state": {0: {"step": torch.tensor(float(opt["step"])),
                          "exp_avg": torch.from_numpy(flat["exp_avg"][lo:hi].copy()),
                          "exp_avg_sq": torch.from_numpy(flat["exp_avg_sq"][lo:hi].copy())}},
            "param_groups": opt["param_groups"]})
        self.scheduler.load_state_dict(training_state["lr_scheduler"])


# ---- checkpoints -------------------------------------------------------------------------------

def gather_to_rank0(tensor, world):
    parts = [torch.empty_like(tensor) for _ in range(world)] if dist.get_rank() == 0 else None
    dist.gather(tensor, parts, dst=0)
    return parts


def checkpoint(manager, zero, loader, step, loss, config, args):
    """Every rank's slice goes to rank 0, whose CheckpointManager writes one rank file per rank."""
    # Why gather instead of each process writing its own file (write_rank_shard + commit): the
    # CheckpointManager -- `latest`, keep-last-K, save_async's snapshot, the mirror, resume -- is
    # one object over the root and lives in one process. Gathering costs one copy of the whole
    # state (14 bytes per parameter) in rank 0's memory and the gather's time; for this small CPU
    # model that is nothing. A job whose state does not fit one process, or that runs on several
    # nodes, writes per process with write_rank_shard and commits on one (docs/python.md section 3).
    exp_avg, exp_avg_sq, opt_step = zero.optimizer_state()
    my_bits = zero.bits[zero.begin:zero.begin + zero.slice].contiguous().view(torch.int32)
    gathered = [gather_to_rank0(t, zero.world) for t in (my_bits, zero.master.detach(), exp_avg, exp_avg_sq)]
    if zero.rank != 0:
        return 0.0
    ranks = [{"rank": r, "offset": r * zero.slice, "param": gathered[0][r].view(torch.int16).numpy(),
              "master": gathered[1][r].numpy(), "exp_avg": gathered[2][r].numpy(), "exp_avg_sq": gathered[3][r].numpy()}
             for r in range(zero.world)]
    groups = zero.optimizer.state_dict()["param_groups"]
    training_state = {
        "optimizer": {"name": "adamw", "step": opt_step, "param_groups": groups},
        "lr_scheduler": zero.scheduler.state_dict(),
        "dataloader": loader.state(),
        "rng": {"torch_cpu": bytes(torch.get_rng_state().numpy()).hex()},
        "trainer": {"config": config, "steps_done": step, "last_loss": loss, "param_numel": zero.numel},
    }
    save = manager.save if args.sync else manager.save_async
    start = time.perf_counter()
    save(step, ranks, dtype="bf16", training_state=training_state, tensors=zero.layout)
    return time.perf_counter() - start


def resume(manager, zero, loader, config, world):
    """Rank 0 asks the manager (local copy, or the mirror's); the others load the step it chose."""
    state = manager.resume() if zero.rank == 0 else None
    box = [None if state is None else {k: v for k, v in state.items() if k != "ranks"}]
    dist.broadcast_object_list(box, src=0)
    meta = box[0]
    if meta is None:
        return None
    ranks = state["ranks"] if zero.rank == 0 else shardscope.load(meta["path"], None)
    ts = meta["training_state"]
    if ts.get("trainer", {}).get("config") != config or meta["param_numel_total"] != zero.padded:
        raise SystemExit(f"{meta['path']}: made with another configuration: {ts.get('trainer', {}).get('config')}")
    ranks.sort(key=lambda r: r["offset"])
    flat = {k: np.concatenate([r[k] for r in ranks]) for k in ("param", "master", "exp_avg", "exp_avg_sq")}
    zero.restore(flat, ts)
    loader.restore(ts["dataloader"])
    torch.set_rng_state(torch.tensor(list(bytes.fromhex(ts["rng"]["torch_cpu"])), dtype=torch.uint8))
    return {"step": meta["step"], "path": meta["path"], "world_size": meta["saved_world_size"],
            "from_mirror": meta["from_mirror"], "loss": ts["trainer"]["last_loss"]}


# ---- the loop ----------------------------------------------------------------------------------

def train(rank, world, init_method, args):
    torch.set_num_threads(1)  # one intra-op thread: a microbatch's result must not depend on scheduling
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    config = {"seed": args.seed, "dim": args.dim, "layers": args.layers, "seq": args.seq,
              "micro_batch": args.micro_batch, "microbatches": MICROBATCHES, "lr": args.lr, "steps": args.steps}
    vocab, mb = 32, args.micro_batch
    torch.manual_seed(args.seed)
    model = TinyLM(vocab, args.dim, args.layers, args.seq)
    zero = Zero1(model, rank, world, args)
    data = make_dataset(args.seed, vocab, args.seq, 16 * MICROBATCHES * mb)
    loader = Loader(len(data), MICROBATCHES * mb, args.seed)
    manager = shardscope.CheckpointManager(args.root, args.keep, args.mirror, durable=not args.no_fsync) \
        if rank == 0 else None
    if rank == 0 and not args.resume and manager.latest() is not None:
        raise SystemExit(f"{args.root} already holds checkpoints; pass --resume or use an empty --root")
    resumed = resume(manager, zero, loader, config, world) if args.resume else None
    step = resumed["step"] if resumed else 0
    loss = resumed["loss"] if resumed else None
    if rank == 0 and resumed:
        print(f"resuming at step {step} from {resumed['path']} (saved by {resumed['world_size']} ranks)", flush=True)
    mine = range(rank * MICROBATCHES // world, (rank + 1) * MICROBATCHES // world)
    saves, stall = 0, 0.0
    while step < args.steps:
        batch = loader.next_batch()
        seeds = torch.randint(0, 2 ** 62, (MICROBATCHES,))  # the same on every rank
        zero.load_params_into()
        model.train()
        fixed = torch.zeros(zero.padded, dtype=torch.long)
        losses = torch.zeros(MICROBATCHES, dtype=torch.float64)
        for j in mine:
            tokens = data[batch[j * mb:(j + 1) * mb]]
            for p in zero.params:
                p.grad = None
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(int(seeds[j]))  # CPU only: no lazy CUDA seeding
                logits = model(tokens[:, :-1])
                mb_loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
                mb_loss.backward()
            fixed += zero.gradient_to_fixed()
            losses[j] = mb_loss.item()
        dist.all_reduce(losses)  # one non-zero entry per slot: exact
        loss = sum(losses.tolist()) / MICROBATCHES
        zero.step(fixed)
        step += 1
        if rank == 0:
            print(f"step {step} loss {loss:.6f}", flush=True)
        if step % args.save_every == 0 or step == args.steps:
            stall += checkpoint(manager, zero, loader, step, loss, config, args)
            saves += 1
    if rank == 0:
        manager.wait()
        final = shardscope.load(os.path.join(args.root, manager.latest()), world)
        print(json.dumps({"steps": step, "world_size": world, "final_loss": loss,
                          "final_loss_hex": float(loss).hex() if loss is not None else None,
                          "digests": shardscope.digests(final), "latest": manager.latest(),
                          "resumed_from": resumed, "saves": saves, "save_stall_ms": 1000 * stall}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://", args)
        return
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one machine: loopback only
    # A fresh rendezvous file per launch: a killed run leaves its own behind, never a shared one.
    with tempfile.TemporaryDirectory(prefix="zero-rdzv-") as rdzv:
        init = "file://" + os.path.join(rdzv, "store")
        # fork: the workers start with torch already imported (a second or more per process saved).
        torch.multiprocessing.start_processes(train, args=(args.nproc, init, args), nprocs=args.nproc,
                                              start_method="fork")


if __name__ == "__main__":
    sys.exit(main())
