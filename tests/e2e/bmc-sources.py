"""An image server for bmc-media.sh's image-source checks, logging every
connection it accepts and every request line to LOG (so a test can tell that
nothing reached it).

Usage: bmc-sources.py ADDR PORT LOG [--dir DIR] [--tls CERT KEY]
                      [--redirect URL] [--delay SECONDS]

--dir serves files from DIR; --redirect answers every GET with 302 to URL;
--delay holds each answer that long (overlapping requests stay in flight);
--tls serves HTTPS with that certificate and key.
"""
import argparse
import http.server
import os
import socket
import ssl
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("addr")
p.add_argument("port", type=int)
p.add_argument("log")
p.add_argument("--dir")
p.add_argument("--tls", nargs=2)
p.add_argument("--redirect")
p.add_argument("--delay", type=float, default=0)
a = p.parse_args()
log = open(a.log, "a", buffering=1)


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kw):
        super().__init__(*args, directory=a.dir or os.devnull, **kw)

    def log_message(self, fmt, *args):
        log.write("request " + (fmt % args) + "\n")

    def do_GET(self):
        time.sleep(a.delay)
        if a.redirect:
            self.log_message('"%s" 302 -', self.requestline)
            self.send_response_only(302)
            self.send_header("Location", a.redirect)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in a.addr else socket.AF_INET

    def get_request(self):
        conn, peer = super().get_request()
        log.write(f"connection from {peer[0]}\n")
        return conn, peer


srv = Server((a.addr, a.port), Handler)
if a.tls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*a.tls)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(f"serving on {a.addr}:{a.port}", file=sys.stderr)
srv.serve_forever()
