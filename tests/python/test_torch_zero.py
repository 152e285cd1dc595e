"""examples/torch_zero_train.py (ZeRO-1 over torch.distributed/gloo, checkpoints through
shardscope.CheckpointManager), killed with SIGKILL at random instants (fixed seed) and resumed on
the same and on another number of processes, ends bit-identical to an uninterrupted run: the same
loss at every step, the same final loss and the same four digests of the final state."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pyutil
from pyutil import shardctl

try:
    import torch  # noqa: F401  (only to know whether the example can run)
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(pyutil.SKIP)

import shardscope

EXAMPLE = os.path.join(os.environ.get("SHARDSCOPE_SOURCE_DIR", "."), "examples", "torch_zero_train.py")
STEPS, SAVE_EVERY = 60, 6


class Run:
    """One launch of the example in its own session, so a SIGKILL takes every rank at once."""

    def __init__(self, root, nproc, tmp, resume=False, sync=False):
        argv = [sys.executable, EXAMPLE, "--root", root, "--steps", str(STEPS), "--save-every", str(SAVE_EVERY),
                "--nproc", str(nproc)] + (["--resume"] if resume else []) + (["--sync"] if sync else [])
        # TMPDIR: the rendezvous file a killed run leaves behind goes with the test's directory
        env = dict(os.environ, TMPDIR=tmp)
        self.lines = []
        self.started = time.monotonic()
        self.first_step = None
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            if self.first_step is None and line.startswith("step "):
                self.first_step = time.monotonic()
            self.lines.append(line.rstrip("\n"))

    def wait_until(self, condition, timeout=60):
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the run ended or stalled before it was due to be killed:\n" +
                                     "\n".join(self.lines[-20:]))
            time.sleep(0.005)

    def kill_after(self, seconds):
        time.sleep(seconds)
        os.killpg(self.process.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout=120):
        status = self.process.wait(timeout=timeout)
        self._reader.join()
        self.process.stdout.close()
        return status

    def result(self):
        finals = [line for line in self.lines if line.startswith("{")]
        if not finals:
            raise AssertionError("no result line:\n" + "\n".join(self.lines[-30:]))
        return json.loads(finals[-1])

    def losses(self):
        """{step: the loss it printed}, to compare with the reference step by step."""
        out = {}
        for line in self.lines:
            if line.startswith("step "):
                _, step, _, loss = line.split()
                out[int(step)] = loss
        return out


class TorchZero(pyutil.TempDirTest):
    def test_killed_and_resumed_runs_end_bit_identical(self):
        timings = {}
        # The uninterrupted reference, on 2 processes: the result does not depend on the count.
        start = time.monotonic()
        reference = Run(self.path("reference"), 2, self.tmp)
        self.assertEqual(reference.finish(), 0, "\n".join(reference.lines[-30:]))
        timings["reference (2 processes)"] = time.monotonic() - start
        expected = reference.result()
        expected_losses = reference.losses()
        self.assertEqual(sorted(expected_losses), list(range(1, STEPS + 1)))
        training = time.monotonic() - reference.first_step

        rng = random.Random(18)
        root = self.path("run")
        seen = {}
        # 1. 4 processes, killed at a random instant after the first checkpoint was published
        start = time.monotonic()
        first = Run(root, 4, self.tmp)
        first.wait_until(lambda: os.path.exists(os.path.join(root, "latest")))
        self.assertEqual(first.kill_after(rng.uniform(0.0, 0.35 * training)), -signal.SIGKILL)
        timings["killed run (4 processes)"] = time.monotonic() - start
        seen.update(first.losses())
        timings[f"  (killed after step {max(first.losses())})"] = 0.0
        # 2. resumed on the same number, saving synchronously this time, killed again
        start = time.monotonic()
        second = Run(root, 4, self.tmp, resume=True, sync=True)
        second.wait_until(lambda: second.first_step is not None)
        self.assertEqual(second.kill_after(rng.uniform(0.0, 0.35 * training)), -signal.SIGKILL)
        timings["resumed and killed (4 processes)"] = time.monotonic() - start
        resumed_at = [line for line in second.lines if line.startswith("resuming at step")]
        self.assertEqual(len(resumed_at), 1, "\n".join(second.lines[:5]))
        timings[f"  ({resumed_at[0]}; killed after step {max(second.losses(), default=None)})"] = 0.0
        seen.update(second.losses())
        # 3. resumed on 3 processes, to the end
        start = time.monotonic()
        last = Run(root, 3, self.tmp, resume=True)
        self.assertEqual(last.finish(), 0, "\n".join(last.lines[-30:]))
        timings["resumed to the end (3 processes)"] = time.monotonic() - start
        seen.update(last.losses())
        got = last.result()

        self.assertEqual(got["world_size"], 3)
        self.assertEqual(got["resumed_from"]["world_size"], 4)  # really a world-size change
        self.assertEqual(got["steps"], STEPS)
        self.assertEqual(got["final_loss_hex"], expected["final_loss_hex"])
        self.assertEqual(got["digests"], expected["digests"])
        for step, loss in seen.items():  # every step any run printed, killed or not
            self.assertEqual(loss, expected_losses[step], f"step {step}")

        # the checkpoints are ordinary ShardScope checkpoints
        self.assertTrue(shardscope.verify(root)["ok"])
        self.assertTrue(shardscope.diff(root, self.path("reference"))["ok"])
        self.assertEqual(shardctl("verify", root)[0], 0)
        status, stats = shardctl("stats", root)
        self.assertEqual(status, 0, stats["problems"] if stats else None)
        self.assertIn("blocks.0.attn.in_proj_weight", {t["name"] for t in stats["tensors"]})
        app = os.environ.get("SHARDSCOPE_APP")
        if app:  # and the app opens them: the report it exports headless (verify and tensor scan)
            report = self.path("app-report.md")
            done = subprocess.run([app, root, "--export", report], capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(report, encoding="utf-8") as text:
                exported = text.read()
            self.assertIn("Safe to resume: all 3 shards verified", exported)
            self.assertIn("tensors are finite", exported)
        training_state = shardscope.manifest(root)["training_state"]
        self.assertEqual(sorted(training_state), ["dataloader", "lr_scheduler", "optimizer", "rng", "trainer"])
        print("\n" + "\n".join(f"  {what}: {seconds:.1f} s" if seconds else what for what, seconds in timings.items()),
              file=sys.stderr)


if __name__ == "__main__":
    pyutil.main()
