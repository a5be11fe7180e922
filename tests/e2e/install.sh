#!/usr/bin/env bash
# tests/e2e/install.sh IMAGE — the install driver end to end, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/install.sh /path/to/standin.qcow2
#
# `shiftlab create cluster` drives a fake openshift-install (the test double of
# testing.md: same verbs and files; its wait-for verbs check the stand-in nodes)
# from the cluster file to "install complete": every target recorded as done, the
# installer's Ignition wrapped per node, the bootstrap removed after
# bootstrap-complete, workers started after it. The installer and the CoreOS
# image come from a loopback mirror: verified, cached, downloaded once; a
# corrupted tarball is a clear error that caches nothing. Rehearsals with
# `rehearsal: true` alone (the shipped stand-in installer, no mirror): a compact dual-stack
# 3+0 with storage: nfs, a user and ntp_servers (their manifests in bootstrap.ign),
# the report and its DNS and firewall breaks; the same compact lab IPv6
# single-stack (no IPv4 anywhere: every node on its planned IPv6 address, DNS and
# the load balancer over IPv6, the report proven); a UPI 3+2 killed with -9
# during `infra` and during the bootstrap-complete wait, each rerun completing
# with no duplicated libvirt objects and the report holding.
#
# `shiftlab serve` runs the load balancers, as on a real host (create's preflight
# refuses to start without it, before any download: shown first). Ingress is proven for a UPI 3+2 and a compact
# 3+0 cluster: through the ingress load balancer on 80 and 443, the answers come
# from exactly the nodes that run routers (the stand-ins decide that as the
# cluster would, from what the fake installer made of shiftlab's manifests:
# docs/standin.md, "Routers") — the workers, or the control planes of a compact
# cluster; the fake's install-complete fails when a router node is not behind
# *.apps.
set -euo pipefail

NAME=install
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir install
export SHIFTLAB_CACHE=$work/cache
on_exit 'pkill -f "$fake"; pkill -f "$work/cache"'
destroy_on_exit inst1 inst2 inst3 inst4 inst5 inst6
serve=""
on_exit 'stop_pid "$serve"'
# On failure: what the installer and serve said (the work directory goes at exit).
on_exit '[[ $rc == 0 ]] || for l in "$SHIFTLAB_HOME"/clusters/*/openshift-install.log "$work/serve.log"; do [[ -f $l ]] && echo "--- $l" && tail -25 "$l"; done'
on_exit '[[ $rc == 0 ]] || grep -h "standin: role" /var/log/libvirt/qemu/*-console.log'

# The release mirror on loopback (lib.sh): release $V, a corrupted one, the
# stand-in as the stream's CoreOS image (qcow2.xz only, as OKD's before 4.19).
release_mirror
mirror_release 4.17.0-okd-scos.1 corrupt
mirror_qcow2_stream "$IMAGE"
# The fake's waits (default 300 s) under a loaded machine's TCG boots.
export FAKE_INSTALL_TIMEOUT=600

install_file() { # name cidr [version] [workers]
	cluster_file "$1" "$2" "version: ${3:-$V}" "mirror: $mirror_url" "method: upi" "ctlplanes: 3" "workers: ${4:-1}"
}

check_finished() { # cluster [workers]
	local c=$1 w=${2:-1} t
	for t in release install-config manifests ignition infra bootstrap-complete bootstrap-removal workers csr-approval install-complete; do
		[[ $(target_status "$c" "$t") == done ]] || fail "$c: target $t is $(target_status "$c" "$t"), not done"
	done
	[[ -z $(virsh list --all --name | grep "^$c-bootstrap" || true) ]] || fail "$c: the bootstrap domain is still there"
	[[ -z $(virsh vol-list shiftlab | grep "$c-bootstrap" || true) ]] || fail "$c: the bootstrap volumes are still there"
	[[ $(virsh list --name | grep -c "^$c-ctlplane-") == 3 ]] || fail "$c: not 3 running control planes"
	[[ $(virsh list --name | grep -c "^$c-worker-" || true) == "$w" ]] || fail "$c: not $w running workers"
	[[ $(virsh list --all --name | grep -c "^$c-") == $((3 + w)) ]] || fail "$c: unexpected domains: $(virsh list --all --name | grep "^$c-" | tr '\n' ' ')"
	[[ $(virsh net-list --all --name | grep -c "^shiftlab-$c\$") == 1 ]] || fail "$c: not exactly one network"
	[[ $(virsh vol-list shiftlab | grep -c "$c-") == $((2 * (3 + w))) ]] || fail "$c: volumes: $(virsh vol-list shiftlab | grep "$c-" | awk '{print $1}' | tr '\n' ' ')"
}

# The ingress path: *.apps through the load balancer (the lab's DNS answers the
# name, HAProxy passes 80 and 443 on) reaches exactly the nodes that run routers
# (each stand-in's report says whether it does), and those are EXPECTED. In
# the family of the DNS server asked (A of an IPv4 one, AAAA of an IPv6 one).
check_ingress() { # cluster dns-server expected-node...
	local c=$1 dns=$2 n got routers= type=A
	shift 2
	local want
	want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
	[[ $dns != *:* ]] || type=AAAA
	at() { if [[ $1 == *:* ]]; then echo "[$1]"; else echo "$1"; fi; }
	for n in $(virsh list --name | grep "^$c-"); do
		ip=$(dig +short "@$dns" "$n.$c.lab.test" $type | awk 'NR == 1')
		[[ $(curl -fsS -m 3 "http://$(at "$ip"):8000/report" | jq -r .router || true) != yes ]] || routers+="$n"$'\n'
	done
	routers=$(printf '%s' "$routers" | sort | tr '\n' ' ')
	[[ $routers == "$want" ]] || fail "$c: routers run on: $routers, expected: $want ($type)"
	apps=$(dig +short "@$dns" "console-openshift-console.apps.$c.lab.test" $type | awk 'NR == 1')
	[[ -n $apps ]] || fail "$c: *.apps does not resolve ($type)"
	got=$(for port in 80 443; do
		for _ in $(seq 24); do
			curl -s -m 3 -o /dev/null -D - -H "Host: console-openshift-console.apps.$c.lab.test" "http://$(at "$apps"):$port/" |
				tr -d '\r' | awk -F': ' 'tolower($1) == "x-shiftlab-standin" {print $2}' || true
		done
	done | sort -u | tr '\n' ' ')
	echo "$c: *.apps ($apps) on 80/443 reached: $got"
	[[ $got == "$want" ]] || fail "$c: *.apps through the load balancer reached: $got, expected: $want"
}

step "without shiftlab serve create cluster is refused before the download, saying how to run serve"
f0=$(install_file inst1 192.168.180.0/24 "$V" 2)
# The preflight refused the host: the infrastructure code, 4, and nothing made.
noserve_rc=0
asked=$(grep -c 'GET /' "$work/mirror.log" || true)
"$bin" create cluster -f "$f0" >"$work/noserve.out" 2>&1 || noserve_rc=$?
[[ $noserve_rc == 4 ]] || { cat "$work/noserve.out"; fail "without serve: exit $noserve_rc, expected the preflight's 4"; }
tail -3 "$work/noserve.out"
grep -q '^  - serve: shiftlab serve is not running' "$work/noserve.out" || fail "the error does not say serve is not running"
grep -q 'sudo shiftlab serve --install-unit' "$work/noserve.out" || fail "the error does not say how to start serve"
[[ $(grep -c 'GET /' "$work/mirror.log" || true) == "$asked" ]] || fail "the mirror was asked despite the preflight: $(cat "$work/mirror.log")"
[[ $(target_status inst1 release) == none && $(target_status inst1 infra) == none ]] || fail "a target started despite the preflight"
[[ -z $(virsh net-list --all --name | grep '^shiftlab-inst1$' || true) ]] || fail "the network was created despite the preflight"

SHIFTLAB_LOG=info "$bin" serve --host-dns off --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"

step "with serve running, the same create resumes to install complete (UPI 3+2)"
f1=$f0
# Its output is a pipe, as under nohup or CI: the waits beat (every second here,
# a minute by default) with the installer's latest INFO line.
SHIFTLAB_HEARTBEAT_SECS=1 "$bin" create cluster -f "$f1" 2>&1 | tee "$work/run1.out"
awk '/^==> bootstrap-complete/{m=1; next} /^==> /{m=0} m' "$work/run1.out" >"$work/run1.bootstrap"
grep -E '^    still waiting for openshift-install wait-for bootstrap-complete[^(]* \(([0-9]+h)?([0-9]+m)?[0-9]+s\): (Waiting up to|API v)' "$work/run1.bootstrap" >/dev/null ||
	fail "no heartbeat with the installer's INFO line during bootstrap-complete: $(cat "$work/run1.bootstrap")"
grep -q 'console: *https://console-openshift-console.apps.inst1.lab.test' "$work/run1.out" || fail "no console URL printed"
grep -q 'export KUBECONFIG=.*/clusters/inst1/assets/auth/kubeconfig' "$work/run1.out" || fail "no KUBECONFIG printed"
check_finished inst1 2
check_ingress inst1 192.168.180.1 inst1-worker-0 inst1-worker-1
# The installer prints the kubeadmin password; shiftlab's log and output never
# carry it, and the files that do are private.
pw=$(cat "$SHIFTLAB_HOME/clusters/inst1/assets/auth/kubeadmin-password")
[[ ${#pw} -ge 20 ]] || fail "no kubeadmin password"
if grep -qF "$pw" "$SHIFTLAB_HOME/clusters/inst1/openshift-install.log" "$work/run1.out" "$work/noserve.out"; then
	fail "the kubeadmin password is in shiftlab's log or output"
fi
# The real installer's form: the message unquoted, its own quotes bare.
grep -qF 'and password: "<redacted>"' "$SHIFTLAB_HOME/clusters/inst1/openshift-install.log" || fail "the installer's password line is not in the log, redacted"
for f in openshift-install.log assets/auth/kubeadmin-password assets/auth/kubeconfig assets/.openshift_install_state.json; do
	[[ $(stat -c %a "$SHIFTLAB_HOME/clusters/inst1/$f") == 600 ]] || fail "$f is not 0600"
done
"$bin" status inst1 -o json | jq -e '.install.flow == "upi" and all(.install.targets[]; .status == "done")' >/dev/null ||
	fail "status does not show every target done: $("$bin" status inst1 -o json | jq -c .install)"
# Workers start only after bootstrap-complete: their domain started after the
# bootstrap-complete target was recorded as done.
grep -n '^==> \|started domain inst1-worker' "$work/run1.out" | tee "$work/order"
[[ $(grep -n '^==> workers' "$work/run1.out" | cut -d: -f1) -gt $(grep -n '^==> bootstrap-complete' "$work/run1.out" | cut -d: -f1) ]] || fail "workers before bootstrap-complete"
# The node's Ignition merges the installer's config, unedited.
ign=$(virsh vol-path --pool shiftlab inst1-ctlplane-0.ign)
jq -r '.ignition.config.merge[0].source' "$ign" | sed 's/^data:[^,]*,//' | base64 -d |
	jq -e '.ignition.config.merge[0].source == "https://api-int.inst1.lab.test:22623/config/master"' >/dev/null ||
	fail "the control plane's Ignition does not merge master.ign"
[[ -f $SHIFTLAB_HOME/clusters/inst1/install-config.backup.yaml ]] || fail "no install-config backup"
[[ $(stat -c %a "$SHIFTLAB_HOME/clusters/inst1/install-config.backup.yaml") == 600 ]] || fail "the backup is not 0600"
grep -q 'Install complete' "$SHIFTLAB_HOME/clusters/inst1/openshift-install.log" || fail "the installer log is not kept"

[[ $(mirror_downloads "$V/openshift-install-linux") == 1 ]] || fail "the installer was not downloaded exactly once"
[[ $(mirror_downloads coreos-qemu) == 1 ]] || fail "the CoreOS image was not downloaded exactly once"
cat "$work/noserve.out" "$work/run1.out" | contains "release $V (quay.io/okd/scos-release:$V)" || fail "the release is not named"
[[ $(virsh vol-list shiftlab | grep -c 'shiftlab-base-[0-9a-f]*\.qcow2 ') == 1 ]] || fail "the base image is not the mirror's"

step "running it again does nothing"
"$bin" create cluster -f "$f1" 2>&1 | tee "$work/run2.out"
if grep -q '^==> ' "$work/run2.out"; then fail "a finished install ran targets again"; fi
check_finished inst1 2
"$bin" destroy cluster inst1 >/dev/null

step "a compact 3+0 dual-stack rehearsal with rehearsal: true alone: the shipped stand-in installer; routers on the control planes, *.apps through the load balancer to them over both families"
# No mirror, no stream, no installer of the tests': what a user's file holds;
# dual-stack, IPv4 primary (docs/ipv6.md).
f4=$(cluster_file inst4 "[192.168.183.0/24, 'fd00:183::/64']" "method: upi" "ctlplanes: 3" "workers: 0" "${lab_settings[@]}")
env -u SHIFTLAB_FAKE_STREAM_JSON "$bin" create cluster -f "$f4" >"$work/run4.out" 2>&1 || {
	tail -5 "$work/run4.out"
	tail -15 "$SHIFTLAB_HOME/clusters/inst4/openshift-install.log"
	fail "the compact install failed"
}
tail -3 "$work/run4.out"
check_finished inst4 0
check_ingress inst4 192.168.183.1 inst4-ctlplane-0 inst4-ctlplane-1 inst4-ctlplane-2
# Dual-stack: the same path over IPv6, the lab's DNS asked on its IPv6 address.
check_ingress inst4 fd00:183::1 inst4-ctlplane-0 inst4-ctlplane-1 inst4-ctlplane-2
contains "Install complete!" "$SHIFTLAB_HOME/clusters/inst4/openshift-install.log" || fail "the stand-in installer did not say Install complete!"
# The lab's manifests (storage, users, time) reached bootstrap.ign.
ign_has "$SHIFTLAB_HOME/clusters/inst4/assets/bootstrap.ign" /opt/openshift/openshift/99-shiftlab-storage-storageclass.yaml \
	/opt/openshift/openshift/99-shiftlab-users-htpasswd-secret.yaml /opt/openshift/openshift/99-master-chrony-shiftlab.yaml
jq -e --arg c "$SHIFTLAB_CACHE/rehearsal/" '.flow == "upi" and (.facts.openshift_install | startswith($c))
	and .facts.release_version == "4.18.0-rehearsal" and (.facts.coreos_image | endswith("/images/standin.qcow2"))' \
	"$SHIFTLAB_HOME/clusters/inst4/install-state.json" >/dev/null ||
	fail "the rehearsal did not run the shipped installer: $(jq -c '{flow, facts}' "$SHIFTLAB_HOME/clusters/inst4/install-state.json")"
contains -F 'everything that applies holds on this host' "$work/run4.out" || fail "create cluster printed no report: $(tail -5 "$work/run4.out")"

# The rehearsal report (docs/rehearsal.md), on the compact rehearsal above:
# create cluster of a rehearsal ends with the report; `shiftlab report` asks the
# host again: every check that applies proven, exit 0. Then one host piece broken
# at a time inside the sandbox's own namespace (the lab dnsmasq's api record
# removed with virsh net-update; an nftables input chain dropping 22623 from the
# nodes, which serve's openings are not in), each named by the report with exit
# 9, then restored and proven again.
step "the rehearsal report: every check that applies proven; a broken DNS record or firewall named (exit 9), restored"
report_ok() { # the report of inst4 exits 0 and every applicable check is proven
	"$bin" report inst4 -o json >"$work/report4.json" || {
		jq -r '.rows[] | select(.result == "failed") | "\(.check) \(.subject): \(.evidence)"' "$work/report4.json"
		fail "report inst4 exited non-zero $1"
	}
	jq -e '.ok and .failed == 0 and ([.rows[] | select(.result == "failed")] | length) == 0' "$work/report4.json" >/dev/null ||
		fail "the report's JSON does not hold $1"
	local c n
	# A compact dual-stack UPI: 3 control planes' leases (DHCP and DHCPv6), boots;
	# api, api-int, *.apps and each node's A and PTR, and each AAAA and ip6.arpa
	# PTR asked over IPv6, by the host and by each control plane itself (the
	# bootstrap's own rows not applicable once removed); 4 frontends on each
	# family's VIP and their backends; the bootstrap removal.
	for c in dhcp:3 dhcp6:3 resolve6:3 dns:18 lb:8 lb-backends:4 boot:3 bootstrap-removed:1; do
		n=$(jq --arg c "${c%:*}" '[.rows[] | select(.check == $c and .result == "proven")] | length' "$work/report4.json")
		[[ $n -ge ${c#*:} ]] || fail "report $1: $n ${c%:*} check(s) proven, expected at least ${c#*:}"
	done
}
report_ok "after the install"
report_broken() { # what: the report exits 9 and names it (a regex on the table)
	local rc=0
	"$bin" report inst4 >"$work/report4.out" 2>&1 || rc=$?
	[[ $rc == 9 ]] || { cat "$work/report4.out"; fail "with $1 report exited $rc, not 9"; }
	contains -E "$2" "$work/report4.out" || { cat "$work/report4.out"; fail "with $1 the report does not name it"; }
	grep -E ' failed ' "$work/report4.out"
}
api_host() { # address-prefix: the network's host record of api-int in that family
	virsh net-dumpxml shiftlab-inst4 | awk -v p="<host ip='$1" '{sub(/^[ \t]+/, "")} /^<host ip=/ {h = ""; on = 1} on {h = h $0}
		on && /<\/host>/ {on = 0; if (h ~ /api-int\./ && index(h, p) == 1) print h}'
}
api4=$(api_host 192.168.183.) api6=$(api_host fd00:183:)
[[ -n $api4 && -n $api6 ]] || fail "no api host record of each family in the network"
# Deleted by address alone: libvirt matches a whole record by any of its names,
# which the two families' records share ("multiple matching DNS HOST records").
virsh net-update shiftlab-inst4 delete dns-host "<host ip='192.168.183.2'/>" --live >/dev/null
report_broken "the api DNS record removed" '^dns +A api-int\.inst4\.lab\.test +failed +192\.168\.183\.1:53 has no A record'
virsh net-update shiftlab-inst4 add dns-host "$api4" --live >/dev/null
virsh net-update shiftlab-inst4 delete dns-host "<host ip='fd00:183::2'/>" --live >/dev/null
report_broken "the api AAAA record removed" '^dns +AAAA api-int\.inst4\.lab\.test +failed +\[fd00:183::1\]:53 has no AAAA record'
virsh net-update shiftlab-inst4 add dns-host "$api6" --live >/dev/null
report_ok "with the api records restored"
# serve checks its openings again every minute and would add them to the new
# chain (as it should): a bounded few tries at the breakage before it does.
broke=""
for _ in 1 2 3; do
	nft add table inet e2e-report
	nft add chain inet e2e-report input '{ type filter hook input priority 0; policy accept; }'
	nft add rule inet e2e-report input ip saddr 192.168.183.0/24 tcp dport 22623 drop
	rc=0
	"$bin" report inst4 >"$work/report4.out" 2>&1 || rc=$?
	nft delete table inet e2e-report
	if [[ $rc == 9 ]] && contains -E '^firewall +host +failed +.*no rule for .*:22623' "$work/report4.out"; then
		broke=yes
		break
	fi
done
[[ -n $broke ]] || { cat "$work/report4.out"; fail "with 22623 dropped the report did not exit 9 naming it"; }
grep -E '^firewall ' "$work/report4.out"
report_ok "with the firewall restored"
# destroy of a rehearsal checks that it left nothing, and fails naming what it
# left: here a volume another domain still uses (destroy never removes those).
held=$(virsh vol-path --pool shiftlab inst4-ctlplane-2.qcow2)
on_exit 'virsh undefine e2e-holder >/dev/null 2>&1; virsh vol-delete --pool shiftlab inst4-ctlplane-2.qcow2 >/dev/null 2>&1'
virsh define /dev/stdin >/dev/null <<EOF
<domain type='qemu'><name>e2e-holder</name><memory unit='MiB'>64</memory><os><type arch='x86_64'>hvm</type></os>
<devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$held'/><target dev='vda' bus='virtio'/></disk></devices></domain>
EOF
rc=0
"$bin" destroy cluster inst4 >"$work/destroy4.out" 2>&1 || rc=$?
[[ $rc != 0 ]] || { cat "$work/destroy4.out"; fail "destroy left a volume behind and exited 0"; }
contains -F 'destroy of rehearsal inst4 left behind: volume shiftlab/inst4-ctlplane-2.qcow2' "$work/destroy4.out" ||
	{ cat "$work/destroy4.out"; fail "destroy did not name the volume it left"; }
tail -1 "$work/destroy4.out"
virsh undefine e2e-holder >/dev/null
virsh vol-delete --pool shiftlab inst4-ctlplane-2.qcow2 >/dev/null
# And with nothing held: it says it left nothing (its infra again, then destroy).
"$bin" create infra -f "$f4" >"$work/infra4.out" 2>&1 || { tail -5 "$work/infra4.out"; fail "create infra of inst4 failed"; }
"$bin" destroy cluster inst4 >"$work/destroy4.out" 2>&1 || { cat "$work/destroy4.out"; fail "destroy of inst4 failed"; }
contains -F 'left nothing: no domain, volume, network, HAProxy, host DNS or firewall entry, or state of inst4' "$work/destroy4.out" ||
	{ cat "$work/destroy4.out"; fail "destroy did not say it left nothing"; }

step "a compact 3+0 IPv6 single-stack rehearsal: no IPv4 anywhere; every node on its planned IPv6 address, the lab's DNS and the load balancer answering over IPv6"
f6=$(cluster_file inst6 "'fd00:186::/64'" "method: upi" "ctlplanes: 3" "workers: 0" "${lab_settings[@]}")
env -u SHIFTLAB_FAKE_STREAM_JSON "$bin" create cluster -f "$f6" >"$work/run6.out" 2>&1 || {
	tail -15 "$work/run6.out"
	tail -15 "$SHIFTLAB_HOME/clusters/inst6/openshift-install.log"
	fail "the IPv6 single-stack install failed"
}
tail -3 "$work/run6.out"
check_finished inst6 0
# No IPv4 in the lab: the network has no IPv4 <ip>, the bridge no IPv4 address.
! virsh net-dumpxml shiftlab-inst6 | grep -E "<ip address='[0-9.]+'" >/dev/null || fail "the network has an IPv4 address"
[[ -z $(ip -4 addr show dev sl-inst6) ]] || fail "the lab bridge holds an IPv4 address"
# The lab's dnsmasq over IPv6: api, api-int, *.apps and each node's AAAA and PTR.
for n in api api-int test.apps; do
	[[ $(dig +short -6 @fd00:186::1 "$n.inst6.lab.test" AAAA) == fd00:186::2 ]] || fail "$n.inst6.lab.test AAAA over IPv6"
done
[[ $(dig +short -6 @fd00:186::1 -x fd00:186::b) == inst6-ctlplane-0.inst6.lab.test. ]] || fail "the PTR of fd00:186::b over IPv6"
check_ingress inst6 fd00:186::1 inst6-ctlplane-0 inst6-ctlplane-1 inst6-ctlplane-2
"$bin" report inst6 -o json >"$work/report6.json" || {
	jq -r '.rows[] | select(.result == "failed") | "\(.check) \(.subject): \(.evidence)"' "$work/report6.json"
	fail "report inst6 exited non-zero"
}
# Every control plane holds its planned IPv6 address (DHCPv6) and resolves
# over IPv6; 4 frontends on the IPv6 VIP and their IPv6 backends; no DHCPv4.
for c in dhcp6:3 resolve6:3 dns:12 lb:4 lb-backends:4 boot:3 bootstrap-removed:1; do
	n=$(jq --arg c "${c%:*}" '[.rows[] | select(.check == $c and .result == "proven")] | length' "$work/report6.json")
	[[ $n -ge ${c#*:} ]] || fail "report inst6: $n ${c%:*} check(s) proven, expected at least ${c#*:}"
done
[[ $(jq '[.rows[] | select(.check == "dhcp")] | length' "$work/report6.json") == 0 ]] || fail "report inst6 has DHCPv4 rows"
"$bin" destroy cluster inst6 >"$work/destroy6.out" 2>&1 || { cat "$work/destroy6.out"; fail "destroy of inst6 failed"; }
contains -F 'left nothing' "$work/destroy6.out" || { cat "$work/destroy6.out"; fail "destroy of inst6 left something"; }

step "a corrupted tarball is a clear error and nothing is cached"
f3=$(install_file inst3 192.168.182.0/24 4.17.0-okd-scos.1)
if "$bin" create cluster -f "$f3" >"$work/corrupt.out" 2>&1; then cat "$work/corrupt.out"; fail "a corrupted tarball was accepted"; fi
cat "$work/corrupt.out"
grep -q 'sha256 mismatch for .*openshift-install-linux-4.17.0-okd-scos.1.tar.gz' "$work/corrupt.out" || fail "the error does not name the corrupted file"
bad=$(sha256sum <"$work/mirror/4.17.0-okd-scos.1/openshift-install-linux-4.17.0-okd-scos.1.tar.gz" | cut -d' ' -f1)
want=$(awk '/openshift-install/ {print $1}' "$work/mirror/4.17.0-okd-scos.1/sha256sum.txt")
[[ ! -e $SHIFTLAB_CACHE/blobs/sha256/$bad && ! -e $SHIFTLAB_CACHE/blobs/sha256/$want ]] || fail "the corrupted tarball was cached"
[[ -z $(virsh list --all --name | grep '^inst3-' || true) ]] || fail "a failed release created domains"
"$bin" destroy cluster inst3 >/dev/null

# UPI 3+2 as a user rehearses it (rehearsal: true alone: the shipped stand-in
# installer, no mirror, no stream file), killed on the way; each rerun ends with
# the report holding.
step "UPI 3+2 rehearsal with rehearsal: true alone: kill -9 during infra, then during the bootstrap-complete wait; reruns complete, the report holds"
unset SHIFTLAB_FAKE_STREAM_JSON
asked=$(grep -c 'GET /' "$work/mirror.log" || true)
f2=$(cluster_file inst2 192.168.181.0/24 "method: upi" "ctlplanes: 3" "workers: 2")
kill_during "$f2" inst2 infra
"$bin" create cluster -f "$f2" >"$work/run2a.out" 2>&1 || { tail -8 "$work/run2a.out"; fail "the rerun after the kill during infra failed"; }
tail -3 "$work/run2a.out"
check_finished inst2 2
contains -F 'everything that applies holds on this host' "$work/run2a.out" || fail "inst2: create cluster printed no report holding"
"$bin" destroy cluster inst2 >/dev/null
kill_during "$f2" inst2 bootstrap-complete "$work/cache/.*openshift-install wait-for bootstrap-complete"
[[ $(target_status inst2 infra) == done ]] || fail "infra was not done before bootstrap-complete"
"$bin" create cluster -f "$f2" >"$work/resume.out" 2>&1 || { tail -8 "$work/resume.out"; fail "the rerun after the kill during the wait failed"; }
tail -3 "$work/resume.out"
check_finished inst2 2
if grep -q '^==> infra' "$work/resume.out"; then fail "the rerun repeated infra"; fi
contains -F 'everything that applies holds on this host' "$work/resume.out" || fail "inst2: the resumed create printed no report holding"
"$bin" report inst2 -o json >"$work/report2.json" || {
	jq -r '.rows[] | select(.result == "failed") | "\(.check) \(.subject): \(.evidence)"' "$work/report2.json"
	fail "report inst2 exited non-zero"
}
jq -e '.ok and .method == "upi" and ([.rows[] | select(.check == "boot" and .result == "proven")] | length) == 5' "$work/report2.json" >/dev/null ||
	fail "inst2: the report does not prove the 5 nodes' boot: $(jq -c '[.rows[] | select(.check == "boot")]' "$work/report2.json")"
jq -e --arg c "$SHIFTLAB_CACHE/rehearsal/" '(.facts.openshift_install | startswith($c)) and .facts.release_version == "4.18.0-rehearsal"' \
	"$SHIFTLAB_HOME/clusters/inst2/install-state.json" >/dev/null || fail "inst2 did not run the shipped installer"
[[ $(grep -c 'GET /' "$work/mirror.log" || true) == "$asked" ]] || fail "the rehearsal asked the mirror: $(tail -n 3 "$work/mirror.log")"
# The mirror's installs (inst1, its rerun, the corrupt inst3): every artifact
# downloaded once, then cached.
[[ $(mirror_downloads "$V/openshift-install-linux") == 1 ]] || fail "the installer was downloaded again"
[[ $(mirror_downloads coreos-qemu) == 1 ]] || fail "the CoreOS image was downloaded again"

step "a c10s stream (SCOS 10, built for x86-64-v3): TCG nodes get Haswell-noTSX-IBRS, and an x86-64-v3 image comes up on them"
"$bin" image standin --cpu-level x86-64-v3 --out "$work/standin-v3.qcow2" >/dev/null
mirror_qcow2_stream "$work/standin-v3.qcow2" c10s 10.0.20250628-0
f5=$(install_file inst5 192.168.184.0/24 "$V" 0)
echo "libvirt: {domain_type: qemu}" >>"$f5"
"$bin" create infra -f "$f5" >"$work/run5.out" 2>&1 || {
	tail -5 "$work/run5.out"
	fail "create infra of the c10s cluster failed"
}
contains -F "stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3: QEMU's TCG runs the nodes as Haswell-noTSX-IBRS" "$work/run5.out" ||
	fail "the release target did not say the nodes' CPU: $(tail -5 "$work/run5.out")"
for d in inst5-bootstrap inst5-ctlplane-0; do
	model=$(virsh dumpxml "$d" | sed -n "s|.*<model fallback='forbid'>\(.*\)</model>.*|\1|p")
	[[ $model == Haswell-noTSX-IBRS ]] || fail "$d has CPU model '$model', not Haswell-noTSX-IBRS"
done
# The image refuses a CPU without x86-64-v3 (tests/e2e/standin-boot.sh): up means the level is there.
wait_for 300 "inst5-ctlplane-0 up on an x86-64-v3 CPU" \
	grep -q "standin: cpu: x86-64-v3 as this image needs" /var/log/libvirt/qemu/inst5-ctlplane-0-console.log
"$bin" destroy cluster inst5 >/dev/null

echo "PASS $NAME"
