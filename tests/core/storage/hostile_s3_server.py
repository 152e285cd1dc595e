#!/usr/bin/env python3
"""A hostile "S3" server on loopback for tst_s3: each object path answers one way a broken or
malicious server could. Prints its port on stdout, then serves until --lifetime seconds pass."""

import argparse
import http.server
import sys
import threading
import time


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        query = self.path.partition("?")[2]
        if "list-type=2" in query and path == "/b/" or path == "/b" and "list-type=2" in query:
            if "prefix=loop" in query:  # truncated, and the same token again whatever was asked
                body = (b"<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>same"
                        b"</NextContinuationToken><Contents><Key>loop/a</Key><Size>1</Size></Contents>"
                        b"</ListBucketResult>")
                return self.reply(200, body)
            if "prefix=endless" in query:  # a new token every page, one key a page, for ever
                token = query.partition("continuation-token=")[2].partition("&")[0] or "0"
                following = str(int(token) + 1 if token.isdigit() else 1).encode()
                body = (b"<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>" + following +
                        b"</NextContinuationToken><Contents><Key>endless/k" + following + b"</Key><Size>1</Size>"
                        b"</Contents></ListBucketResult>")
                return self.reply(200, body)
            if "prefix=garbage" in query:  # no listing at all: binary bytes where XML belongs
                return self.reply(200, b"\x00\xff<Contents><Size>-1</Size>\x00")
            if "prefix=bomb" in query:
                body = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
                        b"<ListBucketResult><Contents><Key>&lol2;</Key><Size>1</Size></Contents></ListBucketResult>")
            else:  # a key outside the prefix asked for
                body = (b"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>run/../../etc/passwd"
                        b"</Key><Size>1</Size></Contents><Contents><Key>other/x</Key><Size>1</Size></Contents>"
                        b"</ListBucketResult>")
            return self.reply(200, body)
        params = [p.split("=")[0] for p in query.split("&")]
        if (path == "/b/" or path == "/b") and "uploads" in params and "prefix=refused" in query:
            return self.reply(403, b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>")
        if (path == "/b/" or path == "/b") and "uploads" in params and "prefix=broken" in query:
            return self.reply(500, b"<Error><Code>InternalError</Code></Error>")
        if (path == "/b/" or path == "/b") and "uploads" in params:  # markers that never move on
            body = (b"<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>back/a"
                    b"</NextKeyMarker><NextUploadIdMarker>1</NextUploadIdMarker><Upload><Key>back/a</Key>"
                    b"<UploadId>1</UploadId></Upload></ListMultipartUploadsResult>")
            return self.reply(200, body)
        if path == "/b/silent":  # takes the request and never answers (a hung server)
            time.sleep(20)
            return
        if path == "/b/redirect":
            return self.reply(301, b"", [("Location", "http://elsewhere.invalid/b/redirect")])
        if path == "/b/scheme-redirect":  # to another scheme on the same host
            return self.reply(302, b"", [("Location", "ftp://127.0.0.1/b/scheme-redirect")])
        if path == "/b/longer":  # a range of 10 bytes answered with 20
            return self.reply(206, b"x" * 20, [("Content-Range", "bytes 0-19/100")])
        if path == "/b/norange":  # the Range header ignored: the whole 100-byte object, 200
            return self.reply(200, b"r" * 100)
        if path == "/b/endless":  # chunked, never ending
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"y" * 65536
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                return
        if path == "/b/shortlength":  # announces 100 bytes, sends 10 and closes
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"z" * 10)
            self.wfile.flush()
            self.close_connection = True
            return
        if path == "/b/shortrange":  # the range asked for, announced whole, cut after 10 bytes
            first, _, last = self.headers.get("Range", "bytes=0-99")[6:].partition("-")
            self.send_response(206)
            self.send_header("Content-Length", str(int(last) - int(first) + 1))
            self.send_header("Content-Range", f"bytes {first}-{last}/100")
            self.end_headers()
            self.wfile.write(b"s" * 10)
            self.wfile.flush()
            self.close_connection = True
            return
        if path == "/b/slice200":  # the range asked for, but as 200: as though it were the whole object
            first, _, last = self.headers.get("Range", "bytes=0-99")[6:].partition("-")
            return self.reply(200, b"c" * (int(last) - int(first) + 1))
        if path == "/b/twolengths":  # which frames the body? 10 bytes come, the 100 never do
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"t" * 10)
            self.wfile.flush()
            threading.Event().wait(30)
            return
        if path == "/b/minuslength":
            return self.reply(200, b"", [("Content-Length", "-1")])
        if path == "/b/partial":  # part of the object where none was asked for
            return self.reply(206, b"p" * 10, [("Content-Range", "bytes 0-9/100")])
        if path == "/b/wrongrange":  # 206 with the first 10 bytes, whatever was asked
            return self.reply(206, b"w" * 10, [("Content-Range", "bytes 0-9/100")])
        return self.reply(404, b"<Error><Code>NoSuchKey</Code><Message>\x1b[31mno\x1b[0m</Message></Error>")

    def do_HEAD(self):
        if self.path.startswith("/ranks/") and "/mp_rank_" in self.path:  # every rank folder there is
            return self.reply(200, b"", [("Content-Length", "10")])
        if self.path.split("?")[0] == "/b/minuslength":
            return self.reply(200, b"", [("Content-Length", "-1")])
        if self.path.split("?")[0] == "/b/nolength":  # 200 without the Content-Length a HEAD must give
            self.send_response(200)
            self.send_header("ETag", '"x"')
            self.end_headers()
            return
        self.reply(404)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lifetime", type=float, default=120)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Timer(args.lifetime, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
