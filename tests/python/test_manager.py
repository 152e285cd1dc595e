"""CheckpointManager from Python: latest, keep-last-K, resume (also at another world size and from
the mirror), save_async returning while the write proceeds, background errors raised later."""

import gc
import os
import time
import warnings

import numpy as np

import pyutil
from pyutil import TempDirTest, flat_state, split

import shardscope

STATE = {"optimizer": {"step": 0}, "dataloader": {"epoch": 1, "offset": 64}}


def steps_on_disk(root):
    return sorted(n for n in os.listdir(root) if n.startswith("step-"))


class Manager(TempDirTest):
    def test_a_url_is_never_taken_for_a_local_path(self):
        # s3://ckpt/run as a path would be the folder "s3:/ckpt/run" in the working directory.
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            with self.assertRaises(shardscope.InvalidArgumentError) as caught:
                shardscope.CheckpointManager(os.path.join(self.tmp, "root"), keep=2, mirror="gs://ckpt/run")
            self.assertIn('unknown URL scheme "gs"', str(caught.exception))
            # A mistyped URL would be the folder "s3:" here.
            with self.assertRaises(shardscope.InvalidArgumentError) as caught:
                shardscope.CheckpointManager("root", keep=2, mirror="s3:/ckpt/run")
            self.assertIn("s3:/ckpt/run: not a URL", str(caught.exception))
            with self.assertRaises(shardscope.InvalidArgumentError) as caught:
                shardscope.load("s3://ckpt/run", None)
            self.assertIn("s3://ckpt/run: a local path is needed here", str(caught.exception))
            with self.assertRaises(shardscope.InvalidArgumentError) as caught:
                shardscope.load("https://user:hunter2@host/run", None)
            self.assertNotIn("hunter2", str(caught.exception))
            self.assertEqual(os.listdir(self.tmp), [])
        finally:
            os.chdir(cwd)

    def test_latest_rotation_and_resume(self):
        root = self.path("run")
        manager = shardscope.CheckpointManager(root, keep=2)
        self.assertIsNone(manager.latest())
        self.assertIsNone(manager.resume())  # nothing saved yet: a fresh start
        flats = {}
        for step in (10, 20, 30, 40):
            flats[step] = flat_state(3001, step)
            manifest = manager.save(step, split(flats[step], 4), training_state=dict(STATE, step=step))
            self.assertEqual(manifest["step"], step)
            self.assertEqual(manager.latest(), f"step-{step:08d}")
        self.assertEqual(steps_on_disk(root), ["step-00000030", "step-00000040"])
        self.assertEqual(manager.options["keep"], 2)

        resumed = manager.resume()
        self.assertEqual((resumed["step"], resumed["saved_world_size"], resumed["from_mirror"]), (40, 4, False))
        self.assertEqual(resumed["training_state"], dict(STATE, step=40))
        self.assertTrue(resumed["path"].endswith("step-00000040"))
        for saved, got in zip(split(flats[40], 4), resumed["ranks"]):
            for key in ("param", "master", "exp_avg", "exp_avg_sq"):
                self.assertBitsEqual(got[key], saved[key])
        # a job restarting on 3 ranks gets the even split of the same global state
        three = shardscope.CheckpointManager(root, keep=2).resume(world_size=3)
        self.assertEqual([r["offset"] for r in three["ranks"]], [0, 1000, 2000])
        self.assertEqual(three["saved_world_size"], 4)
        self.assertBitsEqual(np.concatenate([r["master"] for r in three["ranks"]]), flats[40]["master"])

    def test_a_second_writer_of_the_root_is_a_storage_error(self):
        root = self.path("run")
        first = shardscope.CheckpointManager(root, keep=2)
        first.save(10, split(flat_state(301, 10), 2), training_state=dict(STATE, step=10))
        second = shardscope.CheckpointManager(root, keep=2)
        before = sorted(os.listdir(root))
        with self.assertRaises(shardscope.StorageError) as caught:
            second.save(20, split(flat_state(301, 20), 2), training_state=dict(STATE, step=20))
        self.assertEqual((caught.exception.kind, caught.exception.exit_code), ("root_locked", 2))
        self.assertIn(f"pid {os.getpid()} on host ", caught.exception.message)  # names the holder
        self.assertEqual(sorted(os.listdir(root)), before)  # the refused save wrote nothing
        self.assertEqual(second.resume()["step"], 10)  # reading the root needs no lock

    def test_a_diverged_run_resumes_from_its_last_healthy_step(self):
        root = self.path("run")
        manager = shardscope.CheckpointManager(root, keep=2)
        flats = {}
        for step in (10, 20, 30, 40):
            flats[step] = flat_state(3001, step)
            if step >= 30:  # the run diverged: Adam's second moment holds NaN
                flats[step]["exp_avg_sq"][7] = np.nan
            manifest = manager.save(step, split(flats[step], 4), training_state=dict(STATE, step=step))
            health = [s["health"] for s in manifest["shards"]]
            self.assertEqual(sum(h["nonfinite"]["exp_avg_sq"] for h in health), 1 if step >= 30 else 0)
        # keep=2 alone would keep 30 and 40; the newest healthy step stays too
        self.assertEqual(steps_on_disk(root), ["step-00000020", "step-00000030", "step-00000040"])
        resumed = manager.resume()
        self.assertEqual(resumed["step"], 20)
        self.assertEqual([s.split(":")[0] for s in resumed["skipped_unhealthy"]], ["step-00000040", "step-00000030"])
        self.assertIn("1 non-finite exp_avg_sq values", resumed["skipped_unhealthy"][0])
        self.assertBitsEqual(np.concatenate([r["master"] for r in resumed["ranks"]]), flats[20]["master"])
        self.assertEqual(manager.resume(allow_unhealthy=True)["step"], 40)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ranks = shardscope.load(root, 4)
        self.assertBitsEqual(np.concatenate([r["master"] for r in ranks]), flats[20]["master"])
        self.assertEqual(len(caught), 2)
        self.assertIn("passed over step-00000040", str(caught[0].message))

    def test_save_async_returns_while_the_write_proceeds(self):
        root = self.path("run")
        flat = flat_state(8_000_000, 1)  # 112 MB of state, written with fsync
        original = {k: v.copy() for k, v in flat.items()}
        with shardscope.CheckpointManager(root, keep=3) as manager:
            start = time.perf_counter()
            manager.save_async(5, split(flat, 4), training_state=STATE)
            returned = time.perf_counter() - start
            committed_before_return = os.path.exists(os.path.join(root, "step-00000005", "manifest.json"))
            # the snapshot was taken: the loop may change its state at once
            for v in flat.values():
                v[:] = 0
            with pyutil.Ticker() as ticker:
                start = time.perf_counter()
                manager.wait()
                end = time.perf_counter()
            self.assertGreater(ticker.ticks_between(start + 0.002, end - 0.002), 3, "wait() held the GIL")
        self.assertFalse(committed_before_return, f"save_async took {returned:.3f} s and returned after the commit")
        self.assertEqual(manager.latest(), "step-00000005")
        loaded = shardscope.load(os.path.join(root, "step-00000005"), 4)
        self.assertBitsEqual(np.concatenate([r["master"] for r in loaded]), original["master"])
        self.assertEqual(shardscope.digests(loaded), shardscope.digests(split(original, 4)))

    def test_gil_is_released_during_a_synchronous_save(self):
        manager = shardscope.CheckpointManager(self.path("run"))
        ranks = split(flat_state(5_000_000, 2), 4)
        with pyutil.Ticker() as ticker:
            start = time.perf_counter()
            manager.save(1, ranks)
            end = time.perf_counter()
        self.assertGreater(ticker.ticks_between(start + 0.002, end - 0.002), 3)

    def test_errors_bad_input_now_a_failed_background_write_by_the_next_call(self):
        root = self.path("run")
        manager = shardscope.CheckpointManager(root)
        ranks = split(flat_state(1000, 3), 2)
        with self.assertRaises(shardscope.CheckpointError) as caught:  # refused up front, not later
            manager.save_async(1, [ranks[0], dict(ranks[1], offset=600)])
        self.assertEqual(caught.exception.kind, "layout_gap")
        with self.assertRaises(shardscope.InvalidArgumentError):
            manager.save_async(1, [ranks[0], dict(ranks[1], master=ranks[1]["master"].astype(np.float64))])
        # a file where the step directory must go: the background write fails with io_error
        open(os.path.join(root, "step-00000007"), "w").close()
        manager.save_async(7, ranks)
        with self.assertRaises(shardscope.StorageError) as caught:
            manager.wait()
        self.assertEqual(caught.exception.kind, "io_error")
        self.assertIsNone(manager.latest())
        manager.save(8, ranks)  # the error was reported once; the manager goes on
        self.assertEqual(manager.latest(), "step-00000008")

    def test_bad_input_leaves_the_root_untouched(self):
        # A crash leftover and a committed-but-unpublished step: a save would clean up the first
        # and move the second aside, so a refused save must refuse before either.
        root = self.path("run")
        ranks = split(flat_state(1000, 3), 2)
        shardscope.save_sharded(os.path.join(root, "step-00000005"), 5, ranks)
        os.makedirs(os.path.join(root, "step-00000003"))
        open(os.path.join(root, "step-00000003", "rank0.safetensors.tmp"), "w").close()
        before = sorted(os.listdir(root))
        manager = shardscope.CheckpointManager(root)
        for save in (manager.save, manager.save_async):
            with self.assertRaises(shardscope.CheckpointError) as caught:
                save(5, [ranks[0], dict(ranks[1], offset=600)])
            self.assertEqual(caught.exception.kind, "layout_gap")
            self.assertEqual(sorted(os.listdir(root)), before)
        with self.assertRaises(shardscope.InvalidArgumentError):
            manager.resume(world_size=0)
        with self.assertRaises(shardscope.InvalidArgumentError):
            manager.resume(world_size=-2)

    def test_a_mirror_overlapping_the_root_or_an_empty_path_is_refused(self):
        # The mirror's retention deletes what it does not hold: pointed at the root, it would
        # delete the root's steps. Nothing is created before the refusal.
        root = self.path("run")
        for mirror in (root, os.path.join(root, "mirror"), self.path(""), ""):
            with self.assertRaises(shardscope.InvalidArgumentError):
                shardscope.CheckpointManager(root, mirror=mirror)
        with self.assertRaises(shardscope.InvalidArgumentError):
            shardscope.CheckpointManager("")
        self.assertFalse(os.path.exists(root))

    def test_dropped_manager_warns_of_an_unreported_background_error(self):
        root = self.path("run")
        manager = shardscope.CheckpointManager(root)
        os.makedirs(root, exist_ok=True)
        open(os.path.join(root, "step-00000007"), "w").close()  # the background write will fail
        manager.save_async(7, split(flat_state(1000, 3), 2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del manager
            gc.collect()
        self.assertEqual([w.category for w in caught], [ResourceWarning])
        self.assertIn("wait()", str(caught[0].message))
        self.assertIn("step-00000007", str(caught[0].message))
        with warnings.catch_warnings(record=True) as caught:  # waited for: nothing to say
            warnings.simplefilter("always")
            manager = shardscope.CheckpointManager(self.path("other"))
            manager.save_async(1, split(flat_state(1000, 3), 2))
            manager.wait()
            del manager
            gc.collect()
        self.assertEqual(caught, [])

    def test_resume_falls_back_to_the_mirror(self):
        root, mirror = self.path("run"), self.path("mirror")
        flat = flat_state(2000, 9)
        with shardscope.CheckpointManager(root, 3, mirror) as manager:
            manager.save(1, split(flat, 2))
            manager.save_async(2, split(flat, 2), training_state=STATE)
        self.assertTrue(os.path.exists(os.path.join(mirror, "step-00000002", "upload.json")))
        with open(os.path.join(root, "step-00000002", "rank1.safetensors"), "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(b"\x01")
        resumed = shardscope.CheckpointManager(root, 3, mirror).resume()
        self.assertTrue(resumed["from_mirror"])
        self.assertEqual(resumed["step"], 2)
        self.assertEqual(shardscope.digests(resumed["ranks"]), shardscope.digests(split(flat, 2)))
        with self.assertRaises(shardscope.CheckpointError) as caught:  # no mirror: the local error
            shardscope.CheckpointManager(root, 3).resume()
        self.assertEqual((caught.exception.kind, caught.exception.rank), ("hash_mismatch", 1))


if __name__ == "__main__":
    pyutil.main()
