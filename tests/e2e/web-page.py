#!/usr/bin/env python3
"""Drive Debian's headless Chromium against shiftlab serve's web page.

    web-page.py running BASE CLUSTER
        the cluster page shows the target running now, as the API does
    web-page.py full BASE CLUSTER SCREENSHOT.png
        every node, backend state and install target of the API is on the page,
        the page is accessible (landmarks, headings, table semantics, a live
        region) and fits a phone's width; a full-page screenshot is saved; the
        overview shows the cluster; without EventSource the page polls
    web-page.py health BASE CLUSTER unreachable
        the health panel says "API not reachable: <the API's reason>" and the
        rest of the page is there
    web-page.py health BASE CLUSTER degraded OPERATOR CSR
        the health panel shows the ClusterVersion, OPERATOR degraded with its
        message, every Node with its Ready state, CSR pending with its requestor
        and a date in UTC with its age; the oc login and export KUBECONFIG lines
        to copy are the API's; the PTR records are collapsed
    web-page.py kill BASE CLUSTER FRONTEND/NODE MAX_SECONDS -- CMD...
        with the page open, CMD (kills a stand-in); the backend goes DOWN in the
        API and then on the page without a reload, within 5 s of the API and
        MAX_SECONDS of CMD

With WEB_TOKEN set (the page's --web-token-file), the API is asked with it
(Authorization: Bearer) and the browser opens its first page with ?token=, as a
user does (the page sets its cookie and drops the token from the URL).

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
NUL-terminated JSON messages on fds 3 and 4, chromium's
content/browser/devtools/devtools_pipe_handler.cc), so no WebSocket client and
no package from PyPI is needed inside the sandbox, which has no network.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def fail(msg):
    print(f"FAIL web-page: {msg}", flush=True)
    sys.exit(1)


class Browser:
    """One headless Chromium with one page, spoken to over the pipe."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="shiftlab-web-chromium.")
        to_r, self.to_w = os.pipe()  # we write commands -> chromium's fd 3
        self.from_r, from_w = os.pipe()  # chromium's fd 4 -> we read

        def fds():
            # In the child: the pipe ends onto fds 3 and 4 (through copies, in
            # case one of them is 3 or 4 already); pass_fds keeps 3 and 4 open.
            r, w = os.dup(to_r), os.dup(from_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [shutil.which("chromium") or "/usr/bin/chromium", *FLAGS,
             f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4),
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.profile, "stderr"), "wb"))
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_r, 1 << 16)
            if not chunk:
                fail("chromium closed the DevTools pipe: " +
                     open(os.path.join(self.profile, "stderr"), "rb").read()[-2000:].decode(errors="replace"))
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self._read()
            if r.get("id") == self.next_id:
                if "error" in r:
                    fail(f"{method}: {r['error']}")
                return r.get("result", {})
        fail(f"{method}: no answer in {timeout} s")

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            fail(f"script error in {expr[:80]}…: {r['exceptionDetails'].get('text')} "
                 f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r["result"].get("value")

    def size(self, width, height, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})

    def open(self, url):
        token = os.environ.get("WEB_TOKEN")
        if token and not getattr(self, "authed", False):
            url += ("&" if "?" in url else "?") + "token=" + token
            self.authed = True
        self.call("Page.navigate", {"url": url})

    def wait(self, expr, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.js(expr):
                return
            time.sleep(0.2)
        fail(f"timed out waiting for {what}; page text: {self.js('document.body.innerText')[:1500]}")

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def api(base, cluster):
    req = urllib.request.Request(f"{base}/api/clusters/{cluster}")
    if os.environ.get("WEB_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["WEB_TOKEN"])
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def backends(status):
    lb = (status.get("services") or {}).get("load_balancer") or {"frontends": []}
    return {f"{f['name']}/{b['node']}": b["status"] for f in lb["frontends"] for b in f["backends"]}


PAGE_FACTS = """(() => ({
  nodes: Object.fromEntries([...document.querySelectorAll('li.node')].map(e => [e.dataset.node, e.dataset.state])),
  backends: Object.fromEntries([...document.querySelectorAll('tr[data-backend]')].map(e => [e.dataset.backend, e.dataset.status])),
  targets: Object.fromEntries([...document.querySelectorAll('tr[data-target]')].map(e => [e.dataset.target, e.dataset.state])),
  current: [...document.querySelectorAll('tr[aria-current="step"]')].map(e => e.dataset.target),
  runningNow: (document.getElementById('running-now') || {}).textContent || '',
  dns: document.querySelectorAll('#dns-records tbody tr, #dns-ptr tbody tr').length,
  consoles: [...document.querySelectorAll('details[data-console]')].map(e => e.dataset.console),
  access: (document.getElementById('access') || {}).textContent || '',
  durations: [...document.querySelectorAll('tr[data-target][data-state="done"] td:nth-child(4)')].map(e => e.textContent),
}))()"""


def page_facts(b):
    return b.js(PAGE_FACTS)


def open_cluster(b, base, cluster):
    b.open(f"{base}/clusters/{cluster}")
    b.wait("!!document.querySelector('tr[data-target], li.node')", "the cluster page to render")


def agree(b, base, cluster, keys, timeout=8):
    """The page and the API agree on `keys` (the page may be one update behind)."""
    deadline = time.time() + timeout
    while True:
        s = api(base, cluster)
        want = {
            "nodes": {n["name"]: n["state"] for n in s["nodes"]},
            "backends": backends(s),
            "targets": {t["target"]: t["status"] for t in (s.get("install") or {}).get("targets", [])},
        }
        got = page_facts(b)
        diff = {k: (want[k], got[k]) for k in keys if want[k] != got[k]}
        if not diff:
            return s, got
        if time.time() > deadline:
            fail(f"page and API disagree: {json.dumps(diff)}")
        time.sleep(0.5)


def running(base, cluster):
    b = Browser()
    try:
        b.size(1280, 900)
        open_cluster(b, base, cluster)
        deadline = time.time() + 120
        while True:
            s = api(base, cluster)
            started = [t["target"] for t in (s.get("install") or {}).get("targets", []) if t["status"] == "started"]
            got = page_facts(b)
            if started and got["current"] == started and started[0] in got["runningNow"]:
                print(f"running now on the page: {started[0]}")
                return
            if time.time() > deadline:
                fail(f"no running target shown: API {started}, page {got['current']} / {got['runningNow']!r}")
            time.sleep(0.5)
    finally:
        b.close()


def full(base, cluster, shot):
    b = Browser()
    try:
        b.size(1280, 900)
        open_cluster(b, base, cluster)
        s, got = agree(b, base, cluster, ["nodes", "backends", "targets"])
        if not got["nodes"] or not got["backends"] or not got["targets"]:
            fail(f"an empty section: {json.dumps(got)}")
        print(f"page shows {len(got['nodes'])} nodes, {len(got['backends'])} backends, {len(got['targets'])} targets")
        if got["dns"] != len(s["lab"]["dns"]) or got["dns"] == 0:
            fail(f"DNS records: page {got['dns']}, plan {len(s['lab']['dns'])}")
        if sorted(got["consoles"]) != sorted(n["name"] for n in s["nodes"]):
            fail(f"console tails: {got['consoles']}")
        if s["lab"]["console_url"] not in got["access"]:
            fail(f"console URL not shown: {got['access']!r}")
        if not s["lab"].get("kubeconfig") or s["lab"]["kubeconfig"] not in got["access"]:
            fail(f"kubeconfig not shown: {got['access']!r}")
        if any(d in ("", "—") for d in got["durations"]):
            fail(f"a done target without a duration: {got['durations']}")
        # Accessibility: landmarks, one h1, a heading per section, table semantics,
        # a live region, every table column headed.
        a11y = b.js("""(() => ({
          main: document.querySelectorAll('main').length,
          header: document.querySelectorAll('body > header').length,
          nav: document.querySelectorAll('nav[aria-label]').length,
          h1: document.querySelectorAll('h1').length,
          unlabelled: [...document.querySelectorAll('main section')].filter(s => !s.getAttribute('aria-labelledby') || !document.getElementById(s.getAttribute('aria-labelledby'))).length,
          colheads: [...document.querySelectorAll('table')].every(t => t.querySelectorAll('thead th[scope=col]').length > 0),
          live: document.querySelectorAll('[aria-live]').length,
          lang: document.documentElement.lang,
        }))()""")
        if a11y != {"main": 1, "header": 1, "nav": 1, "h1": 1, "unlabelled": 0, "colheads": True,
                    "live": 1, "lang": "en"}:
            fail(f"accessibility: {a11y}")
        # A phone: nothing wider than the screen but the scrolling tables.
        b.size(390, 800, mobile=True)
        time.sleep(0.5)
        over = b.js("document.documentElement.scrollWidth - window.innerWidth")
        if over > 1:
            fail(f"the page is {over}px wider than a phone's screen")
        b.size(1280, 900)
        time.sleep(0.5)
        height = b.js("Math.ceil(document.documentElement.scrollHeight)")
        b.size(1280, min(height, 4000))
        time.sleep(0.5)
        png = b.call("Page.captureScreenshot", {"format": "png"})["data"]
        import base64
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))
        print(f"screenshot {shot} (1280x{min(height, 4000)})")
        # The overview: the cluster's row with its nodes and install progress.
        b.size(1280, 900)
        b.open(f"{base}/")
        sel = json.dumps(f'tr[data-cluster="{cluster}"]')
        b.wait(f"!!document.querySelector({sel})", "the overview's row")
        row = b.js(f"document.querySelector({sel}).innerText")
        n = len(s["nodes"])
        t = len(s["install"]["targets"])
        if f"{n}/{n}" not in row or f"{t}/{t}" not in row:
            fail(f"overview row: {row!r}")
        print(f"overview: {' '.join(row.split())}")
    finally:
        b.close()
    # Without EventSource the page polls, and still shows the cluster.
    b = Browser()
    try:
        b.call("Page.addScriptToEvaluateOnNewDocument", {"source": "delete window.EventSource;"})
        b.size(1280, 900)
        open_cluster(b, base, cluster)
        agree(b, base, cluster, ["nodes", "targets"])
        b.wait("document.getElementById('connection').textContent.includes('polling')", "the polling fallback")
        print("without EventSource: " + b.js("document.getElementById('connection').textContent"))
    finally:
        b.close()


def health(base, cluster, want, operator=None, csr=None):
    b = Browser()
    try:
        b.size(1280, 900)
        open_cluster(b, base, cluster)
        agree(b, base, cluster, ["nodes"])
        if want == "unreachable":
            b.wait("(document.getElementById('health-state') || {textContent: ''}).textContent"
                   ".startsWith('API not reachable: ')", "API not reachable on the page")
            s = api(base, cluster)
            said = b.js("document.getElementById('health-state').textContent")
            if s["health"].get("state") != "unreachable" or said != "API not reachable: " + s["health"]["reason"]:
                fail(f"the page says {said!r}, the API {s['health']}")
            print(f"health: {said}")
            return
        op = json.dumps(f'#operators tr[data-operator="{operator}"][data-degraded="True"]')
        row = json.dumps(f'#pending-csrs tr[data-csr="{csr}"]')
        b.wait(f"!!document.querySelector({op}) && !!document.querySelector({row})",
               f"{operator} degraded and {csr} pending in the health panel", timeout=60)
        s = api(base, cluster)
        h = s["health"]
        if h.get("state") != "ok":
            fail(f"the API's health: {h}")
        o = next(o for o in h["operators"] if o["name"] == operator)
        got = b.js(f"document.querySelector({op}).innerText")
        if o["degraded"]["message"] not in got or "UTC" not in got:
            fail(f"operator row {got!r}, API {o}")
        c = next(c for c in h["pending_csrs"] if c["name"] == csr)
        got = b.js(f"document.querySelector({row}).innerText")
        if c["requestor"] not in got or "UTC" not in got or "ago" not in got:
            fail(f"CSR row {got!r}, API {c}")
        cv = b.js("document.getElementById('cluster-version').innerText")
        if h["version"]["desired"] not in cv:
            fail(f"ClusterVersion box {cv!r}, API {h['version']}")
        ready = b.js("Object.fromEntries([...document.querySelectorAll('tr[data-health-node]')]"
                     ".map(e => [e.dataset.healthNode, e.dataset.ready]))")
        want_ready = {n["name"]: (n["ready"] or {}).get("status", "Unknown") for n in h["nodes"]}
        if ready != want_ready or not ready:
            fail(f"nodes Ready on the page {ready}, API {want_ready}")
        lines = b.js("""(() => ({login: document.getElementById('oc-login').value,
          login_ro: document.getElementById('oc-login').readOnly,
          export: (document.getElementById('kubeconfig-export') || {}).value}))()""")
        if lines != {"login": s["lab"]["oc_login"], "login_ro": True, "export": s["lab"]["kubeconfig_export"]}:
            fail(f"the lines to copy: {lines}, API {s['lab']['oc_login']!r} {s['lab']['kubeconfig_export']!r}")
        ptr = b.js("""(() => { const d = document.getElementById('dns-ptr-details');
          return d ? {open: d.open, rows: d.querySelectorAll('tbody tr').length} : null; })()""")
        n_ptr = sum(1 for r in s["lab"]["dns"] if r["type"] == "PTR")
        if ptr != {"open": False, "rows": n_ptr} or n_ptr == 0:
            fail(f"PTR records: {ptr}, {n_ptr} in the plan")
        # Storage and users: the plan's class and the API's, the export, the users.
        st = s["storage"]
        classes = b.js("Object.fromEntries([...document.querySelectorAll('#storage-classes tr[data-storage-class]')]"
                       ".map(e => [e.dataset.storageClass + ' ' + e.dataset.source, e.innerText.includes('default')]))")
        want_classes = {f"{c['name']} plan": c["default"] for c in st["storage_classes"]}
        want_classes.update({f"{c['name']} API": c["default"] for c in h["storage_classes"]})
        if classes != want_classes or "shiftlab-nfs API" not in classes:
            fail(f"StorageClasses on the page {classes}, API {want_classes}")
        e = st["export"]
        box = b.js("document.getElementById('nfs-export').innerText")
        if (f"{e['server']}:{e['path']}" not in box or e["clients"] not in box
                or ("up" if e["server_running"] else "down") not in box or "free" not in box):
            fail(f"NFS export box {box!r}, API {e}")
        users = b.js("Object.fromEntries([...document.querySelectorAll('#users tr[data-user]')]"
                     ".map(e => [e.dataset.user, e.dataset.admin]))")
        want_users = {u["name"]: "true" if u["admin"] else "false" for u in s["users"]}
        if users != want_users or not users:
            fail(f"users on the page {users}, API {want_users}")
        print(f"storage: {sorted(classes)}, export {e['path']} server {'up' if e['server_running'] else 'down'}; "
              f"users {users}")
        print(f"health: {operator} degraded, {csr} pending, {len(ready)} nodes, PTR ({n_ptr}) collapsed; "
              f"{lines['login']!r}")
    finally:
        b.close()


def kill(base, cluster, backend, max_s, cmd):
    b = Browser()
    try:
        b.size(1280, 900)
        open_cluster(b, base, cluster)
        agree(b, base, cluster, ["backends"])
        if backends(api(base, cluster)).get(backend) != "UP":
            fail(f"{backend} is not UP before the kill: {backends(api(base, cluster))}")
        b.js("window.__notReloaded = true")
        t0 = time.time()
        subprocess.run(cmd, check=True)
        api_down = page_down = None
        sel = json.dumps(f'tr[data-backend="{backend}"]')
        while time.time() - t0 < max_s + 10:
            now = time.time() - t0
            if api_down is None and backends(api(base, cluster)).get(backend) == "DOWN":
                api_down = now
            if page_down is None and b.js(f"(document.querySelector({sel}) || {{dataset: {{}}}}).dataset.status") == "DOWN":
                page_down = now
            if api_down is not None and page_down is not None:
                break
            time.sleep(0.25)
        print(f"{backend}: DOWN in the API after {api_down} s, on the page after {page_down} s")
        if page_down is None:
            fail(f"{backend} never went DOWN on the page")
        if not b.js("window.__notReloaded === true"):
            fail("the page reloaded")
        if api_down is not None and page_down - api_down > 5:
            fail(f"the page showed DOWN {page_down - api_down:.1f} s after the API")
        if page_down > max_s:
            fail(f"DOWN on the page after {page_down:.1f} s, more than {max_s} s")
        said = b.js("document.getElementById('announce').textContent")
        if backend.split("/")[1] not in said:
            fail(f"the live region did not announce the change: {said!r}")
    finally:
        b.close()


def main():
    a = sys.argv[1:]
    if a[:1] == ["running"] and len(a) == 3:
        running(a[1], a[2])
    elif a[:1] == ["full"] and len(a) == 4:
        full(a[1], a[2], a[3])
    elif a[:1] == ["health"] and len(a) == 4 and a[3] == "unreachable":
        health(a[1], a[2], a[3])
    elif a[:1] == ["health"] and len(a) == 6 and a[3] == "degraded":
        health(a[1], a[2], a[3], a[4], a[5])
    elif a[:1] == ["kill"] and len(a) > 6 and a[5] == "--":
        kill(a[1], a[2], a[3], float(a[4]), a[6:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
