#!/usr/bin/env python3
"""A full-page screenshot of serve's cluster page, once the page has drawn it.

    page-shot.py URL SELECTOR OUT.png [SECONDS]

Debian's headless Chromium, driven over the DevTools pipe
(--remote-debugging-pipe: NUL-terminated JSON on fds 3 and 4), opens URL, waits
up to SECONDS (30) for SELECTOR to match (the page draws from its event stream
after it has loaded, so `chromium --screenshot` alone shots "Loading…"), and
saves the whole page as a PNG. scripts/demo uses it; Python's standard library
only.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: page-shot.py URL SELECTOR OUT.png [SECONDS]")
    url, selector, out = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) == 5 else 30.0
    profile = tempfile.mkdtemp(prefix="shiftlab-shot.")
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()

    def fds():
        r, w = os.dup(to_r), os.dup(from_w)
        os.dup2(r, 3)
        os.dup2(w, 4)

    stderr = open(os.path.join(profile, "stderr"), "wb")
    proc = subprocess.Popen(
        [shutil.which("chromium") or "/usr/bin/chromium", "--headless", "--no-sandbox",
         "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
        preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=stderr)
    os.close(to_r)
    os.close(from_w)
    state = {"buf": b"", "id": 0, "session": None}
    deadline = time.time() + seconds + 30

    def call(method, params=None):
        state["id"] += 1
        msg = {"id": state["id"], "method": method, "params": params or {}}
        if state["session"]:
            msg["sessionId"] = state["session"]
        os.write(to_w, json.dumps(msg).encode() + b"\0")
        while time.time() < deadline:
            while b"\0" not in state["buf"]:
                chunk = os.read(from_r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                state["buf"] += chunk
            raw, state["buf"] = state["buf"].split(b"\0", 1)
            r = json.loads(raw)
            if r.get("id") == state["id"]:
                if "error" in r:
                    raise RuntimeError(f"{method}: {r['error']}")
                return r.get("result", {})
        raise RuntimeError(f"{method}: no answer in time")

    def js(expr):
        r = call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        return r.get("result", {}).get("value")

    try:
        target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
        state["session"] = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        call("Page.enable")
        call("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        call("Page.navigate", {"url": url})
        until = time.time() + seconds
        while not js(f"!!document.querySelector({json.dumps(selector)})"):
            if time.time() > until:
                text = js("document.body ? document.body.innerText : ''") or ""
                raise RuntimeError(f"{selector} not on the page in {seconds:.0f} s; it shows: {text[:300]}")
            time.sleep(0.2)
        height = js("document.documentElement.scrollHeight") or 900
        call("Emulation.setDeviceMetricsOverride",
             {"width": 1280, "height": min(int(height), 4000), "deviceScaleFactor": 1, "mobile": False})
        png = call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(out, "wb") as f:
            f.write(base64.b64decode(png))
    except RuntimeError as e:
        sys.exit(f"page-shot: {e}")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


main()
