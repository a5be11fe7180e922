#!/usr/bin/env bash
# Host services end to end, in namespaces this script creates (needs root,
# haproxy, python3, curl, jq):
#   - a "host" network namespace with the cluster bridge sl-svce2e holding the
#     gateway 192.168.150.1 and the load balancer's address 192.168.150.2;
#   - one network namespace per stand-in node (1 bootstrap, 3 control planes,
#     2 workers), plugged into the bridge by a veth, running a small HTTP
#     server that acts out the node: /readyz on 6443 (plain HTTP: a rehearsal),
#     /config/<role> on 22623, 80/443 on workers, GET :8000/fail-readyz;
#   - a private mount namespace where /etc/hosts is a bind-mounted copy, so the
#     real hosts-file mechanism runs without touching the machine's file.
# It runs `shiftlab serve` there (under systemd's default soft open-file limit,
# 1,024) and drives it with the CLI only; then floods its artifact port with
# 2,000 half-open requests from one node's address, and from 20 addresses,
# while another node fetches its Ignition and the CLI and the page are used.
NAME=services-netns
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_TRACE:-}" ] && set -x
tag=${SVC_E2E_TAG:-svce2e$$}
H=${tag}h
NODES="bootstrap:10 ctlplane-0:11 ctlplane-1:12 ctlplane-2:13 worker-0:20 worker-1:21"

if [ "${1:-}" != "--inside" ]; then
  for t in haproxy python3 curl jq; do
    command -v "$t" >/dev/null || fail "$t is missing"
  done
  [ "$(id -u)" -eq 0 ] || fail "needs root"
  [ -x "$bin" ] || (cd "$repo" && cargo build -q --bin shiftlab)
  netns_host "$H" sl-svce2e 192.168.150.1/24 192.168.150.2/24
  i=0
  for n in $NODES; do
    name=${n%%:*} last=${n##*:} ns="${tag}-${name}"
    i=$((i + 1))
    netns_node "$ns" "sv${$}n$i" "192.168.150.$last/24"
    case $name in
      worker*) ports="80 443" role=worker ;;
      bootstrap) ports="6443 22623" role=bootstrap ;;
      *) ports="6443 22623" role=master ;;
    esac
    ip netns exec "$ns" python3 - "svc-$name" "$role" $ports >/dev/null 2>&1 <<'PY' &
import http.server, socketserver, sys, threading
name, role, ports = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
state = {"fail": False}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        port = self.server.server_address[1]
        if port == 8000 and self.path == "/fail-readyz":
            state["fail"] = True
        code = 500 if (self.path == "/readyz" and state["fail"]) else 200
        body = f"{name} {self.path}\n".encode()
        self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True; allow_reuse_address = True
for p in ports + [8000]:
    threading.Thread(target=S(("0.0.0.0", p), H).serve_forever, daemon=True).start()
threading.Event().wait()
PY
  done
  # worker-1 floods from 20 addresses of its own.
  for i in $(seq 100 119); do
    ip -n "${tag}-worker-1" addr add "192.168.150.$i/24" dev eth0
  done
  SVC_E2E_TAG=$tag netns_inside
  exit $?
fi

# ---- inside the host namespace, with a private mount namespace -------------
e2e_workdir services-netns
cp /etc/hosts "$work/hosts.orig"
cp /etc/hosts "$work/hosts"
mount --bind "$work/hosts" /etc/hosts
on_exit 'umount /etc/hosts'
state=$work/state
sl() { "$bin" --state-dir "$state" "$@"; }
fail() { echo "FAIL $NAME: $*"; echo "--- serve log"; tail -40 "$work/serve.log"; exit 1; }
bodies() { # url count
  for _ in $(seq "$2"); do curl -s --max-time 2 "$1" | cut -d' ' -f1; done | sort -u
}

cat >"$work/cluster.yaml" <<'EOF'
cluster: svc
domain: lab.test
distribution: okd
method: upi
rehearsal: true
ctlplanes: 3
workers: 2
network:
  cidr: 192.168.150.0/24
  bridge: sl-svce2e
EOF
mkdir -p "$state/clusters/svc"
HOME=$work sl plan -f "$work/cluster.yaml" -o json >"$state/clusters/svc/plan.json" 2>/dev/null

# The binary itself in the background, not the sl function: $! is then serve's
# own pid (a backgrounded function runs in a subshell: killing that left serve
# running).
# Under systemd's default limits (soft 1,024): serve raises its own.
SHIFTLAB_LOG=info prlimit --nofile=1024:16384 "$bin" --state-dir "$state" serve --host-dns hosts --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
on_exit 'stop_pid "$serve"'
wait_for 10 "serve's control socket" test -S "$state/serve.sock"
sl serve notify svc || fail "serve notify"

# Host-side resolution through /etc/hosts, and the API through the LB.
getent hosts api.svc.lab.test | grep '^192.168.150.2 ' >/dev/null || fail "api does not resolve"
getent hosts console-openshift-console.apps.svc.lab.test | grep '^192.168.150.2 ' >/dev/null || fail "*.apps does not resolve"
wait_for 10 "the API through the LB" curl -sf --max-time 2 http://api.svc.lab.test:6443/readyz
seen=$(bodies http://api.svc.lab.test:6443/readyz 30)
echo "6443 reached: $(echo $seen)"
[ "$(echo "$seen" | wc -l)" -ge 3 ] || fail "several API backends expected"
echo "$seen" | grep -x svc-bootstrap >/dev/null || fail "the bootstrap must serve before its removal"
echo "$seen" | grep worker >/dev/null && fail "workers behind 6443"
curl -sf --resolve api-int.svc.lab.test:22623:192.168.150.2 \
  http://api-int.svc.lab.test:22623/config/master | grep '/config/master' >/dev/null || fail "22623"
apps=$(bodies http://console-openshift-console.apps.svc.lab.test/ 10; bodies http://oauth-openshift.apps.svc.lab.test:443/ 10)
[ "$(echo "$apps" | sort -u | tr '\n' ' ')" = "svc-worker-0 svc-worker-1 " ] || fail "ingress: $apps"

# A control plane failing /readyz leaves within 30 s; traffic avoids it.
status() { sl serve status svc -o json | jq -r --arg n "$1" \
  '.load_balancer.frontends[] | select(.name=="api") | .backends[] | select(.node==$n) | .status'; }
is_status() { [ "$(status "$1")" = "$2" ]; }
wait_for 20 "ctlplane-0 checked" is_status svc-ctlplane-0 UP
curl -sf --max-time 2 http://192.168.150.11:8000/fail-readyz >/dev/null || fail "fail-readyz"
start=$(date +%s)
wait_for 30 "ctlplane-0 down" is_status svc-ctlplane-0 DOWN
echo "ctlplane-0 down after $(( $(date +%s) - start )) s"
bodies http://api.svc.lab.test:6443/ 20 | grep -x svc-ctlplane-0 >/dev/null && fail "traffic to a DOWN backend"

# Removing the bootstrap stops all traffic to it.
sl serve remove-bootstrap svc || fail "remove-bootstrap"
for url in http://api.svc.lab.test:6443/ http://192.168.150.2:22623/config/master; do
  bodies "$url" 20 | grep -x svc-bootstrap >/dev/null && fail "bootstrap still behind $url"
done
[ "$(status svc-bootstrap)" = removed ] || fail "status after removal"

# A killed HAProxy is restarted by serve.
pid=$(cat "$state/clusters/svc/haproxy.pid")
kill -9 "$pid"
wait_for 20 "haproxy restarted" sh -c "[ \"\$(cat $state/clusters/svc/haproxy.pid 2>/dev/null)\" != $pid ] && curl -sf --max-time 1 http://api.svc.lab.test:6443/readyz"
echo "haproxy $pid killed, restarted as $(cat "$state/clusters/svc/haproxy.pid")"

# Artifacts over HTTP on the cluster's address, with their digest.
echo '{"ignition":{"version":"3.4.0"}}' >"$state/clusters/svc/http/worker.ign"
curl -sf http://192.168.150.1:8080/worker.ign | cmp - "$state/clusters/svc/http/worker.ign" || fail "artifact"
[ "$(curl -sf http://192.168.150.1:8080/worker.ign.sha512)" = "sha512-$(sha512sum <"$state/clusters/svc/http/worker.ign" | cut -d' ' -f1)" ] || fail "digest"
[ "$(curl -s -o /dev/null -w '%{http_code}' --path-as-is http://192.168.150.1:8080/../plan.json)" = 404 ] || fail "traversal"

# Floods of half-open requests on the artifact port (open to the nodes by
# design), from one node's address, then from 20: meanwhile another node
# fetches its Ignition through the private route, the CLI reaches serve, the
# page loads. Afterwards HAProxy and host DNS are as they were.
grep '^Max open files' "/proc/$serve/limits" | contains -E '16384 +16384' || fail "soft open-file limit not raised: $(grep '^Max open files' "/proc/$serve/limits")"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; mkdir -p "$state/clusters/svc/http-private"; printf '%s\n' "$token" >"$state/clusters/svc/http-token")
echo '{"ignition":{"version":"3.4.0"},"secret":"x"}' >"$state/clusters/svc/http-private/ctlplane-1.ign"
chmod 600 "$state/clusters/svc/http-private/ctlplane-1.ign"
haproxy_pid=$(cat "$state/clusters/svc/haproxy.pid")
here=$(cd "$(dirname "$0")" && pwd)
in_node() { local n=$1; shift; ip netns exec "${tag}-$n" "$@"; }
flood() { # node label sources...
  local node=$1 label=$2 ready=$work/flood-$2
  shift 2
  rm -f "$ready"
  in_node "$node" python3 "$here/flood.py" 192.168.150.1 8080 2000 "$@" --hold 120 --ready "$ready" >/dev/null 2>&1 &
  flooder=$!
  wait_for 90 "the $label flood to open its connections" test -s "$ready"
  echo "flood from $label: $(cat "$ready"); serve holds $(ls "/proc/$serve/fd" | wc -l) descriptors"
  in_node ctlplane-1 curl -sf --max-time 10 "http://192.168.150.1:8080/$token/ctlplane-1.ign" \
    | cmp - "$state/clusters/svc/http-private/ctlplane-1.ign" || fail "Ignition during the $label flood"
  sl serve notify svc || fail "serve notify during the $label flood"
  curl -sf --max-time 10 http://127.0.0.1:8090/ | contains -i '<html' || fail "web page during the $label flood"
  curl -sf --max-time 10 http://api.svc.lab.test:6443/readyz >/dev/null || fail "the API during the $label flood"
  stop_pid "$flooder"
  flooder=
}
on_exit 'stop_pid "${flooder:-}"'
flood worker-0 "one address"
flood worker-1 "20 addresses" $(for i in $(seq 100 119); do echo "--source 192.168.150.$i"; done)
sleep 2 # a scan or two after the flood
contains 'cluster gone' "$work/serve.log" && fail "serve logged a cluster gone under the flood"
[ "$(cat "$state/clusters/svc/haproxy.pid")" = "$haproxy_pid" ] && kill -0 "$haproxy_pid" || fail "haproxy did not run through the flood"
curl -sf --max-time 2 http://api.svc.lab.test:6443/readyz >/dev/null || fail "the API after the flood"
getent hosts api.svc.lab.test | grep '^192.168.150.2 ' >/dev/null || fail "host dns lost in the flood"
test -f "$state/clusters/svc/host-dns.json" || fail "host-dns.json lost in the flood"
contains 'connections refused over the limits' "$work/serve.log" || fail "refusals not logged"
[ "$(grep -c 'connections refused over the limits' "$work/serve.log")" -le 10 ] || fail "refusals logged per connection"

# Destroy: forget (the hook), then the directory goes.
pid=$(cat "$state/clusters/svc/haproxy.pid")
sl serve forget svc || fail "forget"
rm -rf "$state/clusters/svc"
sleep 2
kill -0 "$pid" 2>/dev/null && fail "haproxy $pid still running"
curl -s --max-time 1 http://192.168.150.2:6443/readyz && fail "LB still answering"
cmp /etc/hosts "$work/hosts.orig" || fail "/etc/hosts not restored byte for byte"
pgrep -f "haproxy -W -db -f $state/" && fail "a haproxy of this test survived"
# Stopping serve stops serve itself.
stop_pid "$serve"
pgrep -f -- "--state-dir $state serve" && fail "serve outlived stop_pid"
serve=
echo "services-netns: all checks passed"
