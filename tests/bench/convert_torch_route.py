"""bench_convert's torch side, with Debian's torch (1.13, torch.distributed._shard.checkpoint).

`make DIR MIB` saves a DCP of float32 4096 x 4096 tensors (64 MiB each) with torch's own
FileSystemWriter, one file per rank as torch 2.x writes by default. `route DCP OUT` is what a user
writes to turn such a DCP into one file for inference: read the metadata, allocate the tensors,
load_state_dict, then torch.save the state dict as OUT/pytorch_model.bin, fsync'd. (Debian has no
safetensors package; pytorch_model.bin is the format transformers read before safetensors.)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import torch_shard_import  # noqa: E402,F401  (before torch)
import torch  # noqa: E402
import torch.distributed._shard.checkpoint as dcp  # noqa: E402


def make(out, mib):
    generator = torch.Generator().manual_seed(7)
    state = {f"layers.{i}.weight": torch.rand(4096, 4096, generator=generator) - 0.5 for i in range(max(1, mib // 64))}
    dcp.save_state_dict(state, dcp.FileSystemWriter(out, single_file_per_rank=True), no_dist=True)


def route(source, out):
    reader = dcp.FileSystemReader(source)
    metadata = reader.read_metadata()
    state = {k: torch.empty(tuple(v.size), dtype=v.properties.dtype) for k, v in metadata.state_dict_metadata.items()}
    dcp.load_state_dict(state, reader, no_dist=True)
    save(state, out)


def save(state, out):
    """OUT/pytorch_model.bin, fsync'd with its folder: what both torch routes end with."""
    os.makedirs(out)
    path = os.path.join(out, "pytorch_model.bin")
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    folder = os.open(out, os.O_RDONLY)
    os.fsync(folder)
    os.close(folder)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    else:
        route(sys.argv[2], sys.argv[3])
