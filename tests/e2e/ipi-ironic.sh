#!/usr/bin/env bash
# The fake installer's Ironic (tests/fixtures/fake-openshift-install/ironic.py,
# real sushy) against `shiftlab bmc` on a real libvirtd in the sandbox: two tiny
# QEMU domains deployed concurrently over TLS with the BMC's password — power
# off, insert the ISO from an HTTP server on 127.0.0.1, Cd/Once, power on, wait
# for the node's report, eject — checked through virsh and Redfish; a rerun
# leaves deployed hosts alone; a wrong password fails with the BMC's message.
# The nodes' report is a double here (tiny domains boot nothing): it says
# "disk" once the domain runs with its boot override consumed, which is what
# the stand-in's report says after its install-and-reboot (assets/standin).
NAME=ipi-ironic
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

bmc_suite 170 "$@"

e2e_workdir ipi-ironic
bmc_pids
on_exit '[ "$rc" -eq 0 ] || tail -n 30 "$work/bmc.log" "$work/ironic.log"'

tiny_domains ipi-ironic-a ipi-ironic-b
for d in a b; do
  virsh -q start "ipi-ironic-$d" >/dev/null # Ironic must power it off first
done
iso_server 18081 live.iso
# The report double: /<domain> says disk once the domain runs.
cat >"$work/report.py" <<'EOF'
import http.server, json, subprocess
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        dom = self.path.strip("/")
        st = subprocess.run(["virsh", "-q", "domstate", dom], capture_output=True, text=True).stdout.strip()
        body = json.dumps({"boot": "disk" if st == "running" else "none"}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 18082), H).serve_forever()
EOF
python3 "$work/report.py" &
pids+=($!)
port=18444
bmc_start "$port" ipi-ironic-a ipi-ironic-b
wait_for 10 "the report double" curl -s "http://127.0.0.1:18082/ipi-ironic-a"

password=$(cat "$work/bmc/password")
config() { # password
  jq -n --arg pw "$1" --arg ca "$work/bmc/tls/ca.crt" --arg st "$work/ironic" \
    --arg a "$(virsh domuuid ipi-ironic-a)" --arg b "$(virsh domuuid ipi-ironic-b)" --argjson port "$port" '
    def host($n; $u): {name: $n, username: "admin", password: $pw, disableCertificateVerification: false,
      address: "redfish-virtualmedia+https://127.0.0.1:\($port)/redfish/v1/Systems/\($u)",
      report: "http://127.0.0.1:18082/\($n)"};
    {iso: "http://127.0.0.1:18081/live.iso", ca: $ca, state: $st, timeout: 60,
     hosts: [host("ipi-ironic-a"; $a), host("ipi-ironic-b"; $b)]}'
}
ironic() { "$venv/bin/python" "$repo/tests/fixtures/fake-openshift-install/ironic.py"; }

# A wrong password: the BMC's refusal, nothing deployed.
if config wrong | ironic 2>"$work/ironic.log"; then fail "a wrong password deployed"; fi
grep -q 'level=error msg="ipi-ironic-a: .*401' "$work/ironic.log" || fail "no BMC refusal in: $(cat "$work/ironic.log")"
[ ! -e "$work/ironic/ipi-ironic-a" ] || fail "deployed with a wrong password"
step "ok: a wrong password fails with the BMC's answer"

config "$password" | ironic 2>"$work/ironic.log" || fail "ironic failed: $(cat "$work/ironic.log")"
for d in a b; do
  grep -q "ipi-ironic-$d: active" "$work/ironic.log" || fail "$d not active"
  [ "$(virsh -q domstate "ipi-ironic-$d")" = running ] || fail "$d not running"
  # The definition: the BMC applies an eject on a running domain at its next
  # start when the live change is refused (its log says so).
  virsh -q domblklist "ipi-ironic-$d" --details --inactive | awk '$2 == "cdrom" && $4 != "-" {exit 1}' ||
    fail "$d: media still inserted: $(virsh -q domblklist "ipi-ironic-$d" --details)"
done
step "ok: both hosts: powered off, media inserted, Cd/Once, on, reported, ejected"
grep -q 'boot override set' "$work/bmc.log" || fail "the BMC did not log a boot override"
[ "$(grep -c 'GET /live.iso' "$work/http.log")" -ge 1 ] || fail "the ISO was not fetched from the HTTP server"
step "ok: the BMC set the boot overrides and fetched the ISO over HTTP"

config "$password" | ironic 2>"$work/ironic.log" || fail "rerun failed"
[ "$(grep -c 'active already' "$work/ironic.log")" = 2 ] || fail "rerun redeployed: $(cat "$work/ironic.log")"
step "ok: a rerun leaves deployed hosts alone"
echo "PASS $NAME"
