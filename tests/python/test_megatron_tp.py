"""A Megatron-LM checkpoint saved at tensor-parallel size t and p pipeline stages
(tests/fixtures/megatron_legacy.py cuts a model with torch as Megatron's layers cut it) is read as
the model it was cut from: every tensor has the whole model's name and shape (the stages' layers
numbered as the model numbers them), its statistics are the whole tensor's (against float64), diff
against the same model saved at t = p = 1 is identical, and convert writes the whole tensors bit for
bit (Hugging Face output read by hand). Legacy and Megatron Core names, gated (SwiGLU) and plain MLPs."""

import os
import shutil
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

CASES = [  # (tensor-parallel size, pipeline stages, model chunks per stage, Megatron Core names, gated MLP)
    (2, 1, 1, False, True),
    (4, 1, 1, False, False),
    (4, 1, 1, True, True),
    (2, 2, 1, False, True),
    (1, 3, 1, True, False),
    (2, 2, 2, True, True),  # a virtual pipeline: model0 holds layers 0, 1-2 of the stages, model1 3, 4-5
]
# Uneven blocks, in Megatron's (chunk, stage) order: offsets are counted, not assumed.
STAGE_LAYERS = {(1, 1): None, (2, 1): [3, 1], (3, 1): [1, 2, 1], (2, 2): [1, 2, 1, 2]}


def bf16_bits(t):
    return t.contiguous().reshape(-1).view(torch.int16).numpy().view(np.uint16)


class MegatronTensorParallel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, tp, pp, vp, core, gated):
        root = os.path.join(self.tmp.name,
                            f"tp{tp}-pp{pp}-vp{vp}-{'core' if core else 'legacy'}-{'gated' if gated else 'plain'}")
        layers = sum(STAGE_LAYERS[pp, vp] or [4])
        model = megatron_legacy.write(root, tp, pp, core=core, gated=gated, layers=layers,
                                      stage_layers=STAGE_LAYERS[pp, vp], chunks=vp)
        return root, {"model." + name: t for name, t in model.items()}

    def test_slices_read_as_the_whole_model(self):
        for tp, pp, vp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, vp=vp, core=core, gated=gated):
                root, model = self.write(tp, pp, vp, core, gated)
                code, stats = shardctl("stats", root)
                self.assertEqual(code, 0, stats)
                seen = {t["name"]: t for t in stats["tensors"]
                        if t["name"].startswith("model.") and not t["name"].endswith("._extra_state")}
                self.assertEqual(set(seen), set(model))
                _, rule = megatron_legacy.whole_model(core, gated, layers=sum(STAGE_LAYERS[pp, vp] or [4]))
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
                    how = rule[name[len("model."):]]
                    expected = 1 if how == "whole" or tp == 1 else 2 * tp if how == "gated" else tp
                    self.assertEqual(len(got["parts"]), expected, name)
                # Stage by stage the layers are numbered as the model numbers them; the ranks'
                # random-generator states, on every stage, are said by file.
                if pp > 1:
                    self.assertTrue(any(t["name"].endswith(": rng_state.0.torch_rng_state") for t in stats["tensors"]))

    def test_diff_against_tensor_parallel_size_one_is_identical(self):
        for tp, pp, vp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, vp=vp, core=core, gated=gated):
                one = os.path.join(self.tmp.name, f"whole-{tp}-{pp}-{vp}")
                layers = sum(STAGE_LAYERS[pp, vp] or [4])
                megatron_legacy.write(one, 1, core=core, gated=gated, layers=layers)
                many, model = self.write(tp, pp, vp, core, gated)
                code, diff = shardctl("diff", one, many, "--tensor", "model.*")
                self.assertEqual(code, 0, diff)
                status = {t["name"]: t["status"] for t in diff["tensors"]}
                self.assertEqual({n: status.get(n) for n in model}, {n: "identical" for n in model})
                # Besides the model only Transformer Engine's (empty) extra states, identical too.
                self.assertTrue(all(n.endswith("._extra_state") for n in set(status) - set(model)), status)
                self.assertEqual(diff["summary"]["identical"], diff["summary"]["tensors"], diff["summary"])

    def test_convert_writes_the_whole_tensors(self):
        for tp, pp, vp, core, gated in CASES:
            with self.subTest(tp=tp, pp=pp, vp=vp, core=core, gated=gated):
                root, model = self.write(tp, pp, vp, core, gated)
                out = root + "-hf"
                code, result = shardctl("convert", root, "--to", "hf", "--out", out)
                self.assertEqual(code, 0, result)
                written = pyutil.read_hf(out)
                # The model only: the ranks' random-generator states and Transformer Engine's
                # extra states are not part of it.
                self.assertEqual(set(written), set(model))
                for name, tensor in model.items():
                    dtype, shape, values = written[name]
                    self.assertEqual((dtype, shape), ("BF16", list(tensor.shape)), name)
                    np.testing.assert_array_equal(values, bf16_bits(tensor), err_msg=name)
                code, diff = shardctl("diff", root, out, "--tensor", "model.*")
                status = {t["name"]: t["status"] for t in diff["tensors"]}
                self.assertEqual({n: status.get(n) for n in model}, {n: "identical" for n in model})
                # Transformer Engine's extra states are not written: the source's own.
                self.assertEqual({n: s for n, s in status.items() if n not in model},
                                 {n: "only_in_a" for n in status if n not in model})
                self.assertTrue(all(n.endswith("._extra_state") for n in set(status) - set(model)), status)
                self.assertEqual(diff["summary"]["only_in_a"] > 0, core)

    def test_globs_select_by_the_models_names(self):
        # Layer 4 is model1's layer 0 on stage 0 of a virtual pipeline: --tensor names the model's.
        root, model = self.write(2, 2, 2, True, True)
        code, stats = shardctl("stats", root, "--tensor", "model.decoder.layers.4.*")
        self.assertEqual(code, 0, stats)
        wanted = sorted(n for n in model if n.startswith("model.decoder.layers.4."))
        stats["tensors"] = [t for t in stats["tensors"] if not t["name"].endswith("._extra_state")]
        self.assertEqual(sorted(t["name"] for t in stats["tensors"]), wanted)
        for t in stats["tensors"]:
            self.assertEqual(t["max"], model[t["name"]].to(torch.float64).max().item(), t["name"])

    def set_args(self, root, **sizes):
        """Every rank file's saved args given these sizes, as Megatron would have saved them."""
        for folder, _, files in os.walk(root):
            if "model_optim_rng.pt" in files:
                path = os.path.join(folder, "model_optim_rng.pt")
                state = torch.load(path)
                for key, value in sizes.items():
                    setattr(state["args"], key, value)
                torch.save(state, path)

    def test_expert_parallel_folders_are_not_taken_for_stages(self):
        # mp_rank_TT_EEE: every expert-parallel rank holds the dense model, embedding included.
        # Numbered as stages its layers would be renamed 4..7: each keeps its file's name instead.
        root, model = self.write(1, 1, 1, True, True)
        step = os.path.join(root, "iter_0000020")
        os.rename(os.path.join(step, "mp_rank_00"), os.path.join(step, "mp_rank_00_000"))
        shutil.copytree(os.path.join(step, "mp_rank_00_000"), os.path.join(step, "mp_rank_00_001"))
        self.set_args(root, expert_model_parallel_size=2)
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 0, verified["problems"])
        self.assertEqual((verified["summary"]["pipeline-parallel size"], verified["summary"]["expert-parallel size"]),
                         ("1", "2"))
        code, stats = shardctl("stats", root)
        self.assertEqual(code, 0, stats)
        names = [t["name"] for t in stats["tensors"]]
        extra = sum(n.endswith("._extra_state") for n in names) // 2  # Transformer Engine's, per layer
        self.assertEqual(extra, 4)
        self.assertEqual(len(names), 2 * (len(model) + extra + 1))  # and each rank's rng state
        for folder in ("mp_rank_*_000", "mp_rank_*_001"):
            self.assertIn(folder + "/model_optim_rng.pt: model.decoder.layers.3.mlp.linear_fc2.weight", names)
        self.assertFalse(any("layers.4." in n for n in names))

    def test_expert_parallel_and_pipeline_folders_are_verified(self):
        # mp_rank_TT_PPP_EEE: two stages, each saved by two expert-parallel ranks.
        root, _ = self.write(1, 2, 1, True, True)
        step = os.path.join(root, "iter_0000020")
        for stage in range(2):
            folder = os.path.join(step, f"mp_rank_00_{stage:03d}")
            os.rename(folder, folder + "_000")
            shutil.copytree(folder + "_000", folder + "_001")
        self.set_args(root, expert_model_parallel_size=2)
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 0, verified)
        self.assertEqual([s["path"] for s in verified["shards"]],
                         [f"mp_rank_00_{s:03d}_{e:03d}/model_optim_rng.pt" for s in range(2) for e in range(2)])
        self.assertEqual((verified["summary"]["pipeline-parallel size"], verified["summary"]["expert-parallel size"]),
                         ("2", "2"))
        self.assertEqual(verified["world_size"], 4)
        shutil.rmtree(os.path.join(step, "mp_rank_00_001_001"))
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 1, verified)
        self.assertEqual([(p["kind"], p["path"]) for p in verified["problems"]],
                         [("missing_shard", "mp_rank_00_001_001/model_optim_rng.pt")])

    def test_each_layer_stack_is_numbered_on_its_own(self):
        # A vision tower's three layers on the first stage beside the decoder's: the decoder's layers
        # on the second stage follow the decoder's on the first, whatever the tower holds.
        root, model = self.write(1, 2, 1, True, False)
        path = os.path.join(root, "iter_0000020", "mp_rank_00_000", "model_optim_rng.pt")
        state = torch.load(path)
        for i in range(3):
            state["model"][f"vision_model.layers.{i}.norm.weight"] = torch.full((4,), float(i))
        torch.save(state, path)
        code, stats = shardctl("stats", root)
        self.assertEqual(code, 0, stats)
        names = {t["name"] for t in stats["tensors"]}
        self.assertTrue(set(model) <= names, set(model) - names)
        self.assertEqual({n for n in names if ".vision_model." in n or n.startswith("model.vision_model.")},
                         {f"model.vision_model.layers.{i}.norm.weight" for i in range(3)})

    def test_what_no_rule_joins_is_read_end_to_end_and_not_converted(self):
        # Three ways slices are not one tensor: rank 1 lacks one (its file was saved without it),
        # the copies of a norm differ (the ranks diverged), and MoE experts, which ranks may hold
        # whole or split, or different experts under one local name.
        root, model = self.write(2, 1, 1, False, True)
        names = {"model.language_model.output_layer.weight", "model.language_model.encoder.layers.0.input_norm.weight",
                 "model.language_model.encoder.layers.0.mlp.experts.local_experts.0.dense_h_to_4h.weight"}
        for rank in range(2):
            path = os.path.join(root, "iter_0000020", f"mp_rank_{rank:02d}", "model_optim_rng.pt")
            state = torch.load(path)
            lm = state["model"]["language_model"]
            encoder = lm["encoder"]
            encoder["layers.0.mlp.experts.local_experts.0.dense_h_to_4h.weight"] = \
                encoder["layers.0.mlp.dense_h_to_4h.weight"].clone()
            if rank == 1:
                del lm["output_layer"]
                encoder["layers.0.input_norm.weight"] = encoder["layers.0.input_norm.weight"] + 1
            torch.save(state, path)
        code, stats = shardctl("stats", root)
        # The diverged norm is a finding of its own, naming the rank whose copy differs.
        self.assertEqual(code, 1, stats["problems"])
        self.assertEqual([(p["kind"], p["rank"], p["path"]) for p in stats["problems"]],
                         [("replicas_differ", 1, "mp_rank_01/model_optim_rng.pt")])
        self.assertIn("'model.language_model.encoder.layers.0.input_norm.weight'", stats["problems"][0]["message"])
        code, verified = shardctl("verify", root, "--content")
        self.assertEqual((verified["verdict"]["state"], verified["verdict"]["title"][:16]),
                         ("corrupt", "Ranks diverged: "))
        seen = {t["name"]: t for t in stats["tensors"]}
        for name in names:
            flat = seen[name]
            self.assertEqual(len(flat["shape"]), 1, name)  # laid end to end, each rank's values counted
            self.assertEqual(flat["numel"], sum(p["numel"] for p in flat["parts"]), name)
        self.assertEqual(len(seen["model.language_model.output_layer.weight"]["parts"]), 1)
        self.assertEqual(seen["model.language_model.encoder.layers.0.input_norm.weight"]["numel"], 2 * 32)
        # A source with a finding is not converted; without it, what no rule joins is refused.
        code, result = shardctl("convert", root, "--to", "hf", "--out", root + "-hf")
        self.assertEqual((code, result["error"]["kind"]), (1, "replicas_differ"), result)
        norm = "layers.0.input_norm.weight"
        rank0 = torch.load(os.path.join(root, "iter_0000020", "mp_rank_00", "model_optim_rng.pt"))
        path = os.path.join(root, "iter_0000020", "mp_rank_01", "model_optim_rng.pt")
        state = torch.load(path)
        state["model"]["language_model"]["encoder"][norm] = rank0["model"]["language_model"]["encoder"][norm]
        torch.save(state, path)
        code, result = shardctl("convert", root, "--to", "hf", "--out", root + "-hf")
        self.assertEqual(code, 2, result)
        self.assertIn("rank file", result["error"]["message"])
        self.assertFalse(os.path.exists(root + "-hf"))

    def test_a_lost_rank_leaves_its_peers_slices_unjoined(self):
        # mp_rank_00 is gone: rank 1's half of the output layer is not the output layer, and stats
        # says the rank file is missing, as verify does.
        root, model = self.write(2, 1, 1, False, True)
        shutil.rmtree(os.path.join(root, "iter_0000020", "mp_rank_00"))
        name = "model.language_model.output_layer.weight"
        code, stats = shardctl("stats", root, "--tensor", name)
        self.assertEqual(code, 1, stats)
        self.assertEqual([(p["kind"], p["path"]) for p in stats["problems"]],
                         [("missing_shard", "mp_rank_00/model_optim_rng.pt")])
        self.assertEqual(stats["tensors"][0]["shape"], [model[name].numel() // 2])
        code, verified = shardctl("verify", root)
        self.assertEqual((code, verified["problems"][0]["kind"]), (1, "missing_shard"))

    def test_the_saved_args_name_the_ranks_no_folder_names(self):
        # The last tensor-parallel rank's folder is gone: no name is missing from the sequence the
        # folders show, but the args of the others say two ranks saved.
        root, model = self.write(2, 1, 1, False, True)
        shutil.rmtree(os.path.join(root, "iter_0000020", "mp_rank_01"))
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 1, verified["problems"])
        self.assertEqual([(p["kind"], p["path"], p["rank"]) for p in verified["problems"]],
                         [("missing_shard", "mp_rank_01/model_optim_rng.pt", 1)])
        self.assertIn("tensor-parallel size 2", verified["problems"][0]["message"])
        self.assertEqual(verified["world_size"], 2)
        # Rank 0's half of a split tensor is not the tensor, and stats says which rank is missing.
        name = "model.language_model.output_layer.weight"
        code, stats = shardctl("stats", root, "--tensor", name)
        self.assertEqual(stats["tensors"][0]["shape"], [model[name].numel() // 2])
        self.assertEqual((code, [(p["kind"], p["path"]) for p in stats["problems"]]),
                         (1, [("missing_shard", "mp_rank_01/model_optim_rng.pt")]), stats["problems"])
        # Files whose args disagree with each other say so.
        root, _ = self.write(2, 2, 1, True, True)
        path = os.path.join(root, "iter_0000020", "mp_rank_01_001", "model_optim_rng.pt")
        state = torch.load(path)
        state["args"].tensor_model_parallel_size = 4
        torch.save(state, path)
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 1)
        mismatch = [p for p in verified["problems"] if p["kind"] == "world_size_mismatch"]
        self.assertEqual([p["path"] for p in mismatch], ["mp_rank_01_001/model_optim_rng.pt"])
        self.assertIn("tensor-parallel size 4", mismatch[0]["message"])

    def test_folders_the_args_leave_no_room_for(self):
        # A stray mp_rank_03 beside the two ranks the args name: a folder too many, and mp_rank_02,
        # which only the names implied, is not missing.
        root, _ = self.write(2, 1, 1, False, True)
        step = os.path.join(root, "iter_0000020")
        shutil.copytree(os.path.join(step, "mp_rank_01"), os.path.join(step, "mp_rank_03"))
        code, verified = shardctl("verify", root)
        self.assertEqual(code, 1)
        self.assertEqual([(p["kind"], p["path"]) for p in verified["problems"]],
                         [("world_size_mismatch", "mp_rank_03/model_optim_rng.pt")])
        self.assertEqual([(s["rank"], s["path"]) for s in verified["shards"]],
                         [(-1, "mp_rank_03/model_optim_rng.pt"), (0, "mp_rank_00/model_optim_rng.pt"),
                          (1, "mp_rank_01/model_optim_rng.pt")])
        # Files of two layouts in one step: not a reshard away from resuming, an inconsistent step.
        self.assertEqual(verified["verdict"]["state"], "corrupt")
        self.assertTrue(verified["verdict"]["title"].startswith("Parallel sizes disagree: "))
        self.assertNotIn("reshard", verified["verdict"]["meaning"])
        shutil.rmtree(os.path.join(step, "mp_rank_03"))
        # The distributed optimizer saves distrib_optim.pt beside each rank's model: one lost is found.
        self.set_args(root, use_distributed_optimizer=True)
        code, verified = shardctl("verify", root)
        self.assertEqual([(p["kind"], p["path"], p["rank"]) for p in verified["problems"]],
                         [("missing_shard", "mp_rank_00/distrib_optim.pt", 0),
                          ("missing_shard", "mp_rank_01/distrib_optim.pt", 1)])
        self.set_args(root, no_save_optim=True)  # saved without the optimizer: nothing to miss
        code, verified = shardctl("verify", root)
        self.assertEqual((code, verified["problems"]), (0, []))
        # Args that are no sizes Megatron ran with are not used: the names are all there is.
        self.set_args(root, tensor_model_parallel_size=0, use_distributed_optimizer=False)
        shutil.rmtree(os.path.join(step, "mp_rank_01"))
        code, verified = shardctl("verify", root)
        self.assertEqual((code, verified["problems"]), (0, []))
        self.assertNotIn("sizes from", verified["summary"])

    def test_qkv_saved_before_checkpoint_version_2_is_not_joined(self):
        # Older Megatron stored a rank's QKV rows in another order: its ranks' rows laid one after
        # another are no whole QKV, so they stay end to end; the other layers are joined as ever.
        root, model = self.write(2, 1, 1, False, True)
        for rank in range(2):
            path = os.path.join(root, "iter_0000020", f"mp_rank_{rank:02d}", "model_optim_rng.pt")
            state = torch.load(path)
            state["checkpoint_version"] = 1.0
            torch.save(state, path)
        code, stats = shardctl("stats", root)
        self.assertEqual(code, 0, stats)
        seen = {t["name"]: t["shape"] for t in stats["tensors"]}
        qkv = "model.language_model.encoder.layers.0.self_attention.query_key_value.weight"
        self.assertEqual(seen[qkv], [model[qkv].numel()])
        dense = "model.language_model.encoder.layers.0.self_attention.dense.weight"
        self.assertEqual(seen[dense], list(model[dense].shape))

    def test_slices_that_do_not_fit_the_rule_are_not_joined(self):
        # Rank 1's output layer has one row more than rank 0's: not slices of one tensor as
        # Megatron cuts it, so stats reads them end to end and convert refuses, naming it.
        root, model = self.write(2, 1, 1, False, True)
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
