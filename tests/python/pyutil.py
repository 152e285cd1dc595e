"""What the Python module's tests share: states with known values, shardctl runs, temp dirs.

Run by ctest (label python) with PYTHONPATH at the build tree's python/ and SHARDCTL naming the
CLI, so every dict the module returns can be compared with the command's --json output.
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

import shardscope

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def bf16_bits(master):
    """fp32 -> bf16 rounded to nearest even, as the core's float_to_bf16 (NaN stays a quiet NaN)."""
    bits = master.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(master)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def param_bits(master, dtype):
    return bf16_bits(master) if dtype == "bf16" else master.astype(np.float16).view(np.uint16)


def flat_state(numel, seed, dtype="bf16", mean=0.0, scale=1.0):
    """A consistent global state: param is its master rounded, the moments are plausible."""
    rng = np.random.default_rng(seed)
    master = (mean + scale * rng.standard_normal(numel)).astype(np.float32)
    return {"param": param_bits(master, dtype), "master": master,
            "exp_avg": (0.1 * rng.standard_normal(numel)).astype(np.float32),
            "exp_avg_sq": (rng.random(numel) ** 2).astype(np.float32)}


def split(flat, world):
    """The even split (rank r owns [P*r/N, P*(r+1)/N)) as rank dicts viewing `flat` (no copies)."""
    n = len(flat["param"])
    ranks = []
    for r in range(world):
        lo, hi = n * r // world, n * (r + 1) // world
        ranks.append({"rank": r, "offset": lo, **{k: v[lo:hi] for k, v in flat.items()}})
    return ranks


def shardctl(*args):
    """(exit status, parsed JSON or None) of `shardctl ARGS... --json`."""
    done = subprocess.run([os.environ["SHARDCTL"], *map(str, args), "--json"], capture_output=True, text=True)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        return done.returncode, None


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


class Ticker:
    """A Python thread that records when it runs: if a call released the GIL, it ran during it."""

    def __init__(self):
        self.times = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop:
            self.times.append(time.perf_counter())
            time.sleep(0.001)

    def __enter__(self):
        self._thread.start()
        time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()

    def ticks_between(self, start, end):
        return sum(1 for t in self.times if start < t < end)


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="shardscope-py-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def assertBitsEqual(self, a, b):
        """Bitwise: NaN payloads and -0.0 included."""
        a, b = np.asarray(a), np.asarray(b)
        self.assertEqual(a.dtype.itemsize, b.dtype.itemsize)
        self.assertEqual(a.shape, b.shape)
        view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        self.assertTrue(np.array_equal(a.view(view), b.view(view)))


def main():
    unittest.main(verbosity=2)


HF_DTYPES = {"F32": np.uint32, "BF16": np.uint16, "I64": np.int64}


def read_hf(folder):
    """name -> (dtype, shape, raw values as unsigned ints) of a Hugging Face folder, parsed by hand."""
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out = {}
    for file in sorted(set(index["weight_map"].values())):
        with open(os.path.join(folder, file), "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            lo, hi = entry["data_offsets"]
            out[name] = (entry["dtype"], entry["shape"],
                         np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=HF_DTYPES[entry["dtype"]]))
    return out
