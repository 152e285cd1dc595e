"""stats and diff from Python: every figure against numpy's float64, the health checks, a planted
change found where it was planted, and the same objects as `shardctl stats/diff --json`."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np

import pyutil
from pyutil import TempDirTest, flat_state, shardctl, split, without

import shardscope

# Three model tensors in a flat vector of 4000 (the last 7 elements belong to none of them).
TENSORS = [{"name": "embed.weight", "offset": 0, "numel": 2000, "shape": [40, 50]},
           {"name": "blocks.0.bias", "offset": 2000, "numel": 333, "shape": [333]},
           {"name": "head.weight", "offset": 2333, "numel": 1660, "shape": [166, 10]}]
NUMEL = 4000


def decoded_param(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Stats(TempDirTest):
    def setUp(self):
        super().setUp()
        # A large mean against a small spread: where a one-pass variance would lose digits.
        self.flat = flat_state(NUMEL, 11, mean=1e3, scale=1e-2)
        self.flat["master"][2000:2010] = 0.0  # zeros in blocks.0.bias
        self.flat["param"] = pyutil.bf16_bits(self.flat["master"])
        shardscope.save_sharded(self.path("c"), 5, split(self.flat, 3), tensors=TENSORS)

    def test_figures_match_numpy_float64(self):
        report = shardscope.stats(self.path("c"))
        self.assertTrue(report["ok"], report["problems"])
        self.assertEqual(report["format"], "shardscope")
        by_key = {(t["name"], t["state"]): t for t in report["tensors"]}
        self.assertEqual(len(by_key), 3 * 4)
        for info in TENSORS:
            lo, hi = info["offset"], info["offset"] + info["numel"]
            for state in ("param", "master", "exp_avg", "exp_avg_sq"):
                values = self.flat[state][lo:hi]
                x = (decoded_param(values) if state == "param" else values).astype(np.float64)
                t = by_key[(info["name"], state)]
                self.assertEqual(t["shape"], info["shape"])
                self.assertEqual(t["dtype"], "BF16" if state == "param" else "F32")
                self.assertEqual(t["numel"], info["numel"])
                self.assertEqual(t["zeros"], int(np.count_nonzero(x == 0)))
                self.assertEqual((t["nan"], t["posinf"], t["neginf"]), (0, 0, 0))
                self.assertEqual(t["min"], x.min())
                self.assertEqual(t["max"], x.max())
                self.assertEqual(t["abs_max"], np.abs(x).max())
                self.assertAlmostEqual(t["mean"], x.mean(), delta=1e-12 * max(1.0, abs(x.mean())))
                self.assertAlmostEqual(t["std"], x.std(), delta=1e-9 * max(x.std(), 1e-300))
                self.assertAlmostEqual(t["l2"], np.sqrt(np.sum(x * x)), delta=1e-12 * np.sqrt(np.sum(x * x)))
                nonzero = np.abs(x[x != 0])
                bins = np.clip(np.floor(np.log2(nonzero)).astype(int) + 56, 0, 63)
                self.assertEqual(t["histogram"]["counts"], np.bincount(bins, minlength=64).tolist())
                # one part per rank slice the tensor overlaps, in order, covering it
                self.assertEqual(sum(p["numel"] for p in t["parts"]), info["numel"])
                for part in t["parts"]:
                    first = part["first_element"]
                    chunk = x[first:first + part["numel"]]
                    self.assertEqual((part["min"], part["max"]), (chunk.min(), chunk.max()))

    def test_planted_nan_fails_the_health_check_and_names_the_rank(self):
        self.flat["master"][3500] = np.nan  # head.weight, in rank 2's slice [2666, 4000)
        self.flat["param"] = pyutil.bf16_bits(self.flat["master"])
        shardscope.save_sharded(self.path("nan"), 6, split(self.flat, 3), tensors=TENSORS)
        report = shardscope.stats(self.path("nan"))
        self.assertFalse(report["ok"])
        nonfinite = [p for p in report["problems"] if p["kind"] == "nonfinite_values"]
        self.assertEqual(len(nonfinite), 2)  # the master and its rounded param
        self.assertTrue(all("head.weight" in p["message"] for p in nonfinite), nonfinite)
        self.assertEqual({p["rank"] for p in nonfinite}, {2})
        master = next(t for t in report["tensors"] if (t["name"], t["state"]) == ("head.weight", "master"))
        self.assertEqual(master["nan"], 1)
        # tensor= selects like --tensor GLOB
        only = shardscope.stats(self.path("nan"), tensor="embed.*")
        self.assertEqual({t["name"] for t in only["tensors"]}, {"embed.weight"})
        self.assertTrue(only["ok"])

    def test_the_stats_object_is_the_cli_object(self):
        status, cli = shardctl("stats", self.path("c"))
        self.assertEqual(status, 0)
        self.assertEqual(without(shardscope.stats(self.path("c")), "seconds"), without(cli, "seconds"))
        with self.assertRaises(shardscope.StorageError) as caught:
            shardscope.stats(self.path("missing"))
        self.assertEqual(caught.exception.kind, "cannot_open")

    def test_a_checkpoint_on_a_web_server_is_read_in_place(self):
        # The same folder served over HTTP with range requests: the same figures, the same bytes.
        server = subprocess.Popen(
            [sys.executable, os.path.join(os.environ["SHARDSCOPE_SOURCE_DIR"], "tests/core/storage/range_http_server.py"),
             self.path("")], stdout=subprocess.PIPE, text=True)
        try:
            url = "http://127.0.0.1:%s/c" % server.stdout.readline().strip()
            report = shardscope.verify(url)
            self.assertTrue(report["ok"], report["problems"])
            self.assertEqual(len(report["shards"]), 3)
            local = shardscope.stats(self.path("c"))
            remote = shardscope.stats(url)
            self.assertEqual(without(remote, "seconds", "path"), without(local, "seconds", "path"))
            self.assertEqual(remote["path"], url)
            self.assertTrue(shardscope.diff(self.path("c"), url)["ok"])
            with self.assertRaises(shardscope.StorageError) as caught:
                shardscope.stats(url + "-missing")
            self.assertEqual(caught.exception.kind, "cannot_open")
        finally:
            server.terminate()
            server.wait()
            server.stdout.close()

    def test_a_self_signed_server_is_read_only_when_told(self):
        # TLS certificates are checked unless verify_tls=False says otherwise.
        cert, key = self.path("cert.pem"), self.path("key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                        "-days", "1", "-keyout", key, "-out", cert], check=True, capture_output=True)
        server = subprocess.Popen(
            [sys.executable, os.path.join(os.environ["SHARDSCOPE_SOURCE_DIR"], "tests/core/storage/range_http_server.py"),
             self.path(""), "--cert", cert, "--key", key], stdout=subprocess.PIPE, text=True)
        try:
            url = "https://127.0.0.1:%s/c" % server.stdout.readline().strip()
            with self.assertRaises(shardscope.StorageError) as caught:
                shardscope.verify(url)
            self.assertEqual(caught.exception.kind, "remote_error")
            self.assertIn("certificate", str(caught.exception))
            # .path is the URL the refused request was for, beneath the one asked.
            self.assertTrue(caught.exception.path.startswith(url + "/"), caught.exception.path)
            report = shardscope.verify(url, verify_tls=False)
            self.assertTrue(report["ok"], report["problems"])
            self.assertEqual(len(report["shards"]), 3)
            self.assertEqual(len(shardscope.stats(url, verify_tls=False)["tensors"]),
                             len(shardscope.stats(self.path("c"))["tensors"]))
            self.assertTrue(shardscope.diff(self.path("c"), url, verify_tls=False)["ok"])
        finally:
            server.terminate()
            server.wait()
            server.stdout.close()


class Interrupt(TempDirTest):
    def test_ctrl_c_stops_a_call_waiting_on_a_server_that_does_not_answer(self):
        # A server that takes the connection and never answers: each request would wait out its
        # stall timeout, retried. Ctrl+C (SIGINT, from another thread here) raises KeyboardInterrupt
        # at once, from verify, stats and diff alike, and the next call runs as before.
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        held = []

        def hold():
            while True:
                try:
                    held.append(server.accept()[0])
                except OSError:
                    return

        threading.Thread(target=hold, daemon=True).start()
        url = "http://127.0.0.1:%d/ckpt" % server.getsockname()[1]
        try:
            for call in (lambda: shardscope.verify(url), lambda: shardscope.stats(url),
                         lambda: shardscope.diff(url, url)):
                timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
                timer.start()
                started = time.monotonic()
                with self.assertRaises(KeyboardInterrupt):
                    call()
                timer.join()
                self.assertLess(time.monotonic() - started, 10)
            # SIGINT is Python's again: one arriving now, between calls, raises KeyboardInterrupt
            # in plain Python code (a handler the module left behind would swallow it).
            with self.assertRaises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    time.sleep(0.01)
            shardscope.save_sharded(self.path("after"), 1, split(flat_state(100, 1), 1))
            self.assertTrue(shardscope.verify(self.path("after"))["ok"])
        finally:
            server.close()
            for connection in held:
                connection.close()


class Diff(TempDirTest):
    def test_a_planted_change_is_found_where_it_was_planted(self):
        flat = flat_state(NUMEL, 12)
        shardscope.save_sharded(self.path("a"), 1, split(flat, 4), tensors=TENSORS)
        changed = {k: v.copy() for k, v in flat.items()}
        index = 2333 + 1234  # element 1234 of head.weight
        changed["master"][index] += np.float32(0.5)
        shardscope.save_sharded(self.path("b"), 2, split(changed, 3), tensors=TENSORS)  # another world size

        report = shardscope.diff(self.path("a"), self.path("b"))
        self.assertFalse(report["ok"])
        self.assertTrue(report["bitwise"])
        differing = [t for t in report["tensors"] if t["status"] != "identical"]
        self.assertEqual([(t["name"], t["state"]) for t in differing], [("head.weight", "master")])
        t = differing[0]
        self.assertEqual((t["changed_elements"], t["first_changed_element"]), (1, 1234))
        expected = abs(np.float64(changed["master"][index]) - np.float64(flat["master"][index]))
        self.assertEqual(t["max_abs_diff"], expected)
        self.assertEqual(report["summary"]["changed"], 1)
        self.assertEqual(report["summary"]["identical"], 11)
        self.assertEqual(report["summary"]["largest_rel_l2"]["name"], "head.weight")

        status, cli = shardctl("diff", self.path("a"), self.path("b"))
        self.assertEqual(status, 1)
        self.assertEqual(without(report, "seconds"), without(cli, "seconds"))
        # within a tolerance the change is not one; and the same state at two world sizes is identical
        self.assertTrue(shardscope.diff(self.path("a"), self.path("b"), atol=0.6)["ok"])
        shardscope.save_sharded(self.path("a5"), 1, split(flat, 5), tensors=TENSORS)
        self.assertTrue(shardscope.diff(self.path("a"), self.path("a5"))["ok"])
        with self.assertRaises(shardscope.InvalidArgumentError):
            shardscope.diff(self.path("a"), self.path("b"), rtol=-1)


def e4m3(codes):
    """float64 values of FP8 E4M3 codes (OCP FP8 spec: bias 7, no infinities, S.1111.111 is NaN)."""
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent - 7.0)
    subnormal = (mantissa / 8.0) * 2.0 ** -6
    values = sign * np.where(exponent == 0, subnormal, normal)
    return np.where((codes & 0x7F) == 0x7F, np.nan, values)


def write_fp8_safetensors(path, codes, scales):
    """A DeepSeek-V3-style FP8 weight "q.weight" and its F32 block scales "q.weight_scale_inv"."""
    header = {"q.weight": {"dtype": "F8_E4M3", "shape": list(codes.shape), "data_offsets": [0, codes.size]},
              "q.weight_scale_inv": {"dtype": "F32", "shape": list(scales.shape),
                                     "data_offsets": [codes.size, codes.size + 4 * scales.size]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + codes.tobytes() + scales.astype("<f4").tobytes())


class Fp8(TempDirTest):
    """raw_fp8 is the CLI's --raw-fp8: FP8 weights read as stored instead of times their block scales."""

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(7)
        codes = rng.integers(0, 256, size=(200, 130), dtype=np.uint8)
        self.codes = np.where((codes & 0x7F) == 0x7F, codes ^ 1, codes).astype(np.uint8)  # no NaN
        self.scales = np.array([[0.5, 2.0], [0.125, 8.0]], dtype=np.float32)  # [ceil(200/128), ceil(130/128)]
        write_fp8_safetensors(self.path("a.safetensors"), self.codes, self.scales)
        write_fp8_safetensors(self.path("b.safetensors"), self.codes, self.scales * 2)

    def weight(self, report):
        return next(t for t in report["tensors"] if t["name"] == "q.weight")

    def test_stats_dequantizes_unless_raw_fp8(self):
        raw = e4m3(self.codes)
        block = np.repeat(np.repeat(self.scales.astype(np.float64), 128, axis=0), 128, axis=1)[:200, :130]
        for raw_fp8, values in ((False, raw * block), (True, raw)):
            report = shardscope.stats(self.path("a.safetensors"), raw_fp8=raw_fp8)
            self.assertTrue(report["ok"], report["problems"])
            t = self.weight(report)
            self.assertEqual(t["dtype"], "F8_E4M3")
            self.assertEqual("dequantized_by" in t, not raw_fp8)
            if not raw_fp8:
                self.assertEqual(t["dequantized_by"], "q.weight_scale_inv")
            self.assertEqual((t["min"], t["max"]), (values.min(), values.max()))
            self.assertAlmostEqual(t["l2"], np.sqrt(np.sum(values * values)), delta=1e-12 * t["l2"])
            flags = ("--raw-fp8",) if raw_fp8 else ()
            status, cli = shardctl("stats", self.path("a.safetensors"), *flags)
            self.assertEqual(status, 0)
            self.assertEqual(without(report, "seconds"), without(cli, "seconds"))
        self.assertEqual(shardscope.stats(self.path("a.safetensors"))["tensors"],
                         shardscope.stats(self.path("a.safetensors"), raw_fp8=False)["tensors"])

    def test_diff_compares_dequantized_values_unless_raw_fp8(self):
        # Same stored codes, every scale doubled: the values differ, the stored bytes do not.
        a, b = self.path("a.safetensors"), self.path("b.safetensors")
        changed = shardscope.diff(a, b)
        self.assertEqual(self.weight(changed)["status"], "changed")
        self.assertEqual(self.weight(changed)["changed_elements"], int(np.count_nonzero(e4m3(self.codes))))
        stored = shardscope.diff(a, b, raw_fp8=True)
        self.assertEqual(self.weight(stored)["status"], "identical")
        for raw_fp8, report in ((False, changed), (True, stored)):
            status, cli = shardctl("diff", a, b, *(("--raw-fp8",) if raw_fp8 else ()))
            self.assertEqual(status, 1)  # the scale tensors differ either way
            self.assertEqual(without(report, "seconds"), without(cli, "seconds"))
        with self.assertRaises(TypeError):
            shardscope.stats(a, True)  # keyword only


if __name__ == "__main__":
    pyutil.main()
