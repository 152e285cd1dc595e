"""save_sharded / load / verify / manifest / write_rank_shard + commit / digests / plan_reshard /
reshard from Python: bit-exact round trips, the CLI's JSON objects, typed errors, input refused
before anything is written, and the GIL released while the core works."""

import os
import threading
import time

import numpy as np

import pyutil
from pyutil import TempDirTest, flat_state, shardctl, split, without

import shardscope

TRAINING_STATE = {"optimizer": {"name": "adamw", "step": 300, "lr": 0.1, "betas": [0.9, 0.95]},
                  "rng": {"counter": 2 ** 60, "seed": -3}, "note": "ünïcode", "flags": [True, False, None]}
TENSORS = [{"name": "embed.weight", "offset": 0, "numel": 6000, "shape": [60, 100]},
           {"name": "head.bias", "offset": 6000, "numel": 4007, "shape": [4007]}]


class RoundTrip(TempDirTest):
    def save(self, name="ckpt", world=4, dtype="bf16", numel=10007, seed=1, **kwargs):
        flat = flat_state(numel, seed, dtype)
        ranks = split(flat, world)
        manifest = shardscope.save_sharded(self.path(name), 1200, ranks, dtype=dtype, **kwargs)
        return flat, ranks, manifest

    def test_save_load_is_bit_exact(self):
        for dtype in ("bf16", "f16"):
            flat = flat_state(10007, 3, dtype)
            # values that survive only a bitwise path: -0, infinities, NaN payloads, subnormals
            flat["master"][:6] = np.array([-0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39], dtype=np.float32)
            flat["exp_avg"][7] = np.float32(np.nan)
            flat["param"][:6] = pyutil.param_bits(flat["master"][:6], dtype)
            ranks = split(flat, 4)
            manifest = shardscope.save_sharded(self.path(dtype), 7, ranks, dtype=dtype,
                                               training_state=TRAINING_STATE, tensors=TENSORS)
            self.assertEqual(manifest["param_dtype"], dtype.upper())
            loaded = shardscope.load(self.path(dtype), 4)
            self.assertEqual([r["rank"] for r in loaded], [0, 1, 2, 3])
            for saved, got in zip(ranks, loaded):
                self.assertEqual(got["offset"], saved["offset"])
                self.assertEqual(got["dtype"], dtype.upper())
                self.assertEqual(got["param"].dtype, np.uint16)
                for key in ("param", "master", "exp_avg", "exp_avg_sq"):
                    self.assertBitsEqual(got[key], saved[key])
            self.assertEqual(shardscope.digests(loaded), shardscope.digests(ranks))
            on_disk = shardscope.manifest(self.path(dtype))
            self.assertEqual(on_disk, manifest)
            self.assertEqual(on_disk["training_state"], TRAINING_STATE)
            self.assertEqual(on_disk["tensors"], TENSORS)

    def test_loaded_arrays_own_the_loaded_memory(self):
        self.save()
        rank = shardscope.load(self.path("ckpt"), 4)[2]
        for key in ("param", "master", "exp_avg", "exp_avg_sq"):
            a = rank[key]
            self.assertTrue(a.flags.c_contiguous and a.flags.writeable)
            self.assertFalse(a.flags.owndata)  # the core's vector, handed over: no copy was made
            self.assertEqual(type(a.base).__name__, "PyCapsule")

    def test_ranks_default_to_position_and_back_to_back_offsets(self):
        flat = flat_state(1000, 5)
        ranks = [{k: v for k, v in r.items() if k not in ("rank", "offset")} for r in split(flat, 3)]
        shardscope.save_sharded(self.path("c"), 1, ranks)
        loaded = shardscope.load(self.path("c"), 3)
        self.assertEqual([r["offset"] for r in loaded], [0, 333, 666])

    def test_torch_tensors_through_numpy(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        master = torch.randn(4096)
        param = master.to(torch.bfloat16)
        ranks = [{"rank": r, "offset": r * 1024, "param": param[r * 1024:(r + 1) * 1024].view(torch.int16).numpy(),
                  "master": master[r * 1024:(r + 1) * 1024].numpy(),
                  "exp_avg": torch.zeros(1024).numpy(), "exp_avg_sq": torch.ones(1024).numpy()} for r in range(4)]
        shardscope.save_sharded(self.path("t"), 3, ranks)
        loaded = shardscope.load(self.path("t"), 4)
        back = torch.cat([torch.from_numpy(r["param"].view(np.int16)) for r in loaded]).view(torch.bfloat16)
        self.assertTrue(torch.equal(back, param))
        self.assertTrue(torch.equal(torch.cat([torch.from_numpy(r["master"]) for r in loaded]), master))
        # a tensor itself is not a buffer: the error says how to pass it
        with self.assertRaises(shardscope.InvalidArgumentError) as caught:
            shardscope.save_sharded(self.path("t2"), 3, [{"param": param.view(torch.int16), "master": master,
                                                          "exp_avg": master, "exp_avg_sq": master}])
        self.assertIn(".numpy()", str(caught.exception))

    def test_dicts_are_the_cli_objects(self):
        flat, ranks, _ = self.save(training_state=TRAINING_STATE, tensors=TENSORS)
        status, cli = shardctl("verify", self.path("ckpt"))
        self.assertEqual(status, 0)
        mine = shardscope.verify(self.path("ckpt"))
        self.assertTrue(mine["ok"])
        self.assertEqual(without(mine, "seconds"), without(cli, "seconds"))
        self.assertEqual(shardscope.verify(self.path("ckpt"), fast=True)["checksum"], "xxh3")
        status, cli = shardctl("load", self.path("ckpt"), "--expect-world-size", 4)
        self.assertEqual(status, 0)
        self.assertEqual(shardscope.digests(shardscope.load(self.path("ckpt"), 4)), cli["digests"])
        self.assertEqual(shardscope.digests(ranks), cli["digests"])
        status, cli = shardctl("plan-reshard", self.path("ckpt"), "--to", 3)
        self.assertEqual(shardscope.plan_reshard(self.path("ckpt"), 3), cli)

    def test_world_size_mismatch_raises_its_kind(self):
        self.save()
        with self.assertRaises(shardscope.CheckpointError) as caught:
            shardscope.load(self.path("ckpt"), 8)
        e = caught.exception
        self.assertIsInstance(e, shardscope.Error)
        self.assertEqual(e.kind, "world_size_mismatch")
        self.assertTrue(e.path.endswith("manifest.json"))
        self.assertIsNone(e.rank)
        self.assertEqual(e.exit_code, 1)
        self.assertIn("world_size 4", str(e))
        report = shardscope.verify(self.path("ckpt"), expected_world_size=8)
        self.assertFalse(report["ok"])
        self.assertEqual([p["kind"] for p in report["problems"]], ["world_size_mismatch"])
        self.assertEqual(len(shardscope.load(self.path("ckpt"), None)), 4)  # None: any world size
        # A world size no checkpoint can have is the caller's mistake, not the checkpoint's.
        for wrong in (0, -1, 131073):
            with self.assertRaises(shardscope.InvalidArgumentError):
                shardscope.load(self.path("ckpt"), wrong)
            with self.assertRaises(shardscope.InvalidArgumentError):
                shardscope.verify(self.path("ckpt"), expected_world_size=wrong)

    def test_verify_with_content_is_ok_only_when_safe(self):
        # Intact files whose values hold a NaN: every byte verifies, the verdict is not safe, and
        # `ok` says what the verdict (and shardctl's exit status) says.
        flat = flat_state(10007, 5)
        flat["exp_avg"][9] = np.float32(np.nan)
        shardscope.save_sharded(self.path("nan"), 7, split(flat, 2))
        self.assertTrue(shardscope.verify(self.path("nan"))["ok"])
        report = shardscope.verify(self.path("nan"), content=True)
        self.assertEqual(report["verdict"]["state"], "diverged")
        self.assertFalse(report["ok"])
        status, cli = shardctl("verify", self.path("nan"), "--content")
        self.assertEqual((status, cli["ok"]), (1, False))

    def test_damage_is_reported_with_rank_and_file(self):
        self.save()
        shard = self.path("ckpt", "rank1.safetensors")
        with open(shard, "r+b") as f:
            f.seek(-3, os.SEEK_END)
            byte = f.read(1)
            f.seek(-3, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
        report = shardscope.verify(self.path("ckpt"))
        self.assertEqual([(p["kind"], p["rank"], p["path"]) for p in report["problems"]],
                         [("hash_mismatch", 1, "rank1.safetensors")])
        self.assertEqual([s["status"] for s in report["shards"]], ["ok", "hash_mismatch", "ok", "ok"])
        with self.assertRaises(shardscope.CheckpointError) as caught:
            shardscope.load(self.path("ckpt"), 4)
        self.assertEqual((caught.exception.kind, caught.exception.rank), ("hash_mismatch", 1))
        os.truncate(shard, 100)
        with self.assertRaises(shardscope.CheckpointError) as caught:
            shardscope.load(self.path("ckpt"), 4)
        self.assertEqual(caught.exception.kind, "partial_write")
        with self.assertRaises(shardscope.StorageError) as caught:
            shardscope.verify(self.path("nowhere"))
        self.assertEqual((caught.exception.kind, caught.exception.exit_code), ("cannot_open", 2))

    def test_non_utf8_path_raises_the_error_not_a_decode_error(self):
        # POSIX file names are bytes: an error naming one must still be a shardscope.Error, its
        # .path giving the original bytes back through os.fsencode.
        directory = os.path.join(os.fsencode(self.tmp), b"run-\xff\xfe")
        with self.assertRaises(shardscope.StorageError) as caught:
            shardscope.verify(os.path.join(directory, b"nowhere"))
        e = caught.exception
        self.assertIsInstance(e, shardscope.Error)
        self.assertEqual(e.kind, "cannot_open")
        self.assertIn(b"\xff\xfe", os.fsencode(e.path))
        self.assertIsInstance(e.message, str)
        self.assertIn("\ufffd", str(e))  # the message is for people: undecodable bytes replaced

        ckpt = os.path.join(directory, b"ckpt")
        shardscope.save_sharded(ckpt, 1, split(flat_state(1000, 2), 2))
        with self.assertRaises(shardscope.CheckpointError) as caught:
            shardscope.load(ckpt, 3)
        self.assertEqual(caught.exception.kind, "world_size_mismatch")
        self.assertEqual(os.fsencode(caught.exception.path), os.path.join(ckpt, b"manifest.json"))

    def test_bad_input_is_refused_before_anything_is_written(self):
        flat = flat_state(1000, 2)
        good = split(flat, 2)

        def refused(ranks, error=shardscope.InvalidArgumentError, kind="invalid_argument", **kwargs):
            target = self.path("bad")
            with self.assertRaises(error) as caught:
                shardscope.save_sharded(target, 1, ranks, **kwargs)
            self.assertEqual(caught.exception.kind, kind)
            self.assertFalse(os.path.exists(target), "something was written")
            return str(caught.exception)

        def with_(which, **changes):
            return [dict(good[0], **changes), good[1]] if which == 0 else [good[0], dict(good[1], **changes)]

        self.assertIn("float32", refused(with_(1, master=good[1]["master"].astype(np.float64))))
        self.assertIn("16-bit", refused(with_(0, param=good[0]["master"])))
        self.assertIn("same length", refused(with_(1, exp_avg=good[1]["exp_avg"][:-1])))  # the core's check
        # a float32 view starting one byte into its buffer: refused, never read misaligned
        misaligned = np.frombuffer(bytearray(4 * 500 + 1), dtype=np.float32, offset=1)
        self.assertFalse(misaligned.flags.aligned)
        self.assertIn("aligned", refused(with_(1, master=misaligned)))
        self.assertIn("contiguous", refused(with_(0, exp_avg_sq=np.repeat(good[0]["exp_avg_sq"], 2)[::2])))
        self.assertIn("1-D", refused(with_(0, master=good[0]["master"].reshape(20, 25))))
        self.assertIn("missing", refused(with_(0, exp_avg=None)))
        self.assertIn("array", refused(with_(0, master=list(good[0]["master"]))))
        refused(with_(1, master=good[1]["master"].byteswap().view(">f4")))
        refused(with_(1, dtype="f16"))  # a rank saying another dtype than the save
        refused(good, dtype="fp8")
        refused([])
        refused(good, training_state={"lr": float("nan")})
        refused(good, training_state={1: "not a str key"})
        refused(good, tensors=[{"name": "w", "offset": 900, "numel": 200}])  # ends past the vector
        # offsets that do not tile: the layout commit would refuse, refused up front
        refused(with_(1, offset=501), shardscope.CheckpointError, "layout_gap")
        refused(with_(1, offset=499), shardscope.CheckpointError, "layout_overlap")
        refused(with_(1, rank=0), shardscope.CheckpointError, "duplicate_rank")
        self.assertTrue(issubclass(shardscope.InvalidArgumentError, ValueError))

    def test_two_phase_save_across_writers(self):
        flat = flat_state(5000, 4)
        ranks = split(flat, 4)
        records = [None] * 4

        def writer(r):  # as if each rank were its own process
            records[r] = shardscope.write_rank_shard(self.path("c"), ranks[r], 4)

        threads = [threading.Thread(target=writer, args=(r,)) for r in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(records[2]), ["bytes", "health", "param_shard_numel", "param_shard_offset", "path",
                                              "rank", "sha256", "xxh3"])
        # Each writer counts its own rank's health; the commit publishes it in the manifest.
        self.assertEqual(records[2]["health"], {"nonfinite": {"param": 0, "master": 0, "exp_avg": 0, "exp_avg_sq": 0},
                                                "negative_exp_avg_sq": 0, "param_master_mismatch": 0})
        self.assertFalse(os.path.exists(self.path("c", "manifest.json")))
        meta = {"world_size": 4, "step": 9, "dtype": "bf16", "training_state": TRAINING_STATE}
        with self.assertRaises(shardscope.CheckpointError) as caught:  # one record short
            shardscope.commit(self.path("c"), records[:3], meta)
        self.assertEqual(caught.exception.kind, "shard_count_mismatch")
        self.assertFalse(os.path.exists(self.path("c", "manifest.json")))
        with self.assertRaises(shardscope.InvalidArgumentError):
            shardscope.commit(self.path("c"), records, dict(meta, wordl_size=4))  # a typo is not ignored
        with self.assertRaises(shardscope.InvalidArgumentError) as caught:  # two names for one field
            shardscope.commit(self.path("c"), records, dict(meta, param_dtype="BF16"))
        self.assertIn("both", str(caught.exception))
        manifest = shardscope.commit(self.path("c"), records[::-1], meta)
        self.assertEqual([s["rank"] for s in manifest["shards"]], [0, 1, 2, 3])
        self.assertEqual(manifest["param_numel_total"], 5000)
        self.assertEqual(manifest["shards"][2]["health"], records[2]["health"])
        self.assertTrue(shardscope.verify(self.path("c"))["ok"])
        self.assertEqual(shardscope.digests(shardscope.load(self.path("c"), 4)), shardscope.digests(ranks))
        with self.assertRaises(shardscope.StorageError) as caught:
            shardscope.commit(self.path("c"), records, meta)
        self.assertEqual(caught.exception.kind, "already_exists")
        with self.assertRaises(shardscope.StorageError):
            shardscope.write_rank_shard(self.path("c"), ranks[0], 4)
        with self.assertRaises(shardscope.InvalidArgumentError):  # no rank/offset to default to here
            shardscope.write_rank_shard(self.path("d"), without(ranks[0], "offset"), 4)

    def test_reshard_keeps_the_global_state(self):
        flat, ranks, _ = self.save(training_state=TRAINING_STATE)
        result = shardscope.reshard(self.path("ckpt"), 3, self.path("ckpt3"))
        self.assertEqual(sorted(result), ["bytes", "ok", "path", "plan", "seconds", "step", "world_size"])
        self.assertEqual((result["world_size"], result["step"]), (3, 1200))
        self.assertEqual(result["plan"], shardscope.plan_reshard(self.path("ckpt"), 3))
        loaded = shardscope.load(self.path("ckpt3"), 3)
        self.assertEqual(shardscope.digests(loaded), shardscope.digests(ranks))
        self.assertBitsEqual(np.concatenate([r["master"] for r in loaded]), flat["master"])
        self.assertEqual(shardscope.manifest(self.path("ckpt3"))["training_state"], TRAINING_STATE)
        with self.assertRaises(shardscope.StorageError):  # a non-empty destination
            shardscope.reshard(self.path("ckpt"), 2, self.path("ckpt3"))

    def test_gil_is_released_while_the_core_works(self):
        flat = flat_state(6_000_000, 6)  # 84 MB of state: long enough to watch
        ranks = split(flat, 4)
        with pyutil.Ticker() as ticker:
            for name, call in [("save_sharded", lambda: shardscope.save_sharded(self.path("big"), 1, ranks)),
                               ("verify", lambda: shardscope.verify(self.path("big"))),
                               ("load", lambda: shardscope.load(self.path("big"), 4))]:
                start = time.perf_counter()
                call()
                end = time.perf_counter()
                # a held GIL would let the ticker run only at the edges of the call
                self.assertGreater(ticker.ticks_between(start + 0.002, end - 0.002), 3,
                                   f"{name} took {end - start:.3f} s without letting Python run")


if __name__ == "__main__":
    pyutil.main()
