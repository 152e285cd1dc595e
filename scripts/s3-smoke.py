#!/usr/bin/env python3
"""End-to-end check of the test S3 server (and, with --proxy, of the fault proxy in front of it).

    eval "$(scripts/s3-test-server.sh start)"
    scripts/s3-smoke.py [--proxy http://127.0.0.1:PROXYPORT]

Signs with SigV4 from the standard library, so it also shows the canonical form RGW accepts: the
path URI-encoded once (everything but unreserved characters and '/'), query parameters sorted and
fully encoded, x-amz-content-sha256 always sent. Prints one line per check; exits 1 on the first
failure, naming what was expected and what came back.
"""

import argparse
import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import sys
import time
import urllib.parse
import uuid


class S3:
    def __init__(self, endpoint, access, secret, region):
        self.ep = urllib.parse.urlsplit(endpoint)
        self.access, self.secret, self.region = access, secret, region

    def request(self, method, path, query=None, body=b"", headers=None):
        """Returns (status, headers, body); raises OSError/HTTPException on a broken connection."""
        enc = lambda s, safe="-_.~": urllib.parse.quote(s, safe=safe)  # noqa: E731
        amzdate = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        uri = enc(path, safe="/-_.~")
        cq = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted((query or {}).items()))
        h = {"host": self.ep.netloc, "x-amz-date": amzdate,
             "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
        h.update({k.lower(): v for k, v in (headers or {}).items()})
        signed = ";".join(sorted(h))
        canonical = "\n".join([method, uri, cq, "".join(f"{k}:{h[k]}\n" for k in sorted(h)), signed,
                               h["x-amz-content-sha256"]])
        scope = f"{amzdate[:8]}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret).encode()
        for part in (amzdate[:8], self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access}/{scope}, "
                              f"SignedHeaders={signed}, Signature={sig}")
        conn = http.client.HTTPConnection(self.ep.hostname, self.ep.port, timeout=20)
        try:
            conn.request(method, uri + ("?" + cq if cq else ""), body=body,
                         headers={k: v for k, v in h.items() if k != "host"})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()


def check(what, cond, detail=""):
    if not cond:
        print(f"FAIL {what}: {detail}")
        sys.exit(1)
    print(f"ok   {what}")


def expect(what, got, status):
    check(what, got[0] == status, f"expected HTTP {status}, got {got[0]}: {got[2][:200]!r}")
    return got


def server_checks(s3):
    bucket = "smoke-" + uuid.uuid4().hex[:12]
    expect("create bucket", s3.request("PUT", f"/{bucket}"), 200)
    key = f"/{bucket}/step 1/shard+x=1&y~\u00fc.bin"
    data = os.urandom(100_000)
    r = expect("put object with a key that needs encoding", s3.request("PUT", key, body=data), 200)
    check("PutObject ETag is the MD5", r[1].get("etag") == f'"{hashlib.md5(data).hexdigest()}"', r[1])
    r = expect("ranged get", s3.request("GET", key, headers={"Range": "bytes=1000-1999"}), 206)
    check("ranged get returns the bytes asked for", r[2] == data[1000:2000], f"{len(r[2])} bytes")
    check("Content-Range", r[1].get("content-range") == "bytes 1000-1999/100000", r[1])
    expect("range past the end", s3.request("GET", key, headers={"Range": "bytes=200000-"}), 416)
    r = s3.request("PUT", f"/{bucket}/bad", body=b"abc",
                   headers={"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="})
    check("wrong Content-MD5 is refused", r[0] == 400 and b"BadDigest" in r[2], r[:1])
    r = expect("ListObjectsV2 with prefix", s3.request(
        "GET", f"/{bucket}", {"list-type": "2", "prefix": "step 1/"}), 200)
    check("listing names the key", "step 1/shard+x=1&amp;y~\u00fc.bin" in r[2].decode(), r[2][:300])

    mpu = f"/{bucket}/big"
    r = expect("create multipart upload", s3.request("POST", mpu, {"uploads": ""}), 200)
    upload = re.search(rb"<UploadId>(.*?)</UploadId>", r[2]).group(1).decode()
    parts = [os.urandom(5 * 1024 * 1024), os.urandom(1234)]
    etags = []
    for n, part in enumerate(parts, 1):
        r = expect(f"upload part {n}", s3.request("PUT", mpu, {"partNumber": str(n), "uploadId": upload},
                                                    body=part), 200)
        etags.append(r[1]["etag"])
    xml = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in enumerate(etags, 1)
    ) + "</CompleteMultipartUpload>"
    r = expect("complete multipart upload", s3.request("POST", mpu, {"uploadId": upload},
                                                        body=xml.encode()), 200)
    r = expect("head of the multipart object", s3.request("HEAD", mpu), 200)
    check("multipart ETag ends in -2", r[1].get("etag", "").endswith('-2"'), r[1].get("etag"))
    check("multipart size", r[1].get("content-length") == str(sum(map(len, parts))), r[1])

    delete = (f"<Delete><Object><Key>{key.split('/', 2)[2].replace('&', '&amp;')}</Key></Object>"
              "<Object><Key>big</Key></Object></Delete>").encode()
    r = expect("DeleteObjects", s3.request("POST", f"/{bucket}", {"delete": ""}, body=delete), 200)
    check("both keys deleted", r[2].count(b"<Deleted>") == 2, r[2][:300])
    expect("delete bucket", s3.request("DELETE", f"/{bucket}"), 204)


def proxy_checks(s3, proxy_url):
    ctl = urllib.parse.urlsplit(proxy_url)

    def fault(query):
        c = http.client.HTTPConnection(ctl.hostname, ctl.port, timeout=5)
        c.request("POST", "/__fault__?" + query)
        state = json.loads(c.getresponse().read())
        c.close()
        return state

    bucket = "smoke-" + uuid.uuid4().hex[:12]
    data = os.urandom(200_000)
    expect("create bucket through the proxy", s3.request("PUT", f"/{bucket}"), 200)
    expect("put through the proxy (Host passed through)", s3.request("PUT", f"/{bucket}/o", body=data), 200)

    fault("mode=503&count=2")
    for i in (1, 2):
        r = s3.request("GET", f"/{bucket}/o")
        check(f"503 SlowDown #{i}", r[0] == 503 and b"<Code>SlowDown</Code>" in r[2], r[:1])
    check("third request passes", s3.request("GET", f"/{bucket}/o")[2] == data)

    for mode in ("reset", "truncate"):
        fault(f"mode={mode}&count=1")
        try:
            r = s3.request("GET", f"/{bucket}/o")
            check(f"{mode} breaks the response", False, f"got HTTP {r[0]} with {len(r[2])} bytes")
        except (OSError, http.client.HTTPException) as e:
            check(f"{mode} breaks the response ({type(e).__name__})", True)
        check(f"after {mode}, the next request passes", s3.request("GET", f"/{bucket}/o")[2] == data)

    fault("mode=slow&seconds=1.5&count=1")
    t0 = time.monotonic()
    r = s3.request("GET", f"/{bucket}/o")
    check("slow delays the response by 1.5 s", r[2] == data and time.monotonic() - t0 >= 1.5)
    fault("mode=none")
    expect("cleanup", s3.request("DELETE", f"/{bucket}/o"), 204)
    expect("cleanup bucket", s3.request("DELETE", f"/{bucket}"), 204)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--proxy", help="also check the fault proxy listening at this URL")
    args = parser.parse_args()
    try:
        env = {k: os.environ[k] for k in ("SHARDSCOPE_S3_ENDPOINT", "AWS_ACCESS_KEY_ID",
                                           "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    except KeyError as e:
        sys.exit(f"s3-smoke: {e.args[0]} is not set; run: eval \"$(scripts/s3-test-server.sh start)\"")
    creds = (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_DEFAULT_REGION"])
    server_checks(S3(env["SHARDSCOPE_S3_ENDPOINT"], *creds))
    if args.proxy:
        proxy_checks(S3(args.proxy, *creds), args.proxy)
    print("all checks passed")


if __name__ == "__main__":
    main()
