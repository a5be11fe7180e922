"""shiftlab's Redfish BMC vs sushy-emulator, side by side on the same libvirt
domain, in one run. Prints numbers and ratios; asserts nothing about timing.

Run by bench/bmc/run.sh inside the sandbox (a private libvirtd); see
docs/benchmarks.md. Load generator: ApacheBench (`ab`, HTTP/1.0, a new TCP
and TLS connection per request, as sushy does with `Connection: close`).
Only 127.0.0.1 is contacted.
"""
import argparse
import http.client
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import time
import base64

import libvirt

p = argparse.ArgumentParser()
p.add_argument("--shiftlab", required=True)
p.add_argument("--limit", required=True, help="the limit server (examples/bmc_limit.rs)")
p.add_argument("--sushy", required=True, help="sushy-emulator executable")
p.add_argument("--work", required=True)
p.add_argument("--domain", required=True)
p.add_argument("--uri", default="qemu:///system")
p.add_argument("--seq-requests", type=int, default=int(os.environ.get("BENCH_SEQ", 1000)))
p.add_argument("--conc-requests", type=int, default=int(os.environ.get("BENCH_CONC", 4000)))
p.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", 15)),
               help="time limit of each load run")
p.add_argument("--limit-pairs", type=int, default=int(os.environ.get("BENCH_LIMIT_PAIRS", 5)),
               help="shiftlab/limit runs, interleaved, per concurrency (the ratio is their median)")
p.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", 5)),
               help="power On/ForceOff rounds per implementation")
a = p.parse_args()

USER, PASSWORD = "admin", "bench-password"
work = a.work
procs = []


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


conn = libvirt.open(a.uri)
dom = conn.lookupByName(a.domain)
uuid = dom.UUIDString()
if dom.isActive():
    dom.destroy()

# ---------------------------------------------------------------- servers
os.makedirs(work, exist_ok=True)
env = dict(os.environ, SHIFTLAB_BMC_PASSWORD=PASSWORD, NO_COLOR="1")
servers = {}


def start(key, cmd, port, scheme, auth, extra_env=None):
    log = open(f"{work}/{key}.log", "w")
    pr = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(env, **(extra_env or {})))
    procs.append(pr)
    servers[key] = dict(proc=pr, base=f"{scheme}://127.0.0.1:{port}", port=port, scheme=scheme, auth=auth)


# shiftlab: plain HTTP without auth, and its default TLS + auth
start("shiftlab-http", [a.shiftlab, "bmc", "--connect", a.uri, "--allow", a.domain, "--insecure-http",
                        "--no-auth", "--listen", "127.0.0.1:8101", "--bmc-dir", f"{work}/shiftlab-http"],
      8101, "http", False)
start("shiftlab-tls", [a.shiftlab, "bmc", "--connect", a.uri, "--allow", a.domain,
                       "--listen", "127.0.0.1:8102", "--bmc-dir", f"{work}/shiftlab-tls"],
      8102, "https", True)
# wait for shiftlab's TLS material; sushy serves the same certificate
for _ in range(100):
    if os.path.exists(f"{work}/shiftlab-tls/tls/bmc.key"):
        break
    time.sleep(0.1)
# sushy-emulator: plain HTTP, and TLS + Basic auth (htpasswd, bcrypt at the
# library's default cost, 12)
import bcrypt  # noqa: E402  (installed with sushy-tools)

with open(f"{work}/htpasswd", "w") as f:
    f.write(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt()).decode()}\n")
with open(f"{work}/sushy-tls.conf", "w") as f:
    f.write(f"SUSHY_EMULATOR_AUTH_FILE = {work + '/htpasswd'!r}\n")
start("sushy-http", [a.sushy, "-i", "127.0.0.1", "-p", "8201", "--libvirt-uri", a.uri], 8201, "http", False)
start("sushy-tls", [a.sushy, "-i", "127.0.0.1", "-p", "8202", "--libvirt-uri", a.uri,
                    "--config", f"{work}/sushy-tls.conf",
                    "--ssl-certificate", f"{work}/shiftlab-tls/tls/bmc.crt",
                    "--ssl-key", f"{work}/shiftlab-tls/tls/bmc.key"], 8202, "https", True)

CTX = ssl.create_default_context()
CTX.check_hostname = False
CTX.verify_mode = ssl.CERT_NONE
AUTHZ = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def request(s, method, path, body=None):
    c = (http.client.HTTPSConnection("127.0.0.1", s["port"], context=CTX, timeout=120)
         if s["scheme"] == "https" else http.client.HTTPConnection("127.0.0.1", s["port"], timeout=120))
    h = {"Connection": "close"}
    if s["auth"]:
        h["Authorization"] = AUTHZ
    if body is not None:
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def wait_ready(s):
    for _ in range(300):
        try:
            if request(s, "GET", "/redfish/v1/")[0] == 200:
                return
        except OSError:
            pass
        if s["proc"].poll() is not None:
            break
        time.sleep(0.1)
    sys.exit(f"server {s['base']} did not come up; see {work}")


def cleanup():
    for pr in procs:
        if pr.poll() is None:
            pr.terminate()
    for pr in procs:
        try:
            pr.wait(10)
        except subprocess.TimeoutExpired:
            pr.kill()


try:
    for s in servers.values():
        wait_ready(s)
    path = f"/redfish/v1/Systems/{uuid}"
    for k, s in servers.items():
        st, body = request(s, "GET", path)
        if st != 200 or json.loads(body).get("Id") not in (uuid, a.domain):
            sys.exit(f"{k}: GET {path} -> {st} {body[:200]!r}")
        for _ in range(20):  # warm up
            request(s, "GET", path)
    # the limit: a minimal hyper server answering every request with a body of
    # the size shiftlab's GET returns, under the same ab load (plain HTTP)
    size = len(request(servers["shiftlab-http"], "GET", path)[1])
    start("limit-http", [a.limit, "127.0.0.1:8301", str(size)], 8301, "http", False)
    servers["limit-http"]["size"] = size
    for _ in range(100):
        try:
            if request(servers["limit-http"], "GET", path)[0] == 200:
                break
        except OSError:
            time.sleep(0.1)

    # ------------------------------------------------------------ GET load
    def cpu_seconds(pid):
        # the server's CPU time (user + system, every thread, exited ones
        # included): what serving cost it, whatever else ran on the machine
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def ab(s, concurrency, n):
        cmd = ["ab", "-q", "-r", "-s", "120", "-t", str(a.seconds), "-n", str(n), "-c", str(concurrency)]
        if s["auth"]:
            cmd += ["-A", f"{USER}:{PASSWORD}"]
        cpu0 = cpu_seconds(s["proc"].pid)
        out = sh(*cmd, s["base"] + path)
        cpu = cpu_seconds(s["proc"].pid) - cpu0
        num = lambda pat: float(re.search(pat, out, re.M).group(1))  # noqa: E731
        pct = dict((int(k), float(v)) for k, v in re.findall(r"^\s+(\d+)%\s+(\d+)", out, re.M))
        non2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
        # ab counts a body whose length differs from the first one as
        # failed; only connection errors and non-2xx answers are failures.
        kinds = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", out)
        errors = sum(int(x) for i, x in enumerate(kinds.groups()) if i != 2) if kinds else 0
        return dict(
            rps=num(r"Requests per second:\s+([\d.]+)"),
            mean_ms=num(r"Time per request:\s+([\d.]+) \[ms\] \(mean\)$"),
            p50=pct.get(50), p99=pct.get(99),
            done=int(num(r"Complete requests:\s+(\d+)")),
            failed=errors + (int(non2xx.group(1)) if non2xx else 0),
            other_length=int(kinds.group(3)) if kinds else 0,
            cpu=cpu,
        )

    get = {}
    pairs = {}
    for cfg in ("http", "tls"):
        for conc, n in ((1, a.seq_requests), (16, a.conc_requests)):
            for impl in ("shiftlab", "sushy"):
                key = f"{impl}-{cfg}"
                # sushy is ~100x slower: a smaller count keeps the run bounded
                count = n if impl == "shiftlab" else max(50, n // 20)
                get[(key, conc)] = ab(servers[key], conc, count)
                print(f"  GET {key:14} c={conc:<2} {get[(key, conc)]}", file=sys.stderr)
            if cfg == "http":
                # shiftlab and the limit back to back, several times: each pair
                # is measured at one moment (the machine's load moves between
                # moments), the ratio is the pairs' median
                first = get[("shiftlab-http", conc)]
                for i in range(a.limit_pairs):
                    s = first if i == 0 else ab(servers["shiftlab-http"], conc, n)
                    lim = ab(servers["limit-http"], conc, n)
                    pairs.setdefault(conc, []).append((s, lim))
                    print(f"  GET pair {i}  c={conc:<2} shiftlab {s['rps']:.0f} limit {lim['rps']:.0f} req/s", file=sys.stderr)
                get[("limit-http", conc)] = lim

    rss = {}
    for k, s in servers.items():
        status = open(f"/proc/{s['proc'].pid}/status").read()
        kb = lambda f: int(re.search(rf"^{f}:\s+(\d+) kB", status, re.M).group(1))  # noqa: E731
        rss[k] = (kb("VmRSS"), kb("VmHWM"))

    # ------------------------------------------------------------ power
    def timed(f):
        t = time.perf_counter()
        f()
        return (time.perf_counter() - t) * 1000

    def reset(s, kind):
        st, body = request(s, "POST", f"{path}/Actions/ComputerSystem.Reset", {"ResetType": kind})
        if st not in (200, 202, 204):
            sys.exit(f"{s['base']} {kind} -> {st} {body[:300]!r}")

    def check_state(want):
        got = dom.isActive() == 1
        if got != want:
            sys.exit(f"domain {'running' if got else 'off'}, expected the opposite")

    power = {k: {"On": [], "ForceOff": []} for k in
             ("libvirt", "virsh", "shiftlab-http", "sushy-http", "shiftlab-tls", "sushy-tls")}
    for _ in range(a.rounds):
        for k in power:
            if k == "libvirt":
                on, off = dom.create, dom.destroy
            elif k == "virsh":
                on = lambda: sh("virsh", "-q", "-c", a.uri, "start", a.domain)  # noqa: E731
                off = lambda: sh("virsh", "-q", "-c", a.uri, "destroy", a.domain)  # noqa: E731
            else:
                s = servers[k]
                on = lambda s=s: reset(s, "On")  # noqa: E731
                off = lambda s=s: reset(s, "ForceOff")  # noqa: E731
            power[k]["On"].append(timed(on))
            check_state(True)
            time.sleep(0.3)  # let the guest get going, as it would between Ironic's calls
            power[k]["ForceOff"].append(timed(off))
            check_state(False)
finally:
    cleanup()

# ---------------------------------------------------------------- report
med = statistics.median
out = []
w = out.append
w(f"GET /redfish/v1/Systems/{{id}}: new connection per request (ab, HTTP/1.0); "
  f"shiftlab {a.seq_requests}/{a.conc_requests} requests, sushy 1/20 of that, at most {a.seconds} s each")
w("")
w("| transport | clients | shiftlab req/s | sushy req/s | ratio | shiftlab p50 / p99 ms | sushy p50 / p99 ms | failed (shiftlab/sushy) |")
w("|---|---|---|---|---|---|---|---|")
for cfg, label in (("http", "HTTP, no auth"), ("tls", "TLS + Basic auth")):
    for conc in (1, 16):
        s, y = get[(f"shiftlab-{cfg}", conc)], get[(f"sushy-{cfg}", conc)]
        w(f"| {label} | {conc} | {s['rps']:.0f} | {y['rps']:.1f} | **{s['rps'] / y['rps']:.0f}×** | "
          f"{s['p50']:.0f} / {s['p99']:.0f} | {y['p50']:.0f} / {y['p99']:.0f} | {s['failed']}/{y['failed']} |")
w("")
w(f"Limit: a minimal hyper server (examples/bmc_limit.rs, same runtime and HTTP/1 stack) answering "
  f"every request with a {servers['limit-http']['size']}-byte body, the size of shiftlab's GET, same ab load; "
  f"{a.limit_pairs} shiftlab/limit pairs back to back per row, medians (ratio: median of the pairs' ratios, "
  f"min–max in brackets)")
w("")
w("| transport | clients | limit req/s | shiftlab req/s | shiftlab / limit | CPU µs per request, limit / shiftlab | CPU per request, limit / shiftlab |")
w("|---|---|---|---|---|---|---|")
for conc in (1, 16):
    ps = pairs[conc]
    ratios = sorted(x["rps"] / y["rps"] for x, y in ps)
    # CPU per request over all the pairs' requests
    cs = sum(x["cpu"] for x, _ in ps) / sum(x["done"] for x, _ in ps) * 1e6
    cl = sum(y["cpu"] for _, y in ps) / sum(y["done"] for _, y in ps) * 1e6
    w(f"| HTTP, no auth | {conc} | {med(y['rps'] for _, y in ps):.0f} | {med(x['rps'] for x, _ in ps):.0f} | "
      f"**{med(ratios):.2f}×** ({ratios[0]:.2f}–{ratios[-1]:.2f}) | {cl:.0f} / {cs:.0f} | **{cl / cs:.2f}×** |")
w("")
w(f"Power (POST ComputerSystem.Reset, one request each, {a.rounds} rounds interleaved on the same domain; median ms)")
w("")
w("| | On | ForceOff | On vs libvirt | ForceOff vs libvirt |")
w("|---|---|---|---|---|")
base_on, base_off = med(power["libvirt"]["On"]), med(power["libvirt"]["ForceOff"])
names = {"libvirt": "raw libvirt call (python, open connection)", "virsh": "virsh start / destroy",
         "shiftlab-http": "shiftlab, HTTP", "sushy-http": "sushy-emulator, HTTP",
         "shiftlab-tls": "shiftlab, TLS + auth", "sushy-tls": "sushy-emulator, TLS + auth"}
for k, v in power.items():
    on, off = med(v["On"]), med(v["ForceOff"])
    w(f"| {names[k]} | {on:.0f} | {off:.0f} | {on / base_on:.2f}× | {off / base_off:.2f}× |")
w("")
w("Memory after the load (kB): current RSS / peak RSS")
w("")
w("| server | shiftlab | sushy-emulator |")
w("|---|---|---|")
for cfg in ("http", "tls"):
    s, y = rss[f"shiftlab-{cfg}"], rss[f"sushy-{cfg}"]
    w(f"| {cfg} | {s[0]} / {s[1]} | {y[0]} / {y[1]} |")
print("\n".join(out))
