"""A torch Distributed Checkpoint holding a model trained a few steps with torch's Adam and its
optimizer state, saved by Debian's torch (torch.distributed._shard.checkpoint, 1.13) under the
names torch's optimizer state dict gives them (`optim.state.<param>.exp_avg`, `.exp_avg_sq`,
`.step`) and under Megatron's distributed-checkpoint names (`optimizer.state.exp_avg.<param>`,
`optimizer.state.fp32_param.<param>`): `shardctl convert --to shardscope --states
model+optimizer` makes them the checkpoint's states, read back bit for bit through
shardscope.load, with Adam's step as the checkpoint's step."""

import os
import sys
import unittest

import numpy as np

import pyutil
import shardscope
from pyutil import shardctl

sys.path.insert(0, os.path.join(os.environ.get("SHARDSCOPE_SOURCE_DIR", "."), "tests", "fixtures"))
try:
    import torch_shard_import  # noqa: E402,F401  (before torch)
    import torch
    import torch.distributed._shard.checkpoint as dcp
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(pyutil.SKIP)

STEPS = 3


def trained():
    """A small model after STEPS Adam steps: (parameters by name, the optimizer's state by name)."""
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.GELU(), torch.nn.Linear(24, 5))
    model[0].bias.requires_grad_(False)  # frozen: Adam keeps no state for it
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.randn(8, 16)).square().mean().backward()
        opt.step()
    params = dict(model.named_parameters())
    state = {name: opt.state[p] for name, p in params.items() if p in opt.state}
    return {k: v.detach() for k, v in params.items()}, state


def save(folder, tensors):
    os.makedirs(folder)
    dcp.save_state_dict({k: v.contiguous() for k, v in tensors.items()}, dcp.FileSystemWriter(folder), no_dist=True)


class TorchDcpOptimizer(pyutil.TempDirTest):
    def flat(self, folder, world):
        ranks = sorted(shardscope.load(folder, world), key=lambda r: r["offset"])
        return {k: np.concatenate([r[k] for r in ranks]) for k in ("master", "exp_avg", "exp_avg_sq")}

    def expected(self, params, state, masters=None):
        """The flat vectors in the model's order: the moments of a frozen parameter are zeros."""
        out = {"master": [], "exp_avg": [], "exp_avg_sq": []}
        for name, p in params.items():
            out["master"].append((masters or params)[name].reshape(-1).numpy())
            for moment in ("exp_avg", "exp_avg_sq"):
                out[moment].append(state[name][moment].reshape(-1).numpy() if name in state
                                   else np.zeros(p.numel(), np.float32))
        return {k: np.concatenate(v) for k, v in out.items()}

    def assertFlatEqual(self, got, want):
        for k in want:
            self.assertBitsEqual(got[k], want[k])

    def test_torch_names_become_the_states(self):
        params, state = trained()
        tensors = {f"model.{k}": v for k, v in params.items()}
        for name, s in state.items():
            for key in ("exp_avg", "exp_avg_sq", "step"):
                tensors[f"optim.state.{name}.{key}"] = s[key]
        save(self.path("dcp"), tensors)
        status, out = shardctl("convert", self.path("dcp"), "--to", "shardscope", "--out", self.path("ss"),
                               "--states", "model+optimizer", "--dtype", "bf16", "--world-size", "3", "--json")
        self.assertEqual(status, 0, out)
        self.assertEqual(out["world_size"], 3)
        status, info = shardctl("info", self.path("ss"))
        self.assertEqual(status, 0, info)
        self.assertEqual(info["step"], STEPS)
        self.assertFlatEqual(self.flat(self.path("ss"), 3), self.expected(params, state))

        # Without the step tensors the checkpoint's step is 0 (the DCP records none); the moments
        # are still carried.
        save(self.path("nostep"), {k: v for k, v in tensors.items() if not k.endswith(".step")})
        status, out = shardctl("convert", self.path("nostep"), "--to", "shardscope", "--out", self.path("ss0"),
                               "--states", "model+optimizer", "--dtype", "bf16", "--json")
        self.assertEqual(status, 0, out)
        self.assertEqual(shardscope.manifest(self.path("ss0"))["step"], 0)
        self.assertFlatEqual(self.flat(self.path("ss0"), 1), self.expected(params, state))

        # Steps that disagree: refused naming the tensor, nothing written.
        first = next(iter(state))
        tensors[f"optim.state.{first}.step"] = torch.tensor(float(STEPS + 1))
        save(self.path("skew"), tensors)
        status, out = shardctl("convert", self.path("skew"), "--to", "shardscope", "--out", self.path("bad"),
                               "--states", "model+optimizer", "--dtype", "bf16", "--json")
        self.assertEqual(status, 2, out)
        self.assertIn(f"optim.state.{first}.step", out["error"]["message"])
        self.assertIn("a ShardScope checkpoint has one step", out["error"]["message"])
        self.assertFalse(os.path.exists(self.path("bad")))

    def test_megatron_names_carry_the_master_weights(self):
        params, state = trained()
        masters = {k: v + 1e-3 for k, v in params.items()}  # distinct from the 16-bit weights' values
        tensors = {k: v.to(torch.bfloat16) for k, v in params.items()}
        for name in params:
            tensors[f"optimizer.state.fp32_param.{name}"] = masters[name]
        for name, s in state.items():
            for key in ("exp_avg", "exp_avg_sq"):
                tensors[f"optimizer.state.{key}.{name}"] = s[key]
        save(self.path("dcp"), tensors)
        status, out = shardctl("convert", self.path("dcp"), "--to", "shardscope", "--out", self.path("ss"),
                               "--states", "model+optimizer", "--world-size", "2", "--json")
        self.assertEqual(status, 0, out)
        self.assertFlatEqual(self.flat(self.path("ss"), 2), self.expected(params, state, masters))


if __name__ == "__main__":
    pyutil.main()
