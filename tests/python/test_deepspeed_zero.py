"""A DeepSpeed ZeRO checkpoint (stages 1, 2, 3 and the BF16 optimizer; tests/fixtures/deepspeed_zero.py
writes it with torch as DeepSpeed's engine lays it out) read through shardctl: the model put
together from the ranks' flat fp32 partitions is the state dict zero_to_fp32 gives, bit for bit,
in convert's Hugging Face output, in diff, and in stats against a float64 reference; each
parameter's Adam moments likewise, and a negative second moment is found by parameter."""

import collections
import json
import os
import sys
import tempfile
import unittest

import numpy as np

import pyutil
import shardscope
from pyutil import shardctl

try:
    import torch
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(pyutil.SKIP)

sys.path.insert(0, os.path.join(os.environ.get("SHARDSCOPE_SOURCE_DIR", "."), "tests", "fixtures"))
import deepspeed_zero  # noqa: E402

CASES = [(1, 4, False), (2, 3, False), (3, 4, False), (1, 2, True)]  # stage, data-parallel ranks, BF16_Optimizer
def bits(t):
    """A torch tensor's values as (dtype name, raw unsigned ints), to compare bit for bit."""
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bfloat16:
        return "BF16", t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype == torch.float32:
        return "F32", t.numpy().view(np.uint32)
    return "I64", t.numpy()


class DeepSpeedZero(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def case(self, stage, world, bf16, **kw):
        root = os.path.join(self.tmp.name, f"stage{stage}-{world}{'-bf16' if bf16 else ''}")
        return root, deepspeed_zero.write(root, stage, world, bf16, **kw)

    def assert_written(self, written, name, tensor):
        dtype, shape, values = written[name]
        self.assertEqual((dtype, shape), (bits(tensor)[0], list(tensor.shape)), name)
        np.testing.assert_array_equal(values, bits(tensor)[1], err_msg=name)

    def test_convert_gives_zero_to_fp32s_state_dict(self):
        for stage, world, bf16 in CASES:
            with self.subTest(stage=stage, world=world, bf16=bf16):
                root, (truth, moments) = self.case(stage, world, bf16)
                out = root + "-hf"
                status, result = shardctl("convert", root, "--to", "hf", "--out", out)
                self.assertEqual(status, 0, result)
                self.assertEqual(result["source"]["format"], "deepspeed")
                self.assertEqual(result["tensors"], len(truth))
                written = pyutil.read_hf(out)
                self.assertEqual(set(written), set(truth))  # buffers, frozen, trained and tied parameters
                for name, tensor in truth.items():
                    self.assert_written(written, name, tensor)
                # With the optimizer: each trained parameter's moments, named as a ShardScope
                # source's are, and nothing of the flat groups.
                status, result = shardctl("convert", root, "--to", "hf", "--out", out + "-optim",
                                          "--states", "model+optimizer")
                self.assertEqual(status, 0, result)
                written = pyutil.read_hf(out + "-optim")
                expected = set(truth) | {f"optim.{k}.{n}" for n in moments for k in ("exp_avg", "exp_avg_sq")}
                self.assertEqual(set(written), expected)
                for name, states in moments.items():
                    for k, tensor in states.items():
                        self.assert_written(written, f"optim.{k}.{name}", tensor)
                # diff pairs the assembled tensors with the output's: identical; the files' own
                # tensors (module.*, the flat groups, the moments) are only in the source.
                status, diff = shardctl("diff", root, out)
                self.assertEqual(status, 1, diff)  # not everything is in both
                statuses = {(t["name"], t.get("state", "")): t["status"] for t in diff["tensors"]}
                for name in truth:
                    self.assertEqual(statuses.pop((name, "")), "identical", name)
                self.assertTrue(statuses and all(s == "only_in_a" for s in statuses.values()), statuses)
                self.assertIn(("up.weight", "exp_avg_sq"), statuses)

    def test_a_universal_checkpoint_is_the_same_model(self):
        # ds_to_universal's zero/<parameter>/ files: the model is each fp32.pt's tensor, the
        # buffers, frozen and tied parameters come from the engine's model file beside them;
        # convert gives zero_to_fp32's state dict and the moments, diff finds the ZeRO step it
        # came from identical, a missing moment file is named.
        root = os.path.join(self.tmp.name, "universal")
        truth, moments, folder = deepspeed_zero.write_universal(root, stage=2, world=2)
        status, info = shardctl("info", folder)
        self.assertEqual(status, 0, info)
        self.assertEqual(info["format"], "deepspeed")
        self.assertEqual(info["summary"]["universal checkpoint"],
                         f"{len(moments)} parameters in zero/ (fp32, exp_avg, exp_avg_sq, step)")
        out = folder + "-hf"
        status, result = shardctl("convert", folder, "--to", "hf", "--out", out, "--states", "model+optimizer")
        self.assertEqual(status, 0, result)
        written = pyutil.read_hf(out)
        expected = set(truth) | {f"optim.{k}.{n}" for n in moments for k in ("exp_avg", "exp_avg_sq")}
        self.assertEqual(set(written), expected)
        for name, tensor in truth.items():
            self.assert_written(written, name, tensor)
        for name, states in moments.items():
            for k, tensor in states.items():
                self.assert_written(written, f"optim.{k}.{name}", tensor)
        status, diff = shardctl("diff", os.path.join(root, "global_step7"), folder)
        statuses = {(t["name"], t.get("state", "")): t["status"] for t in diff["tensors"]}
        for name in truth:
            self.assertEqual(statuses[(name, "")], "identical", name)
        for name, states in moments.items():
            for k in states:
                self.assertEqual(statuses[(name, k)], "identical", (name, k))
        # The root, through latest_universal when no `latest` is there: the same model, its step.
        os.remove(os.path.join(root, "latest"))
        status, from_root = shardctl("convert", root, "--to", "hf", "--out", out + "-root")
        self.assertEqual(status, 0, from_root)
        self.assertEqual(from_root["source"]["path"], folder)
        self.assertEqual(set(pyutil.read_hf(out + "-root")), set(truth))
        status, info = shardctl("info", root)
        self.assertEqual((status, info.get("step")), (0, 7), info)
        # A parameter folder without a moment, one without anything, and one whose name would
        # reach the terminal: one sentence each, the name escaped.
        os.remove(os.path.join(folder, "zero", "up.weight", "exp_avg_sq.pt"))
        os.makedirs(os.path.join(folder, "zero", "empty"))
        os.makedirs(os.path.join(folder, "zero", "evil\x1b[31m"))
        status, verified = shardctl("verify", folder)
        self.assertEqual(status, 1, verified)
        messages = "\n".join(p["message"] for p in verified["problems"])
        self.assertIn("zero/up.weight: no exp_avg_sq.pt", messages)
        self.assertIn("zero/empty: no fp32.pt, exp_avg.pt, exp_avg_sq.pt", messages)
        self.assertIn("evil\\x1b[31m: a parameter folder whose name is not plain text", messages)
        self.assertNotIn("\x1b", json.dumps(verified, ensure_ascii=False))

    def test_convert_to_shardscope_carries_masters_and_moments(self):
        # ShardScope holds floating-point parameters only: the model without its int64 buffer
        root, (truth, moments) = self.case(2, 3, False, batchnorm=False)
        out = root + "-shardscope"
        status, result = shardctl("convert", root, "--to", "shardscope", "--dtype", "bf16", "--states",
                                  "model+optimizer", "--world-size", "2", "--out", out)
        self.assertEqual(status, 0, result)
        manifest = shardscope.manifest(out)
        self.assertEqual(manifest["step"], 7)  # global_step7
        ranks = shardscope.load(out, 2)
        flat = {k: np.concatenate([r[k] for r in ranks]) for k in ("param", "master", "exp_avg", "exp_avg_sq")}
        self.assertEqual([t["name"] for t in manifest["tensors"]], list(truth))
        for t in manifest["tensors"]:
            name, lo, hi = t["name"], t["offset"], t["offset"] + t["numel"]
            master = truth[name].float().numpy().reshape(-1)
            np.testing.assert_array_equal(flat["master"][lo:hi].view(np.uint32), master.view(np.uint32), name)
            np.testing.assert_array_equal(flat["param"][lo:hi].view(np.uint16), pyutil.bf16_bits(master), name)
            for k in ("exp_avg", "exp_avg_sq"):
                # a tied alias has no moments of its own: a fresh optimizer's zeros
                want = moments[name][k].numpy().reshape(-1) if name in moments else np.zeros(hi - lo, np.float32)
                np.testing.assert_array_equal(flat[k][lo:hi].view(np.uint32), want.view(np.uint32), f"{name} {k}")

    def test_stats_of_the_assembled_model_match_float64(self):
        root, (truth, moments) = self.case(3, 4, False)  # stage 3's padding holds NaN: no model value
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 0, stats)
        # the flat groups hold the padding's NaN; it is no finding about the model, and the one
        # verdict says safe, naming the padding
        flat = [t for t in stats["tensors"] if t["name"].startswith("optimizer_state_dict.fp32_flat_groups.")]
        self.assertTrue(flat and all(t["nan"] > 0 for t in flat), flat)
        status, verified = shardctl("verify", root, "--content")
        self.assertEqual(status, 0, verified)
        self.assertEqual(verified["verdict"]["state"], "safe")
        self.assertTrue(verified["verdict"]["title"].endswith("but the padding of 2 ZeRO partitions"),
                        verified["verdict"]["title"])
        # info says what each file is to the ZeRO layout
        status, info = shardctl("info", root)
        self.assertEqual(status, 0, info)
        details = {f["path"]: f["detail"] for f in info["files"]}
        self.assertIn("ZeRO stage 3 partition of 4", details["zero_pp_rank_1_mp_rank_00_optim_states.pt"])
        self.assertIn("param_shapes: 9 parameters in 2 groups", details["zero_pp_rank_0_mp_rank_00_model_states.pt"])
        assembled = {(t["name"], t.get("state", "")): t for t in stats["tensors"] if t.get("assembled")}
        expected = {(n, ""): t for n, t in truth.items()}
        expected.update({(n, k): t for n, states in moments.items() for k, t in states.items()})
        self.assertEqual(set(assembled), set(expected))
        for (name, state), tensor in expected.items():
            ref = tensor.double().numpy().reshape(-1)
            got = assembled[(name, state)]
            self.assertEqual(got["nan"], 0, name)
            self.assertEqual(got["numel"], ref.size, name)
            self.assertEqual(got["shape"], list(tensor.shape), name)
            self.assertEqual(got["min"], ref.min(), name)
            self.assertEqual(got["max"], ref.max(), name)
            self.assertAlmostEqual(got["mean"], ref.mean(), delta=1e-12 * max(1.0, abs(ref).max()), msg=name)
            self.assertAlmostEqual(got["l2"], float(np.sqrt((ref * ref).sum())), delta=1e-9, msg=name)
        # A parameter of 42 elements is split 11, 11, 11, 9 over the four ranks.
        self.assertEqual([p["rank"] for p in assembled[("up.weight", "")]["parts"]], [0, 1, 2, 3])
        self.assertEqual([p["numel"] for p in assembled[("up.weight", "")]["parts"]], [11, 11, 11, 9])
        # Only the selected assembled tensors, though their flat groups are not selected.
        status, some = shardctl("stats", root, "--tensor", "up.*")
        self.assertEqual(status, 0, some)
        self.assertEqual([(t["name"], t.get("state")) for t in some["tensors"]],
                         [("up.weight", None), ("up.bias", None), ("up.weight", "exp_avg"), ("up.bias", "exp_avg"),
                          ("up.weight", "exp_avg_sq"), ("up.bias", "exp_avg_sq")])

    def test_a_negative_second_moment_is_found_by_parameter(self):
        for stage, world in [(2, 3), (3, 4)]:
            with self.subTest(stage=stage):
                root, _ = self.case(stage, world, False, negative="down.bias")
                status, stats = shardctl("stats", root)
                self.assertEqual(status, 1, stats)
                found = [p["message"] for p in stats["problems"] if p["kind"] == "negative_second_moment"]
                # the parameter's; the flat moment holding it (and padding) has no finding of its own
                self.assertEqual(len(found), 1, stats["problems"])
                self.assertIn("'down.bias' (exp_avg_sq) has 1 negative values", found[0])

    def test_partitions_that_do_not_hold_param_shapes_are_refused(self):
        for stage, world in [(2, 3), (3, 4)]:
            with self.subTest(stage=stage):
                root, _ = self.case(stage, world, False, unlisted="up.weight")
                status, stats = shardctl("stats", root)
                self.assertEqual(status, 1, stats)
                messages = [p["message"] for p in stats["problems"]]
                self.assertTrue(any("zero_pp_rank_" in m and "cannot be put together" in m for m in messages),
                                messages)
                self.assertFalse(any(t.get("assembled") for t in stats["tensors"]))
                out = root + "-hf"
                status, result = shardctl("convert", root, "--to", "hf", "--out", out)
                self.assertEqual(status, 1, result)
                self.assertFalse(result["ok"])
                self.assertEqual([f for f in os.listdir(self.tmp.name) if os.path.basename(out) in f], [])

    def test_hostile_fields_are_one_sentence(self):
        def huge_shape(name, content):
            if "param_shapes" in content:
                content["param_shapes"][0]["up.weight"] = torch.Size([1 << 40, 1 << 40])

        def other_partition_count(name, content):
            if "optim_states" in name:
                content["optimizer_state_dict"]["partition_count"] = [5, 5]

        def missing_group(name, content):
            if name.startswith("zero_pp_rank_1_") and "optim_states" in name:
                content["optimizer_state_dict"]["single_partition_of_fp32_groups"].pop()

        def repeated_name(name, content):
            if "param_shapes" in content:
                content["param_shapes"][1]["up.bias"] = content["param_shapes"][0]["up.weight"]
                content["param_shapes"][0]["up.bias"] = torch.Size([7])

        def stage3_rank_of_other_type(name, content):
            if name.startswith("zero_pp_rank_2_") and "optim_states" in name:
                groups = content["optimizer_state_dict"]["fp32_flat_groups"]
                groups[0] = groups[0].double()

        def one_group_named_many_times(name, content):
            # pickle stores the dict once and refers to it 5000 times: 10^7 entries if copied out
            if "param_shapes" in content:
                many = collections.OrderedDict((f"p{i}", torch.Size([1, 1])) for i in range(2000))
                content["param_shapes"] = [many] * 5000

        for stage, edit, kind, words in [
                (2, one_group_named_many_times, "invalid_archive", "more parameter names and dimensions"),
                (2, huge_shape, "invalid_archive", "overflows"),
                (3, huge_shape, "invalid_archive", "overflows"),
                (2, other_partition_count, "missing_shard", "split over 5 ranks, but 3"),
                (2, missing_group, "missing_tensor", "single_partition_of_fp32_groups.1"),
                (2, repeated_name, "invalid_archive", "'up.bias' twice"),
                (3, stage3_rank_of_other_type, "invalid_archive", "F64")]:
            with self.subTest(stage=stage, edit=edit.__name__):
                root, _ = self.case(stage, 3 if stage == 2 else 4, False, edit=edit)
                status, stats = shardctl("stats", root)
                self.assertEqual(status, 1, stats)
                found = [p for p in stats["problems"] if "cannot be put together" in p["message"]]
                self.assertEqual(len(found), 1, stats["problems"])
                self.assertEqual(found[0]["kind"], kind)
                self.assertIn(words, found[0]["message"])
                self.assertIn(".pt", found[0]["message"])  # names the file

    def test_a_missing_stage3_model_rank_is_named(self):
        root, _ = self.case(3, 4, False)
        os.remove(os.path.join(root, "global_step7", "zero_pp_rank_2_mp_rank_00_model_states.pt"))
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 1, stats)
        found = [p for p in stats["problems"] if "cannot be put together" in p["message"]]
        self.assertEqual(len(found), 1, stats["problems"])
        self.assertIn("rank 2", found[0]["message"])
        self.assertIn("model", found[0]["message"])

    def test_the_last_rank_lost_is_named_by_the_optimizer_states_split(self):
        # No name is missing from the sequence the files show, but every optimizer file says how
        # many ranks its state is split over: verify names the lost last rank's files (ZeRO-3's
        # model file too) and the step's data-parallel size is that split, not the files counted.
        for stage, world in ((2, 3), (3, 4)):
            with self.subTest(stage=stage):
                root, _ = self.case(stage, world, False)
                step = os.path.join(root, "global_step7")
                last = world - 1
                lost = ["zero_pp_rank_%d_mp_rank_00_optim_states.pt" % last]
                if stage == 3:
                    lost.append("zero_pp_rank_%d_mp_rank_00_model_states.pt" % last)
                for name in lost:
                    os.remove(os.path.join(step, name))
                status, verified = shardctl("verify", root)
                self.assertEqual(status, 1, verified)
                missing = [p for p in verified["problems"] if p["kind"] == "missing_shard"]
                self.assertEqual(sorted(p["path"] for p in missing), sorted(lost), verified["problems"])
                self.assertEqual({p["rank"] for p in missing}, {last})
                self.assertIn("split over %d ranks" % world, missing[0]["message"])
                status, info = shardctl("info", root)
                self.assertEqual(info["world_size"], world, info)

    def test_elastic_moments(self):
        root, (truth, moments) = self.case(2, 3, False, elastic=True)
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 0, stats)
        got = {(t["name"], t.get("state")): t for t in stats["tensors"] if t.get("assembled")}
        for name, states in moments.items():
            for k, tensor in states.items():
                ref = float(np.sqrt((tensor.double() ** 2).sum()))
                self.assertAlmostEqual(got[(name, k)]["l2"], ref, delta=1e-12 * ref, msg=(name, k))
                self.assertEqual(got[(name, k)]["numel"], tensor.numel(), (name, k))

    def test_moments_that_do_not_fit_leave_the_model_and_the_files_optimizer(self):
        def short_moment(name, content):
            if name.startswith("zero_pp_rank_1_") and "optim_states" in name:
                state = content["optimizer_state_dict"]["base_optimizer_state"]["state"][0]
                state["exp_avg_sq"] = state["exp_avg_sq"][:-40]

        root, (truth, _) = self.case(2, 3, False, edit=short_moment)
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 0, stats)
        assembled = [(t["name"], t.get("state")) for t in stats["tensors"] if t.get("assembled")]
        self.assertEqual(sorted(n for n, s in assembled), sorted(truth))  # the model, no moment
        self.assertTrue(any("exp_avg_sq is not put together" in w["message"] for w in stats["warnings"]),
                        stats["warnings"])
        out = root + "-hf"
        status, result = shardctl("convert", root, "--to", "hf", "--out", out, "--states", "model+optimizer")
        self.assertEqual(status, 0, result)
        written = pyutil.read_hf(out)
        self.assertTrue(set(truth) < set(written))
        # the optimizer as the files hold it, since it could not be put together per parameter
        self.assertIn("optimizer_state_dict.base_optimizer_state.state.0.exp_avg", written)

    def test_model_parallel_ranks_are_not_put_together(self):
        root, _ = self.case(2, 3, False)
        step = os.path.join(root, "global_step7")
        for f in os.listdir(step):  # a second tensor-parallel rank, as DeepSpeed names its files
            with open(os.path.join(step, f), "rb") as src, \
                    open(os.path.join(step, f.replace("mp_rank_00", "mp_rank_01")), "wb") as dst:
                dst.write(src.read())
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 0, stats)
        self.assertFalse(any(t.get("assembled") for t in stats["tensors"]))
        self.assertTrue(any("not put together" in w["message"] for w in stats["warnings"]), stats["warnings"])
        status, result = shardctl("convert", root, "--to", "hf", "--out", root + "-hf")
        self.assertEqual(status, 2, result)
        self.assertIn("model-parallel", result["error"]["message"])
        self.assertFalse(os.path.exists(root + "-hf"))

    def test_second_moments_of_torch_adam_are_checked_in_any_format(self):
        path = os.path.join(self.tmp.name, "optimizer.pt")
        torch.save({"optimizer": {"state": {0: {"exp_avg": torch.ones(4), "exp_avg_sq": torch.tensor([1., -2., 3., 4.])}},
                                  "param_groups": [{"params": [0]}]}}, path)
        status, stats = shardctl("stats", path)
        self.assertEqual(status, 1, stats)
        found = [p for p in stats["problems"] if p["kind"] == "negative_second_moment"]
        self.assertEqual(len(found), 1, stats["problems"])
        self.assertIn("optimizer.state.0.exp_avg_sq", found[0]["message"])

    def test_diff_against_the_shardscope_conversion(self):
        root, _ = self.case(2, 3, False, batchnorm=False)
        out = root + "-shardscope"
        status, result = shardctl("convert", root, "--to", "shardscope", "--dtype", "bf16", "--states",
                                  "model+optimizer", "--out", out)
        self.assertEqual(status, 0, result)
        # the ZeRO model pairs with the ShardScope param state, its moments are not compared
        status, diff = shardctl("diff", root, out, "--rtol", "0.00390625")
        self.assertTrue(diff["states_as_param"], diff)
        paired = [t for t in diff["tensors"] if t["status"] not in ("only_in_a", "only_in_b")]
        self.assertEqual(sorted(t["name"] for t in paired), sorted(t["name"] for t in shardscope.manifest(out)["tensors"]))
        # the fp32 masters rounded to bf16 (the frozen parameter was bf16 already)
        self.assertTrue(all(t["state"] == "param" and t["status"] in ("dtype_changed", "identical")
                            and t["changed_elements"] == 0 for t in paired), paired)
        self.assertEqual(sum(t["status"] == "dtype_changed" for t in paired), len(paired) - 1)


if __name__ == "__main__":
    unittest.main()
