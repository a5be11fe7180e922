#!/usr/bin/env bash
# tests/e2e/services.sh IMAGE — host services with real stand-in VMs, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/services.sh /path/to/standin.qcow2
#
# `shiftlab serve` runs beside the sandbox's libvirtd; `shiftlab create infra`
# brings up a stand-in UPI cluster (1 bootstrap, 3 control planes, 2 workers) and
# serve picks it up. From inside the sandbox: the API through the load balancer
# reaches bootstrap and control planes, /config/master through api-int:22623,
# *.apps 80/443 reach the workers; a control plane failing /readyz leaves within
# 30 s and traffic avoids it; removing the bootstrap stops traffic to it; a killed
# HAProxy is restarted; the host resolves api and *.apps (hosts-file mechanism, on
# a bind-mounted copy of /etc/hosts); `destroy` stops HAProxy and restores
# /etc/hosts byte for byte. Stand-ins answer plain HTTP (no TLS) on 6443 and 443.
set -euo pipefail

NAME=services
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir services
cp /etc/hosts "$work/hosts.orig"
cp /etc/hosts "$work/hosts"
# The sandbox has its own mount namespace: this copy hides the host's file.
mount --bind "$work/hosts" /etc/hosts
on_exit 'umount /etc/hosts 2>/dev/null'
serve=""
on_exit 'stop_pid "$serve"'
destroy_on_exit svc
fail() {
	echo "FAIL $NAME: $*"
	echo "--- serve log"
	tail -30 "$work/serve.log" 2>/dev/null
	exit 1
}
# The node names that answered `count` requests (bodies are "ok <hostname>").
bodies() { # url count
	for _ in $(seq "$2"); do curl -s --max-time 3 "$1" | awk '{print $2}'; done | sort -u
}
lb_status() { # node
	"$bin" serve status svc -o json | jq -r --arg n "$1" \
		'.load_balancer.frontends[] | select(.name=="api") | .backends[] | select(.node==$n) | .status'
}
is_status() { [[ $(lb_status "$1") == "$2" ]]; }

cluster_file svc 192.168.190.0/24 "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 2" >/dev/null

step "shiftlab serve, then create infra: serve picks the cluster up"
SHIFTLAB_LOG=info "$bin" serve --host-dns hosts --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"
"$bin" create infra -f "$work/svc.yaml" --start-workers | tee "$work/create.out"
grep -q 'shiftlab serve picked up svc' "$work/create.out" || fail "create did not notify serve"

step "the host resolves api and *.apps"
wait_for 30 "api in /etc/hosts" sh -c 'getent hosts api.svc.lab.test | grep "^192.168.190.2 " >/dev/null'
getent hosts console-openshift-console.apps.svc.lab.test | grep '^192.168.190.2 ' >/dev/null || fail "*.apps does not resolve on the host"

step "the API through the load balancer reaches bootstrap and control planes"
wait_for 240 "every API backend UP" sh -c "for n in svc-bootstrap svc-ctlplane-0 svc-ctlplane-1 svc-ctlplane-2; do [ \"\$('$bin' serve status svc -o json | jq -r --arg n \$n '.load_balancer.frontends[] | select(.name==\"api\") | .backends[] | select(.node==\$n) | .status')\" = UP ] || exit 1; done"
seen=$(bodies http://api.svc.lab.test:6443/readyz 40)
echo "6443 reached: $(echo $seen)"
[[ $(wc -l <<<"$seen") -ge 3 ]] || fail "several API backends expected, saw: $seen"
if grep -q worker <<<"$seen"; then fail "workers behind 6443"; fi
curl -sf --max-time 3 --resolve api-int.svc.lab.test:22623:192.168.190.2 \
	http://api-int.svc.lab.test:22623/config/master | jq -e .ignition.version >/dev/null ||
	fail "/config/master through api-int:22623"

step "*.apps on 80 and 443 reach the workers"
wait_for 120 "ingress backends UP" sh -c "curl -sf --max-time 2 http://console-openshift-console.apps.svc.lab.test/ >/dev/null"
apps=$( (bodies http://console-openshift-console.apps.svc.lab.test/ 20; bodies http://oauth-openshift.apps.svc.lab.test:443/ 20) | sort -u | tr '\n' ' ')
[[ $apps == "svc-worker-0 svc-worker-1 " ]] || fail "ingress reached: $apps"

step "a control plane failing /readyz leaves within 30 s; traffic avoids it"
curl -sf --max-time 3 http://192.168.190.11:8000/fail-readyz >/dev/null || fail "fail-readyz"
start=$SECONDS
wait_for 30 "ctlplane-0 DOWN" is_status svc-ctlplane-0 DOWN
echo "ctlplane-0 down after $((SECONDS - start)) s"
if bodies http://api.svc.lab.test:6443/readyz 30 | grep -x svc-ctlplane-0 >/dev/null; then fail "traffic reached a DOWN backend"; fi

step "removing the bootstrap stops all traffic to it"
"$bin" serve remove-bootstrap svc || fail "remove-bootstrap"
for url in http://api.svc.lab.test:6443/readyz http://192.168.190.2:22623/config/master; do
	if bodies "$url" 30 | grep -x svc-bootstrap >/dev/null; then fail "the bootstrap still answers behind $url"; fi
done
[[ $(lb_status svc-bootstrap) == removed ]] || fail "status after removal: $(lb_status svc-bootstrap)"

step "a killed HAProxy is restarted by serve"
pid=$(cat "$SHIFTLAB_HOME/clusters/svc/haproxy.pid")
kill -9 "$pid"
wait_for 40 "haproxy restarted" sh -c "[ \"\$(cat $SHIFTLAB_HOME/clusters/svc/haproxy.pid 2>/dev/null)\" != $pid ] && curl -sf --max-time 2 http://api.svc.lab.test:6443/readyz"
echo "haproxy $pid killed, restarted as $(cat "$SHIFTLAB_HOME/clusters/svc/haproxy.pid")"

step "status shows the load balancer and the HTTP endpoint"
"$bin" status svc | tee "$work/status.out"
grep -q '^load balancer: running' "$work/status.out" || fail "status shows no running load balancer"
grep -q '^host DNS: configured' "$work/status.out" || fail "status shows host DNS not configured"
# fw_cfg nodes get their Ignition from QEMU: none is on the HTTP server (the
# bootstrap's holds the admin kubeconfig and the pull secret), and the digest list
# names no Ignition.
for n in svc-bootstrap svc-worker-0; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://192.168.190.1:8080/$n.ign")
	[[ $code == 404 ]] || fail "$n's Ignition is served over HTTP ($code)"
done
[[ ! -e $SHIFTLAB_HOME/clusters/svc/http/svc-bootstrap.ign ]] || fail "the bootstrap's Ignition is in the HTTP directory"
sums=$(curl -sf --max-time 3 http://192.168.190.1:8080/SHA512SUMS) || fail "SHA512SUMS"
[[ $sums != *.ign* ]] || fail "SHA512SUMS lists Ignition: $sums"

step "destroy stops HAProxy and removes its files and host DNS entries"
pid=$(cat "$SHIFTLAB_HOME/clusters/svc/haproxy.pid")
"$bin" destroy cluster svc | tee "$work/destroy.out"
grep -q '^removed host services of svc' "$work/destroy.out" || fail "destroy did not stop the services"
sleep 2
if kill -0 "$pid" 2>/dev/null; then fail "haproxy $pid still runs"; fi
[[ ! -e $SHIFTLAB_HOME/clusters/svc ]] || fail "the cluster's files are still there"
cmp /etc/hosts "$work/hosts.orig" || fail "/etc/hosts not restored byte for byte"
if curl -s --max-time 2 http://192.168.190.2:6443/readyz; then fail "the load balancer still answers"; fi

echo "PASS $NAME"
