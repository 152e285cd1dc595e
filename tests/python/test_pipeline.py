"""schedule and plan from Python: the `shardctl schedule --json` object, the textbook bubbles, a
profile from a file or a dict, and typed errors for broken rules."""

import os
import time

import pyutil
from pyutil import shardctl, without

import shardscope

PROFILES = os.path.join(os.environ.get("SHARDSCOPE_SOURCE_DIR", "."), "resources", "profiles")


class Pipeline(pyutil.TempDirTest):
    def test_textbook_bubbles(self):
        for kind, extra, expected in [("gpipe", {}, 3 / 11), ("1f1b", {}, 3 / 11),
                                      ("interleaved", {"virtual_stages": 2}, 1.5 / 9.5), ("zb-h1", {}, 3 / 27)]:
            s = shardscope.schedule(4, 8, kind, **extra)
            self.assertAlmostEqual(s["bubble_fraction"], expected, places=12, msg=kind)
            self.assertAlmostEqual(s["closed_form_bubble"], expected, places=12, msg=kind)
            self.assertEqual(s["schedule"], kind)
        self.assertEqual(shardscope.schedule(4, 8, "interleaved")["virtual_stages"], 2)  # the CLI's default

    def test_the_schedule_object_is_the_cli_object(self):
        profile = os.path.join(PROFILES, "decoder-7b-32.json")
        mine = shardscope.schedule(4, 8, "1f1b", profile=profile, partition="compute", p2p_latency_ms=0.05)
        status, cli = shardctl("schedule", "--stages", 4, "--microbatches", 8, "--schedule", "1f1b",
                               "--profile", profile, "--partition", "compute", "--p2p-latency", 0.05)
        self.assertEqual(status, 0)
        self.assertEqual(mine, cli)
        self.assertEqual(len(mine["ops"]), 4 * 8 * 2)
        plan = shardscope.plan(4, 8, "1f1b", profile=profile, partition="compute", p2p_latency_ms=0.05)
        self.assertNotIn("ops", plan)
        self.assertEqual(plan["op_count"], len(mine["ops"]))
        self.assertEqual(without(plan, "op_count"), without(mine, "ops"))
        csv = os.path.join(PROFILES, "mixed-12.csv")
        status, cli = shardctl("schedule", "--stages", 3, "--microbatches", 6, "--schedule", "zb-h1",
                               "--profile", csv, "--partition", "manual:4,8")
        self.assertEqual(shardscope.schedule(3, 6, "zb-h1", profile=csv, partition="manual:4,8"), cli)

    def test_the_training_step_is_the_cli_step(self):
        # Memory, recomputation and communication: the same options, the same dict.
        profile = os.path.join(PROFILES, "decoder-7b-32.json")
        mine = shardscope.schedule(4, 8, "1f1b", profile=profile, partition="compute", dp=8, zero=1,
                                   recompute="full", gpu_memory_gib=80, link_gbps=200)
        status, cli = shardctl("schedule", "--stages", 4, "--microbatches", 8, "--schedule", "1f1b",
                               "--profile", profile, "--partition", "compute", "--dp", 8, "--zero", 1,
                               "--recompute", "full", "--gpu-memory", 80, "--link-gbps", 200)
        self.assertEqual(status, 0)
        self.assertEqual(mine, cli)
        self.assertGreater(mine["peak_memory_bytes"], 0)
        self.assertGreater(mine["allreduce_ms"], 0)
        # Megatron's fp32 gradients: the CLI's --fp32-grads, twice the gradient bytes.
        fp32 = shardscope.schedule(4, 8, "1f1b", profile=profile, partition="compute", dp=8, zero=1,
                                   recompute="full", gpu_memory_gib=80, link_gbps=200, fp32_grads=True)
        status, cli = shardctl("schedule", "--stages", 4, "--microbatches", 8, "--schedule", "1f1b",
                               "--profile", profile, "--partition", "compute", "--dp", 8, "--zero", 1,
                               "--recompute", "full", "--gpu-memory", 80, "--link-gbps", 200, "--fp32-grads")
        self.assertEqual(fp32, cli)
        self.assertTrue(fp32["fp32_grads"])
        for a, b in zip(mine["stage_stats"], fp32["stage_stats"]):
            self.assertEqual(b["memory"]["gradients"], 2 * a["memory"]["gradients"])
        self.assertAlmostEqual(fp32["allreduce_ms"], 1.5 * mine["allreduce_ms"], delta=1e-9 * mine["allreduce_ms"])
        with self.assertRaises(shardscope.Error) as caught:
            shardscope.schedule(4, 8, "1f1b", recompute="sometimes")
        self.assertEqual(caught.exception.kind, "invalid_argument")
        with self.assertRaises(shardscope.Error):
            shardscope.schedule(4, 8, "1f1b", gpu_memory_gib=float("nan"))

    def test_a_profile_dict(self):
        profile = {"name": "toy", "layers": [{"name": f"l{i}", "params": 10 * (i + 1), "fwd_ms": 1.0 + i,
                                              "activation_bytes": 100} for i in range(6)]}
        s = shardscope.schedule(2, 4, "gpipe", profile=profile, partition="compute")
        self.assertEqual((s["profile"], s["partition"]), ("toy", "compute"))
        self.assertEqual(len(s["boundaries"]), 1)
        bad = {"layers": [{"name": "x", "params": 1, "fwd_ms": 1, "activation_bytes": 1, "bwd_weigth_ms": 1}]}
        with self.assertRaises(shardscope.PipelineError) as caught:
            shardscope.schedule(1, 1, "gpipe", profile=bad)
        self.assertEqual(caught.exception.kind, "invalid_profile")

    def test_broken_rules_raise_typed_errors(self):
        with self.assertRaises(shardscope.PipelineError) as caught:  # M not a multiple of N
            shardscope.schedule(4, 6, "interleaved")
        self.assertEqual((caught.exception.kind, caught.exception.exit_code), ("invalid_schedule", 1))
        with self.assertRaises(shardscope.PipelineError):  # chunks without interleaving
            shardscope.plan(4, 8, "1f1b", virtual_stages=2)
        with self.assertRaises(shardscope.InvalidArgumentError):
            shardscope.schedule(4, 8, "pipedream")
        with self.assertRaises(shardscope.InvalidArgumentError):
            shardscope.schedule(4, 8, "1f1b", partition="by-vibes")
        with self.assertRaises(shardscope.StorageError) as caught:
            shardscope.schedule(4, 8, "1f1b", profile=self.path("no-such-profile.json"))
        self.assertEqual(caught.exception.kind, "cannot_open")

    def test_gil_is_released_during_the_simulation(self):
        shardscope.plan(16, 64)  # warm up
        with pyutil.Ticker() as ticker:
            start = time.perf_counter()
            shardscope.plan(16, 200000)  # a few hundred ms of partition + simulation
            end = time.perf_counter()
        self.assertGreater(ticker.ticks_between(start + 0.002, end - 0.002), 3, "plan() held the GIL")


if __name__ == "__main__":
    pyutil.main()
