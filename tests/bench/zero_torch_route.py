"""bench_convert's DeepSpeed side, with Debian's torch 1.13 (DeepSpeed is not in Debian).

`make DIR MIB WORLD` writes a ZeRO stage 3 checkpoint over WORLD data-parallel ranks of float32
4096 x 4096 weights (64 MiB each) with Adam moments, as DeepSpeed's engine lays it out
(tests/fixtures/deepspeed_zero.py). `route DIR OUT` is what DeepSpeed's zero_to_fp32 does, with what
torch 1.13 offers: torch.load every rank's optimizer file (1.13 has no mmap), gather each
parameter's pieces in param_shapes order (ceil(n / world) a rank, padding dropped), then torch.save
the state dict as OUT/pytorch_model.bin, fsync'd.
"""
import glob
import math
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_torch_route  # noqa: E402
import deepspeed_zero  # noqa: E402


class Layers(torch.nn.Module):
    def __init__(self, count):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4096, 4096, bias=False) for _ in range(count))


def make(out, mib, world):
    torch.manual_seed(7)
    with torch.no_grad():
        model = Layers(max(1, mib // 64))
    deepspeed_zero.write(out, 3, world, model=model)


def route(root, out):
    with open(os.path.join(root, "latest")) as f:
        tag = os.path.join(root, f.read().strip())
    rank = lambda path: int(re.search(r"zero_pp_rank_(\d+)_", path).group(1))  # noqa: E731
    optim = sorted(glob.glob(os.path.join(tag, "*_optim_states.pt")), key=rank)
    flat = [torch.cat(torch.load(f, map_location="cpu")["optimizer_state_dict"]["fp32_flat_groups"]) for f in optim]
    model_file = torch.load(os.path.join(tag, "zero_pp_rank_0_mp_rank_00_model_states.pt"), map_location="cpu")
    world, offset, state = len(flat), 0, {}
    for group in model_file["param_shapes"]:
        for name, shape in group.items():
            numel = math.prod(shape)
            piece = math.ceil(numel / world)
            state[name] = torch.cat([f[offset:offset + piece] for f in flat])[:numel].view(shape).clone()
            offset += piece
    convert_torch_route.save(state, out)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        route(sys.argv[2], sys.argv[3])
