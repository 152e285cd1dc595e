"""The Python module against this test run's real S3 server (Ceph's RADOS Gateway, started by
scripts/s3-test-server.sh as the ctest fixture): CheckpointManager mirroring into a bucket and
resuming from it, verify and stats of s3:// locations, and no credential in anything returned."""

import importlib.util
import json
import os
import re
import shutil
import time

import pyutil
from pyutil import TempDirTest, flat_state, split

import shardscope


def server_env():
    """The export lines of the server's env.sh, or None when no server runs for this test."""
    path = os.environ.get("SHARDSCOPE_S3_ENV", "")
    if not path or not os.path.exists(path):
        return None
    env = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"export (\w+)=(.*)", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
    return env


def smoke_client():
    """scripts/s3-smoke.py's standard-library SigV4 client: buckets and listings the module does
    not make, signed independently of the code under test."""
    path = os.path.join(os.environ["SHARDSCOPE_SOURCE_DIR"], "scripts", "s3-smoke.py")
    spec = importlib.util.spec_from_file_location("s3_smoke", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.S3


class S3Mirror(TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.env = server_env()
        if cls.env is None:
            raise RuntimeError("no S3 server: SHARDSCOPE_S3_ENV names no env.sh")
        # What a training job's environment holds: the module finds the server as the AWS tools do.
        os.environ["AWS_ENDPOINT_URL"] = cls.env["SHARDSCOPE_S3_ENDPOINT"]
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            os.environ[key] = cls.env[key]
        cls.s3 = smoke_client()(cls.env["SHARDSCOPE_S3_ENDPOINT"], cls.env["AWS_ACCESS_KEY_ID"],
                                cls.env["AWS_SECRET_ACCESS_KEY"], cls.env["AWS_DEFAULT_REGION"])
        cls.bucket = "tst-python-%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000000)
        status, _, body = cls.s3.request("PUT", "/" + cls.bucket)
        if status != 200:
            raise RuntimeError("creating the bucket: HTTP %d %r" % (status, body[:200]))

    def multipart_uploads(self, prefix):
        status, _, body = self.s3.request("GET", "/" + self.bucket, {"uploads": "", "prefix": prefix})
        self.assertEqual(status, 200, body[:200])
        return re.findall(rb"<Upload>", body)

    def test_the_manager_mirrors_into_a_bucket_and_resumes_from_it(self):
        root = self.path("run")
        url = "s3://%s/runs/python" % self.bucket
        flat = flat_state(3_000_000, 4)  # 42 MB a rank file at world 1: a multipart upload of 6 parts
        small = flat_state(4000, 5)
        with shardscope.CheckpointManager(root, 2, url, mirror_keep=2) as manager:
            manager.save(1, split(small, 2))
            manager.save(2, split(flat, 1), training_state={"optimizer": {"step": 2}})
            manager.wait()
            self.assertEqual([(s["name"], s["state"]) for s in manager.upload_status()],
                             [("step-00000001", "uploaded"), ("step-00000002", "uploaded")])
        self.assertEqual(self.multipart_uploads("runs/python/"), [])

        # The bucket's copy is the local one: verified by hash where it lives, the same values.
        remote = shardscope.verify(url + "/step-00000002")
        self.assertTrue(remote["ok"], remote)
        self.assertEqual(len(remote["shards"]), 1)
        self.assertTrue(shardscope.verify((url + "/step-00000002").encode())["ok"])  # bytes, as a path may be
        local_stats = shardscope.stats(os.path.join(root, "step-00000002"))
        remote_stats = shardscope.stats(url + "/step-00000002")
        self.assertEqual(json.dumps(local_stats["tensors"], sort_keys=True),
                         json.dumps(remote_stats["tensors"], sort_keys=True))
        self.assertEqual(len(remote_stats["tensors"]), 4)
        # plan_reshard reads the root in the bucket as on the disk: `latest`, then the manifest.
        self.assertEqual(shardscope.plan_reshard(url, 3), shardscope.plan_reshard(root, 3))
        self.assertEqual(shardscope.plan_reshard(url + "/step-00000001", 5)["source_world_size"], 2)

        # The local tier is lost: resume loads the bucket's copy, bit for bit.
        shutil.rmtree(os.path.join(root, "step-00000002"))
        resumed = shardscope.CheckpointManager(root, 2, url).resume()
        self.assertTrue(resumed["from_mirror"])
        self.assertEqual(resumed["step"], 2)
        # The local `latest` names the lost step: said, not passed over silently.
        self.assertTrue(any(s.startswith("step-00000002: the local copy did not verify") for s in resumed["skipped_unhealthy"]),
                        resumed["skipped_unhealthy"])
        self.assertEqual(shardscope.digests(resumed["ranks"]), shardscope.digests(split(flat, 1)))

        secret = self.env["AWS_SECRET_ACCESS_KEY"]
        for returned in (remote, local_stats, remote_stats, pyutil.without(resumed, "ranks")):
            self.assertNotIn(secret, repr(returned))

    def test_a_wrong_secret_is_one_sentence_without_it(self):
        kept = os.environ["AWS_SECRET_ACCESS_KEY"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-0123456789"
        try:
            with self.assertRaises(shardscope.Error) as caught:
                shardscope.verify("s3://%s/runs/none" % self.bucket)
        finally:
            os.environ["AWS_SECRET_ACCESS_KEY"] = kept
        message = str(caught.exception)
        self.assertIn("s3://%s/runs/none" % self.bucket, message)
        self.assertNotIn("not-the-secret", message)
        self.assertNotIn(kept, message)

    def test_a_failed_upload_is_said_by_upload_status_not_raised(self):
        # The mirror refuses the job's key: training goes on (wait() does not raise), and the job
        # learns from upload_status() that the bucket lacks the step, and why.
        kept = os.environ["AWS_SECRET_ACCESS_KEY"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-0123456789"
        try:
            with shardscope.CheckpointManager(self.path("refused"), 2, "s3://%s/runs/refused" % self.bucket) as manager:
                manager.save(1, split(flat_state(4000, 6), 2))
                manager.wait()
                statuses = manager.upload_status()
        finally:
            os.environ["AWS_SECRET_ACCESS_KEY"] = kept
        self.assertEqual([(s["name"], s["state"]) for s in statuses], [("step-00000001", "failed")])
        self.assertIn("credentials", statuses[0]["error"])
        self.assertNotIn("not-the-secret", repr(statuses))
        self.assertEqual(statuses[0]["retry_in_saves"], 1)


if __name__ == "__main__":
    pyutil.main()
