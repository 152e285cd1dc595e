#!/usr/bin/env python3
"""A plain HTTP(S) file server on loopback that answers HEAD and single-range GETs the way a model
host does (206 with Content-Range), for tst_remote_read. Serves the files beneath ROOT; prints its
port on stdout, then serves until --lifetime seconds pass. --cert/--key serve HTTPS."""

import argparse
import http.server
import os
import re
import ssl
import sys
import threading
import urllib.parse


def make_handler(root, log):
    class Files(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def target(self):
            path = urllib.parse.unquote(self.path.split("?")[0])
            parts = [p for p in path.split("/") if p]
            if any(p in (".", "..") for p in parts):
                return None
            full = os.path.join(root, *parts)
            return full if os.path.isfile(full) else None

        def empty(self, status):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self):
            log.append("HEAD " + self.path)
            full = self.target()
            if not full:
                return self.empty(404)
            self.send_response(200)
            self.send_header("Content-Length", str(os.path.getsize(full)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self):
            log.append("GET " + self.path + " " + self.headers.get("Range", ""))
            if self.path == "/__requests__":
                body = ("\n".join(log) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            full = self.target()
            if not full:
                return self.empty(404)
            size = os.path.getsize(full)
            first, last = 0, size - 1
            status = 200
            match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if match:
                first, last = int(match.group(1)), min(int(match.group(2)), size - 1)
                if first > last:
                    return self.empty(416)
                status = 206
            self.send_response(status)
            self.send_header("Content-Length", str(last - first + 1))
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
            self.end_headers()
            with open(full, "rb") as f:
                f.seek(first)
                left = last - first + 1
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)

    return Files


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--lifetime", type=float, default=300)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.root, []))
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    threading.Timer(args.lifetime, server.shutdown).start()
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
