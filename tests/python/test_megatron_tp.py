"""A Megatron-LM checkpoint saved at tensor-parallel size t and p pipeline stages
(tests/fixtures/megatron_legacy.py cuts a model with torch as Megatron's layers cut it) is read as
the model it was cut from: every tensor has the whole model's name and shape (the stages' layers
numbered as the model numbers them), its statistics are the whole tensor's (against float64), diff
against the same model saved at t = p = 1 is identical, and convert writes the whole tensors bit for
bit (Hugging Face output read by hand). Legacy and Megatron Core names, gated (SwiGLU) and plain MLPs."""

import os
import sys
import tempfile
import unittest

import numpy as np

import pyutil
from pyutil import shardctl

try:
    import torch
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(pyutil.SKIP)

sys.path.insert(0, os.path.join(os.environ.get("SHARDSCOPE_SOURCE_DIR", "."), "tests", "fixtures"))
import megatron_legacy  # noqa: E402

CASES = [  # (tensor-parallel size, pipeline stages, Megatron Core names, gated MLP)
    (2, 1, False, True),
    (4, 1, False, False),
    (4, 1, True, True),
    (2, 2, False, True),
    (1, 3, True, False),
]
STAGE_LAYERS = {1: None, 2: [3, 1], 3: [1, 2, 1]}  # uneven stages: offsets are counted, not assumed


def bf16_bits(t):
    return t.contiguous().reshape(-1).view(torch.int16).numpy().view(np.uint16)


class MegatronTensorParallel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, tp, pp, core, gated):
        root = os.path.join(self.tmp.name,
                            f"tp{tp}-pp{pp}-{'core' if core else 'legacy'}-{'gated' if gated else 'plain'}")
        model = megatron_legacy.write(root, tp, pp, core=core, gated=gated, layers=4, stage_layers=STAGE_LAYERS[pp])
        return root, {"model." + name: t for name, t in model.items()}

    def test_slices_read_as_the_whole_model(self):
        for tp, pp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, core=core, gated=gated):
                root, model = self.write(tp, pp, core, gated)
                code, stats = shardctl("stats", root)
                self.assertEqual(code, 0, stats)
                seen = {t["name"]: t for t in stats["tensors"] if t["name"].startswith("model.")}
                self.assertEqual(set(seen), set(model))
                for name, tensor in model.items():
                    got = seen[name]
                    values = tensor.to(torch.float64).numpy().reshape(-1)
                    self.assertEqual(got["shape"], list(tensor.shape), name)
                    self.assertEqual(got["numel"], values.size, name)
                    self.assertEqual((got["min"], got["max"]), (values.min(), values.max()), name)
                    self.assertAlmostEqual(got["mean"], values.mean(), delta=1e-12 * max(1, abs(values).max()))
                    self.assertAlmostEqual(got["std"], values.std(), delta=1e-12 * max(1, values.std()))
                    # A tensor every rank holds whole is one part; a split one a part per rank
                    # (two for a gated first layer: its gate rows and its up rows).
                    parts = len(got["parts"])
                    self.assertIn(parts, (1, tp, 2 * tp), name)
                # Stage by stage the layers are numbered as the model numbers them; the ranks'
                # random-generator states, on every stage, are said by file.
                if pp > 1:
                    self.assertTrue(any(t["name"].endswith(": rng_state.0.torch_rng_state") for t in stats["tensors"]))

    def test_diff_against_tensor_parallel_size_one_is_identical(self):
        for tp, pp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, core=core, gated=gated):
                one, _ = self.write(1, 1, core, gated)
                many, model = self.write(tp, pp, core, gated)
                code, diff = shardctl("diff", one, many, "--tensor", "model.*")
                self.assertEqual(code, 0, diff)
                self.assertEqual(diff["summary"]["identical"], len(model), diff["summary"])
                self.assertEqual(diff["summary"]["tensors"], len(model))

    def test_convert_writes_the_whole_tensors(self):
        for tp, pp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, core=core, gated=gated):
                root, model = self.write(tp, pp, core, gated)
                out = root + "-hf"
                code, result = shardctl("convert", root, "--to", "hf", "--out", out)
                self.assertEqual(code, 0, result)
                written = pyutil.read_hf(out)
                # The model only: the ranks' random-generator states are not part of it.
                self.assertEqual(set(written), set(model))
                for name, tensor in model.items():
                    dtype, shape, values = written[name]
                    self.assertEqual((dtype, shape), ("BF16", list(tensor.shape)), name)
                    np.testing.assert_array_equal(values, bf16_bits(tensor), err_msg=name)
                code, diff = shardctl("diff", root, out, "--tensor", "model.*")
                self.assertEqual((code, diff["summary"]["identical"]), (0, len(model)), diff["summary"])

    def test_slices_that_do_not_fit_the_rule_are_not_joined(self):
        # Rank 1's output layer has one row more than rank 0's: not slices of one tensor as
        # Megatron cuts it, so stats reads them end to end and convert refuses, naming it.
        root, model = self.write(2, 1, False, True)
        path = os.path.join(root, "iter_0000020", "mp_rank_01", "model_optim_rng.pt")
        state = torch.load(path)
        head = state["model"]["language_model"]["output_layer"]
        head["weight"] = torch.cat([head["weight"], head["weight"][:1]])
        torch.save(state, path)
        name = "model.language_model.output_layer.weight"
        code, stats = shardctl("stats", root, "--tensor", name)
        self.assertEqual(code, 0, stats)
        self.assertEqual(stats["tensors"][0]["shape"], [model[name].numel() + 32])
        code, result = shardctl("convert", root, "--to", "hf", "--out", root + "-hf")
        self.assertEqual(code, 2, result)
        self.assertIn("'" + name + "' is held by 2 rank files", result["error"]["message"])
        self.assertFalse(os.path.exists(root + "-hf"))


if __name__ == "__main__":
    unittest.main()
