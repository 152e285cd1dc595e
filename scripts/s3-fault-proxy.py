#!/usr/bin/env python3
"""An HTTP/1.1 proxy on loopback in front of an S3 server that injects faults on request.

    scripts/s3-fault-proxy.py --upstream http://127.0.0.1:PORT [--port 0] [--lifetime 600]

It prints `listening on 127.0.0.1:PORT` once ready (and writes the port to --port-file). Requests
are forwarded byte for byte: request line, headers (Host included), bodies with Content-Length or
chunked framing, Expect: 100-continue, keep-alive. Faults are set through the proxy itself:

    POST /__fault__?mode=503&count=3         the next 3 requests get `503 SlowDown` (S3 XML body)
    POST /__fault__?mode=reset&count=1       the next response is cut by a TCP reset halfway through
    POST /__fault__?mode=slow&seconds=2      the next response is held 2 s before it is sent
    POST /__fault__?mode=truncate&count=1    the next response with a body keeps its Content-Length
                                             but only half the body is sent, then the connection closes
    POST /__fault__?mode=corrupt&count=1     the next response body (Content-Length framed) arrives
                                             with its first byte flipped: a bad disk, RAM or NIC on
                                             the way, which only a checksum of the bytes catches
    POST /__fault__?mode=corrupt-request     the same to the next request body on its way to the
                                             server (which a Content-MD5 lets the server refuse)
    POST /__fault__?mode=narrow&rate=4194304&count=-1
                                             each response body relayed at most `rate` bytes a
                                             second: a WAN link, where one connection carries a
                                             fraction of what the store sends over many at once
    POST /__fault__?mode=412&count=-1        requests that carry If-Match get `412 Precondition Failed`
                                             without reaching the server: a store whose conditional
                                             reads misfire (it refuses its own ETag)
    POST /__fault__?mode=none                no more faults
    GET  /__fault__                          the current fault and counters, as JSON

count defaults to 1; count=-1 means every request until mode=none. Optional filters `method=GET`
and `path=SUBSTRING` restrict which requests a fault applies to (others pass and do not use up
the count). Control requests need no signature and are never forwarded.

Why the Host header is left alone: a SigV4 signature covers the Host header, and RGW (like S3)
recomputes it from the Host it receives. So the client must address the proxy - sign for
`127.0.0.1:PROXYPORT` simply by using `http://127.0.0.1:PROXYPORT` as its endpoint - and the proxy
passes that Host through unchanged. RGW accepts a Host naming another port than its own (checked
with curl against RGW 16). Rewriting Host to the gateway's port would break every signature.

The proxy exits by itself after --lifetime seconds so a crashed test never leaves it behind.
"""

import argparse
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

MODES = ("none", "503", "412", "reset", "slow", "truncate", "corrupt", "corrupt-request", "narrow")
REQUEST_MODES = ("503", "412", "corrupt-request")  # decided when the request arrives
MAX_HEAD = 64 * 1024


class Fault:
    """The fault to apply next, shared by all connections."""

    def __init__(self):
        self.lock = threading.Lock()
        self.set({"mode": ["none"]})
        self.forwarded = 0
        self.injected = 0

    def set(self, query):
        mode = query.get("mode", ["none"])[0]
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not '{mode}'")
        count = int(query.get("count", ["1"])[0])
        seconds = float(query.get("seconds", ["1"])[0])
        rate = float(query.get("rate", ["1048576"])[0])
        if rate <= 0:
            raise ValueError("rate must be a positive number of bytes a second")
        with self.lock:
            self.rate = rate
            self.mode = mode
            self.remaining = 0 if mode == "none" else count
            self.seconds = seconds
            self.method = query.get("method", [""])[0].upper()
            self.path = query.get("path", [""])[0]

    def state(self):
        with self.lock:
            return {"mode": self.mode, "remaining": self.remaining, "seconds": self.seconds, "rate": self.rate,
                    "method": self.method, "path": self.path,
                    "forwarded": self.forwarded, "injected": self.injected}

    def take(self, phase, method, target, body_len=-1, conditional=False):
        """The mode for this request, using up one count if it applies. 503, 412 and corrupt-request
        are decided when the request arrives; the others when the response is known."""
        with self.lock:
            if self.mode == "none" or self.remaining == 0:
                return "none"
            if (self.mode in REQUEST_MODES) != (phase == "request"):
                return "none"
            if self.method and method != self.method:
                return "none"
            if self.path and self.path not in target:
                return "none"
            if self.mode == "412" and not conditional:
                return "none"  # only a conditional request can fail its precondition
            if self.mode == "truncate" and body_len == 0:
                return "none"  # nothing to cut short; keep the count for a response with a body
            if self.mode in ("corrupt", "corrupt-request") and body_len <= 0:
                return "none"  # no Content-Length framed body to flip; keep the count
            if self.remaining > 0:
                self.remaining -= 1
            self.injected += 1
            return self.mode


class Closed(Exception):
    pass


def read_head(f):
    """Reads a request or response head; returns (raw bytes, first line, {lower name: value})."""
    raw = b""
    while True:
        line = f.readline(MAX_HEAD)
        if not line:
            if raw:
                raise Closed("connection closed inside a message head")
            raise Closed("connection closed")
        raw += line
        if len(raw) > MAX_HEAD:
            raise Closed("message head too large")
        if line in (b"\r\n", b"\n"):
            if raw.strip() == b"":
                raw = b""  # tolerate stray blank lines between messages
                continue
            break
    lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for h in lines[1:]:
        if ":" in h:
            name, value = h.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return raw, lines[0], headers


def body_chunks(f, headers, until_close=False):
    """Yields a message body as it arrives, framing bytes included so it can be relayed verbatim."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = f.readline(MAX_HEAD)
            if not size_line:
                raise Closed("connection closed inside a chunked body")
            yield size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = f.readline(MAX_HEAD)
                    if not trailer:
                        raise Closed("connection closed inside chunked trailers")
                    yield trailer
                    if trailer in (b"\r\n", b"\n"):
                        return
            left = size + 2  # the chunk and its CRLF
            while left:
                data = f.read1(min(left, 65536))
                if not data:
                    raise Closed("connection closed inside a chunk")
                left -= len(data)
                yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left:
            data = f.read1(min(left, 65536))
            if not data:
                raise Closed("connection closed inside a body")
            left -= len(data)
            yield data
    elif until_close:
        while True:
            data = f.read1(65536)
            if not data:
                return
            yield data


def flipped(chunks):
    """A Content-Length framed body with its first byte flipped, relayed as it arrives."""
    first = True
    for data in chunks:
        if first and data:
            data = bytes([data[0] ^ 0x01]) + data[1:]
            first = False
        yield data


def paced(chunks, rate):
    """The body relayed at no more than `rate` bytes a second."""
    start, sent = time.monotonic(), 0
    for data in chunks:
        ahead = start + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        sent += len(data)
        yield data


def slow_down(target):
    key = urllib.parse.urlsplit(target).path
    body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            "<Message>Please reduce your request rate.</Message>"
            f"<Resource>{key}</Resource><RequestId>fault-proxy</RequestId></Error>").encode()
    return body


def precondition_failed(target):
    key = urllib.parse.urlsplit(target).path
    return ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
            "<Message>At least one of the pre-conditions you specified did not hold</Message>"
            f"<Resource>{key}</Resource><RequestId>fault-proxy</RequestId></Error>").encode()


class Connection:
    def __init__(self, client, upstream_addr, fault):
        self.client = client
        self.cin = client.makefile("rb")
        self.upstream_addr = upstream_addr
        self.fault = fault
        self.up = None
        self.uin = None

    def send(self, data):
        self.client.sendall(data)

    def close_client(self, abort=False):
        # The makefile() reader holds the descriptor open too: close it first, or the client
        # never sees the connection end.
        if abort:
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN: the abrupt end a
            # client sees when a server or middlebox dies mid-transfer.
            try:
                self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        try:
            self.cin.close()
            self.client.close()
        except OSError:
            pass

    def upstream(self):
        # A kept-alive upstream socket that is readable between requests has been closed by the
        # gateway (idle timeout): reconnect rather than fail the next request.
        if self.up is not None:
            readable, _, _ = select.select([self.up], [], [], 0)
            if readable:
                self.close_upstream()
        if self.up is None:
            self.up = socket.create_connection(self.upstream_addr, timeout=300)
            self.uin = self.up.makefile("rb")
        return self.up

    def close_upstream(self):
        if self.up is not None:
            self.uin.close()
            self.up.close()
            self.up = None
            self.uin = None

    def control(self, method, target):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
        status = "200 OK"
        try:
            if method == "POST":
                self.fault.set(query)
            body = json.dumps(self.fault.state()) + "\n"
        except ValueError as e:
            status, body = "400 Bad Request", json.dumps({"error": str(e)}) + "\n"
        self.send(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}".encode())

    def serve(self):
        try:
            while self.one_request():
                pass
        except (Closed, OSError, ValueError):
            pass
        finally:
            self.close_upstream()
            self.close_client()

    def one_request(self):
        """Relays one request and its response; False when the client connection should end."""
        raw, request_line, headers = read_head(self.cin)
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise Closed("bad request line")
        method, target, _ = parts
        keep_alive = headers.get("connection", "").lower() != "close"
        has_request_body = ("content-length" in headers and headers["content-length"] != "0") or \
            "chunked" in headers.get("transfer-encoding", "").lower()
        expect_continue = headers.get("expect", "").lower() == "100-continue" and has_request_body

        if urllib.parse.urlsplit(target).path == "/__fault__":
            for _ in body_chunks(self.cin, headers):
                pass
            self.control(method, target)
            return keep_alive

        request_body_len = int(headers.get("content-length", "0") or 0) if "content-length" in headers else -1
        request_mode = self.fault.take("request", method, target, request_body_len, "if-match" in headers)
        if request_mode in ("503", "412"):
            body = slow_down(target) if request_mode == "503" else precondition_failed(target)
            close = expect_continue  # the client is still waiting to send its body; end it cleanly
            if not expect_continue:
                for _ in body_chunks(self.cin, headers):
                    pass
            status = "503 Slow Down" if request_mode == "503" else "412 Precondition Failed"
            self.send((f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n"
                       f"Content-Length: {len(body)}\r\n"
                       f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n").encode() + body)
            return keep_alive and not close

        up = self.upstream()
        up.sendall(raw)
        with self.fault.lock:
            self.fault.forwarded += 1
        if expect_continue:
            resp_raw, status_line, resp_headers = read_head(self.uin)
            if status_line.split(" ")[1:2] == ["100"]:
                self.send(resp_raw)
                for data in self.request_body(headers, request_mode):
                    up.sendall(data)
                resp = read_head(self.uin)
            else:
                resp = (resp_raw, status_line, resp_headers)
                keep_alive = False  # the client may or may not send the body now; do not guess
        else:
            for data in self.request_body(headers, request_mode):
                up.sendall(data)
            resp = read_head(self.uin)
        while resp[1].split(" ")[1:2] == ["100"]:  # a late or unsolicited 100 Continue
            self.send(resp[0])
            resp = read_head(self.uin)
        return self.relay_response(method, target, resp, keep_alive)

    def request_body(self, headers, mode):
        chunks = body_chunks(self.cin, headers)
        return flipped(chunks) if mode == "corrupt-request" else chunks

    def relay_response(self, method, target, resp, keep_alive):
        resp_raw, status_line, h = resp
        code = int(status_line.split(" ")[1])
        bodiless = method == "HEAD" or code in (204, 304) or 100 <= code < 200
        framed = "content-length" in h or "chunked" in h.get("transfer-encoding", "").lower()
        body_len = 0 if bodiless else int(h.get("content-length", "-1"))
        mode = self.fault.take("response", method, target, body_len)
        upstream_close = h.get("connection", "").lower() == "close" or (not framed and not bodiless)

        if mode == "slow":
            time.sleep(self.fault.seconds)
        chunks = [] if bodiless else body_chunks(self.uin, h, until_close=True)
        if mode == "corrupt":
            chunks = flipped(chunks)
        if mode == "narrow":
            chunks = paced(chunks, self.fault.rate)
        if mode in ("reset", "truncate"):
            body = b"".join(chunks)
            self.close_upstream()
            # Half the body; with no body, half the head, so that the client always sees a
            # response that ends too early.
            cut = len(resp_raw) + len(body) // 2 if body or mode == "truncate" else len(resp_raw) // 2
            self.send((resp_raw + body)[:cut])
            self.close_client(abort=mode == "reset")
            return False
        self.send(resp_raw)
        for data in chunks:
            self.send(data)
        if upstream_close:
            self.close_upstream()
            return False
        return keep_alive


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="the gateway, e.g. http://127.0.0.1:8000")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--port-file", help="write the chosen port here once listening")
    parser.add_argument("--lifetime", type=float, default=600, help="exit after this many seconds")
    args = parser.parse_args()

    up = urllib.parse.urlsplit(args.upstream)
    if up.scheme != "http" or not up.hostname or not up.port:
        sys.exit(f"s3-fault-proxy: --upstream must look like http://127.0.0.1:PORT, not '{args.upstream}'")
    upstream_addr = (up.hostname, up.port)

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.port))
    server.listen(64)
    port = server.getsockname()[1]

    def expire():
        print(f"s3-fault-proxy: lifetime of {args.lifetime:g}s is over; exiting", file=sys.stderr)
        os._exit(0)

    timer = threading.Timer(args.lifetime, expire)
    timer.daemon = True
    timer.start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"listening on 127.0.0.1:{port}", flush=True)

    fault = Fault()
    while True:
        client, _ = server.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(client, upstream_addr, fault)
        threading.Thread(target=conn.serve, daemon=True).start()


if __name__ == "__main__":
    main()
