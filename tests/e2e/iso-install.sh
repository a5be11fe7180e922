#!/usr/bin/env bash
# tests/e2e/iso-install.sh IMAGE — single node and agent-based installs from live
# ISOs, end to end, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/iso-install.sh /path/to/standin.qcow2
#
# Each install is a rehearsal with `rehearsal: true` alone: no version, no mirror,
# no stream file (docs/rehearsal.md; FAKE_INSTALL_TIMEOUT only lengthens the
# waits for a loaded machine). shiftlab materializes its shipped stand-in
# installer under $SHIFTLAB_CACHE/rehearsal/ and builds the stand-in live ISO
# there on demand; `shiftlab create cluster` then drives
#   sno1  method sno:   single-node-ignition-config, the ISO embedded by
#                       coreos-installer, one node; with storage: nfs, a user and
#                       ntp_servers, whose manifests reach the live config;
#   ag1   method agent: agent create image, 3 control planes + 1 worker on one ISO
#                       (the stand-in oc on the installer's PATH, the stand-in ISO
#                       shiftlab built given to it through its image cache, no
#                       download), the routers on every node;
#   ag2   method agent: 3 control planes + 2 workers, straight through, the
#                       routers on the workers alone; the same lab settings, their
#                       manifests in the ISO's Ignition as extra manifests;
#   sno6, ag6           a single node and an agent 3+1, IPv6 single-stack: no
#                       DHCPv4, each node on its planned IPv6 address, the
#                       rendezvous IP IPv6, every frontend through the IPv6 VIP;
# from the cluster file to "install complete" and the rehearsal report holding
# (the boot rows: each node installed by the live ISO). Each node boots the ISO
# once (its disk is empty, the CD-ROM comes second in the boot order), installs,
# reboots and comes back from its disk; at the end the drives are empty and the
# ISO volume is gone. Each run is killed with -9 during the ISO build
# (coreos-installer slowed by a shim on PATH so the kill lands inside it) and
# during the bootstrap-complete wait; the reruns complete with no duplicated
# libvirt objects. Node zero (the rendezvous host) installs last, after every
# other host reported its "Rebooting" stage to its assisted-service. ag1's
# install fails, as a real one would, once its load balancer leaves the control
# planes out of *.apps. Bad input — a corrupt or
# missing ISO in a loopback release mirror (the release path for ISOs), SNO with
# workers, a disk below the real minimum — is refused before anything is created.
set -euo pipefail

NAME=iso-install
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
real_ci=$(command -v coreos-installer || true)
[[ -n $real_ci ]] || fail "coreos-installer not found (scripts/setup installs it)"
e2e_workdir iso-install
export SHIFTLAB_CACHE=$work/cache XDG_CACHE_HOME=$work/xdg
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}
export FAKE_INSTALL_TIMEOUT=${FAKE_INSTALL_TIMEOUT:-600}
on_exit 'pkill -f "$work/cache/.*openshift-install"'
destroy_on_exit sno1 ag1 ag2 sno6 ag6 bad1 bad2 bad3

# coreos-installer, slowed: the kill during the ISO build must land inside it.
mkdir -p "$work/shim"
printf '#!/bin/sh\nsleep "${SHIM_DELAY:-0}"\nexec %s "$@"\n' "$real_ci" >"$work/shim/coreos-installer"
chmod +x "$work/shim/coreos-installer"
export PATH=$work/shim:$PATH

# The mirror (lib.sh): one OKD release, the stand-in live ISO as the stream's
# metal ISO, and a corrupt copy for the bad-input case.
release_mirror
"$bin" image standin --iso --out "$work/mirror/coreos-live.x86_64.iso" >/dev/null
cp "$work/mirror/coreos-live.x86_64.iso" "$work/mirror/corrupt-live.x86_64.iso"
echo garbage >>"$work/mirror/corrupt-live.x86_64.iso"
stream() { # iso-file-name sha256
	jq -n --arg loc "$mirror_url/$1" --arg sum "$2" \
		'{stream:"scos-4.17",architectures:{x86_64:{artifacts:{metal:{formats:{iso:{disk:{location:$loc,sha256:$sum}}}}}}}}'
}
good_sum=$(sha256sum <"$work/mirror/coreos-live.x86_64.iso" | cut -d' ' -f1)
stream coreos-live.x86_64.iso "$good_sum" >"$work/stream.json"
stream corrupt-live.x86_64.iso "$good_sum" >"$work/stream-corrupt.json"
stream missing-live.x86_64.iso "$good_sum" >"$work/stream-missing.json"
export SHIFTLAB_FAKE_STREAM_JSON=$work/stream.json

# shiftlab serve runs the agent cluster's load balancer, as on a real host (the
# driver refuses to wait without it: src/serve/ready.rs); a single node has none.
serve=""
on_exit 'stop_pid "$serve"'
SHIFTLAB_LOG=info "$bin" serve --host-dns off --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"

iso_file() { # name cidr method-lines...
	local n=$1 c=$2
	shift 2
	cluster_file "$n" "$c" "version: $V" "mirror: $mirror_url" "$@"
}
# Each disk of a domain's definition: device, boot order, whether it has a source.
disks() {
	virsh dumpxml --inactive "$1" | python3 -c '
import sys, xml.etree.ElementTree as E
out = []
for d in E.fromstring(sys.stdin.read()).iter("disk"):
    b = d.find("boot")
    out.append("%s %s %s" % (d.get("device"), b.get("order") if b is not None else "-",
                             "source" if d.find("source") is not None else "empty"))
print(",".join(out))'
}
console() { cat "/var/log/libvirt/qemu/$1-console.log" 2>/dev/null || true; }

# Every target done; each node booted the ISO once, installed once, and runs from
# its disk; the drives are empty, the ISO volume gone, nothing duplicated.
check_finished() { # cluster targets nodes...
	local c=$1 targets=$2 n
	shift 2
	for t in $targets; do
		[[ $(target_status "$c" "$t") == done ]] || fail "$c: target $t is $(target_status "$c" "$t"), not done"
	done
	[[ $(virsh list --all --name | grep -c "^$c-") == $# ]] ||
		fail "$c: domains: $(virsh list --all --name | grep "^$c-" | tr '\n' ' ')"
	[[ $(virsh vol-list shiftlab | grep -c " *$c-") == $# ]] ||
		fail "$c: volumes: $(virsh vol-list shiftlab | awk '{print $1}' | grep "^$c-\|^\.$c-" | tr '\n' ' ')"
	[[ -z $(virsh vol-list shiftlab | grep -- "$c-live.iso" || true) ]] || fail "$c: the ISO volume is still there"
	if virsh vol-list shiftlab | contains shiftlab-base-; then fail "$c: an ISO install imported a base image"; fi
	for n; do
		[[ $(console "$n" | grep -c 'SHIFTLAB-STANDIN-INSTALLED') == 1 ]] ||
			fail "$n: installed $(console "$n" | grep -c 'SHIFTLAB-STANDIN-INSTALLED') times, not once"
		[[ $(console "$n" | grep -c 'standin: boot: iso') == 1 ]] ||
			fail "$n: booted the ISO $(console "$n" | grep -c 'standin: boot: iso') times, not once"
		console "$n" | grep 'SHIFTLAB-STANDIN-REPORT' | tail -n 1 | contains '"boot":"disk"' ||
			fail "$n: its last report is not from its disk: $(console "$n" | grep SHIFTLAB-STANDIN-REPORT | tail -n 1)"
		# Disk first, then the CD-ROM; the drive stays, empty.
		[[ $(disks "$n") == "disk 1 source,cdrom 2 empty" ]] ||
			fail "$n: disks (device, boot order, source): $(disks "$n")"
	done
}

# A rehearsal's end: create cluster printed the report holding; `report -o json`
# asks the host again, exit 0, each node's boot row proven (installed by the live
# ISO, then from its disk); the install ran the shipped installer and client that
# shiftlab materialized in its cache, no release's.
check_rehearsal() { # cluster create-output nodes...
	local c=$1 out=$2 n
	shift 2
	contains -F 'everything that applies holds on this host' "$out" || fail "$c: create cluster printed no report holding: $(tail -5 "$out")"
	"$bin" report "$c" -o json >"$work/report-$c.json" || {
		jq -r '.rows[] | select(.result == "failed") | "\(.check) \(.subject): \(.evidence)"' "$work/report-$c.json"
		fail "report $c exited non-zero"
	}
	jq -e '.ok and .failed == 0' "$work/report-$c.json" >/dev/null || fail "$c: the report's JSON does not hold"
	for n; do
		jq -e --arg n "$n" '[.rows[] | select(.check == "boot" and .subject == $n and .result == "proven"
			and (.evidence | contains("the live ISO, installed")))] | length == 1' "$work/report-$c.json" >/dev/null ||
			fail "$n: its boot row is not proven from the live ISO: $(jq -c --arg n "$n" '.rows[] | select(.check == "boot" and .subject == $n)' "$work/report-$c.json")"
	done
	jq -e --arg r "$SHIFTLAB_CACHE/rehearsal/" '(.facts.openshift_install | startswith($r)) and (.facts.oc | startswith($r))
		and .facts.release_version == "4.18.0-rehearsal"' "$SHIFTLAB_HOME/clusters/$c/install-state.json" >/dev/null ||
		fail "$c did not run the shipped installer: $(jq -c .facts "$SHIFTLAB_HOME/clusters/$c/install-state.json")"
}

# A dual-stack rehearsal's IPv6 half (after check_rehearsal): each node took its
# planned IPv6 by DHCPv6 and resolved the cluster's names and its own address
# over IPv6 (the report's dhcp6 and resolve6 rows proven).
dual_stack_proven() { # cluster nodes...
	local c=$1 n row
	shift
	for n; do
		for row in dhcp6 resolve6; do
			jq -e --arg n "$n" --arg r "$row" '[.rows[] | select(.check == $r and .subject == $n and .result == "proven")] | length == 1' \
				"$work/report-$c.json" >/dev/null ||
				fail "$n: its $row row is not proven: $(jq -c --arg n "$n" --arg r "$row" '.rows[] | select(.check == $r and .subject == $n)' "$work/report-$c.json")"
		done
	done
}

# create cluster to the end, its output in OUT; on failure, what explains it: the
# report's failed rows, the installer's last lines, each node's last console lines.
create_to_end() { # cluster-file cluster out
	"$bin" create cluster -f "$1" >"$3" 2>&1 && {
		tail -3 "$3"
		return 0
	}
	tail -5 "$3"
	grep -E '^[a-z0-9-]+ +[^ ]+ +failed ' "$3" || true
	tail -15 "$SHIFTLAB_HOME/clusters/$2/openshift-install.log"
	for d in $(virsh list --all --name | grep "^$2-"); do
		echo "... $d's console:"
		console "$d" | tail -n 6
	done
	fail "$2: create cluster failed"
}

sno_targets="release install-config manifests single-node-ignition iso infra bootstrap-complete install-complete eject-iso"
agent_targets="release install-config manifests iso infra bootstrap-complete install-complete eject-iso"

step "bad input is refused before anything is created"
f=$(iso_file bad1 192.168.187.0/24 "method: sno" "workers: 1")
if "$bin" create cluster -f "$f" >"$work/bad1.out" 2>&1; then fail "SNO with a worker was accepted"; fi
grep -q 'a single-node cluster (method sno) has no workers' "$work/bad1.out" || fail "SNO with workers: $(cat "$work/bad1.out")"
f=$(cluster_file bad2 192.168.188.0/24 "version: $V" "mirror: $mirror_url" "method: agent" "workers: 2" "disk_size: 40")
sed -i '/^rehearsal:/d' "$f"
if "$bin" create cluster -f "$f" >"$work/bad2.out" 2>&1; then fail "a 40 GB agent disk was accepted"; fi
grep -q "disk_size: 40 GB (GiB) is below assisted-service's master gate" "$work/bad2.out" || fail "small disk: $(cat "$work/bad2.out")"
for s in corrupt missing; do
	f=$(iso_file bad3 192.168.189.0/24 "method: sno")
	if SHIFTLAB_FAKE_STREAM_JSON=$work/stream-$s.json "$bin" create cluster -f "$f" >"$work/bad3-$s.out" 2>&1; then
		fail "a $s ISO was accepted"
	fi
	cat "$work/bad3-$s.out"
	grep -q 'CoreOS live ISO' "$work/bad3-$s.out" || fail "the $s ISO's error does not say which artifact"
	[[ -z $(virsh list --all --name | grep '^bad3-' || true) ]] || fail "a $s ISO created domains"
	"$bin" destroy cluster bad3 >/dev/null
done
grep -q 'sha256 mismatch' "$work/bad3-corrupt.out" || fail "the corrupt ISO is not named a digest mismatch"
for c in bad1 bad2; do
	[[ -z $(virsh list --all --name | grep "^$c-" || true) ]] || fail "$c created domains"
done

# The rehearsals name no release: no stream file, and the mirror is asked nothing.
unset SHIFTLAB_FAKE_STREAM_JSON
mirror_asked=$(grep -c 'GET /' "$work/mirror.log" || true)

step "sno, dual-stack: kill -9 during the ISO build, rerun, kill -9 during the wait, rerun to install complete"
f=$(cluster_file sno1 "[192.168.185.0/24, 'fd00:185::/64']" "method: sno" "${lab_settings[@]}")
"$bin" plan -f "$f" | tee "$work/sno-plan.txt" | contains 'sno1-ctlplane-0 .* iso, then disk' ||
	fail "plan does not show the boot path: $(cat "$work/sno-plan.txt")"
SHIM_DELAY=4 kill_during "$f" sno1 iso "$work/shim/coreos-installer iso ignition embed"
[[ ! -e $SHIFTLAB_HOME/clusters/sno1/sno-live.x86_64.iso ]] || fail "a killed build left an ISO in place"
SHIM_DELAY=4 kill_during "$f" sno1 bootstrap-complete "$work/cache/.*openshift-install wait-for bootstrap-complete"
[[ $(target_status sno1 iso) == done ]] || fail "the iso target was not done before the wait"
create_to_end "$f" sno1 "$work/sno.out"
if grep -q '^==> infra' "$work/sno.out"; then fail "the rerun repeated infra"; fi
grep -q 'console: *https://console-openshift-console.apps.sno1.lab.test' "$work/sno.out" || fail "no console URL"
check_finished sno1 "$sno_targets" sno1-ctlplane-0
check_rehearsal sno1 "$work/sno.out" sno1-ctlplane-0
dual_stack_proven sno1 sno1-ctlplane-0
jq -e --arg i "$SHIFTLAB_CACHE/rehearsal/standin-live.x86_64.iso" '.facts.coreos_iso == $i' "$SHIFTLAB_HOME/clusters/sno1/install-state.json" >/dev/null ||
	fail "the node's ISO was not made from the stand-in live ISO shiftlab built: $(jq -c .facts.coreos_iso "$SHIFTLAB_HOME/clusters/sno1/install-state.json")"
console sno1-ctlplane-0 | contains "role 'sno' from the installer's config" ||
	fail "the node did not boot the installer's bootstrap-in-place config"
"$bin" status sno1 -o json | jq -e '.install.flow == "sno" and all(.install.targets[]; .status == "done")' >/dev/null ||
	fail "status: $("$bin" status sno1 -o json | jq -c .install)"
grep -q 'create single-node-ignition-config' "$SHIFTLAB_HOME/clusters/sno1/openshift-install.log" || fail "no installer log"
# The lab's manifests (storage, users, time) reached the live config through
# `create manifests`, under /opt/openshift/ as the installer puts them.
ign_has "$SHIFTLAB_HOME/clusters/sno1/assets/bootstrap-in-place-for-live-iso.ign" \
	/opt/openshift/openshift/99-shiftlab-storage-storageclass.yaml /opt/openshift/openshift/99-shiftlab-users-htpasswd-secret.yaml \
	/opt/openshift/openshift/99-shiftlab-users-oauth.yaml /opt/openshift/openshift/99-master-chrony-shiftlab.yaml
[[ $(stat -c %a "$SHIFTLAB_HOME/clusters/sno1/assets/auth/ann-password") == 600 ]] || fail "sno1: ann's generated password is not 0600"
"$bin" destroy cluster sno1 >/dev/null

step "agent 3+1: kill -9 during agent create image, rerun, kill -9 during the wait, rerun to install complete"
f=$(cluster_file ag1 192.168.186.0/24 "method: agent" "ctlplanes: 3" "workers: 1")
SHIM_DELAY=4 kill_during "$f" ag1 iso "$work/shim/coreos-installer iso ignition embed"
[[ ! -e $SHIFTLAB_HOME/clusters/ag1/assets/agent.x86_64.iso ]] || fail "a killed build left an agent ISO in place"
SHIM_DELAY=4 kill_during "$f" ag1 bootstrap-complete "$work/cache/.*openshift-install agent wait-for bootstrap-complete"
create_to_end "$f" ag1 "$work/agent.out"
if grep -q '^==> infra' "$work/agent.out"; then fail "the rerun repeated infra"; fi
nodes=(ag1-ctlplane-0 ag1-ctlplane-1 ag1-ctlplane-2 ag1-worker-0)
check_finished ag1 "$agent_targets" "${nodes[@]}"
check_rehearsal ag1 "$work/agent.out" "${nodes[@]}"
console ag1-ctlplane-0 | contains 'agent: node zero' || fail "ag1-ctlplane-0 did not act as the rendezvous host"
# Node zero installed last: after every other host reported "Rebooting" to it.
console ag1-ctlplane-0 | contains 'agent: every host registered, waiting for them to reboot' ||
	fail "ag1-ctlplane-0 did not wait for the other hosts to reboot"
for n in ag1-ctlplane-1 ag1-ctlplane-2 ag1-worker-0; do
	console "$n" | contains 'agent: reported Rebooting to' || fail "$n did not report its Rebooting stage to node zero"
done
console ag1-worker-0 | contains "role 'worker' from the installer's config" || fail "ag1-worker-0 did not find its role in the agent config"
# assisted-service's rule (fewer than 2 workers: schedulable control planes): the
# routers may run on every node, and the load balancer sends *.apps to each.
for n in "${nodes[@]}"; do
	console "$n" | contains "router yes" || fail "$n does not run routers: $(console "$n" | grep 'router ' | tail -n 1)"
done
"$bin" status ag1 -o json | jq -e '.install.flow == "agent"' >/dev/null || fail "status does not show the agent flow"
# The installer was given the stand-in ISO shiftlab built (through the override,
# its file name in the installer's image cache linked to shiftlab's verified
# copy) and took it as it is: no download.
grep -q 'Found override for OS Image' "$SHIFTLAB_HOME/clusters/ag1/openshift-install.log" ||
	fail "the installer was not given the stand-in ISO"
if grep -q 'Downloading base ISO' "$SHIFTLAB_HOME/clusters/ag1/openshift-install.log"; then
	fail "the installer downloaded its base ISO: $(grep 'Downloading base ISO' "$SHIFTLAB_HOME/clusters/ag1/openshift-install.log")"
fi
iso=$(jq -r '.facts.coreos_iso' "$SHIFTLAB_HOME/clusters/ag1/install-state.json")
given=$SHIFTLAB_CACHE/openshift-install/agent/image_cache/standin-live.x86_64.iso
[[ $(readlink -f "$given") == "$(readlink -f "$iso")" ]] || fail "the installer's image cache holds $(readlink -f "$given"), not the verified $iso"
[[ $(sha256sum <"$iso" | cut -d' ' -f1) == "$(sha256sum <"$SHIFTLAB_CACHE/rehearsal/standin-live.x86_64.iso" | cut -d' ' -f1)" ]] ||
	fail "the ISO given to the installer ($iso) is not the stand-in live ISO shiftlab built"
[[ $(grep -c 'GET /' "$work/mirror.log" || true) == "$mirror_asked" ]] ||
	fail "a rehearsal asked the mirror: $(tail -n 3 "$work/mirror.log")"

step "agent 3+1: *.apps without the control planes fails install-complete, as the console route would"
plan=$SHIFTLAB_HOME/clusters/ag1/plan.json
cp "$plan" "$work/ag1-plan.json"
jq '(.load_balancer.frontends[] | select(.name | startswith("ingress")) | .backends) |= map(select(.node | test("-worker-")))' \
	"$work/ag1-plan.json" >"$plan.new"
mv "$plan.new" "$plan"
lb_without_ctlplanes() { ! awk '/^backend ingress-http$/{m=1;next} /^$/{m=0} m' "$SHIFTLAB_HOME/clusters/ag1/haproxy.cfg" | contains ctlplane; }
wait_for 30 "serve's load balancer without the control planes" lb_without_ctlplanes
installer=$(jq -r '.facts.openshift_install' "$SHIFTLAB_HOME/clusters/ag1/install-state.json")
if FAKE_INSTALL_TIMEOUT=20 "$installer" agent wait-for install-complete --dir "$SHIFTLAB_HOME/clusters/ag1/assets" >"$work/ag1-nolb.out" 2>&1; then
	fail "install-complete passed with *.apps on the worker alone"
fi
contains "routers may run on ag1-ctlplane-0 ag1-ctlplane-1 ag1-ctlplane-2, which the ingress load balancer" <"$work/ag1-nolb.out" ||
	fail "not the console route's failure: $(tail -n 3 "$work/ag1-nolb.out")"
mv "$work/ag1-plan.json" "$plan"

# Agent 3+2 as a user rehearses it: straight to install complete (the kills are
# ag1's). Two workers: the control planes are not schedulable
# (assisted-service's rule), the routers run on the workers alone.
step "agent 3+2, dual-stack: rehearsal: true alone to install complete, routers on the workers only, the report holding"
"$bin" destroy cluster ag1 >/dev/null
f=$(cluster_file ag2 "[192.168.190.0/24, 'fd00:190::/64']" "method: agent" "ctlplanes: 3" "workers: 2" "${lab_settings[@]}")
create_to_end "$f" ag2 "$work/agent2.out"
nodes=(ag2-ctlplane-0 ag2-ctlplane-1 ag2-ctlplane-2 ag2-worker-0 ag2-worker-1)
check_finished ag2 "$agent_targets" "${nodes[@]}"
check_rehearsal ag2 "$work/agent2.out" "${nodes[@]}"
dual_stack_proven ag2 "${nodes[@]}"
# Straight through, the wait follows the rendezvous host's assisted-service from
# the start (ag1's reruns may begin after node zero installed, when the service
# is gone: the wait then goes by the API alone, as the real one does).
grep -q 'Cluster status: installing' "$SHIFTLAB_HOME/clusters/ag2/openshift-install.log" || {
	grep -A12 'agent wait-for bootstrap-complete' "$SHIFTLAB_HOME/clusters/ag2/openshift-install.log"
	console ag2-ctlplane-0 | grep -a 'standin: ' | tail -n 12
	fail "the wait never saw the rendezvous host's assisted-service report the cluster installing"
}
# The load balancer answers on its IPv6 VIP too: every frontend's row proven
# through it.
[[ $(jq '[.rows[] | select(.check == "lb" and .result == "proven" and (.evidence | contains("[fd00:190::")))] | length' "$work/report-ag2.json") == 4 ]] ||
	fail "ag2: not every frontend proven on its IPv6 VIP: $(jq -c '[.rows[] | select(.check == "lb")]' "$work/report-ag2.json")"
for n in "${nodes[@]}"; do
	want=no
	[[ $n != *-worker-* ]] || want=yes
	console "$n" | grep "role '.*router " | tail -n 1 | contains "router $want " ||
		fail "$n: router $want expected: $(console "$n" | grep "role '.*router " | tail -n 1)"
done
[[ $(grep -c 'GET /' "$work/mirror.log" || true) == "$mirror_asked" ]] ||
	fail "the agent 3+2 rehearsal asked the mirror: $(tail -n 3 "$work/mirror.log")"
# The lab's manifests are the agent's extra manifests: one file per document in
# the ISO's Ignition; the scheduler's (not under openshift/) is not among them.
coreos-installer iso ignition show "$SHIFTLAB_HOME/clusters/ag2/assets/agent.x86_64.iso" >"$work/ag2.ign"
ign_has "$work/ag2.ign" /etc/assisted/extra-manifests/99-shiftlab-storage-storageclass-0.yaml \
	/etc/assisted/extra-manifests/99-shiftlab-users-htpasswd-secret-0.yaml /etc/assisted/extra-manifests/99-master-chrony-shiftlab-0.yaml
if jq -r '.storage.files[].path' "$work/ag2.ign" | contains scheduler; then fail "the agent ISO carries a scheduler manifest"; fi
"$bin" destroy cluster ag2 >/dev/null

step "sno and agent 3+1, IPv6 single-stack: rehearsal: true alone to install complete, the report holding"
# The single node and the agent's hosts take their planned IPv6 by DHCPv6,
# their names from its PTR; the agent's rendezvous host is an IPv6 address.
f=$(cluster_file sno6 "'fd00:187::/64'" "method: sno")
create_to_end "$f" sno6 "$work/sno6.out"
check_rehearsal sno6 "$work/sno6.out" sno6-ctlplane-0
dual_stack_proven sno6 sno6-ctlplane-0
"$bin" destroy cluster sno6 >/dev/null
f=$(cluster_file ag6 "'fd00:189::/64'" "method: agent" "ctlplanes: 3" "workers: 1")
create_to_end "$f" ag6 "$work/agent6.out"
nodes=(ag6-ctlplane-0 ag6-ctlplane-1 ag6-ctlplane-2 ag6-worker-0)
check_rehearsal ag6 "$work/agent6.out" "${nodes[@]}"
dual_stack_proven ag6 "${nodes[@]}"
# The hosts learned the IPv6 rendezvous IP from the ISO, and node zero (its
# owner) ran the assisted-service the others registered with.
console ag6-ctlplane-1 | contains 'rendezvous host fd00:189::b' || fail "ag6: the hosts did not learn the IPv6 rendezvous IP"
console ag6-ctlplane-0 | contains 'agent: node zero, waiting' || fail "ag6: the first control plane did not act as node zero"
[[ $(jq '[.rows[] | select(.check == "lb" and .result == "proven" and (.evidence | contains("[fd00:189::")))] | length' "$work/report-ag6.json") == 4 ]] ||
	fail "ag6: not every frontend proven on its IPv6 VIP: $(jq -c '[.rows[] | select(.check == "lb")]' "$work/report-ag6.json")"
[[ $(jq '[.rows[] | select(.check == "dhcp")] | length' "$work/report-ag6.json") == 0 ]] || fail "report ag6 has DHCPv4 rows"
"$bin" destroy cluster ag6 >/dev/null

echo "PASS $NAME"
