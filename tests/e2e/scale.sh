#!/usr/bin/env bash
# tests/e2e/scale.sh IMAGE — scale a rehearsal 3+1 → 3+3 → 3+1, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/scale.sh /path/to/standin.qcow2
#
# The lab is dual-stack (IPv4 primary). With `shiftlab serve` running (the real
# HAProxy): after each scale the workers' domains and volumes are what the plan
# says, libvirt's dnsmasq answers A and AAAA (dig) for the plan's workers, each
# worker added takes its planned IPv6 by DHCPv6, a removed worker has no record
# or reservation left (its name may still be answered from the DHCP lease
# dnsmasq holds, with the leased address alone: docs/scale.md), and HAProxy's
# ingress backends (its configuration and its stats through serve status) are
# exactly the plan's workers. The existing worker never changes. A lab has no
# API: no drain, said so. Then the same up and down by rerunning `create infra
# -f FILE` with another workers:.
set -euo pipefail

NAME=scale
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
TIMEOUT=${SCALE_BOOT_TIMEOUT:-300}
e2e_workdir scale
destroy_on_exit e2es
serve=""
on_exit 'stop_pid "$serve"'
fail() {
	echo "--- serve log"
	tail -20 "$work/serve.log" 2>/dev/null
	echo "FAIL $NAME: $*"
	exit 1
}

f=$(cluster_file e2es "[192.168.172.0/24, 'fd00:172::/64']" "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 1" \
	"bootstrap: {memory: 256}" "ctlplane: {memory: 256}" "worker: {memory: 256}")
GW=192.168.172.1
GW6=fd00:172::1
CD=e2es.lab.test

SHIFTLAB_LOG=info "$bin" serve --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"

ingress_backends() { # from serve status (HAProxy's stats socket)
	"$bin" serve status e2es -o json |
		jq -r '[.load_balancer.frontends[] | select(.name == "ingress-https") | .backends[].node] | sort | join(" ")'
}
cfg_backends() { # from the HAProxy configuration in force
	grep -o 'server e2es-worker-[0-9]*' "$SHIFTLAB_HOME/clusters/e2es/haproxy.cfg" | awk '{print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# The addresses libvirt's dnsmasq leased to NAME (both families, no prefix);
# the columns: expiry date and time, MAC, protocol, address/prefix, hostname.
leased() {
	virsh -q net-dhcp-leases shiftlab-e2es | awk -v n="$1" '$6 == n {sub(/\/.*/, "", $5); print $5}'
}
check_workers() { # N: workers 0..N-1 exist and run, no other; DNS and LB agree
	local n=$1 want="" i ip ip6 t a
	for ((i = 0; i < n; i++)); do want+="e2es-worker-$i "; done
	want=${want% }
	local have
	have=$(virsh list --all --name | grep '^e2es-worker-' | sort | tr '\n' ' ' | sed 's/ $//')
	[[ $have == "$want" ]] || fail "worker domains: '$have', want '$want'"
	for ((i = 0; i < n; i++)); do
		[[ $(virsh domstate "e2es-worker-$i") == running ]] || fail "e2es-worker-$i is not running"
		# The addresses the plan of n workers gives it.
		sed "s/^workers: .*/workers: $n/" "$work/e2es.yaml" >"$work/plan-$n.yaml"
		"$bin" plan -f "$work/plan-$n.yaml" -o json >"$work/plan-$n.json"
		ip=$(jq -r --arg n "e2es-worker-$i" '.nodes[] | select(.name == $n) | .ip' "$work/plan-$n.json")
		ip6=$(jq -r --arg n "e2es-worker-$i" '.nodes[] | select(.name == $n) | .ipv6' "$work/plan-$n.json")
		[[ $ip == 192.168.172.* ]] || fail "the plan of $n workers gives e2es-worker-$i '$ip'"
		[[ $ip6 == fd00:172::* ]] || fail "the plan of $n workers gives e2es-worker-$i the IPv6 '$ip6'"
		wait_for 30 "dig e2es-worker-$i" bash -c "[[ \$(dig +short @$GW e2es-worker-$i.$CD) == $ip ]]"
		wait_for 30 "dig AAAA e2es-worker-$i over IPv6" bash -c "[[ \$(dig +short @$GW6 AAAA e2es-worker-$i.$CD) == $ip6 ]]"
		# It holds its planned IPv6 address, taken by DHCPv6 (its report, over IPv4).
		wait_for "$TIMEOUT" "e2es-worker-$i to take $ip6 by DHCPv6" \
			bash -c "[[ \$(curl -fsS -m 5 http://$ip:8000/report | jq -r .ipv6) == $ip6 ]]"
	done
	for ((i = n; i < 5; i++)); do
		# No record of shiftlab's answers; dnsmasq may still answer the name
		# from the lease it holds, and then with the leased address alone.
		for t in A AAAA; do
			a=$(dig +short @$GW "$t" "e2es-worker-$i.$CD")
			[[ -z $a ]] || leased "e2es-worker-$i" | grep -xF "$a" >/dev/null ||
				fail "e2es-worker-$i.$CD still resolves ($t $a), and not from a lease: $(virsh -q net-dhcp-leases shiftlab-e2es)"
		done
		[[ -z $(virsh net-dumpxml shiftlab-e2es | grep "name='e2es-worker-$i'" || true) ]] || fail "e2es-worker-$i's reservation or record remains"
		[[ -z $(virsh net-dumpxml shiftlab-e2es | grep -F "e2es-worker-$i." || true) ]] || fail "e2es-worker-$i's DNS record remains"
		[[ -z $(virsh vol-list shiftlab | grep "e2es-worker-$i\b" || true) ]] || fail "e2es-worker-$i's volumes remain"
	done
	wait_for 60 "HAProxy's ingress backends to be '$want'" bash -c "[[ \"\$(cfg_backends)\" == '$want' && \"\$(ingress_backends)\" == '$want' ]]"
}
export -f cfg_backends ingress_backends
export bin SHIFTLAB_HOME

step "create infra 3+1"
"$bin" create infra -f "$f" --start-workers >"$work/create.out"
mac0=$(virsh domiflist e2es-worker-0 | awk '/network/ {print $5}')
check_workers 1

step "scale up to 3 workers"
"$bin" scale e2es --workers 3 -f "$f" | tee "$work/up.out"
grep -q '^added e2es-worker-2$' "$work/up.out" || fail "scale up: $(cat "$work/up.out")"
grep -q 'no kubeconfig' "$work/up.out" || fail "scale up did not say there is no API"
check_workers 3
[[ $(virsh domiflist e2es-worker-0 | awk '/network/ {print $5}') == "$mac0" ]] || fail "the existing worker changed"
"$bin" scale e2es --workers 3 >"$work/up2.out" # by name: the recorded file, scale's count
grep -q 'nothing to do' "$work/up2.out" || fail "a second scale to 3 was not a no-op: $(cat "$work/up2.out")"

step "scale down to 1 worker"
"$bin" scale e2es --workers 1 -f "$f" -o json | tee "$work/down.json"
jq -e '.removed == ["e2es-worker-2", "e2es-worker-1"]' "$work/down.json" >/dev/null || fail "scale down removed $(jq -c .removed "$work/down.json")"
check_workers 1

step "create rerun with workers: 3, then 1 (scale's path)"
f3=$work/e2es-3.yaml
sed 's/^workers: 1$/workers: 3/' "$f" >"$f3"
"$bin" create infra -f "$f3" --start-workers 2>&1 | tee "$work/rerun-up.out"
grep -q '==> scale: e2es has 1 worker(s), the cluster file 3' "$work/rerun-up.out" || fail "create rerun did not scale: $(cat "$work/rerun-up.out")"
grep -q '^added e2es-worker-2$' "$work/rerun-up.out" || fail "create rerun up: $(cat "$work/rerun-up.out")"
check_workers 3
"$bin" create infra -f "$f" 2>&1 | tee "$work/rerun-down.out"
grep -q '==> scale: e2es has 3 worker(s), the cluster file 1' "$work/rerun-down.out" || fail "create rerun did not scale down: $(cat "$work/rerun-down.out")"
contains -q 'removed domain e2es-worker-2' "$work/rerun-down.out" || fail "create rerun down: $(cat "$work/rerun-down.out")"
check_workers 1
[[ $(virsh domiflist e2es-worker-0 | awk '/network/ {print $5}') == "$mac0" ]] || fail "the existing worker changed"
echo "PASS $NAME"
